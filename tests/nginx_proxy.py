"""A real `nginx` in front of gRPC servers, for proxy tests: `grpc_pass` over HTTP/2 to an
upstream of the given ports, round robin, as an operator would put an L7 proxy in front.

Nothing here fakes the proxy. It is the `nginx` binary from PATH (Debian's `nginx` package) in
the foreground, on 127.0.0.1 and a free port, with its configuration, pid file and temporary
files in a directory of its own and its error log on a pipe this module reads. It is ready when
its master logs "start worker processes": by then its listening socket is bound.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Sequence
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
        }}
    }}
}}
"""


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
    `fail_timeout=1s`). Use as a context manager; `close()` stops it and removes its files."""

    def __init__(self, upstream_ports: Sequence[int], *, server_options: str = "") -> None:
        self.upstream_ports = tuple(upstream_ports)
        self.server_options = server_options
        self.port = free_ports(1)[0]
        self._dir = Path(tempfile.mkdtemp(prefix="a2a-nginx-"))
        self._process: subprocess.Popen[str] | None = None
        self._pump: _LogPump | None = None

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def lines(self) -> list[str]:
        """nginx's error log so far."""
        return [] if self._pump is None else self._pump.lines()

    def start(self) -> NginxGrpcProxy:
        servers = "\n".join(
            f"        server 127.0.0.1:{port} {self.server_options};".rstrip()
            for port in self.upstream_ports
        )
        config = self._dir / "nginx.conf"
        # Run as root (CI), nginx would hand its workers to `nobody`, who cannot write here.
        user = "user root;\n" if os.geteuid() == 0 else ""
        config.write_text(CONFIG.format(user=user, dir=self._dir, servers=servers, port=self.port))
        self._process = subprocess.Popen(
            [NGINX, "-p", str(self._dir), "-c", str(config), "-e", "stderr"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self._process.stderr is not None
        self._pump = _LogPump(self._process.stderr, "nginx-log")
        if self._pump.wait_for(READY_LINE, START_TIMEOUT) is None:
            self.close()
            raise RuntimeError("nginx did not start:\n" + "\n".join(self.lines()))
        return self

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
