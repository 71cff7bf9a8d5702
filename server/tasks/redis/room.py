"""The room of the Redis store: how many tasks it holds, live tasks per owner and per tenant
(the fair shares), the tasks waiting for input, and the tasks each replica works on.

`reserve` promises a new task its room, atomically (RESERVE), or refuses with the fair share or
the store's size that is full; when finished tasks fill the store, it evicts the oldest of them
in the same step (up to one eviction batch) and hands their ids to `Eviction.forget`. A task's
room changes (SETTLE) as it settles, waits for input, is worked on again, or is released
unused; `settle_call` gives that change to be batched with the task's write.
"""

from __future__ import annotations

import time

from a2a_grpc.server.tasks.base import LiveTaskLimitError, Scope, StoreFullError, eviction_batch
from a2a_grpc.server.tasks.redis.backend import RedisBackend, ScriptCall
from a2a_grpc.server.tasks.redis.eviction import Eviction


class Room:
    """Room for tasks in Redis (see the module docstring)."""

    def __init__(
        self,
        backend: RedisBackend,
        eviction: Eviction,
        *,
        max_tasks: int,
        max_live_per_owner: int | None,
        max_live_per_tenant: int | None,
        terminal_ttl: float,
    ) -> None:
        self.backend = backend
        self.eviction = eviction
        self.max_tasks = max_tasks
        self._eviction_batch = eviction_batch(max_tasks)
        self.max_live_per_owner = max_live_per_owner
        self.max_live_per_tenant = max_live_per_tenant
        self.terminal_ttl = terminal_ttl

    def _expiry_ms(self) -> int:
        return int((time.time() + self.terminal_ttl) * 1000)

    async def reserve(self, scope: Scope, size: int, task_id: str) -> None:
        backend = self.backend
        keys = backend.keys
        names = keys.scope(scope)
        result = await backend.run_script(
            "RESERVE",
            [
                keys.room_all,
                names.live_owner,
                names.live_tenant,
                keys.replica_tasks(backend.replica_id),
            ],
            [
                task_id,
                int(time.time() * 1000),
                self.max_tasks,
                "" if self.max_live_per_owner is None else self.max_live_per_owner,
                "" if self.max_live_per_tenant is None else self.max_live_per_tenant,
                names.text,
                self._eviction_batch,
            ],
        )
        verdict = result[0].decode()
        if verdict in ("ok", "full"):
            # The finished tasks that left the room with the reservation (expired, or evicted
            # to make room): their keys go now, together.
            evicted = [member.decode() for member in result[1:]]
            if evicted:
                await self.eviction.forget(evicted)
            if verdict == "ok":
                return
        if verdict == "owner":
            raise LiveTaskLimitError(
                f"this caller already has {result[1]} unfinished tasks, the most one caller "
                "may hold: wait for some to finish, or answer or cancel those waiting for input"
            )
        if verdict == "tenant":
            raise LiveTaskLimitError(
                f"this tenant already has {result[1]} unfinished tasks, the most one tenant may "
                "hold: retry when some have finished"
            )
        raise StoreFullError(f"the store holds {self.max_tasks} unfinished tasks; retry later")

    async def settle(self, task_id: str, scope: Scope, how: str) -> None:
        await self.backend.run_script(*self.settle_call(task_id, scope, how))

    def settle_call(
        self, task_id: str, scope: Scope, how: str, runner: str | None = None
    ) -> ScriptCall:
        """The SETTLE of `task_id`; `runner`, the replica whose task set holds it (default:
        this one), e.g. a task canceled here while another replica runs it."""
        keys = self.backend.keys
        names = keys.scope(scope)
        return (
            "SETTLE",
            [
                keys.room_all,
                names.live_owner,
                names.live_tenant,
                keys.parked,
                keys.replica_tasks(runner or self.backend.replica_id),
            ],
            [task_id, how, int(time.time() * 1000), self._expiry_ms(), names.text],
        )

    async def parked_longer_than(self, seconds: float) -> list[str]:
        before = int((time.time() - seconds) * 1000)
        backend = self.backend
        members = await backend.call(
            backend.client.zrangebyscore(backend.keys.parked, "-inf", before)
        )
        return [member.decode() for member in members]

    async def count(self) -> int:
        """The stored tasks (one ZCARD)."""
        backend = self.backend
        return int(await backend.call(backend.client.zcard(backend.keys.room_all)))
