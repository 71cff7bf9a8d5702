"""`serve --workers N`: N server processes on one port, and the parent that supervises them.

The parent (`Supervisor`) starts `count` worker processes, each running the same command: for
`serve`, `serve_worker_command` re-executes `python -m a2a_grpc.cli.main serve` with the
parent's options plus `--workers 1 --worker-index I --worker-lifeline FD`. A worker binds the
gRPC and HTTP ports with SO_REUSEPORT (`ServerConfig.reuse_port`), so the kernel spreads new
connections over the workers (connections, not calls: one client channel stays on the worker it
connected to). Workers must keep their tasks in a shared store; the configuration refuses
`workers > 1` without one (`ServerConfig`).

The contract:

- Start: the workers are started in order, 1 to `count`, each in a process group of its own,
  so a terminal's Ctrl-C reaches only the parent, which forwards it once. Before that, the
  caller checks that the ports are free (`addresses.bind_problem`): SO_REUSEPORT would
  otherwise let a worker join another server's port, if that server also set it, instead of
  failing.
- Stop: SIGTERM or SIGINT to the parent is forwarded, the same signal, to every worker still
  running; each drains as one `serve` does (its `--shutdown-grace`). A worker still running
  `stop_timeout` seconds later is killed (SIGKILL) and counts as failed.
- Reload: SIGHUP to the parent is forwarded to every worker still running; each reads its
  token and TLS files again as one `serve` does. The parent itself reads nothing.
- A worker that exits without being asked to (crash, kill, a start-up error such as a port in
  use) is logged with its exit status and the parent stops all the others (SIGTERM), rather than
  restart it: a worker that cannot start would fail again at once, and the process manager above
  the parent (systemd, Kubernetes) sees a stopped service and owns restarts and their backoff.
  The tasks the dead worker was running are FAILED by the store when its lease runs out
  (`--task-lease`); the others' tasks drain normally.
- Exit status of `run()`: 0 when every worker exited with 0; otherwise the status of the first
  worker that did not (a worker killed by a signal counts as 1), so a start-up error keeps the
  exit code a single `serve` would have (core/exit_codes.py).
- Lifeline: the parent holds the write end of a pipe whose read end every worker inherits
  (`--worker-lifeline FD`) and never writes to it. When the parent dies, even by SIGKILL, the
  kernel closes it; the workers read end-of-file and shut down gracefully (`watch_lifeline`),
  so no worker outlives its supervisor.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence

log = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
"""The signals the parent forwards to its workers to stop them."""
RELOAD_SIGNAL = signal.SIGHUP
"""The signal the parent forwards to its workers to have them reload their files."""

Command = Callable[[int, int], Sequence[str]]
"""(worker index from 1, lifeline file descriptor) -> the worker's argv."""


def serve_worker_command(serve_argv: Sequence[str]) -> Command:
    """The `serve` worker command for `serve_argv` (the parent's options after `serve`).

    The appended options win over the parent's (argparse keeps an option's last value): one
    worker each, its index, and the lifeline. The store URL reaches workers the way it reached
    the parent (the options, or `$A2A_GRPC_STORE` in the environment they inherit).
    """

    def command(index: int, lifeline: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "a2a_grpc.cli.main",
            "serve",
            *serve_argv,
            "--workers",
            "1",
            "--worker-index",
            str(index),
            "--worker-lifeline",
            str(lifeline),
        ]

    return command


