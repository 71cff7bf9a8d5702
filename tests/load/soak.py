"""Soak: replicas under a steady mix of every kind of call, and whether anything only grows.

    .venv/bin/python -m tests.load.soak [--store redis|memory] [--minutes 10] [--replicas 2]
                                        [--workers 8] [--task-ttl 30] [--sample 10]
                                        [--tracemalloc DIR]

Starts a redis-server of its own (tests/redis_servers.py; `--store memory`: one server, no
Redis) and `--replicas` servers of ours as child processes (`tests.load.servers ours`, the demo
agent, `--store` the Redis, `task_ttl` and `dedup_window` of `--task-ttl` seconds so that
finished tasks leave well within the run), all on 127.0.0.1. `--workers` closed-loop callers
(one grpc.aio channel per replica) go round a mix, each call with a 30 s deadline, another
replica taking the second half of a call where there is one:

- a blocking "hello" in one of 50 contexts; a streamed "chunks 3";
- "slow 5" returned at once and canceled (on the other replica);
- "slow 1" returned at once, subscribed to (other replica) for two events, resumed after the
  second with `a2a-last-event-id`, read to its end;
- "ask", answered (other replica); ListTasks of a context; GetTask of a finished task.

Every `--sample` seconds it records each replica's resident memory (VmRSS) and Redis's key
count (DBSIZE) and `used_memory`. At the end it prints one JSON line: the calls by outcome, the
samples, and the slope of each series over the second half of the run (least squares, per
minute), which is what "levels off" is judged by (tests/load/RESULTS.md states the bounds).

`--tracemalloc DIR`: the replicas trace allocations (`--frames`, 25) and write a snapshot to
DIR at a quarter of the run and at its end (SIGUSR1); the JSON line then carries the 25 biggest
growths between the two, per replica, by traceback (the tool that found what grew). 25 frames
slow a replica several times over; `--frames 1` costs far less and still says which line.

Not part of `make test` (10 minutes, and a slope needs minutes to mean anything on a shared
machine); `make test` has the exact form of the Redis half instead: no key outlives its tasks
(tests/integration/test_redis_keys_expire.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import sys
import time
import tracemalloc
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import redis.asyncio

from a2a_grpc.core import event_ids
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from tests.redis_servers import RedisServer

VERSION = (("a2a-version", "1.0"),)
DEADLINE = 30.0
CONTEXTS = 50
SNAPSHOT_ENV = "A2A_SOAK_TRACEMALLOC"
FRAMES_ENV = "A2A_SOAK_TRACEMALLOC_FRAMES"


@dataclasses.dataclass
class Replica:
    process: asyncio.subprocess.Process
    port: int
    stub: a2a_pb2_grpc.A2AServiceStub | None = None

    def rss_mib(self) -> float:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
        return round(int(line.split()[1]) / 1024, 2)


def message(text: str, context_id: str = "", task_id: str = "") -> a2a_pb2.Message:
    sent = a2a_pb2.Message(
        message_id=uuid.uuid4().hex, role=a2a_pb2.ROLE_USER, context_id=context_id, task_id=task_id
    )
    sent.parts.add().text = text
    return sent


class Mix:
    """The calls of one worker, round the mix (see the module docstring)."""

    def __init__(self, replicas: list[Replica], worker: int) -> None:
        self.replicas = replicas
        self.worker = worker
        self.finished: list[str] = []

    def _pair(self, turn: int) -> tuple[a2a_pb2_grpc.A2AServiceStub, a2a_pb2_grpc.A2AServiceStub]:
        first = self.replicas[(self.worker + turn) % len(self.replicas)].stub
        second = self.replicas[(self.worker + turn + 1) % len(self.replicas)].stub
        assert first is not None and second is not None
        return first, second

    async def call(self, turn: int) -> str:
        a, b = self._pair(turn)
        kind = turn % 7
        context = f"ctx-{(self.worker * 7 + turn) % CONTEXTS}"
        immediately = a2a_pb2.SendMessageConfiguration(return_immediately=True)
        if kind == 0:
            sent = await a.SendMessage(
                a2a_pb2.SendMessageRequest(message=message("hello", context)),
                metadata=VERSION,
                timeout=DEADLINE,
            )
            self.finished = [*self.finished[-9:], sent.task.id]
        elif kind == 1:
            stream = a.SendStreamingMessage(
                a2a_pb2.SendMessageRequest(message=message("chunks 3", context)),
                metadata=VERSION,
                timeout=DEADLINE,
            )
            async for _ in stream:
                pass
        elif kind == 2:
            slow = await a.SendMessage(
                a2a_pb2.SendMessageRequest(
                    message=message("slow 5", context), configuration=immediately
                ),
                metadata=VERSION,
                timeout=DEADLINE,
            )
            await b.CancelTask(
                a2a_pb2.CancelTaskRequest(id=slow.task.id), metadata=VERSION, timeout=DEADLINE
            )
        elif kind == 3:
            await self._resumed(a, b, context)
        elif kind == 4:
            asked = await a.SendMessage(
                a2a_pb2.SendMessageRequest(message=message("ask", context)),
                metadata=VERSION,
                timeout=DEADLINE,
            )
            await b.SendMessage(
                a2a_pb2.SendMessageRequest(message=message("42", context, asked.task.id)),
                metadata=VERSION,
                timeout=DEADLINE,
            )
        elif kind == 5:
            await b.ListTasks(
                a2a_pb2.ListTasksRequest(context_id=context, page_size=10),
                metadata=VERSION,
                timeout=DEADLINE,
            )
        elif self.finished:
            with contextlib.suppress(grpc.aio.AioRpcError):  # it may have expired: fine
                await b.GetTask(
                    a2a_pb2.GetTaskRequest(id=self.finished[0]), metadata=VERSION, timeout=DEADLINE
                )
        return "OK"

    async def _resumed(
        self, a: a2a_pb2_grpc.A2AServiceStub, b: a2a_pb2_grpc.A2AServiceStub, context: str
    ) -> None:
        started = await a.SendMessage(
            a2a_pb2.SendMessageRequest(
                message=message("slow 1", context),
                configuration=a2a_pb2.SendMessageConfiguration(return_immediately=True),
            ),
            metadata=VERSION,
            timeout=DEADLINE,
        )
        request = a2a_pb2.SubscribeToTaskRequest(id=started.task.id)
        seen: list[str] = []
        stream = b.SubscribeToTask(request, metadata=VERSION, timeout=DEADLINE)
        async for event in stream:
            seen.append(event_ids.event_id(event) or "")
            if len(seen) == 2:
                break
        stream.cancel()
        if len(seen) < 2 or not seen[-1]:
            return  # it finished before two events: nothing to resume after
        after = (*VERSION, (event_ids.LAST_EVENT_ID_KEY, seen[-1]))
        async for _ in b.SubscribeToTask(request, metadata=after, timeout=DEADLINE):
            pass


async def work(mix: Mix, until: float, outcomes: Counter[str]) -> None:
    turn = 0
    while time.monotonic() < until:
        try:
            outcomes[await mix.call(turn)] += 1
        except grpc.aio.AioRpcError as error:
            outcomes[error.code().name] += 1
        turn += 1


@contextlib.asynccontextmanager
async def replica(
    store: str, task_ttl: int, snapshots: Path | None, frames: int = 25
) -> AsyncIterator[Replica]:
    """`tests.load.soak serve` as a child process (ours, with the soak's settings)."""
    env = dict(os.environ)
    if snapshots is not None:
        env[SNAPSHOT_ENV] = str(snapshots)
        env[FRAMES_ENV] = str(frames)
    args = ["--config", f"task_ttl={task_ttl}", "--config", f"dedup_window={task_ttl}"]
    if store:
        args += ["--store", store]
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.load.soak",
        "serve",
        *args,
        stdout=asyncio.subprocess.PIPE,
        env=env,
    )
    assert child.stdout is not None
    try:
        line = (await asyncio.wait_for(child.stdout.readline(), 60)).decode()
        yield Replica(child, int(line.split()[1]))
    finally:
        child.terminate()
        await child.wait()


