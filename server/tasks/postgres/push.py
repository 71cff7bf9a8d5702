"""Push configs in PostgreSQL, beside their task, and webhook delivery from the store.

Configs (`a2a_push_configs`): one row per (task, config id), with the protocol version of a
config not registered in 1.0 (the config itself stays the 1.0 message every reader sees), and
its webhook's cursor: the sequence of the last event that reached it. Every change moves the
task's `push_version`, so the replica delivering the task's events reads them again.

Delivery: the writer of an event hands it to the task's webhooks (`Deliveries.deliver`); its
write marked it the task's deliverer (writes.py). A webhook's cursor records what reached it
(`delivered`); the replica that reaps a stopped one goes on from those cursors (`take_over`):
at least once, in order. Only the replica whose claim on the stopped replica's lease succeeded
takes over (leases.py), so each task's deliveries are taken over once.
"""

from __future__ import annotations

from a2a_grpc.core.ids import new_id
from a2a_grpc.core.metadata import PROTOCOL_VERSION as V10
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.base import Webhooks
from a2a_grpc.server.tasks.postgres import reads
from a2a_grpc.server.tasks.postgres.backend import PostgresBackend
from a2a_grpc.server.tasks.sealing import PushConfigCodec, Resealed, UnreadableCredentialsError


class PostgresPushConfigs:
    """Push configs in PostgreSQL (see the module docstring); listed by id. Each config's body
    is stored as `codec` writes it (its token and credentials sealed when it has keys)."""

    def __init__(self, backend: PostgresBackend, codec: PushConfigCodec | None = None) -> None:
        self.backend = backend
        self.codec = codec or PushConfigCodec(None)

    async def put(
        self, config: a2a_pb2.TaskPushNotificationConfig, protocol: str = V10
    ) -> a2a_pb2.TaskPushNotificationConfig:
        stored = a2a_pb2.TaskPushNotificationConfig()
        stored.CopyFrom(config)
        if not stored.id:
            stored.id = new_id()
        await self.backend.execute(
            "WITH changed AS (INSERT INTO a2a_push_configs (task_id, config_id, body, protocol) "
            "VALUES (%(task)s, %(id)s, %(body)s, %(protocol)s) ON CONFLICT (task_id, config_id) "
            "DO UPDATE SET body = EXCLUDED.body, protocol = EXCLUDED.protocol RETURNING 1) "
            "UPDATE a2a_tasks SET push_version = push_version + 1 WHERE id = %(task)s",
            {
                "task": stored.task_id,
                "id": stored.id,
                "body": self.codec.encode(stored),
                "protocol": "" if protocol == V10 else protocol,
            },
        )
        return stored

    async def protocols(self, task_id: str) -> dict[str, str]:
        rows = await self.backend.fetchall(
            "SELECT config_id, protocol FROM a2a_push_configs WHERE task_id = %s "
            "AND protocol <> ''",
            (task_id,),
        )
        return {config_id: protocol for config_id, protocol in rows}

    async def for_dispatch(
        self, task_id: str
    ) -> tuple[list[a2a_pb2.TaskPushNotificationConfig], dict[str, str]]:
        """`for_task` and `protocols` in one round trip, for the replica delivering; a config
        whose secrets cannot be opened is left out (`PushConfigCodec.decode_deliverable`)."""
        rows = await self._rows(task_id)
        configs = self.codec.decode_deliverable([bytes(body) for body, _, _ in rows])
        return configs, {config_id: protocol for _, config_id, protocol in rows if protocol}

    async def _rows(self, task_id: str) -> list[tuple[bytes, str, str]]:
        """The task's (body as stored, config id, protocol), by id."""
        rows = await self.backend.fetchall(
            "SELECT body, config_id, protocol FROM a2a_push_configs WHERE task_id = %s "
            "ORDER BY config_id",
            (task_id,),
        )
        return [(bytes(body), config_id, protocol) for body, config_id, protocol in rows]

    async def count(self, task_id: str) -> int:
        row = await self.backend.fetchone(
            "SELECT count(*) FROM a2a_push_configs WHERE task_id = %s", (task_id,)
        )
        return int(row[0]) if row else 0

    async def has(self, task_id: str, config_id: str) -> bool:
        row = await self.backend.fetchone(
            "SELECT 1 FROM a2a_push_configs WHERE task_id = %s AND config_id = %s",
            (task_id, config_id),
        )
        return row is not None

    async def get(self, task_id: str, config_id: str) -> a2a_pb2.TaskPushNotificationConfig | None:
        row = await self.backend.fetchone(
            "SELECT body FROM a2a_push_configs WHERE task_id = %s AND config_id = %s",
            (task_id, config_id),
        )
        return None if row is None else self.codec.decode(bytes(row[0]))

    async def for_task(self, task_id: str) -> list[a2a_pb2.TaskPushNotificationConfig]:
        return [self.codec.decode(body) for body, _, _ in await self._rows(task_id)]

    async def delete(self, task_id: str, config_id: str) -> None:
        await self.backend.execute(
            "WITH changed AS (DELETE FROM a2a_push_configs WHERE task_id = %(task)s "
            "AND config_id = %(id)s RETURNING 1) "
            "UPDATE a2a_tasks SET push_version = push_version + 1 WHERE id = %(task)s",
            {"task": task_id, "id": config_id},
        )

    async def drop_task(self, task_id: str) -> None:
        await self.backend.execute("DELETE FROM a2a_push_configs WHERE task_id = %s", (task_id,))

    async def reseal_all(self, batch: int = 256) -> Resealed:
        """Writes every stored config whose secrets are not sealed with the codec's first key
        again, sealed with it (`a2a-grpc store reseal`): `batch` rows at a time in key order,
        each replaced only if its body is still as read. `push_version` does not move: the
        config reads the same, only its sealing changed."""
        done = Resealed()
        after = ("", "")
        while True:
            rows = await self.backend.fetchall(
                "SELECT task_id, config_id, body FROM a2a_push_configs "
                "WHERE (task_id, config_id) > (%s, %s) ORDER BY task_id, config_id LIMIT %s",
                (*after, batch),
            )
            for task_id, config_id, body in rows:
                raw = bytes(body)
                try:
                    resealed = self.codec.resealed(raw)
                except UnreadableCredentialsError as exc:
                    done.unreadable.append(str(exc))
                    continue
                if resealed is None:
                    done.count(None)
                    continue
                row = await self.backend.fetchone(
                    "UPDATE a2a_push_configs SET body = %s WHERE task_id = %s "
                    "AND config_id = %s AND body = %s RETURNING 1",
                    (resealed, task_id, config_id, raw),
                )
                done.count(row is not None)
            if len(rows) < batch:
                return done
            after = (rows[-1][0], rows[-1][1])


