"""A real `nginx` in front of gRPC servers, for proxy tests: `grpc_pass` over HTTP/2 to an
upstream of the given ports, round robin, as an operator would put an L7 proxy in front.

Nothing here fakes the proxy. It is the `nginx` binary from PATH (Debian's `nginx` package) in
the foreground, on 127.0.0.1 and a free port, with its configuration, pid file and temporary
files in a directory of its own and its error log on a pipe this module reads. It is ready when
its master logs "start worker processes": by then its listening socket is bound.

`reload(down=...)` plays an ingress controller: it rewrites the configuration with those
upstream servers marked `down` and sends SIGHUP, then waits, on the error log (level notice),
until the change is in effect. The master logs "reconfiguring", forks the new workers ("start
worker process N", each with the new configuration), and only then (after a 100 ms pause) tells
the old ones to stop; each old worker logs "gracefully shutting down" as it closes its listening
socket and sends GOAWAY on its client connections, so from that line on new calls reach only
new workers. The reload returns once every old worker has logged it: that is the line that
proves the new configuration routes every new call. (An old worker still finishes the calls it
had; "exiting" comes only after its last connection closed.) A configuration nginx rejects is
logged `[emerg]` and leaves the old workers running: `reload` raises then.

`headers` plays a sidecar: nginx sets each on every proxied call (`grpc_set_header`), in place
of any the client sent under that name, as Envoy does an `x-forwarded-client-cert`. With
`http_upstream`, nginx also proxies HTTP/1.1 (`proxy_pass`, the same headers by
`proxy_set_header`) from `http_target` to that port, for the JSON-RPC and HTTP+JSON bindings.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from tests.redis_servers import _LogPump, free_ports

NGINX = shutil.which("nginx") or next(
    (path for path in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(path, os.X_OK)),
    "nginx",
)
REQUIRE_ENV = "A2A_GRPC_REQUIRE_NGINX"
INSTALL_ADVICE = "apt-get install -y nginx (Debian) to run the proxy tests"
READY_LINE = "start worker processes"
START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0
RELOAD_TIMEOUT = 10.0
LOG_LINE = re.compile(r"\[(?P<level>\w+)\] (?P<pid>\d+)#\d+: (?P<text>.*)$")
"""An error log line: `2026/12/02 01:41:22 [notice] 4711#4711: start worker process 4712`."""
NEW_WORKER = re.compile(r"start worker process (\d+)$")
OLD_WORKER_STOPS = "gracefully shutting down"
RELOAD_FAILED = frozenset({"emerg", "alert", "crit"})

WORKER_PROCESSES = 1
CONFIG = """\
{user}worker_processes 1;
daemon off;
error_log stderr notice;
pid {dir}/nginx.pid;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    upstream replicas {{
{servers}
    }}
    server {{
        listen 127.0.0.1:{port} http2;
        location / {{
            grpc_pass grpc://replicas;
{grpc_headers}
        }}
    }}
{http_server}}}
"""
HTTP_SERVER = """\
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://127.0.0.1:{upstream};
            proxy_http_version 1.1;
            proxy_buffering off;
{headers}
        }}
    }}
