"""The bench's two-replica measurements: replicas A and B of ours on one shared store (a Redis or
a PostgreSQL database), the task on A.

    .venv/bin/python -m tests.load.replica_scenarios subscribe|cancel A_TARGET B_TARGET STORE_URL
                                                     [--samples 200] [--warmup 10]

Both replicas run `tests.load.servers ours --store STORE_URL --agent hold`. Each sample starts
its own task on A (`hold <key>`, SendMessage with return_immediately) and waits until it is
WORKING, so the agent is waiting for its release (`tests.load.hold_agent`: BLPOP <key> on
Redis, the advisory lock <key> the client holds on PostgreSQL) before the clock starts:

- `subscribe`: SubscribeToTask on B; once B sent the snapshot (and WORKING), the client
  releases <key> (RPUSH; pg_advisory_unlock) and times until B's stream yields the artifact the
  agent on A then writes. Reported: `p50_ms` / `p99_ms` from that release (the whole path: the
  store wakes the agent on A, A writes the event, the store publishes it (PUBLISH; NOTIFY), B
  passes it to its stream), and `emit_*` from the agent's timestamp taken just before the write
  on A to the arrival at B.
- `cancel`: SubscribeToTask on A; once it yielded the snapshot (and WORKING), CancelTask on B,
  timed until A's stream yields CANCELED.

The first `--warmup` samples (connections, caches) are left out. One sample at a time; the
client is a single grpc.aio process with one connection to the store. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from typing import Any

import grpc

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from tests.load.closed_loop import METADATA, echo_request, percentile
from tests.load.hold_agent import is_postgres

CALL_TIMEOUT = 30.0


class RedisRelease:
    """Releases on Redis: the agent BLPOPs a fresh key, the client RPUSHes to it."""

    def __init__(self, url: str) -> None:
        import redis.asyncio as aioredis

        self.redis = aioredis.from_url(url)

    async def hold(self) -> str:
        return f"bench:release:{uuid.uuid4()}"

    async def release(self, key: str) -> None:
        await self.redis.rpush(key, "go")

    async def discard(self, key: str) -> None:
        """After a cancel ended the wait: nothing is left behind."""

    async def close(self) -> None:
        await self.redis.aclose()


class PostgresRelease:
    """Releases on PostgreSQL: the client holds a fresh advisory lock before the task starts,
    the agent waits to take it, the client unlocks it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.db: Any = None

    async def hold(self) -> str:
        import psycopg

        if self.db is None:
            self.db = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
        key = str(uuid.uuid4().int >> 65)  # a positive bigint
        await self.db.execute("SELECT pg_advisory_lock(%s)", (int(key),))
        return key

    async def release(self, key: str) -> None:
        await self.db.execute("SELECT pg_advisory_unlock(%s)", (int(key),))

    async def discard(self, key: str) -> None:
        """After a cancel ended the wait: the lock goes (the agent's session waits no more)."""
        await self.release(key)

    async def close(self) -> None:
        if self.db is not None:
            await self.db.close()


class Replicas:
    """The client's channels to A and B, and its connection to their store."""

    def __init__(self, a: str, b: str, store_url: str) -> None:
        self.channels = [grpc.aio.insecure_channel(target) for target in (a, b)]
        self.a, self.b = (a2a_pb2_grpc.A2AServiceStub(channel) for channel in self.channels)
        self.releases = (
            PostgresRelease(store_url) if is_postgres(store_url) else RedisRelease(store_url)
        )

    async def close(self) -> None:
        await asyncio.gather(*(channel.close() for channel in self.channels))
        await self.releases.close()

    async def held_task(self) -> tuple[str, str]:
        """A new task on A whose agent waits on a fresh key: (task id, key)."""
        key = await self.releases.hold()
        request = echo_request(f"hold {key}")
        request.configuration.return_immediately = True
        response = await self.a.SendMessage(request, metadata=METADATA, timeout=CALL_TIMEOUT)
        return response.task.id, key


class Stream:
    """A SubscribeToTask call read one event at a time (grpc.aio's `read`)."""

    def __init__(self, stub: a2a_pb2_grpc.A2AServiceStub, task_id: str) -> None:
        self.call = stub.SubscribeToTask(
            a2a_pb2.SubscribeToTaskRequest(id=task_id), metadata=METADATA, timeout=CALL_TIMEOUT
        )

    async def next(self) -> a2a_pb2.StreamResponse | None:
        """The next event; None once the stream ended."""
        event = await self.call.read()
        return None if event is grpc.aio.EOF else event

    async def until_working(self) -> None:
        """Reads the snapshot, and the WORKING update when the snapshot is older than it."""
        event = await self.next()
        state = event.task.status.state if event is not None else None
        while state != a2a_pb2.TASK_STATE_WORKING:
            event = await self.next()
            if event is None:
                raise RuntimeError("the stream ended before the task was WORKING")
            if event.HasField("status_update"):
                state = event.status_update.status.state

    async def drain(self) -> None:
        while await self.next() is not None:
            pass


async def subscribe_sample(replicas: Replicas) -> tuple[float, float]:
    """(ms from the RPUSH to the event at B, ms from the agent's emit on A to it)."""
    task_id, key = await replicas.held_task()
    stream = Stream(replicas.b, task_id)
    await stream.until_working()
    pushed = time.monotonic_ns()
    await replicas.releases.release(key)
    event = await stream.next()
    arrived = time.monotonic_ns()
    if event is None or not event.HasField("artifact_update"):
        raise RuntimeError(f"expected the released artifact first, got {event}")
    emitted = int(event.artifact_update.artifact.parts[0].text)
    await stream.drain()  # COMPLETED ends it
    return (arrived - pushed) / 1e6, (arrived - emitted) / 1e6


async def cancel_sample(replicas: Replicas) -> float:
    """ms from sending CancelTask to B until A's stream yields CANCELED."""
    task_id, key = await replicas.held_task()
    stream = Stream(replicas.a, task_id)
    await stream.until_working()
    started = time.monotonic_ns()
    cancel = asyncio.ensure_future(
        replicas.b.CancelTask(
            a2a_pb2.CancelTaskRequest(id=task_id), metadata=METADATA, timeout=CALL_TIMEOUT
        )
    )
    while True:
        event = await stream.next()
        if event is None:
            raise RuntimeError("A's stream ended without CANCELED")
        if event.status_update.status.state == a2a_pb2.TASK_STATE_CANCELED:
            break
    seen = time.monotonic_ns()
    await cancel
    await stream.drain()
    await replicas.releases.discard(key)
    return (seen - started) / 1e6


async def run(scenario: str, args: argparse.Namespace) -> dict[str, float]:
    replicas = Replicas(args.a, args.b, args.store_url)
    latencies: list[float] = []
    from_emit: list[float] = []
    try:
        for index in range(args.warmup + args.samples):
            if scenario == "subscribe":
                total, emitted = await subscribe_sample(replicas)
            else:
                total, emitted = await cancel_sample(replicas), 0.0
            if index >= args.warmup:
                latencies.append(total)
                from_emit.append(emitted)
    finally:
        await replicas.close()
    figures = {
        "samples": len(latencies),
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
    }
    if scenario == "subscribe":
        figures.update(emit_p50_ms=percentile(from_emit, 50), emit_p99_ms=percentile(from_emit, 99))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=("subscribe", "cancel"))
    parser.add_argument("a", help="replica A (runs the tasks), host:port")
    parser.add_argument("b", help="replica B, host:port")
    parser.add_argument("store_url", help="their Redis or PostgreSQL URL")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.scenario, args))))


if __name__ == "__main__":
    main()
