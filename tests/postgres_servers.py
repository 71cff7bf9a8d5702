"""Real PostgreSQL servers for tests and load scripts, from Debian's `postgresql` binaries.

Nothing here fakes PostgreSQL. Each server is the `postgres` binary of the newest
/usr/lib/postgresql/<version>/bin (or `initdb` and `postgres` on PATH), with a data directory of
its own in a temporary directory, listening on 127.0.0.1 at a port nobody else held a moment
before and on a Unix socket in that directory. `initdb` runs once per process, into a template
that each server copies (about 1 s saved per server). A server is ready when its log says
"database system is ready to accept connections": start() waits on that line, never on the
clock.

initdb and postgres refuse to run as root: as root, both run as the `postgres` user that
Debian's package makes, and the directory is handed to that user.

Test settings, not production ones: `fsync=off` (a commit's write-ahead log is written to the
operating system before the commit returns, so a killed server keeps it; only a machine crash
would lose data), trust authentication on 127.0.0.1 and the socket.

Load scripts can use it without pytest: only `require_postgres` imports pytest.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from tests.redis_servers import _LogPump, free_ports

READY_LINE = "database system is ready to accept connections"
REQUIRE_ENV = "A2A_GRPC_REQUIRE_POSTGRES"
INSTALL_ADVICE = "apt-get install -y postgresql (Debian) to run the PostgreSQL tests"
SERVICE_USER = "postgres"
"""Who runs initdb and postgres when the tests run as root (Debian's package makes the user)."""
SUPERUSER = "postgres"
"""The database superuser initdb makes (trust authentication: no password)."""

START_TIMEOUT = 20.0  # seconds from exec to the ready line, at most
STOP_TIMEOUT = 20.0  # seconds from the stop signal to exit before SIGKILL follows
PORT_ATTEMPTS = 5

StopMode = Literal["smart", "fast", "immediate"]
_STOP_SIGNALS = {"smart": signal.SIGTERM, "fast": signal.SIGINT, "immediate": signal.SIGQUIT}


class PostgresStartError(RuntimeError):
    """initdb or postgres failed, or the server did not become ready; the message carries its
    log."""


class _PortTaken(PostgresStartError):
    """postgres could not bind: another process took the port between pick and bind."""


def binary_dir(path: str | None = None) -> Path | None:
    """Where `initdb` and `postgres` are: the directory on `path` (default: $PATH) that has both,
    else the newest /usr/lib/postgresql/<version>/bin; None when neither has them."""
    initdb = shutil.which("initdb", path=path)
    if initdb is not None and shutil.which("postgres", path=path) is not None:
        return Path(initdb).resolve().parent  # Debian links them from its versioned dir
    candidates = []
    for found in glob.glob("/usr/lib/postgresql/*/bin"):
        version = Path(found).parent.name
        if version.isdigit() and (Path(found) / "initdb").exists():
            candidates.append((int(version), Path(found)))
    return max(candidates)[1] if candidates else None


def missing_postgres_action(
    path: str | None = None, environ: Mapping[str, str] | None = None
) -> tuple[Literal["run", "skip", "fail"], str]:
    """What a test that needs PostgreSQL does here, and the reason to print: "run" when the
    binaries are found; otherwise "fail" with A2A_GRPC_REQUIRE_POSTGRES=1 in `environ` (CI, where
    PostgreSQL is installed on purpose) and "skip" without."""
    if binary_dir(path) is not None and (os.geteuid() != 0 or _service_user() is not None):
        return "run", ""
    reason = f"initdb and postgres not found: {INSTALL_ADVICE}"
    if binary_dir(path) is not None:
        reason = f"running as root, and there is no {SERVICE_USER!r} user: {INSTALL_ADVICE}"
    env = os.environ if environ is None else environ
    if env.get(REQUIRE_ENV) == "1":
        return "fail", f"{reason} ({REQUIRE_ENV}=1 makes this a failure)"
    return "skip", reason


def require_postgres(path: str | None = None, environ: Mapping[str, str] | None = None) -> None:
    """Skips the calling test, or fails it, as `missing_postgres_action` decides. Call it from a
    test or fixture only: it raises pytest's outcome exceptions."""
    import pytest

    action, reason = missing_postgres_action(path, environ)
    if action == "skip":
        pytest.skip(reason)
    if action == "fail":
        pytest.fail(reason, pytrace=False)


def _service_user() -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(SERVICE_USER)
    except KeyError:
        return None


def _as_service_user() -> dict[str, Any]:
    """Popen's arguments that run a child as the service user when this process is root."""
    if os.geteuid() != 0:
        return {}
    user = _service_user()
    if user is None:
        raise PostgresStartError(f"running as root, and there is no {SERVICE_USER!r} user")
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


def _hand_over(directory: Path) -> None:
    """Makes `directory` (and what is in it) the service user's, when running as root."""
    if os.geteuid() != 0:
        return
    user = _service_user()
    assert user is not None
    for root, dirs, files in os.walk(directory):
        os.chown(root, user.pw_uid, user.pw_gid)
        for name in dirs + files:
            os.lchown(os.path.join(root, name), user.pw_uid, user.pw_gid)


_template_lock = threading.Lock()
_template: Path | None = None


def _template_cluster(bin_dir: Path) -> Path:
    """A data directory made by initdb once per process, which each server copies."""
    global _template
    with _template_lock:
        if _template is not None and _template.exists():
            return _template
        parent = Path(tempfile.mkdtemp(prefix="a2a-pg-template-"))
        parent.chmod(0o755)
        _hand_over(parent)
        data = parent / "data"
        command = [
            str(bin_dir / "initdb"), "-D", str(data), "-U", SUPERUSER, "--auth=trust",
            "-E", "UTF8", "--no-locale", "--no-sync",
        ]  # fmt: skip
        result = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            **_as_service_user(),
        )
        if result.returncode != 0:
            shutil.rmtree(parent, ignore_errors=True)
            raise PostgresStartError(
                f"initdb exited with {result.returncode}:\n{result.stdout}{result.stderr}"
            )
        _template = data
        atexit.register(shutil.rmtree, parent, True)
        return data


