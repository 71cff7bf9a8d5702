"""Time to resume a stream on another replica: reconnect to the first replayed event, on Redis.

    .venv/bin/python -m tests.load.resume_time [--samples 200] [--warmup 10]

Starts its own redis-server and two replicas (`a2a-grpc serve --store`, the replica test agent,
tests/replicas/harness.py). A task runs on A and has streamed a few events (`drip`, the agent
then waits for more). Each sample opens a new channel to B and times from the start of its
SubscribeToTask with `a2a-last-event-id` (an event a few before the last) until B's stream yields
the first replayed event: the connection, the call, B's REPLAY script and the event. For
comparison, `snapshot_*` times the same without the id (until the opening Task snapshot).

The first `--warmup` samples are left out; one sample at a time. Prints one JSON line. Not part
of `make test`: it measures time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid

import grpc
import redis.asyncio as aioredis

from a2a_grpc.core.event_ids import LAST_EVENT_ID_KEY, event_id
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from tests.load.closed_loop import METADATA, percentile
from tests.redis_servers import RedisServer
from tests.replicas.harness import Replica, start_replica

EVENTS = 8
"""Chunks the task has streamed before the samples start."""
BEHIND = 3
"""How many events before the last the resumed stream's id is."""


async def first_event(target: str, task_id: str, after: str | None) -> tuple[float, str | None]:
    """Seconds from opening a channel and SubscribeToTask to the first event, and its id."""
    metadata = METADATA if after is None else (*METADATA, (LAST_EVENT_ID_KEY, after))
    started = time.perf_counter()
    async with grpc.aio.insecure_channel(target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        call = stub.SubscribeToTask(
            a2a_pb2.SubscribeToTaskRequest(id=task_id), metadata=metadata, timeout=30
        )
        event = await call.read()
        elapsed = time.perf_counter() - started
        call.cancel()
    assert isinstance(event, a2a_pb2.StreamResponse)
    return elapsed, event_id(event)


async def measure(samples: int, warmup: int) -> dict[str, object]:
    with RedisServer() as redis_server:
        a: Replica = await start_replica(redis_server.url)
        b: Replica = await start_replica(redis_server.url)
        redis = aioredis.from_url(redis_server.url)
        try:
            name = str(uuid.uuid4())
            message = a2a_pb2.Message(message_id=f"m-{name}", role=a2a_pb2.ROLE_USER)
            message.parts.add().text = f"drip {name} {EVENTS + 1000}"
            request = a2a_pb2.SendMessageRequest(message=message)
            request.configuration.return_immediately = True
            await a.stub.SendMessage(request, metadata=METADATA, timeout=30)
            _, raw = await redis.blpop([f"test:started:{message.message_id}"], timeout=30)
            task_id = raw.decode()
            ids: list[str] = []
            call = a.stub.SubscribeToTask(
                a2a_pb2.SubscribeToTaskRequest(id=task_id), metadata=METADATA, timeout=30
            )
            await call.read()  # the snapshot
            await redis.rpush(f"test:drip:{name}", *["go"] * EVENTS)
            while len(ids) < EVENTS:
                event = await call.read()
                assert isinstance(event, a2a_pb2.StreamResponse)
                found = event_id(event)
                assert found is not None
                ids.append(found)
            call.cancel()
            after = ids[-1 - BEHIND]
            replay: list[float] = []
            snapshot: list[float] = []
            for n in range(samples + warmup):
                seconds, first = await first_event(b.target, task_id, after)
                assert first == ids[-BEHIND], (first, ids)
                plain, _ = await first_event(b.target, task_id, None)
                if n >= warmup:
                    replay.append(seconds * 1000)
                    snapshot.append(plain * 1000)
            return {
                "samples": samples,
                "replay_p50_ms": round(percentile(replay, 50), 3),
                "replay_p90_ms": round(percentile(replay, 90), 3),
                "replay_p99_ms": round(percentile(replay, 99), 3),
                "snapshot_p50_ms": round(percentile(snapshot, 50), 3),
                "snapshot_p99_ms": round(percentile(snapshot, 99), 3),
            }
        finally:
            await redis.aclose()
            await a.kill()
            await b.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.samples, args.warmup))))


if __name__ == "__main__":
    main()
