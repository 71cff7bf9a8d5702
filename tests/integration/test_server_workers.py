"""`serve --workers N`: the supervisor forwards stop signals, waits for its workers, stops them
all when one dies, and workers stop when it is gone; the options it needs are refused without.

The supervisor runs stand-in workers (tests/integration/worker_child.py) in real processes with
real signals; a real `serve` worker shows the lifeline. Every wait is on a process's output or
its exit, bounded by a timeout.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from a2a_grpc.client import A2AClient
from a2a_grpc.client.messages import user_message
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.addresses import bind_problem
from tests.redis_servers import RedisServer

CHILD = str(Path(__file__).with_name("worker_child.py"))
BOUND = 30.0
"""Upper bound on any one wait; the waits themselves are on output and exits."""
"""A shared store (Redis URL) the end-to-end workers test may use; unset, it is skipped."""


class Run:
    """A process whose stdout is read line by line as it comes."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.workers: dict[int, int] = {}
        """Worker index -> pid, from the stand-ins' `ready INDEX PID` lines."""

    async def lines(self, count: int) -> set[str]:
        assert self.process.stdout is not None
        read = [await asyncio.wait_for(self.process.stdout.readline(), BOUND) for _ in range(count)]
        return {line.decode().strip() for line in read}

    async def finish(self) -> tuple[int, set[str], str]:
        """Exit status, the rest of stdout (to its end: every worker gone), and stderr."""
        out, err = await asyncio.wait_for(self.process.communicate(), BOUND)
        assert self.process.returncode is not None
        return self.process.returncode, set(out.decode().splitlines()), err.decode()


async def _start(*argv: str, pass_fds: tuple[int, ...] = ()) -> Run:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        pass_fds=pass_fds,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    return Run(process)


@pytest.fixture
async def supervise() -> AsyncIterator[object]:
    started: list[Run] = []

    async def start(behaviour: str, *, count: int = 2, stop_timeout: float = BOUND) -> Run:
        run = await _start(CHILD, "supervise", str(count), behaviour, str(stop_timeout))
        started.append(run)
        for line in await run.lines(count):
            ready, index, pid = line.split()
            assert ready == "ready", line
            run.workers[int(index)] = int(pid)
        assert sorted(run.workers) == list(range(1, count + 1))
        return run

    yield start
    for run in started:  # a failed test leaves no supervisor; its workers follow the lifeline
        if run.process.returncode is None:
            run.process.kill()
            await run.process.wait()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
async def test_a_stop_signal_reaches_every_worker_and_is_waited_for(
    supervise, sig: signal.Signals
) -> None:
    run = await supervise("serve", count=3)
    run.process.send_signal(sig)
    code, rest, _ = await run.finish()
    assert code == 0
    assert rest == {f"{index} stopped by {sig.name}" for index in (1, 2, 3)}


async def test_sighup_reaches_every_worker_and_stops_none(supervise) -> None:
    run = await supervise("serve", count=3)
    run.process.send_signal(signal.SIGHUP)
    assert await run.lines(3) == {f"{index} reloaded" for index in (1, 2, 3)}
    run.process.send_signal(signal.SIGTERM)
    code, rest, _ = await run.finish()
    assert code == 0
    assert rest == {f"{index} stopped by SIGTERM" for index in (1, 2, 3)}


async def test_a_worker_that_dies_stops_the_others_and_its_status_is_the_exit_status(
    supervise,
) -> None:
    run = await supervise("serve")
    os.kill(run.workers[2], signal.SIGUSR1)  # worker 2 exits 3 at once
    code, rest, err = await run.finish()
    assert code == 3
    assert rest == {"1 stopped by SIGTERM"}
    assert "worker 2" in err and "exited with status 3 without being asked to stop" in err


async def test_a_worker_that_fails_as_it_stops_makes_the_exit_status_non_zero(supervise) -> None:
    run = await supervise("fail-on-stop")
    run.process.send_signal(signal.SIGTERM)
    code, rest, _ = await run.finish()
    assert code == 4
    assert rest == {"1 stopped by SIGTERM", "2 stopped by SIGTERM"}


async def test_a_worker_that_does_not_stop_in_time_is_killed(supervise) -> None:
    run = await supervise("stubborn", stop_timeout=0.2)
    run.process.send_signal(signal.SIGTERM)
    code, rest, err = await run.finish()
    assert code == 1
    assert rest == set()  # killed: nothing more printed
    assert "did not stop within 0.2 s; killing it" in err


