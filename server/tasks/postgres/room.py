"""The room of the PostgreSQL store: reservations bounded by `--max-tasks` and the fair shares
(`a2a_reserve`, schema.py: one at a time, evicting the oldest finished tasks when the room is
full), room given back unused, finished tasks pruned after their time to live, and the tasks
waiting for input.

Pruning works in bounded batches: each `evict_expired` deletes at most `PRUNE_BATCH` expired
tasks (with their events and push configs), and as many expired message-id claims and direct
replies; the housekeeper calls it again on its next round while more are due.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from a2a_grpc.server.tasks.base import LiveTaskLimitError, Scope, StoreFullError, eviction_batch
from a2a_grpc.server.tasks.postgres.backend import Connection, PostgresBackend
from a2a_grpc.server.tasks.postgres.batch import ROOM, WriteBatch

PRUNE_BATCH = 256
"""Expired tasks (and claims, and replies) one `evict_expired` deletes at most."""
RESERVE_TYPES = ("text", "text", "text", "text", "bigint", "integer", "integer", "integer")
"""The types of `Room.reserve_params`, as `a2a_reserve` takes them."""
_RESERVE = "SELECT verdict, live, evicted FROM a2a_reserve(%s, %s, %s, %s, %s, %s, %s, %s)"
FOLD_BATCH = 16384
"""Scope count changes one `evict_expired` folds at most (schema.py, `a2a_fold_counts`): a
task makes two or three, and the housekeeper comes at least once a second."""


class Room:
    """Room for tasks in PostgreSQL (see the module docstring)."""

    def __init__(
        self,
        backend: PostgresBackend,
        batch: WriteBatch,
        *,
        max_tasks: int,
        max_live_per_owner: int | None,
        max_live_per_tenant: int | None,
        on_evict: Callable[[str], None] | None = None,
    ) -> None:
        self.backend = backend
        self.batch = batch
        self.max_tasks = max_tasks
        self.max_live_per_owner = max_live_per_owner
        self.max_live_per_tenant = max_live_per_tenant
        self._eviction_batch = eviction_batch(max_tasks)
        self.on_evict = on_evict

    async def reserve(self, scope: Scope, task_id: str) -> None:
        row = await self.batch.fetchone(_RESERVE, self.reserve_params(scope, task_id), ROOM)
        self.settle(*row)

    def reserve_params(self, scope: Scope, task_id: str) -> tuple[Any, ...]:
        """`a2a_reserve`'s parameters (schema.py) for task `task_id` of `scope`."""
        return (
            task_id,
            scope.tenant,
            scope.owner,
            self.backend.replica_id,
            self.max_tasks,
            self.max_live_per_owner,
            self.max_live_per_tenant,
            self._eviction_batch,
        )

    def settle(self, verdict: str, live: int | None, evicted: Sequence[str] | None) -> None:
        """After `a2a_reserve` (or `a2a_claim_room`) answered: the tasks it evicted are let go;
        a refusal raises its error (LiveTaskLimitError, StoreFullError)."""
        if verdict == "ok":
            self._evicted(evicted or ())
            return
        if verdict == "owner":
            raise LiveTaskLimitError(
                f"this caller already has {live} unfinished tasks, the most one caller "
                "may hold: wait for some to finish, or answer or cancel those waiting for input"
            )
        if verdict == "tenant":
            raise LiveTaskLimitError(
                f"this tenant already has {live} unfinished tasks, the most one tenant may "
                "hold: retry when some have finished"
            )
        raise StoreFullError(f"the store holds {self.max_tasks} unfinished tasks; retry later")

    def _evicted(self, task_ids: Sequence[str]) -> None:
        if self.on_evict is not None:
            for task_id in task_ids:
                self.on_evict(task_id)

    async def release(self, task_id: str) -> None:
        """Gives back a reservation no task used (a created task keeps its row)."""

        async def release(connection: Connection) -> None:
            cursor = await connection.execute(
                "DELETE FROM a2a_tasks WHERE id = %s AND body IS NULL", (task_id,)
            )
            if cursor.rowcount:
                await connection.execute(
                    "UPDATE a2a_counts SET tasks = tasks - %s WHERE id = 1", (cursor.rowcount,)
                )

        await self.backend.transaction(release)

    async def forget(self, task_ids: Sequence[str]) -> int:
        """Deletes tasks (a withdrawn message's), their events and push configs."""
        row = await self.backend.fetchone("SELECT a2a_forget(%s::text[])", (list(task_ids),))
        self._evicted(task_ids)
        return int(row[0]) if row else 0

    async def evict_expired(self) -> int:
        """One bounded batch of finished tasks past their time to live, and of expired claims
        and direct replies; then one of scope count changes folded. Returns how many tasks
        went."""

        async def prune(connection: Connection) -> list[str]:
            cursor = await connection.execute(
                "SELECT ARRAY(SELECT id FROM a2a_tasks WHERE expires_at <= clock_timestamp() "
                "ORDER BY expires_at LIMIT %s FOR UPDATE SKIP LOCKED)",
                (PRUNE_BATCH,),
            )
            row = await cursor.fetchone()
            expired: list[str] = list(row[0]) if row else []
            if expired:
                await connection.execute("SELECT a2a_forget(%s::text[])", (expired,))
            for table, key in (("a2a_claims", "digest"), ("a2a_replies", "task_id")):
                await connection.execute(
                    f"DELETE FROM {table} WHERE {key} IN (SELECT {key} FROM {table} "
                    "WHERE expires_at <= clock_timestamp() LIMIT %s FOR UPDATE SKIP LOCKED)",
                    (PRUNE_BATCH,),
                )
            return expired

        expired = await self.backend.transaction(prune)
        self._evicted(expired)
        await self.backend.execute("SELECT a2a_fold_counts(%s)", (FOLD_BATCH,))
        return len(expired)

    async def parked_longer_than(self, seconds: float) -> list[str]:
        rows = await self.backend.fetchall(
            "SELECT id FROM a2a_tasks WHERE parked_at < clock_timestamp() - make_interval("
            "secs => %s) ORDER BY parked_at",
            (seconds,),
        )
        return [task_id for (task_id,) in rows]

    async def count(self) -> int:
        row = await self.backend.fetchone("SELECT tasks FROM a2a_counts WHERE id = 1")
        return int(row[0]) if row else 0