class PostgresServer:
    """One real PostgreSQL server on 127.0.0.1, in its own directory (see the module docstring).

    The port and the data directory survive `stop()` / `kill()`, so `start()` / `restart()`
    come back on the same address with the same data. `close()` (or leaving the `with` block)
    stops the server and deletes the directory. Not thread-safe: one owner drives it.
    """

    def __init__(
        self,
        *,
        extra_settings: Mapping[str, str] | None = None,
        port: int | None = None,
        start_timeout: float = START_TIMEOUT,
    ) -> None:
        self.extra_settings = dict(extra_settings or {})
        self.start_timeout = start_timeout
        self._port = port
        self._dir: Path | None = None
        self._process: subprocess.Popen[str] | None = None
        self._pump: _LogPump | None = None
        self._databases = 0

    # -- where it is -------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("PostgresServer has no port before start()")
        return self._port

    def url(self, database: str = "postgres") -> str:
        """`postgresql://postgres@127.0.0.1:PORT/<database>`."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    @property
    def socket_dir(self) -> Path:
        return self.dir / "socket"

    @property
    def dir(self) -> Path:
        if self._dir is None:
            raise RuntimeError("PostgresServer has no directory before start()")
        return self._dir

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def log(self) -> list[str]:
        return self._pump.lines() if self._pump is not None else []

    def wait_for_log(self, text: str, timeout: float = START_TIMEOUT) -> str:
        """The first line of the current process's log containing `text`, waiting for it."""
        if self._pump is None:
            raise RuntimeError("PostgresServer was never started")
        line = self._pump.wait_for(text, timeout)
        if line is None:
            raise PostgresStartError(f"postgres ended without logging {text!r}:\n{self._log()}")
        return line

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> PostgresServer:
        """Launches the server and returns once it accepts connections (see `RedisServer.start`
        for the port retries)."""
        if self.running:
            raise RuntimeError(f"postgres already running on port {self._port}")
        bin_dir = binary_dir()
        if bin_dir is None:
            raise PostgresStartError(f"initdb and postgres not found: {INSTALL_ADVICE}")
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="a2a-pg-"))
            try:
                self._dir.chmod(0o755)
                shutil.copytree(_template_cluster(bin_dir), self._dir / "data", symlinks=True)
                (self._dir / "socket").mkdir()
                _hand_over(self._dir)
            except BaseException:
                self.close()
                raise
        if self._port is not None:
            self._launch(bin_dir, self._port)
            return self
        taken: list[str] = []
        for _ in range(PORT_ATTEMPTS):
            (port,) = free_ports(1)
            try:
                self._launch(bin_dir, port)
            except _PortTaken as error:
                taken.append(str(error))
                continue
            return self
        raise PostgresStartError(
            f"postgres found no free port in {PORT_ATTEMPTS} attempts:\n" + "\n".join(taken)
        )

    def stop(self, mode: StopMode = "fast") -> None:
        """Stops the server (PostgreSQL's shutdown modes: "fast" rolls back open transactions
        and disconnects clients, "immediate" quits at once, as after a crash) and waits for
        the exit (SIGKILL of the whole group after `STOP_TIMEOUT` s). A no-op if not running."""
        process = self._process
        if process is not None and process.poll() is None:
            process.send_signal(_STOP_SIGNALS[mode])
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._kill_group()
                process.wait()
        self._reap()

    def kill(self) -> None:
        """An immediate shutdown: the server quits at once, with no checkpoint, and recovers
        from its write-ahead log at the next start (clients see connection refused until then).
        PostgreSQL is never SIGKILLed here: its backends would outlive it and hold its shared
        memory, refusing the next start."""
        self.stop("immediate")

    def pause(self) -> None:
        """SIGSTOP to the server and every backend: it stops answering but keeps its
        connections (a hung database)."""
        for pid in self._processes():
            os.kill(pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after `pause`."""
        for pid in self._processes():
            os.kill(pid, signal.SIGCONT)

    def _processes(self) -> list[int]:
        """The postmaster and its children (each backend is a session of its own: the
        postmaster's process group does not hold them)."""
        assert self._process is not None
        postmaster = self._process.pid
        found = [postmaster]
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue  # ended meanwhile
            # "pid (comm) state ppid ...": comm may hold spaces and parentheses
            fields = stat.rpartition(")")[2].split()
            if len(fields) > 1 and int(fields[1]) == postmaster:
                found.append(int(entry))
        return found

    def restart(self, mode: StopMode = "fast") -> PostgresServer:
        self.stop(mode)
        return self.start()

    def create_database(self, name: str | None = None) -> str:
        """Creates a database (named `name`, or `db<n>`) and returns its URL."""
        if name is None:
            self._databases += 1
            name = f"db{self._databases}"
        self.psql(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def psql(self, sql: str, database: str = "postgres", timeout: float = 30.0) -> str:
        """Runs `sql` with psql over the socket and returns its unaligned output; raises
        PostgresStartError with psql's output when it fails."""
        bin_dir = binary_dir()
        assert bin_dir is not None
        command = [
            str(bin_dir / "psql"), "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1",
            "-h", str(self.socket_dir), "-p", str(self.port), "-U", SUPERUSER,
            "-d", database, "-c", sql,
        ]  # fmt: skip
        result = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if result.returncode != 0:
            raise PostgresStartError(
                f"psql {sql!r} exited with {result.returncode}:\n{result.stdout}{result.stderr}"
            )
        return result.stdout

    def close(self) -> None:
        """`stop()`, and deletes the directory."""
        self.stop()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> PostgresServer:
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

    def _args(self, bin_dir: Path, port: int) -> list[str]:
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(port),
            "unix_socket_directories": str(self.socket_dir),
            "fsync": "off",
            "full_page_writes": "off",
            "max_connections": "200",
            "shared_buffers": "64MB",
            "logging_collector": "off",
            "log_min_messages": "warning",
            "log_min_error_statement": "panic",
            **self.extra_settings,
        }
        args = [str(bin_dir / "postgres"), "-D", str(self.dir / "data")]
        for name, value in settings.items():
            args += ["-c", f"{name}={value}"]
        return args

    def _launch(self, bin_dir: Path, port: int) -> None:
        self._process = subprocess.Popen(
            self._args(bin_dir, port),
            cwd=self.dir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            encoding="utf-8",
            errors="replace",
            start_new_session=True,  # a signal to the test's group does not reach it
            **_as_service_user(),
        )
        assert self._process.stdout is not None
        self._pump = _LogPump(self._process.stdout, f"postgres:{port} log")
        try:
            ready = self._pump.wait_for(READY_LINE, self.start_timeout)
        except TimeoutError:
            self._kill_group()
            self._process.wait()
            raise PostgresStartError(
                f"postgres on port {port} not ready within {self.start_timeout} s:\n" + self._log()
            ) from None
        if ready is None:
            code = self._process.wait()
            self._reap()
            log = self._log()
            if "Address already in use" in log:
                raise _PortTaken(f"port {port} already in use:\n{log}")
            raise PostgresStartError(f"postgres exited with {code} before it was ready:\n{log}")
        self._port = port

    def _kill_group(self) -> None:
        if self._process is not None and self._process.poll() is None:
            for pid in self._processes():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def _reap(self) -> None:
        if self._pump is not None:
            self._pump.close(STOP_TIMEOUT)

    def _log(self) -> str:
        return "\n".join(self.log)


PostgresServerFactory = Callable[..., PostgresServer]
"""The `make_postgres_server` fixture: `PostgresServer`'s keyword arguments in, a started
server out."""
