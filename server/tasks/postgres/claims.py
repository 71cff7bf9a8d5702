"""Message-id claims in PostgreSQL: which delivery of a (tenant, caller, message id) runs,
decided atomically for every replica (`a2a_claim`, schema.py: set unless a claim that has not
expired exists), given back when the claimed delivery was refused before it ran, and the
outcome of the first delivery, wherever it runs, followed through its task's events.
Expired claims are pruned in bounded batches with the expired tasks (room.py).
"""

from __future__ import annotations

from a2a_grpc.server.tasks.base import Outcome, Scope
from a2a_grpc.server.tasks.postgres.backend import PostgresBackend
from a2a_grpc.server.tasks.postgres.batch import CLAIM, WriteBatch
from a2a_grpc.server.tasks.postgres.events import Listener, RemoteOutcome


class PostgresClaims:
    """Claims on message ids (see the module docstring)."""

    def __init__(self, backend: PostgresBackend, batch: WriteBatch, listener: Listener) -> None:
        self.backend = backend
        self.batch = batch
        self.listener = listener

    async def claim(self, digest: str, value: str, window: float) -> str | None:
        # Every message's first store call: a busy replica refuses it here, before anything
        # is claimed or reserved that a refusal would have to undo (batch.py, `admit`).
        self.batch.admit()
        row = await self.batch.fetchone(
            "SELECT a2a_claim(%s, %s, %s)", (digest, value, max(0.001, window)), CLAIM + digest
        )
        return None if row is None else row[0]

    async def unclaim(self, digest: str, value: str) -> None:
        await self.backend.execute(
            "DELETE FROM a2a_claims WHERE digest = %s AND value = %s", (digest, value)
        )

    async def outcome(
        self, task_id: str, scope: Scope, message_id: str, claim: tuple[str, str]
    ) -> Outcome:
        return await RemoteOutcome.follow(
            self.backend, self.listener, task_id, scope, message_id, claim
        )
