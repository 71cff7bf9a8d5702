"""The bench's agent for replicas on a shared store: it emits an event when the bench client says
so, through the store's own database.

- `hold <key>`: WORKING, then waits for the client's release, then one artifact whose text is
  `time.monotonic_ns()` taken just before it is written, then COMPLETED. On Redis the wait is
  BLPOP on the list `<key>` (the client RPUSHes to it); on PostgreSQL it is
  `pg_advisory_lock(<key>)`, an integer the client locked before it sent the message and
  unlocks to release it. Either way the release cannot be missed, whenever it comes. A
  CancelTask (on any replica) ends the wait.
- anything else: the demo agent.

The timestamp lets the client, on the same machine, tell the store's share (emit on A -> event
at B's subscriber) from the wake-up's (client's release -> the wait returns on A):
CLOCK_MONOTONIC is one clock for every process of the host.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from a2a_grpc.server.demo_agent import DemoAgent

HOLD_KEYWORD = "hold"
HOLD_TIMEOUT = 60  # seconds a held run waits for its release before it completes anyway
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres(url: str) -> bool:
    return url.startswith(POSTGRES_SCHEMES)


class HoldAgent:
    """See the module docstring."""

    def __init__(self, store_url: str) -> None:
        self._demo = DemoAgent()
        self._url = store_url
        self._redis = None
        if not is_postgres(store_url):
            import redis.asyncio as aioredis

            self._redis = aioredis.from_url(store_url)

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        words = context.text().split()
        if len(words) != 2 or words[0] != HOLD_KEYWORD:
            await self._demo.execute(context, events)
            return
        if self._redis is not None:
            await events.working()
            await self._redis.blpop([words[1]], timeout=HOLD_TIMEOUT)
        else:
            await self._postgres_hold(int(words[1]), events.working)
        emitted = time.monotonic_ns()
        await events.add_artifact([a2a_pb2.Part(text=str(emitted))], name="released")
        await events.complete()

    async def _postgres_hold(self, key: int, working: Callable[[], Awaitable[object]]) -> None:
        """WORKING once connected, then waits on the client's advisory lock `key`."""
        import psycopg

        async with await psycopg.AsyncConnection.connect(self._url, autocommit=True) as db:
            await db.execute(f"SET lock_timeout = '{HOLD_TIMEOUT}s'")
            await working()
            with contextlib.suppress(psycopg.errors.LockNotAvailable):
                await db.execute("SELECT pg_advisory_lock(%s)", (key,))
