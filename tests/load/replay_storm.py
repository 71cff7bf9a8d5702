"""A replay storm: one principal resumes many SubscribeToTask streams at once, each replaying a
long task's kept events, while another caller goes on calling.

    .venv/bin/python -m tests.load.replay_storm [--streams 1000] [--events 1000] [--channels 8]
                                                [--redis] [--retry] [--drain]
                                                [--config FIELD=INT ...]

Starts our server as a child process (`tests.load.servers ours --agent burst`, in memory, or
`--redis` on a redis-server of its own, as a replica), makes one task of `--events` chunks
(`burst N 0`, followed to its end with SendStreamingMessage, whose first event id it keeps),
then opens `--streams` SubscribeToTask streams at once, each resumed after that id
(`a2a-last-event-id`), over `--channels` connections. With `--retry`, a stream refused with
RESOURCE_EXHAUSTED tries again after the RetryInfo delay, as our client does, until it is
served or 120 s have passed. Meanwhile another caller, in a process of its own (so that its
times are not the storm client's), sends `hello` (SendMessage, blocking) one call after
another, from before the storm (its first 50 calls are the baseline) to after it. With
`--drain`, the server is sent SIGTERM once the storm is under way (give it a grace:
`--config shutdown_grace=10`), to see what the calls made during the drain get.

Prints one JSON line: the streams served (every kept event received), refused (status, with
RetryInfo or not; with `--retry`, refusals before being served), failed otherwise, and never
served (no event before their 30 s deadline); how long refusals took; the other caller's p50 /
p99 / max before and during the storm; the server's RSS before, at its peak (sampled every
100 ms from /proc) and after; and on Redis, how often the store's health (gRPC Health,
`a2a_grpc.store`) went NOT_SERVING.

`storm()` is what tests/integration/test_fair_streams.py runs, smaller and bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from a2a_grpc.core import status
from a2a_grpc.core.event_ids import LAST_EVENT_ID_KEY, event_id
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from tests.load.closed_loop import METADATA, echo_request, percentile

STREAM_DEADLINE = 30.0
"""Seconds each storm stream may take (as the attack's clients gave it)."""
RETRY_FOR = 120.0
"""With retries: seconds a stream keeps trying before it counts as never served."""
STORE_HEALTH = "a2a_grpc.store"
THIS_FILE = str(Path(__file__).resolve())


@dataclass
class StormResult:
    """What the storm's streams and the other caller got."""

    streams: int
    served: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    """Refusals by status (`RESOURCE_EXHAUSTED with RetryInfo` counted apart)."""
    failed: Counter[str] = field(default_factory=Counter)
    """Streams that ended with an error after some events, or any error not a refusal."""
    never_served: int = 0
    refusal_seconds: list[float] = field(default_factory=list)
    """How long each refusal took to come, from the stream's start."""
    served_seconds: list[float] = field(default_factory=list)
    """How long each served stream took, from its first attempt to its last event."""
    other_before: list[float] = field(default_factory=list)
    other_during: list[float] = field(default_factory=list)
    other_errors: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    def summary(self) -> dict[str, object]:
        def ms(values: list[float], pct: float) -> float:
            return round(percentile(values, pct) * 1000, 1)

        return {
            "streams": self.streams,
            "served": self.served,
            "refused": dict(self.refused),
            "failed": dict(self.failed),
            "never_served": self.never_served,
            "refusal_ms": {
                "p50": ms(self.refusal_seconds, 50),
                "max": ms(self.refusal_seconds, 100),
            },
            "served_s": {
                "p50": round(percentile(self.served_seconds, 50), 2),
                "max": round(percentile(self.served_seconds, 100), 2),
            },
            "other_before_ms": {p: ms(self.other_before, n) for p, n in PCTS},
            "other_during_ms": {p: ms(self.other_during, n) for p, n in PCTS},
            "other_calls": {"before": len(self.other_before), "during": len(self.other_during)},
            "other_errors": dict(self.other_errors),
            "seconds": round(self.seconds, 2),
        }


PCTS = (("p50", 50), ("p99", 99), ("max", 100))


async def long_task(
    stub: a2a_pb2_grpc.A2AServiceStub, events: int, replayed: int = 1000
) -> tuple[str, str, int]:
    """A finished task of `events` chunks (`burst N 0`): its id, the id a stream resumes
    after, and how many events it replays: its last `replayed` (what the server keeps by
    default, `--replay-events`), or all after the Task."""
    ids: list[str] = []
    task_id = ""
    async for event in stub.SendStreamingMessage(
        echo_request(f"burst {events} 0"), metadata=METADATA, timeout=120
    ):
        if event.HasField("task"):
            task_id = event.task.id
        found = event_id(event)
        assert found is not None, event
        ids.append(found)
    replayed = min(replayed, len(ids) - 1)
    return task_id, ids[-replayed - 1], replayed


async def resumed_stream(
    stub: a2a_pb2_grpc.A2AServiceStub,
    task_id: str,
    after: str,
    expected: int,
    result: StormResult,
    *,
    retry: bool,
    started: asyncio.Event,
) -> None:
    """One storm stream: counted as served, refused, failed or never served."""
    metadata = (*METADATA, (LAST_EVENT_ID_KEY, after))
    first_try = time.monotonic()
    while True:
        call = stub.SubscribeToTask(
            a2a_pb2.SubscribeToTaskRequest(id=task_id), metadata=metadata, timeout=STREAM_DEADLINE
        )
        attempt = time.monotonic()
        received = 0
        try:
            async for _ in call:
                received += 1
                started.set()
        except grpc.aio.AioRpcError as error:
            code = error.code().name
            if received == 0 and code == "DEADLINE_EXCEEDED":
                result.never_served += 1
                return
            decoded = status.decode(error.code(), error.details() or "", error.trailing_metadata())
            delay = decoded.retry_delay if decoded is not None else None
            if received == 0 and code == "RESOURCE_EXHAUSTED":
                result.refusal_seconds.append(time.monotonic() - attempt)
                result.refused[code + (" with RetryInfo" if delay is not None else "")] += 1
                started.set()
                if retry and delay is not None and time.monotonic() - first_try < RETRY_FOR:
                    await asyncio.sleep(delay)  # as the client does with RetryInfo
                    continue
                if retry:
                    result.never_served += 1
                return
            result.failed[f"{code} after {'some' if received else 'no'} events"] += 1
            return
        if received == expected:
            result.served += 1
            result.served_seconds.append(time.monotonic() - first_try)
        else:
            result.failed[f"OK with {received} of {expected} events"] += 1
        return


async def other_caller(target: str) -> None:
    """The other caller, in a process of its own (`replay_storm other TARGET`), so that its
    times are not the storm client's: blocking SendMessage calls one after another, each
    printed as a JSON line [start, seconds, code] (time.monotonic(): one clock for every
    process), until its stdin closes."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    closed = asyncio.ensure_future(reader.read())
    async with grpc.aio.insecure_channel(target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        await channel.channel_ready()
        print("READY", flush=True)
        while not closed.done():
            started = time.monotonic()
            code = "OK"
            try:
                await stub.SendMessage(echo_request("hello"), metadata=METADATA, timeout=60)
            except grpc.aio.AioRpcError as error:
                code = error.code().name
            print(json.dumps([started, time.monotonic() - started, code]), flush=True)


class OtherCaller:
    """`other_caller` in a child process, and what its calls got."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.calls: list[tuple[float, float, str]] = []
        self._child: asyncio.subprocess.Process | None = None
        self._reading: asyncio.Future[None] | None = None
        self._called = asyncio.Event()

    async def start(self) -> None:
        # This file by its path, with the working directory (the checkout) importable: the
        # same code also measures another checkout's server (its tests.load.servers).
        path = os.pathsep.join(filter(None, (os.getcwd(), os.environ.get("PYTHONPATH"))))
        self._child = child = await asyncio.create_subprocess_exec(
            sys.executable,
            THIS_FILE,
            "other",
            self.target,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": path},
        )
        assert child.stdout is not None
        assert (await asyncio.wait_for(child.stdout.readline(), 60)).strip() == b"READY"
        self._reading = asyncio.ensure_future(self._read(child.stdout))

    async def _read(self, stdout: asyncio.StreamReader) -> None:
        while line := await stdout.readline():
            started, seconds, code = json.loads(line)
            self.calls.append((started, seconds, code))
            self._called.set()

    async def made(self, count: int, since: float) -> None:
        """Waits until `count` calls have started since `since` and ended."""
        while len(self.between(since, math.inf)) < count:
            self._called.clear()
            await self._called.wait()

    async def stop(self) -> None:
        """Ends it after its call under way."""
        child = self._child
        assert child is not None and child.stdin is not None and self._reading is not None
        child.stdin.close()
        await self._reading
        await child.wait()

    def between(self, start: float, end: float) -> list[tuple[float, float, str]]:
        """The calls that started in [start, end)."""
        return [call for call in self.calls if start <= call[0] < end]


async def storm(
    target: str,
    *,
    streams: int,
    events: int,
    channels: int = 4,
    retry: bool = False,
    baseline_calls: int = 50,
    during: Callable[[], None] | None = None,
) -> StormResult:
    """Runs the storm against the server at `target` (see the module docstring); `during` is
    called once it is under way."""
    opened = [
        grpc.aio.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])
        for _ in range(channels + 1)
    ]
    other = OtherCaller(target)
    try:
        await asyncio.gather(*(channel.channel_ready() for channel in opened))
        stubs = [a2a_pb2_grpc.A2AServiceStub(channel) for channel in opened]
        result = StormResult(streams)
        await other.start()
        baseline_from = time.monotonic()
        await other.made(baseline_calls, baseline_from)
        task_id, after, expected = await long_task(stubs[0], events)
        under_way = asyncio.Event()
        began = time.monotonic()
        storm_streams = asyncio.gather(
            *(
                resumed_stream(
                    stubs[index % channels],
                    task_id,
                    after,
                    expected,
                    result,
                    retry=retry,
                    started=under_way,
                )
                for index in range(streams)
            )
        )
        await under_way.wait()  # the first events or refusals are out: the storm is on
        on = time.monotonic()
        if during is not None:
            during()
        await storm_streams
        ended = time.monotonic()
        result.seconds = ended - began
        await other.made(1, ended)  # then the storm is over for it too
        await other.stop()
        before_storm = other.between(baseline_from, began)[:baseline_calls]
        result.other_before = [seconds for _, seconds, _ in before_storm]
        for _, seconds, code in other.between(on, ended):
            result.other_during.append(seconds)
            if code != "OK":
                result.other_errors[code] += 1
        return result
    finally:
        await asyncio.gather(*(channel.close() for channel in opened))


