"""Message-id claims in Redis: which delivery of a (tenant, caller, message id) runs, decided
atomically for every replica (CLAIM sets the claim unless one exists), given back when the
claimed delivery was refused before it ran (UNCLAIM), and the outcome of the first delivery,
wherever it runs, followed through its task's events (`outcome`).
"""

from __future__ import annotations

from a2a_grpc.server.tasks.base import Outcome, Scope
from a2a_grpc.server.tasks.redis.backend import RedisBackend
from a2a_grpc.server.tasks.redis.events import EventReader, RemoteOutcome


class RedisClaims:
    """Claims on message ids (see the module docstring)."""

    def __init__(self, backend: RedisBackend, events: EventReader) -> None:
        self.backend = backend
        self.events = events

    async def claim(self, digest: str, value: str, window: float) -> str | None:
        """Sets the claim `value` on `digest` unless one exists; returns the existing one."""
        existing = await self.backend.run_script(
            "CLAIM", [self.backend.keys.claim(digest)], [value, max(1, int(window * 1000))]
        )
        return None if existing is None else existing.decode()

    async def unclaim(self, digest: str, value: str) -> None:
        await self.backend.run_script("UNCLAIM", [self.backend.keys.claim(digest)], [value])

    async def outcome(
        self, task_id: str, scope: Scope, message_id: str, claim: tuple[str, str]
    ) -> Outcome:
        """What the first delivery of a message id, on any replica, led to (see dedup)."""
        return await RemoteOutcome.follow(
            self.backend, self.events, task_id, scope, message_id, claim
        )
