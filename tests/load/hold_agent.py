"""The bench's agent for replicas on Redis: it emits an event when the bench client says so.

- `hold <key>`: WORKING, then BLPOP on the Redis list `<key>` (the store's own Redis) until the
  client pushes to it, then one artifact whose text is `time.monotonic_ns()` taken just before
  it is written, then COMPLETED. A CancelTask (on any replica) ends the wait.
- anything else: the demo agent.

The timestamp lets the client, on the same machine, tell the store's share (emit on A -> event
at B's subscriber) from the wake-up's (client's RPUSH -> BLPOP returns on A): CLOCK_MONOTONIC is
one clock for every process of the host.
"""

from __future__ import annotations

import time

import redis.asyncio as aioredis

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from a2a_grpc.server.demo_agent import DemoAgent

HOLD_KEYWORD = "hold"
HOLD_TIMEOUT = 60  # seconds a held run waits for its release before it completes anyway


class HoldAgent:
    """See the module docstring."""

    def __init__(self, redis_url: str) -> None:
        self._demo = DemoAgent()
        self._redis = aioredis.from_url(redis_url)

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        words = context.text().split()
        if len(words) != 2 or words[0] != HOLD_KEYWORD:
            await self._demo.execute(context, events)
            return
        await events.working()
        await self._redis.blpop([words[1]], timeout=HOLD_TIMEOUT)
        emitted = time.monotonic_ns()
        await events.add_artifact([a2a_pb2.Part(text=str(emitted))], name="released")
        await events.complete()
