"""Real `redis-server` processes for tests and load scripts: one server, or a 3-master cluster.

Nothing here fakes Redis. Each server is the `redis-server` binary from PATH, on 127.0.0.1 and a
port nobody else holds, in a temporary directory of its own, with its log on a pipe this module
reads. A server is ready when its log says "Ready to accept connections": start() waits on that
line, never on the clock. (A cluster's state turning ok has no such event; see RedisCluster.)

Load scripts can use it without pytest: only `require_redis` imports pytest.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Literal

REDIS_SERVER = "redis-server"
REDIS_CLI = "redis-cli"
READY_LINE = "Ready to accept connections"
REQUIRE_ENV = "A2A_GRPC_REQUIRE_REDIS"
INSTALL_ADVICE = "apt-get install -y redis-server (Debian) to run the Redis tests"

START_TIMEOUT = 10.0  # seconds from exec to the ready line, at most
STOP_TIMEOUT = 10.0  # seconds from SIGTERM to exit before SIGKILL follows
PORT_ATTEMPTS = 5  # fresh ports tried when another process takes the one picked first
CLUSTER_OK_LINE = "Cluster state changed: ok"
"""What a cluster node logs once it serves every slot (Redis 7 and Valkey)."""
CLUSTER_OK_TIMEOUT = 30.0


class RedisStartError(RuntimeError):
    """A redis-server (or the cluster) did not become ready; the message carries its log."""


class _PortTaken(RedisStartError):
    """redis-server could not bind: another process took the port between pick and bind."""


def missing_binaries(path: str | None = None) -> list[str]:
    """The Redis binaries this module needs that are not on `path` (default: $PATH)."""
    return [name for name in (REDIS_SERVER, REDIS_CLI) if shutil.which(name, path=path) is None]


def redis_available(path: str | None = None) -> bool:
    """Whether both `redis-server` and `redis-cli` are on `path` (default: $PATH)."""
    return not missing_binaries(path)


def missing_redis_action(
    path: str | None = None, environ: Mapping[str, str] | None = None
) -> tuple[Literal["run", "skip", "fail"], str]:
    """What a test that needs Redis does here, and the reason to print.

    "run" when both binaries are on `path`; otherwise "fail" if `environ` (default: os.environ)
    has A2A_GRPC_REQUIRE_REDIS=1 (CI, where Redis is installed on purpose) and "skip" if not.
    The reason names the missing binaries and how to install them.
    """
    missing = missing_binaries(path)
    if not missing:
        return "run", ""
    reason = f"{' and '.join(missing)} not installed: {INSTALL_ADVICE}"
    env = os.environ if environ is None else environ
    if env.get(REQUIRE_ENV) == "1":
        return "fail", f"{reason} ({REQUIRE_ENV}=1 makes this a failure)"
    return "skip", reason


def require_redis(path: str | None = None, environ: Mapping[str, str] | None = None) -> None:
    """Skips the calling test, or fails it, as `missing_redis_action` decides; returns if Redis
    can run. Call it from a test or fixture only: it raises pytest's outcome exceptions."""
    import pytest

    action, reason = missing_redis_action(path, environ)
    if action == "skip":
        pytest.skip(reason)
    if action == "fail":
        pytest.fail(reason, pytrace=False)


