"""Webhook delivery from the Redis store: the writer of an event hands it to the task's
webhooks (`deliver`), a webhook's cursor records what reached it (`delivered`), and the
replica that reaps a stopped one goes on with its deliveries from those cursors (`take_over`):
at least once, in order.

Each replica keeps the set of tasks whose webhooks it delivers (`a2a:{room}:d:<replica>`), and
mirrors a task's push configs into its dispatcher when their version moved on any replica. A
task leaves the set when this replica deletes it (`forget`), or, when another replica did, at
the set's bounded sweep (`sweep`).
"""

from __future__ import annotations

from collections.abc import Sequence

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.base import Webhooks
from a2a_grpc.server.tasks.redis import reads
from a2a_grpc.server.tasks.redis.backend import RedisBackend
from a2a_grpc.server.tasks.redis.events import parse_stream_id
from a2a_grpc.server.tasks.redis.push import RedisPushConfigs

SWEEP_COUNT = 256
"""Members of this replica's delivery set one step of `sweep` checks (SSCAN's COUNT hint)."""


class Deliveries:
    """This replica's webhook deliveries (see the module docstring)."""

    def __init__(
        self, backend: RedisBackend, configs: RedisPushConfigs, webhooks: Webhooks | None
    ) -> None:
        self.backend = backend
        self.configs = configs
        self.webhooks = webhooks
        """Delivers the events this replica writes to their tasks' webhooks (None when the
        agent offers no push notifications)."""
        self._push_versions: dict[str, int] = {}  # configs version last mirrored, per task
        self._delivering: set[str] = set()  # tasks in this replica's delivery set
        self._sweep_cursor = 0

    async def deliver(
        self,
        task_id: str,
        version: int,
        event: a2a_pb2.StreamResponse,
        terminal: bool,
        position: str,
        task: a2a_pb2.Task,
    ) -> None:
        """Hands an event this replica wrote (and `task`, as the write left it) to the webhooks
        of its task (the writer delivers), after reading the task's configs again if they
        changed on any replica. The task joins this replica's delivery set, so whoever reaps
        the replica goes on from the cursors."""
        webhooks = self.webhooks
        assert webhooks is not None
        backend = self.backend
        if task_id not in self._delivering:
            key = backend.keys.replica_deliveries(backend.replica_id)
            await backend.call(backend.client.sadd(key, task_id))
            self._delivering.add(task_id)
        if self._push_versions.get(task_id) != version:
            configs, protocols = await self.configs.for_dispatch(task_id)
            webhooks.configs.mirror(task_id, configs, protocols)
            self._push_versions[task_id] = version
        webhooks.observe(task_id, event, position, task, on_delivered=self.delivered)
        if terminal:
            self._push_versions.pop(task_id, None)

    async def delivered(self, task_id: str, config_id: str, position: str) -> None:
        """The webhook's cursor: events up to `position` reached it."""
        backend = self.backend
        await backend.call(
            backend.client.hset(backend.keys.push_cursors(task_id), config_id, position)
        )

    async def take_over(self, replica: str) -> None:
        """Re-queues, per webhook, the events the stopped `replica` recorded for its tasks but
        had not delivered (after each webhook's cursor), in order: at least once."""
        webhooks = self.webhooks
        if webhooks is None:
            return
        backend = self.backend
        keys = backend.keys
        members = await backend.call(backend.client.smembers(keys.replica_deliveries(replica)))
        for member in members:
            task_id = member.decode()
            configs, protocols = await self.configs.for_dispatch(task_id)
            if not configs:
                continue
            webhooks.configs.mirror(task_id, configs, protocols)
            cursors = await backend.call(backend.client.hgetall(keys.push_cursors(task_id)))
            entries = await backend.call(backend.client.xrange(keys.events(task_id), "-", "+"))
            # A 0.3 webhook is sent the task as it stands (read after its events).
            loaded = await reads.load(backend, task_id) if protocols else None
            for config in webhooks.configs.stored_for(task_id):
                cursor = parse_stream_id((cursors.get(config.id.encode()) or b"0-0").decode())
                missed = [
                    (entry_id.decode(), fields[b"e"])
                    for entry_id, fields in entries
                    if parse_stream_id(entry_id.decode()) > cursor
                ]
                task = None if loaded is None else loaded.task
                webhooks.replay(config, missed, task, on_delivered=self.delivered)
            if task_id not in self._delivering:
                await backend.call(
                    backend.client.sadd(keys.replica_deliveries(backend.replica_id), task_id)
                )
                self._delivering.add(task_id)
        await backend.call(backend.client.delete(keys.replica_deliveries(replica)))

    async def forget(self, task_ids: Sequence[str]) -> None:
        """Tasks that left the store leave this replica's delivery set."""
        delivering = [task_id for task_id in task_ids if task_id in self._delivering]
        if delivering:  # (this replica's delivery set holds only those)
            self._delivering.difference_update(delivering)
            backend = self.backend
            key = backend.keys.replica_deliveries(backend.replica_id)
            await backend.call(backend.client.srem(key, *delivering))

    async def sweep(self) -> list[str]:
        """One step of an SSCAN round this replica's delivery set: the tasks in it that left
        the store on another replica (their keys are gone) leave it, and are returned (their
        mirrored configs go too, by the caller's `on_evict`)."""
        backend = self.backend
        client = backend.client
        key = backend.keys.replica_deliveries(backend.replica_id)
        cursor, members = await backend.call(
            client.sscan(key, self._sweep_cursor, count=SWEEP_COUNT)
        )
        self._sweep_cursor = int(cursor)
        task_ids = list(dict.fromkeys(member.decode() for member in members))
        if not task_ids:
            return []
        async with client.pipeline(transaction=False) as pipe:
            for task_id in task_ids:
                pipe.exists(backend.keys.task(task_id))
            found = await backend.call(pipe.execute())
        gone = [task_id for task_id, exists in zip(task_ids, found, strict=True) if not exists]
        if gone:
            self._delivering.difference_update(gone)
            for task_id in gone:
                self._push_versions.pop(task_id, None)
            await backend.call(client.srem(key, *gone))
        return gone