class Deliveries:
    """This replica's webhook deliveries (see the module docstring)."""

    def __init__(
        self, backend: PostgresBackend, configs: PostgresPushConfigs, webhooks: Webhooks | None
    ) -> None:
        self.backend = backend
        self.configs = configs
        self.webhooks = webhooks
        """Delivers the events this replica writes to their tasks' webhooks (None when the
        agent offers no push notifications)."""
        self._push_versions: dict[str, int] = {}  # configs version last mirrored, per task

    async def deliver(
        self,
        task_id: str,
        version: int,
        event: a2a_pb2.StreamResponse,
        terminal: bool,
        seq: int,
        task: a2a_pb2.Task,
    ) -> None:
        """Hands an event this replica wrote (and `task`, as the write left it) to the webhooks
        of its task, after reading the task's configs again if they changed on any replica."""
        webhooks = self.webhooks
        assert webhooks is not None
        if self._push_versions.get(task_id) != version:
            configs, protocols = await self.configs.for_dispatch(task_id)
            webhooks.configs.mirror(task_id, configs, protocols)
            self._push_versions[task_id] = version
        webhooks.observe(task_id, event, str(seq), task, on_delivered=self.delivered)
        if terminal:
            self._push_versions.pop(task_id, None)

    async def delivered(self, task_id: str, config_id: str, position: str) -> None:
        """The webhook's cursor: events up to `position` reached it."""
        await self.backend.execute(
            "UPDATE a2a_push_configs SET delivered = greatest(delivered, %s) "
            "WHERE task_id = %s AND config_id = %s",
            (int(position), task_id, config_id),
        )

    async def take_over(self, replica: str) -> None:
        """Re-queues, per webhook, the events the stopped `replica` wrote for its tasks but had
        not delivered (after each webhook's cursor), in order; its tasks' deliveries are this
        replica's from now on."""
        webhooks = self.webhooks
        if webhooks is None:
            return
        backend = self.backend
        rows = await backend.fetchall(
            "UPDATE a2a_tasks SET deliverer = %s WHERE deliverer = %s RETURNING id",
            (backend.replica_id, replica),
        )
        for (task_id,) in rows:
            configs, protocols = await self.configs.for_dispatch(task_id)
            if not configs:
                continue
            webhooks.configs.mirror(task_id, configs, protocols)
            cursors = dict(
                await backend.fetchall(
                    "SELECT config_id, delivered FROM a2a_push_configs WHERE task_id = %s",
                    (task_id,),
                )
            )
            events = await backend.fetchall(
                "SELECT seq, body FROM a2a_events WHERE task_id = %s ORDER BY seq", (task_id,)
            )
            # A 0.3 webhook is sent the task as it stands (read after its events).
            loaded = await reads.load(backend, task_id) if protocols else None
            for config in webhooks.configs.stored_for(task_id):
                cursor = int(cursors.get(config.id, 0))
                missed = [(str(seq), bytes(body)) for seq, body in events if seq > cursor]
                task = None if loaded is None else loaded.task
                webhooks.replay(config, missed, task, on_delivered=self.delivered)