class Rss:
    """Samples a process's resident set size every 100 ms, keeping the peak."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0
        self._task: asyncio.Task[None] | None = None

    def now(self) -> int:
        """MiB now (0 once the process is gone)."""
        try:
            with open(f"/proc/{self.pid}/status") as lines:
                for line in lines:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) // 1024
        except FileNotFoundError:
            pass
        return 0

    def start(self) -> None:
        async def sample() -> None:
            while True:
                self.peak = max(self.peak, self.now())
                await asyncio.sleep(0.1)

        self._task = asyncio.ensure_future(sample())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


async def health_failures(target: str, counted: Counter[str]) -> None:
    """Counts each time the store's health turns NOT_SERVING (gRPC Health Watch)."""
    async with grpc.aio.insecure_channel(target) as channel:
        watch = health_pb2_grpc.HealthStub(channel).Watch(
            health_pb2.HealthCheckRequest(service=STORE_HEALTH)
        )
        async for answer in watch:
            counted[health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)] += 1


@dataclass
class Child:
    """Our server in a child process."""

    port: int
    pid: int
    log: list[str]
    """Its stderr lines so far (its log)."""


@contextlib.asynccontextmanager
async def server_child(*args: str) -> AsyncIterator[Child]:
    """`tests.load.servers ours ARGS` in a child process."""
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.load.servers",
        "ours",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    log: list[str] = []

    async def keep(stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            log.append(line.decode(errors="replace").rstrip())

    keeping = asyncio.ensure_future(keep(child.stderr))
    try:
        line = (await asyncio.wait_for(child.stdout.readline(), 60)).decode()
        yield Child(int(line.split()[1]), child.pid, log)
    finally:
        if child.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                child.terminate()
        await child.wait()
        await keeping


async def run(args: argparse.Namespace) -> dict[str, object]:
    settings = [arg for setting in args.config for arg in ("--config", setting)]
    redis = None
    if args.redis:
        from tests.redis_servers import RedisServer

        redis = RedisServer().start()
        settings += ["--store", redis.url]
    try:
        async with server_child("--agent", "burst", *settings) as child:
            target = f"127.0.0.1:{child.port}"
            rss = Rss(child.pid)
            before = rss.now()
            health: Counter[str] = Counter()
            watching = asyncio.ensure_future(health_failures(target, health)) if redis else None
            rss.start()
            result = await storm(
                target,
                streams=args.streams,
                events=args.events,
                channels=args.channels,
                retry=args.retry,
                during=(lambda: os.kill(child.pid, signal.SIGTERM)) if args.drain else None,
            )
            await rss.stop()
            if watching is not None:
                watching.cancel()
                with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                    await watching
            summary = result.summary()
            summary.update(
                store="redis" if redis else "memory",
                events=args.events,
                retry=args.retry,
                drain=args.drain,
                config=args.config,
                rss_mib={"before": before, "peak": rss.peak, "after": rss.now()},
            )
            if redis is not None:
                summary["store_health"] = dict(health)  # SERVING counts the first answer
                summary["store_outage_lines"] = [
                    line for line in child.log if "task store (Redis)" in line
                ][:5]
            return summary
    finally:
        if redis is not None:
            redis.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--channels", type=int, default=8)
    parser.add_argument("--redis", action="store_true", help="a replica on its own redis-server")
    parser.add_argument("--retry", action="store_true", help="refused streams retry (RetryInfo)")
    parser.add_argument(
        "--config", action="append", default=[], metavar="FIELD=INT", help="a server setting"
    )
    parser.add_argument(
        "--drain",
        action="store_true",
        help="SIGTERM the server once the storm is under way (give it --config shutdown_grace)",
    )
    if sys.argv[1:2] == ["other"]:
        asyncio.run(other_caller(sys.argv[2]))
        return
    print(json.dumps(asyncio.run(run(parser.parse_args()))), flush=True)


if __name__ == "__main__":
    main()
