"""Redis memory per small finished task, written the way the server writes it (run by `make bench`).

    .venv/bin/python -m tests.load.redis_memory REDIS_URL [N] [--concurrency 64]

Fills the (empty) Redis at REDIS_URL with N small finished tasks through a handler on Redis
(compose.build_handler) and the demo agent, in this process: each is a blocking SendMessage of
"hello" minus the gRPC, so Redis holds exactly what a replica writes per message (the task
hash, its event stream, its ListTasks index entries, the message-id claim, its place in the
room). Reports Redis's `used_memory` growth over the fill divided by N, and where it goes:
MEMORY USAGE of up to 200 keys of each kind, times the kind's count, per task. Prints one JSON
line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import uuid
from collections import Counter, defaultdict
from typing import Any

import redis.asyncio as aioredis

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.card import demo_card
from a2a_grpc.server.compose import build_handler
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.demo_agent import DemoAgent
from a2a_grpc.server.protocol.call_context import CallContext
from a2a_grpc.server.protocol.handler import RequestHandler

SAMPLED_PER_KIND = 200
# Key name -> its kind: task and message ids, digests and context ids folded away.
KINDS = (
    (re.compile(r"^a2a:\{[^}]*\}:(task|events)$"), r"\1"),
    (re.compile(r"^a2a:msg:.*"), "message-id claim"),
    (re.compile(r"^a2a:\{t:[^}]*\}:o:[^:]*:c:.*"), "context index"),
)


def kind_of(key: str) -> str:
    for pattern, name in KINDS:
        if pattern.match(key):
            return pattern.sub(name, key)
    return "shared (room, state indexes)"


async def fill(handler: RequestHandler, count: int, concurrency: int) -> None:
    call = CallContext()
    remaining = iter(range(count))

    async def worker() -> None:
        for _ in remaining:
            request = a2a_pb2.SendMessageRequest(
                message=a2a_pb2.Message(
                    message_id=str(uuid.uuid4()),
                    role=a2a_pb2.ROLE_USER,
                    parts=[a2a_pb2.Part(text="hello")],
                )
            )
            response = await handler.send_message(request, call)
            if response.task.status.state != a2a_pb2.TASK_STATE_COMPLETED:
                raise RuntimeError(f"a task did not complete: {response}")

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def breakdown(client: Any, count: int) -> dict[str, float]:
    """Bytes per task by key kind (MEMORY USAGE of a sample, scaled by the kind's count)."""
    counts: Counter[str] = Counter()
    sampled: dict[str, list[int]] = defaultdict(list)
    async for raw in client.scan_iter(count=1000):
        key = raw.decode()
        kind = kind_of(key)
        counts[kind] += 1
        if len(sampled[kind]) < SAMPLED_PER_KIND:
            sampled[kind].append(await client.memory_usage(key, samples=0))
    return {
        kind: sum(sampled[kind]) / len(sampled[kind]) * counts[kind] / count
        for kind in sorted(counts, key=counts.__getitem__, reverse=True)
    }


async def measure(url: str, count: int, concurrency: int) -> dict[str, Any]:
    config = ServerConfig(max_tasks=count + 1, store=url)
    handler = build_handler(DemoAgent(), demo_card("127.0.0.1:0"), config)
    client = aioredis.from_url(url)
    await handler.store.start()
    try:
        before = (await client.info("memory"))["used_memory"]
        await fill(handler, count, concurrency)
        after = (await client.info("memory"))["used_memory"]
        keys = await breakdown(client, count)
    finally:
        await handler.store.close()
        await client.aclose()
    return {
        "tasks": count,
        "kib_per_task": (after - before) / count / 1024,
        "bytes_per_task_by_kind": {kind: round(value) for kind, value in keys.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("redis_url")
    parser.add_argument("count", nargs="?", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.redis_url, args.count, args.concurrency))))


if __name__ == "__main__":
    main()