def free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports on 127.0.0.1 that were free a moment ago.

    The sockets are all bound before any is closed, so the ports differ; another process may
    still take one before redis-server binds it, which `RedisServer.start` retries.
    """
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


class _LogPump:
    """Reads a process's output on a daemon thread until EOF, so the pipe never fills, and keeps
    every line (redis-server at loglevel notice logs a few per event, none per command) for
    whoever waits on one."""

    def __init__(self, stream: IO[str], name: str) -> None:
        self._stream = stream
        self._lines: list[str] = []
        self._eof = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for line in self._stream:
                with self._changed:
                    self._lines.append(line.rstrip("\n"))
                    self._changed.notify_all()
        finally:
            with self._changed:
                self._eof = True
                self._changed.notify_all()

    def lines(self) -> list[str]:
        with self._changed:
            return list(self._lines)

    def wait_for(self, text: str, timeout: float) -> str | None:
        """The first line containing `text`, waiting for it as lines arrive; None once the
        output ended without one. Raises TimeoutError after `timeout` seconds.

        Each pass either returns or sleeps on the condition until a new line, EOF, or the
        deadline, so the loop ends by the deadline at the latest.
        """
        deadline = time.monotonic() + timeout
        seen = 0
        with self._changed:
            while True:
                for line in self._lines[seen:]:
                    if text in line:
                        return line
                seen = len(self._lines)
                if self._eof:
                    return None
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"no line containing {text!r} within {timeout} s")
                self._changed.wait(remaining)

    def close(self, timeout: float) -> None:
        """Waits (at most `timeout` s) for EOF, then closes the pipe. The process must have
        exited; if a child it forked still holds the pipe, the thread and pipe are left."""
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self._stream.close()


class RedisServer:
    """One real `redis-server` on 127.0.0.1, in its own directory.

    `start()` picks a free port (unless `port` is given), launches the server with
    `--save ""` (no RDB snapshots), `--daemonize no`, `--protected-mode no`,
    `--loglevel notice`, and returns once the log says "Ready to accept connections".
    With `appendonly=True` every write is in the append-only file before its reply
    (`appendfsync always`), so a `kill()` loses nothing and `restart()` reloads it.
    `cluster=True` adds cluster mode (`nodes.conf`, `cluster_node_timeout_ms`) and a cluster
    bus port picked like the client port. `extra_args` go last, so they override.

    The port and directory survive `stop()` / `kill()`, so `restart()` / `start()` come back on
    the same address with the same data. `close()` (or leaving the `with` block) stops the server
    and deletes the directory if this object created it. Not thread-safe: one owner drives it.
    """

    def __init__(
        self,
        *,
        appendonly: bool = False,
        extra_args: Sequence[str] = (),
        port: int | None = None,
        directory: Path | None = None,
        cluster: bool = False,
        cluster_node_timeout_ms: int = 2000,
        start_timeout: float = START_TIMEOUT,
    ) -> None:
        self.appendonly = appendonly
        self.extra_args = tuple(extra_args)
        self.cluster = cluster
        self.cluster_node_timeout_ms = cluster_node_timeout_ms
        self.start_timeout = start_timeout
        self._port = port
        self._bus_port: int | None = None
        self._dir = directory
        self._owns_dir = False
        self._process: subprocess.Popen[str] | None = None
        self._pump: _LogPump | None = None

    # -- where it is -------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The client port; known after the first `start()` and kept for restarts."""
        if self._port is None:
            raise RuntimeError("RedisServer has no port before start()")
        return self._port

    @property
    def url(self) -> str:
        """`redis://127.0.0.1:PORT/0`, for `redis.asyncio.from_url`."""
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def dir(self) -> Path:
        """The server's working directory (AOF, nodes.conf); made by the first `start()`."""
        if self._dir is None:
            raise RuntimeError("RedisServer has no directory before start()")
        return self._dir

    @property
    def running(self) -> bool:
        """Whether the process this object started is still alive."""
        return self._process is not None and self._process.poll() is None

    @property
    def log(self) -> list[str]:
        """The current (or last) process's log lines so far."""
        return self._pump.lines() if self._pump is not None else []

    def wait_for_log(self, text: str, timeout: float = START_TIMEOUT) -> str:
        """The first line of the current process's log containing `text`, waiting for it.

        Raises RedisStartError if the process ends, TimeoutError after `timeout` s without it.
        """
        if self._pump is None:
            raise RuntimeError("RedisServer was never started")
        line = self._pump.wait_for(text, timeout)
        if line is None:
            raise RedisStartError(f"redis-server ended without logging {text!r}:\n{self._log()}")
        return line

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> RedisServer:
        """Launches the server and returns once it accepts connections.

        With no fixed port, a port taken by someone else between pick and bind is retried with
        a fresh one, `PORT_ATTEMPTS` times in all. On a fixed port (given, or kept from an
        earlier start) a taken port is an error. Raises RedisStartError, with the server's log,
        if it exits or is not ready within `start_timeout`.
        """
        if self.running:
            raise RuntimeError(f"redis-server already running on port {self._port}")
        if self._dir is not None:
            self._start()
            return self
        self._dir = Path(tempfile.mkdtemp(prefix="a2a-redis-"))
        self._owns_dir = True
        try:
            self._start()
        except BaseException:
            self.close()  # nothing in the new directory is worth keeping
            raise
        return self

    def _start(self) -> None:
        if self._port is not None:
            self._launch(self._port, self._bus_port or self._pick_bus_port())
            return
        taken: list[str] = []
        for _ in range(PORT_ATTEMPTS):
            port, bus_port = free_ports(2)
            try:
                self._launch(port, bus_port if self.cluster else None)
            except _PortTaken as error:
                taken.append(str(error))
                continue
            return
        raise RedisStartError(
            f"redis-server found no free port in {PORT_ATTEMPTS} attempts:\n" + "\n".join(taken)
        )

    def stop(self) -> None:
        """SIGTERM, then waits for the exit (SIGKILL after `STOP_TIMEOUT` s). A no-op if not
        running. Redis shuts down without an RDB save (`--save ""`) and, with AOF on, with the
        file fsynced, so `restart()` finds every acknowledged write."""
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._reap()

    def kill(self) -> None:
        """SIGKILL, then waits for the exit: a crash, with no shutdown work. A no-op if not
        running. Clients see connection refused on the port until a `start()`."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._reap()

    def pause(self) -> None:
        """SIGSTOP: Redis stops answering but keeps its connections (a slow or hung Redis)."""
        assert self._process is not None
        self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after `pause`."""
        assert self._process is not None
        self._process.send_signal(signal.SIGCONT)

    def restart(self) -> RedisServer:
        """`stop()` then `start()` on the same port and directory, so an AOF is reloaded."""
        self.stop()
        return self.start()

    def flushall(self) -> None:
        """FLUSHALL (synchronous): empties every database, for tests sharing one server."""
        self.cli("FLUSHALL", "SYNC")

    def cli(self, *args: str, timeout: float = START_TIMEOUT) -> str:
        """Runs `redis-cli -e -h 127.0.0.1 -p PORT ARGS...` and returns its stdout; raises
        RedisStartError if it cannot connect or the reply is an error (`-e`: without it,
        redis-cli exits 0 on error replies)."""
        return _cli("-e", "-h", "127.0.0.1", "-p", str(self.port), *args, timeout=timeout)

    def close(self) -> None:
        """`stop()`, and deletes the directory if `start()` created it."""
        self.stop()
        if self._owns_dir and self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
            self._owns_dir = False

    def __enter__(self) -> RedisServer:
        if not self.running:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------------

    def _pick_bus_port(self) -> int | None:
        return free_ports(1)[0] if self.cluster else None

    def _args(self, port: int, bus_port: int | None) -> list[str]:
        args = [REDIS_SERVER, "--bind", "127.0.0.1", "--port", str(port), "--dir", str(self.dir)]
        args += ["--save", "", "--daemonize", "no", "--protected-mode", "no"]
        args += ["--loglevel", "notice", "--logfile", ""]
        if self.appendonly:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            args += ["--appendonly", "no"]
        if bus_port is not None:
            # An explicit bus port: the default (port + 10000) overflows for ports above 55535.
            args += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
            args += ["--cluster-node-timeout", str(self.cluster_node_timeout_ms)]
            args += ["--cluster-port", str(bus_port)]
        return [*args, *self.extra_args]

    def _launch(self, port: int, bus_port: int | None) -> None:
        self._process = subprocess.Popen(
            self._args(port, bus_port),
            cwd=self.dir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            encoding="utf-8",
            errors="replace",
        )
        assert self._process.stdout is not None
        self._pump = _LogPump(self._process.stdout, f"redis-server:{port} log")
        try:
            ready = self._pump.wait_for(READY_LINE, self.start_timeout)
        except TimeoutError:
            self.kill()
            raise RedisStartError(
                f"redis-server on port {port} not ready within {self.start_timeout} s:\n"
                + self._log()
            ) from None
        if ready is None:
            code = self._process.wait()
            self._reap()
            log = self._log()
            if "Address already in use" in log:
                taken = f"port {port}" if bus_port is None else f"port {port} or {bus_port}"
                raise _PortTaken(f"{taken} already in use:\n{log}")
            raise RedisStartError(f"redis-server exited with {code} before it was ready:\n{log}")
        self._port, self._bus_port = port, bus_port

    def _reap(self) -> None:
        if self._pump is not None:
            self._pump.close(STOP_TIMEOUT)

    def _log(self) -> str:
        return "\n".join(self.log)