def slope_per_minute(samples: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) pairs, per minute."""
    n = len(samples)
    if n < 2:
        return 0.0
    mean_t = sum(t for t, _ in samples) / n
    mean_v = sum(v for _, v in samples) / n
    spread = sum((t - mean_t) ** 2 for t, _ in samples)
    return 60 * sum((t - mean_t) * (v - mean_v) for t, v in samples) / spread if spread else 0.0


async def sample(
    replicas: list[Replica], client: redis.asyncio.Redis | None, start: float
) -> dict[str, Any]:
    row: dict[str, Any] = {"t": round(time.monotonic() - start, 1)}
    for index, each in enumerate(replicas):
        row[f"rss_mib_{index}"] = each.rss_mib()
    if client is not None:
        row["redis_keys"] = await client.dbsize()
        row["redis_used_mib"] = round((await client.info("memory"))["used_memory"] / 2**20, 2)
    return row


def top_growth(snapshots: Path, pid: int, count: int = 25) -> list[str]:
    first, last = (tracemalloc.Snapshot.load(str(snapshots / f"{pid}-{n}.snap")) for n in (1, 2))
    stats = last.compare_to(first, "traceback")
    lines = []
    for stat in stats[:count]:
        frames = [f"{frame.filename}:{frame.lineno}" for frame in stat.traceback]
        lines.append(
            f"{stat.size_diff / 1024:+.1f} KiB {stat.count_diff:+d} | " + " < ".join(frames[-6:])
        )
    return lines


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    snapshots = Path(args.tracemalloc) if args.tracemalloc else None
    if snapshots is not None:
        snapshots.mkdir(parents=True, exist_ok=True)
    redis_server = RedisServer() if args.store == "redis" else None
    client: redis.asyncio.Redis | None = None
    replica_count = args.replicas if redis_server is not None else 1
    async with contextlib.AsyncExitStack() as stack:
        url = ""
        if redis_server is not None:
            stack.enter_context(redis_server)
            url = redis_server.url
            client = redis.asyncio.Redis.from_url(url)
            stack.push_async_callback(client.aclose)
        replicas = [
            await stack.enter_async_context(replica(url, args.task_ttl, snapshots, args.frames))
            for _ in range(replica_count)
        ]
        channels = [grpc.aio.insecure_channel(f"127.0.0.1:{each.port}") for each in replicas]
        for each, channel in zip(replicas, channels, strict=True):
            each.stub = a2a_pb2_grpc.A2AServiceStub(channel)
            stack.push_async_callback(channel.close)
        start = time.monotonic()
        until = start + args.minutes * 60
        outcomes: Counter[str] = Counter()
        workers = [
            asyncio.create_task(work(Mix(replicas, index), until, outcomes))
            for index in range(args.workers)
        ]
        samples = [await sample(replicas, client, start)]
        snapped = False
        while time.monotonic() < until:
            await asyncio.sleep(min(args.sample, max(0.0, until - time.monotonic())))
            samples.append(await sample(replicas, client, start))
            if (
                snapshots is not None
                and not snapped
                and time.monotonic() - start > args.minutes * 15
            ):
                snapped = True
                for each in replicas:
                    each.process.send_signal(signal.SIGUSR1)
        await asyncio.gather(*workers)
        growth: dict[str, list[str]] = {}
        if snapshots is not None:
            for each in replicas:
                each.process.send_signal(signal.SIGUSR1)
            await asyncio.sleep(5)  # the snapshot is written by the child (no event to wait on)
            for index, each in enumerate(replicas):
                with contextlib.suppress(OSError):
                    growth[str(index)] = top_growth(snapshots, each.process.pid)
    half = args.minutes * 30
    second_half = [row for row in samples if row["t"] >= half]
    slopes = {
        name: round(slope_per_minute([(row["t"], row[name]) for row in second_half]), 3)
        for name in samples[0]
        if name != "t"
    }
    return {
        "store": args.store,
        "replicas": replica_count,
        "minutes": args.minutes,
        "workers": args.workers,
        "task_ttl": args.task_ttl,
        "calls": dict(outcomes),
        "slopes_per_minute_second_half": slopes,
        "first": samples[0],
        "at_half": second_half[0] if second_half else None,
        "last": samples[-1],
        "samples": samples,
        "growth": growth,
    }


async def serve(args: argparse.Namespace) -> None:
    """The child: ours (tests.load.servers), tracing allocations when the parent asks."""
    from tests.load.servers import serve_ours

    directory = os.environ.get(SNAPSHOT_ENV)
    if directory:
        tracemalloc.start(int(os.environ.get(FRAMES_ENV, "25")))
        taken = 0

        def snapshot() -> None:
            nonlocal taken
            taken += 1
            tracemalloc.take_snapshot().dump(f"{directory}/{os.getpid()}-{taken}.snap")

        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, snapshot)
    overrides = {name: int(value) for name, _, value in (c.partition("=") for c in args.config)}
    await serve_ours("demo", 0, None, overrides, args.store)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    child = sub.add_parser("serve", help="one replica (run by the soak)")
    child.add_argument("--store", default="")
    child.add_argument("--config", action="append", default=[], metavar="FIELD=INT")
    parser.add_argument("--store", choices=("redis", "memory"), default="redis")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--task-ttl", type=int, default=30)
    parser.add_argument("--sample", type=float, default=10.0)
    parser.add_argument("--tracemalloc", metavar="DIR")
    parser.add_argument(
        "--frames", type=int, default=25, help="frames tracemalloc keeps (1: cheap, by line)"
    )
    args = parser.parse_args()
    if args.command == "serve":
        asyncio.run(serve(args))
        return
    print(json.dumps(asyncio.run(soak(args))), flush=True)


if __name__ == "__main__":
    main()
