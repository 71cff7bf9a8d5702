"""Message-id claims in PostgreSQL: which delivery of a (tenant, caller, message id) runs,
decided atomically for every replica (`a2a_claim`, schema.py: set unless a claim that has not
expired exists; for a message that makes a new task, together with its room: `a2a_claim_room`),
given back when the claimed delivery was refused before it ran, and the
outcome of the first delivery, wherever it runs, followed through its task's events.
Expired claims are pruned in bounded batches with the expired tasks (room.py).
"""

from __future__ import annotations

from a2a_grpc.server.tasks.base import Outcome, Scope
from a2a_grpc.server.tasks.postgres.backend import PostgresBackend
from a2a_grpc.server.tasks.postgres.batch import CLAIM, ROOM, WriteBatch
from a2a_grpc.server.tasks.postgres.events import Listener, RemoteOutcome
from a2a_grpc.server.tasks.postgres.room import RESERVE_TYPES, Room
from a2a_grpc.server.tasks.postgres.sets import FunctionRows

_CLAIM_ROOM = FunctionRows(
    "a2a_claim_room",
    ("text", "text", "double precision", *RESERVE_TYPES),
    "f.claimed, f.verdict, f.live, f.evicted",
)


class PostgresClaims:
    """Claims on message ids (see the module docstring)."""

    def __init__(
        self, backend: PostgresBackend, batch: WriteBatch, listener: Listener, room: Room
    ) -> None:
        self.backend = backend
        self.batch = batch
        self.listener = listener
        self.room = room

    async def claim(self, digest: str, value: str, window: float) -> str | None:
        # Every message's first store call: a busy replica refuses it here, before anything
        # is claimed or reserved that a refusal would have to undo (batch.py, `admit`).
        self.batch.admit()
        row = await self.batch.fetchone(
            "SELECT a2a_claim(%s, %s, %s)", (digest, value, max(0.001, window)), CLAIM + digest
        )
        return None if row is None else row[0]

    async def claim_with_room(
        self, digest: str, value: str, window: float, scope: Scope, size: int, task_id: str
    ) -> str | None:
        # One statement for both (`a2a_claim_room`): one write fewer per new task, and one
        # commit fewer that its caller waits for. It takes the room's count row, so its batch
        # runs it with the reservations (ROOM), after any task row; its claim row is new, or
        # one no other writer of the batch's order holds (prunes skip locked claims).
        self.batch.admit()
        row = await self.batch.fetchone(
            _CLAIM_ROOM,
            (digest, value, max(0.001, window), *self.room.reserve_params(scope, task_id)),
            ROOM + digest,
        )
        claimed, verdict, live, evicted = row
        if claimed is not None:
            return str(claimed)
        self.room.settle(verdict, live, evicted)
        return None

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