class RedisCluster:
    """A real Redis Cluster: `masters` (at least 3) redis-servers in cluster mode, no replicas,
    every slot assigned by `redis-cli --cluster create`.

    `start()` returns once `--cluster create` succeeded and every node's CLUSTER INFO says
    `cluster_state:ok`. `url` is the first node's, which is all `RedisCluster.from_url` needs
    to discover the rest. `stop()` stops every node and deletes their directories.
    """

    def __init__(
        self, masters: int = 3, *, node_timeout_ms: int = 2000, start_timeout: float = START_TIMEOUT
    ) -> None:
        if masters < 3:
            raise ValueError("a Redis Cluster needs at least 3 masters")
        self.nodes = [
            RedisServer(
                cluster=True, cluster_node_timeout_ms=node_timeout_ms, start_timeout=start_timeout
            )
            for _ in range(masters)
        ]

    @property
    def ports(self) -> list[int]:
        return [node.port for node in self.nodes]

    @property
    def urls(self) -> list[str]:
        """Every node's `redis://127.0.0.1:PORT/0`."""
        return [node.url for node in self.nodes]

    @property
    def url(self) -> str:
        """The first node's URL: a seed for `redis.asyncio.cluster.RedisCluster.from_url`."""
        return self.nodes[0].url

    def start(self) -> RedisCluster:
        """Starts the nodes, joins them, assigns all 16384 slots; raises RedisStartError (and
        stops what it started) if any step fails."""
        try:
            for node in self.nodes:
                node.start()
            addresses = [f"127.0.0.1:{port}" for port in self.ports]
            _cli("--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes")
            self._wait_until_ok()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_until_ok(self) -> None:
        # `--cluster create` returns once the nodes agree on the slot map, but a node turns its
        # cluster_state to ok only on its own cron, and a fresh master holds "ok" back for ~2 s
        # after it starts (CLUSTER_WRITABLE_DELAY). Each node logs the change
        # ("Cluster state changed: ok"): wait for that line from every node.
        for node in self.nodes:
            node.wait_for_log(CLUSTER_OK_LINE, CLUSTER_OK_TIMEOUT)

    def stop(self) -> None:
        """Stops every node and deletes the directories they made."""
        for node in self.nodes:
            node.close()

    def __enter__(self) -> RedisCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


RedisServerFactory = Callable[..., RedisServer]
"""The `make_redis_server` fixture: `RedisServer`'s keyword arguments in, a started server out."""


def _cli(*args: str, timeout: float = 30.0) -> str:
    result = subprocess.run(
        [REDIS_CLI, *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if result.returncode != 0:
        raise RedisStartError(
            f"redis-cli {' '.join(args)} exited with {result.returncode}:\n"
            f"{result.stdout}{result.stderr}"
        )
    return result.stdout