"""


def _quoted(value: str) -> str:
    """`value` as an nginx configuration string: single-quoted, `'` and `\\` escaped, and no
    `$` (nginx would read a variable)."""
    assert "$" not in value, "no nginx variables in a test header"
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _header_lines(directive: str, headers: Mapping[str, str]) -> str:
    return "\n".join(
        f"            {directive} {name} {_quoted(value)};" for name, value in headers.items()
    )


class _NginxLog(_LogPump):
    """The error log, with a wait that reads each new line from a given point on."""

    def wait_until(self, done: Callable[[str], bool], start: int, timeout: float) -> None:
        """Feeds `done` every line from index `start` on, as they arrive, until it returns
        True. Raises TimeoutError after `timeout` s, EOFError if the log ends first."""
        deadline = time.monotonic() + timeout
        seen = start
        with self._changed:
            while True:
                for line in self._lines[seen:]:
                    seen += 1
                    if done(line):
                        return
                if self._eof:
                    raise EOFError("nginx exited")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"nginx's log did not show it within {timeout} s")
                self._changed.wait(remaining)

    def count(self) -> int:
        with self._changed:
            return len(self._lines)


def require_nginx() -> None:
    """Skips the calling test when nginx is not installed, or fails it with
    A2A_GRPC_REQUIRE_NGINX=1 (CI installs it on purpose)."""
    import pytest

    if os.access(NGINX, os.X_OK):
        return
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"nginx not installed: {INSTALL_ADVICE} ({REQUIRE_ENV}=1)", pytrace=False)
    pytest.skip(f"nginx not installed: {INSTALL_ADVICE}")


class NginxGrpcProxy:
    """One nginx proxying gRPC to `upstream_ports` on 127.0.0.1; `target` is where clients
    connect. `server_options` are appended to each upstream `server` line (e.g.
    `fail_timeout=1s`). Use as a context manager; `close()` stops it and removes its files.
    `reload(down=ports)` takes those ports out of rotation (and puts the others back)."""

    def __init__(
        self,
        upstream_ports: Sequence[int],
        *,
        server_options: str = "",
        headers: Mapping[str, str] | None = None,
        http_upstream: int | None = None,
    ) -> None:
        self.upstream_ports = tuple(upstream_ports)
        self.server_options = server_options
        self.headers = dict(headers or {})
        self.http_upstream = http_upstream
        self.port, self.http_port = free_ports(2)
        self._dir = Path(tempfile.mkdtemp(prefix="a2a-nginx-"))
        self._process: subprocess.Popen[str] | None = None
        self._pump: _NginxLog | None = None
        self.workers: set[int] = set()
        """The pids of the workers that run the current configuration."""
        self.down: frozenset[int] = frozenset()
        """The upstream ports the current configuration marks `down`."""
        self.reloads = 0

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def http_target(self) -> str:
        """The base URL of the HTTP proxy (with `http_upstream`)."""
        return f"http://127.0.0.1:{self.http_port}"

    def lines(self) -> list[str]:
        """nginx's error log so far."""
        return [] if self._pump is None else self._pump.lines()

    def _write_config(self, down: frozenset[int]) -> Path:
        lines = []
        for port in self.upstream_ports:
            words = [f"127.0.0.1:{port}", self.server_options, "down" if port in down else ""]
            lines.append(f"        server {' '.join(word for word in words if word)};")
        servers = "\n".join(lines)
        config = self._dir / "nginx.conf"
        # Run as root (CI), nginx would hand its workers to `nobody`, who cannot write here.
        user = "user root;\n" if os.geteuid() == 0 else ""
        http_server = ""
        if self.http_upstream is not None:
            http_server = HTTP_SERVER.format(
                port=self.http_port,
                upstream=self.http_upstream,
                headers=_header_lines("proxy_set_header", self.headers),
            )
        text = CONFIG.format(
            user=user,
            dir=self._dir,
            servers=servers,
            port=self.port,
            grpc_headers=_header_lines("grpc_set_header", self.headers),
            http_server=http_server,
        )
        written = config.with_suffix(".new")
        written.write_text(text)
        written.replace(config)  # nginx never reads half a file
        return config

    def start(self) -> NginxGrpcProxy:
        config = self._write_config(self.down)
        self._process = subprocess.Popen(
            [NGINX, "-p", str(self._dir), "-c", str(config), "-e", "stderr"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self._process.stderr is not None
        self._pump = _NginxLog(self._process.stderr, "nginx-log")
        if self._pump.wait_for(READY_LINE, START_TIMEOUT) is None:
            self.close()
            raise RuntimeError("nginx did not start:\n" + "\n".join(self.lines()))
        started: set[int] = set()

        def worker_started(line: str) -> bool:
            found = NEW_WORKER.search(line)
            if found:
                started.add(int(found.group(1)))
            return len(started) == WORKER_PROCESSES

        self._pump.wait_until(worker_started, 0, START_TIMEOUT)
        self.workers = started
        return self

    def reload(self, down: Collection[int] = ()) -> None:
        """Rewrites the configuration with the `down` ports marked `down`, sends SIGHUP, and
        returns once the new configuration is in effect (see the module docstring): the new
        workers started and every old one logged "gracefully shutting down". Blocking: call it
        from a thread in async code. Raises RuntimeError, with the log, if nginx rejects it."""
        assert self._process is not None and self._pump is not None, "nginx is not running"
        wanted = frozenset(down)
        self._write_config(wanted)
        start = self._pump.count()
        old, new, stopping = set(self.workers), set[int](), set[int]()
        reconfiguring = False
        failed: list[str] = []

        def in_effect(line: str) -> bool:
            nonlocal reconfiguring
            parsed = LOG_LINE.search(line)
            if parsed is None:
                return False
            text = parsed["text"]
            if parsed["level"] in RELOAD_FAILED:
                failed.append(line)
                return True
            if text == "reconfiguring":
                reconfiguring = True
            elif reconfiguring and (found := NEW_WORKER.search(text)):
                new.add(int(found.group(1)))
            elif text == OLD_WORKER_STOPS and int(parsed["pid"]) in old:
                stopping.add(int(parsed["pid"]))
            return len(new) == WORKER_PROCESSES and stopping == old

        self._process.send_signal(signal.SIGHUP)
        try:
            self._pump.wait_until(in_effect, start, RELOAD_TIMEOUT)
        except (TimeoutError, EOFError) as exc:
            log = "\n".join(self.lines()[start:])
            raise RuntimeError(f"nginx reload: {exc}:\n{log}") from None
        if failed:
            raise RuntimeError("nginx rejected the configuration:\n" + "\n".join(failed))
        self.workers, self.down = new, wanted
        self.reloads += 1

    def close(self) -> None:
        """SIGQUIT (nginx's graceful stop), SIGKILL if it outlives STOP_TIMEOUT; then the files."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGQUIT)
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._pump is not None:
            self._pump.close(STOP_TIMEOUT)
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> NginxGrpcProxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
