"""Tasks leaving the Redis store: finished tasks past their time to live (`evict_expired`),
and the finished tasks a reservation evicted to make room (`forget`). Whoever removes a task
from the room (ZREM) deletes its keys, its index entries and its place in this replica's
delivery set, then tells `on_evict`. A task's keys also expire on their own a while later, as
a backstop.

The ListTasks index keys have no TTL of their own (a live task may sit in one for days): a
task's entries go with it. Entries whose task went without them (its keys expired by the
backstop while no replica swept, or a Cluster write whose index move never ran) are found by
a bounded sweep (`sweep_indexes`): every `INDEX_SWEEP_SECONDS`, one SCAN round trip per node
(`INDEX_SCAN_COUNT` keys) of a cursor that goes round the keyspace; of each index key it finds,
the oldest `INDEX_SWEEP_MEMBERS` entries are checked against their task's hash and the stale
ones removed (ZREM; a set emptied so is deleted by Redis). At 100,000 keys a round takes
~200 steps, about half an hour. ListTasks also removes the stale entries it meets (reads.py).
At the same pace, a step of this replica's delivery-set sweep (`Deliveries.sweep`) lets go of
the tasks another replica deleted, and tells `on_evict` of them here too.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

from a2a_grpc.server.tasks.base import Scope
from a2a_grpc.server.tasks.redis.backend import RedisBackend
from a2a_grpc.server.tasks.redis.deliveries import Deliveries

INDEX_SWEEP_SECONDS = 10.0
"""Seconds between two steps of the index sweep, on each replica."""
INDEX_SCAN_COUNT = 512
"""SCAN's COUNT in one step of the index sweep: keys of any kind it walks past, per node (the
index keys among them are swept)."""
INDEX_SWEEP_MEMBERS = 64
"""Entries of one index key (its oldest) one step checks."""


def _glob_escaped(text: str) -> str:
    return "".join("\\" + char if char in "*?[]\\" else char for char in text)


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
        self._scan_cursors: dict[str, int] = {}  # SCAN's cursor by node name ("": standalone)
        self._index_swept_at = float("-inf")

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
        if time.monotonic() - self._index_swept_at >= INDEX_SWEEP_SECONDS:
            self._index_swept_at = time.monotonic()
            await self.sweep_indexes()
            for task_id in await self.deliveries.sweep():
                if self.on_evict is not None:
                    self.on_evict(task_id)
        return gone

    async def sweep_indexes(self) -> int:
        """One step of the index sweep (see the module docstring): the stale entries removed."""
        names = await self._scan_step()
        removed = 0
        for name in dict.fromkeys(names):  # SCAN may return a key twice
            removed += await self._sweep_index(name.decode())
        return removed

    async def _scan_step(self) -> list[bytes]:
        """One SCAN round trip (per node on a Cluster) on from where the last step stopped,
        for index keys; a node's cursor back at 0 starts its round again."""
        backend = self.backend
        client = backend.client
        pattern = _glob_escaped(backend.keys.prefix) + ":{t:*}:o:*"
        if not backend.on_cluster:
            cursor, names = await backend.call(
                client.scan(self._scan_cursors.get("", 0), match=pattern, count=INDEX_SCAN_COUNT)
            )
            self._scan_cursors[""] = int(cursor)
            return list(names)
        found: list[bytes] = []
        for node in client.get_primaries():
            cursors, names = await backend.call(
                client.scan(
                    self._scan_cursors.get(node.name, 0),
                    match=pattern,
                    count=INDEX_SCAN_COUNT,
                    target_nodes=node,
                )
            )
            self._scan_cursors[node.name] = int(cursors[node.name])
            found += names
        return found

    async def _sweep_index(self, index_key: str) -> int:
        backend = self.backend
        client = backend.client
        members = await backend.call(client.zrange(index_key, 0, INDEX_SWEEP_MEMBERS - 1))
        if not members:
            return 0
        decoded = [member.decode() for member in members]
        async with client.pipeline(transaction=False) as pipe:
            for member in decoded:
                pipe.hget(backend.keys.task(member.partition("|")[2]), "ik")
            current = await backend.call(pipe.execute())
        stale = [
            member
            for member, ik in zip(decoded, current, strict=True)
            if (ik or b"").decode() != member
        ]
        if stale:
            await backend.call(client.zrem(index_key, *stale))
        return len(stale)

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