class Supervisor:
    """Runs `count` worker processes of `command` until they stop (see the module docstring).

    `env` is the workers' environment (None: the parent's), `stdout` their standard output (None:
    the parent's), `stop_timeout` how long stopping workers get before they are killed.
    """

    def __init__(
        self,
        command: Command,
        count: int,
        *,
        env: Mapping[str, str] | None = None,
        stdout: int | None = None,
        stop_timeout: float = 30.0,
    ) -> None:
        if count < 1:
            raise ValueError("a supervisor needs at least one worker")
        self._command = command
        self._count = count
        self._env = env
        self._stdout = stdout
        self._stop_timeout = stop_timeout
        self._workers: dict[int, asyncio.subprocess.Process] = {}
        self._stopping = asyncio.Event()
        self._failure: int | None = None

    @property
    def pids(self) -> dict[int, int]:
        """Worker index -> process id, for the workers started so far."""
        return {index: process.pid for index, process in self._workers.items()}

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Asks every running worker to stop by sending it `sig`; `run()` then returns once they
        have (or were killed after `stop_timeout`). Idempotent; a later call sends `sig` again."""
        self._stopping.set()
        self.forward(sig)

    def forward(self, sig: int) -> None:
        """Sends `sig` to every running worker, without stopping anything."""
        for process in self._workers.values():
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(sig)

    async def run(self, *, handle_signals: bool = True) -> int:
        """Starts the workers, waits until all have exited, returns the exit status (module
        docstring). With `handle_signals`, SIGTERM and SIGINT call `stop` with that signal and
        SIGHUP is forwarded, while it runs (they are the loop's until it returns)."""
        loop = asyncio.get_running_loop()
        if handle_signals:
            for sig in STOP_SIGNALS:
                loop.add_signal_handler(sig, self.stop, sig)
            loop.add_signal_handler(RELOAD_SIGNAL, self.forward, RELOAD_SIGNAL)
        lifeline, lifeline_end = os.pipe()
        try:
            await self._start(lifeline)
            return await self._watch()
        finally:
            os.close(lifeline_end)  # the workers still running read end-of-file: they stop
            if handle_signals:
                for sig in (*STOP_SIGNALS, RELOAD_SIGNAL):
                    loop.remove_signal_handler(sig)

    async def _start(self, lifeline: int) -> None:
        try:
            for index in range(1, self._count + 1):
                if self._stopping.is_set():
                    return
                argv = self._command(index, lifeline)
                try:
                    process = await asyncio.create_subprocess_exec(
                        *argv,
                        pass_fds=(lifeline,),
                        env=self._env,
                        stdout=self._stdout,
                        process_group=0,
                    )
                except OSError as exc:
                    log.error("cannot start worker %d: %s; stopping the others", index, exc)
                    self._fail(1)
                    self.stop()
                    return
                self._workers[index] = process
                log.info("worker %d started (pid %d)", index, process.pid)
                if self._stopping.is_set():  # asked while it started: stop() did not see it
                    with contextlib.suppress(ProcessLookupError):
                        process.terminate()
        finally:
            os.close(lifeline)  # the workers hold it; the parent only ever holds the write end

    async def _watch(self) -> int:
        loop = asyncio.get_running_loop()
        exits = {
            asyncio.ensure_future(process.wait()): index for index, process in self._workers.items()
        }
        asked = asyncio.ensure_future(self._stopping.wait())
        deadline: float | None = None
        killed = False
        try:
            while exits:
                if asked.done() and deadline is None:
                    deadline = loop.time() + self._stop_timeout
                waiting = set(exits) if asked.done() else {*exits, asked}
                timeout = None
                if deadline is not None and not killed:
                    timeout = max(0.0, deadline - loop.time())
                done, _ = await asyncio.wait(
                    waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                )
                if not done:  # the stop deadline passed; SIGKILL ends the rest for certain
                    self._kill_the_rest()
                    killed = True
                for finished in done & set(exits):
                    self._exited(exits.pop(finished), finished.result())
        finally:
            asked.cancel()
        return self._failure or 0

    def _exited(self, index: int, status: int) -> None:
        process = self._workers[index]
        if status != 0:
            self._fail(status if status > 0 else 1)
        if self._stopping.is_set():
            log.info("worker %d (pid %d) %s", index, process.pid, _described(status))
            return
        log.error(
            "worker %d (pid %d) %s without being asked to stop; stopping the others",
            index,
            process.pid,
            _described(status),
        )
        self.stop()

    def _kill_the_rest(self) -> None:
        for index, process in self._workers.items():
            if process.returncode is None:
                log.error(
                    "worker %d (pid %d) did not stop within %g s; killing it",
                    index,
                    process.pid,
                    self._stop_timeout,
                )
                self._fail(1)
                with contextlib.suppress(ProcessLookupError):
                    process.kill()

    def _fail(self, status: int) -> None:
        if self._failure is None:
            self._failure = status


def _described(status: int) -> str:
    if status < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-status).name}"
        return f"was killed by signal {-status}"
    return f"exited with status {status}"


def watch_lifeline(fd: int, on_parent_gone: Callable[[], None]) -> Callable[[], None]:
    """In a worker: calls `on_parent_gone` once the supervisor's end of the lifeline `fd` is
    closed (the parent exited or was killed). Needs a running event loop; returns the function
    that stops watching. Any byte read is ignored (the parent never writes)."""
    loop = asyncio.get_running_loop()
    os.set_blocking(fd, False)

    def readable() -> None:
        try:
            data = os.read(fd, 64)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            loop.remove_reader(fd)
            on_parent_gone()

    def unwatch() -> None:
        loop.remove_reader(fd)

    loop.add_reader(fd, readable)
    return unwatch