async def test_workers_stop_when_the_supervisor_is_killed(supervise) -> None:
    run = await supervise("stubborn")  # even workers that ignore SIGTERM
    run.process.kill()
    code, rest, _ = await run.finish()  # stdout ends only once every worker has exited
    assert code == -signal.SIGKILL
    assert rest == {"1 lifeline closed", "2 lifeline closed"}


async def test_a_serve_worker_shuts_down_when_its_lifeline_closes() -> None:
    lifeline, held = os.pipe()
    try:
        run = await _start(
            "-m",
            "a2a_grpc.cli.main",
            "serve",
            "--port",
            "0",
            "--http-port",
            "-1",
            "--drain-delay",
            "0",
            "--worker-index",
            "1",
            "--worker-lifeline",
            str(lifeline),
            pass_fds=(lifeline,),
        )
    finally:
        os.close(lifeline)
    try:
        (first,) = await run.lines(1)
        assert first.startswith("a2a-grpc[worker 1]: serving A2A 1.0 over gRPC")
    finally:
        os.close(held)  # as when the supervisor dies
    code, rest, _ = await run.finish()
    assert code == 0
    assert "a2a-grpc[worker 1]: the supervisor is gone" in rest
    assert "a2a-grpc[worker 1]: shutting down: NOT_SERVING" in rest
    assert any("reuse_port=True" in line for line in rest)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--workers", "2"], "workers=2 needs a shared store"),
        (
            ["--workers", "2", "--port", "0", "--store", "redis://:pw@127.0.0.1:1/0"],
            "workers=2 needs a fixed port, not 0",
        ),
    ],
    ids=["without-store", "port-0"],
)
async def test_serve_refuses_workers_it_cannot_run(argv: list[str], says: str) -> None:
    run = await _start("-m", "a2a_grpc.cli.main", "serve", *argv)
    code, out, err = await run.finish()
    assert code == 2 and out == set()
    (line,) = err.splitlines()
    assert line.startswith("a2a-grpc serve: ") and says in line
    assert ":pw@" not in err


def test_bind_problem_names_a_port_in_use() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        problem = bind_problem("127.0.0.1", port)
        assert problem is not None and f"cannot listen on 127.0.0.1:{port}" in problem
    assert bind_problem("127.0.0.1", port) is None  # free again once closed


async def test_workers_share_one_port_and_stop_together(redis_server: RedisServer) -> None:
    with socket.socket() as probe:  # a fixed port for the workers (0 is refused)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    run = await _start(
        "-m",
        "a2a_grpc.cli.main",
        "serve",
        "--workers",
        "2",
        "--port",
        str(port),
        "--http-port",
        "-1",
        "--store",
        redis_server.url,
    )
    serving: set[str] = set()
    for _ in range(40):  # the supervisor's line, then each worker's five, in any order
        (line,) = await run.lines(1)
        if "serving A2A 1.0" in line:
            serving.add(line.partition(":")[0])
        if len(serving) == 2:
            break
    assert serving == {"a2a-grpc[worker 1]", "a2a-grpc[worker 2]"}
    for _ in range(10):  # new connections, spread over the workers by the kernel
        async with A2AClient.connect(f"127.0.0.1:{port}") as client:
            task = await client.send_message(user_message("hi"), timeout=BOUND)
        assert isinstance(task, a2a_pb2.Task)
        assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    # The default drain delay (5 s): the first SIGTERM reaches both workers, which keep
    # serving; the second, forwarded too, ends the delay at once.
    run.process.send_signal(signal.SIGTERM)
    delaying: set[str] = set()
    while len(delaying) < 2:
        (line,) = await run.lines(1)
        if "shutting down: NOT_SERVING; serving as usual for 5 s more" in line:
            delaying.add(line.partition(":")[0])
    async with A2AClient.connect(f"127.0.0.1:{port}") as client:  # still served
        task = await client.send_message(user_message("hi"), timeout=BOUND)
    assert isinstance(task, a2a_pb2.Task)
    run.process.send_signal(signal.SIGTERM)
    code, rest, _ = await run.finish()
    assert code == 0
    assert "a2a-grpc: all workers stopped" in rest
    assert {line for line in rest if "draining: GOAWAY" in line} == {
        f"a2a-grpc[worker {n}]: draining: GOAWAY and closing the ports; running work gets 10 s"
        for n in (1, 2)
    }
