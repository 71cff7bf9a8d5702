"""Tasks leaving the Redis store: finished tasks past their time to live (`evict_expired`),
and the finished tasks a reservation evicted to make room (`forget`). Whoever removes a task
from the room (ZREM) deletes its keys, its index entries and its place in this replica's
delivery set, then tells `on_evict`. A task's keys also expire on their own a while later, as
a backstop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

from a2a_grpc.server.tasks.base import Scope
from a2a_grpc.server.tasks.redis.backend import RedisBackend
from a2a_grpc.server.tasks.redis.deliveries import Deliveries


class Eviction:
    """Deleting tasks that left the room (see the module docstring)."""

    def __init__(
        self,
        backend: RedisBackend,
        deliveries: Deliveries,
        *,
        on_evict: Callable[[str], None] | None = None,
    ) -> None:
        self.backend = backend
        self.deliveries = deliveries
        self.on_evict = on_evict

    async def evict_expired(self) -> int:
        """Deletes finished tasks past their time to live, with their events and index
        entries (their keys also expire on their own a while later, as a backstop)."""
        backend = self.backend
        now_ms = int(time.time() * 1000)
        expired = await backend.call(
            backend.client.zrangebyscore(backend.keys.room_all, "-inf", now_ms, start=0, num=256)
        )
        gone = 0
        for member in expired:
            gone += await self._delete(member.decode())
        return gone

    async def _delete(self, task_id: str) -> int:
        """Deletes one finished task (whoever wins the ZREM does it); 1 when this call did."""
        backend = self.backend
        if not await backend.call(backend.client.zrem(backend.keys.room_all, task_id)):
            return 0
        await self.forget([task_id])
        return 1

    async def forget(self, task_ids: Sequence[str]) -> None:
        """Deletes the keys and index entries of tasks that left the room. On a standalone
        Redis two commands for them all, the second after the first (it names the index keys
        the first read); on a Cluster, where a script reaches one slot, those two per task.

        Measured (tests.load.instructions --redis, a full store of 2,000, so one deletion per
        send): 1,685k -> 1,485k instructions per send, against loading the whole task first
        and four commands one after another; 1,402k -> 1,233k with a whole eviction batch
        (up to 64 tasks) in the two commands, against two per task."""
        backend = self.backend
        if backend.on_cluster and len(task_ids) > 1:
            await asyncio.gather(*(self.forget([task_id]) for task_id in task_ids))
            return
        keys = backend.keys
        task_keys = [key for task_id in task_ids for key in keys.of_task(task_id)]
        found = await backend.run_script("FORGET", task_keys, [])
        await self.deliveries.forget(task_ids)
        index_keys: list[str] = []
        members: list[Any] = []
        for tenant, owner, state, context_id, member in found:
            if member and tenant is not None and owner is not None:
                scope = Scope(tenant.decode(), owner.decode())
                names = keys.indexes(scope, int(state or 0), (context_id or b"").decode())
                index_keys += names
                members += (len(names), member)
        if members:
            await backend.run_script("UNINDEX", index_keys, members)
        if self.on_evict is not None:
            for task_id in task_ids:
                self.on_evict(task_id)
