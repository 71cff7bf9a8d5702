"""Push-notification configs in Redis, beside their task (keys.py names the keys)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from a2a_grpc.core.ids import new_id
from a2a_grpc.core.metadata import PROTOCOL_VERSION as V10
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.sealing import PushConfigCodec, Resealed, UnreadableCredentialsError

if TYPE_CHECKING:
    from a2a_grpc.server.tasks.redis.backend import RedisBackend


class RedisPushConfigs:
    """Push configs in Redis, beside their task: a hash of config id -> config, a hash of config
    id -> protocol version for the configs not registered in 1.0 (the config itself stays the
    1.0 message every reader sees), and a version that every change increments (so the replica
    delivering the task's events knows to read them again). Listed by id. Each config is stored
    as `codec` writes it (its token and credentials sealed when it has keys)."""

    def __init__(self, backend: RedisBackend, codec: PushConfigCodec | None = None) -> None:
        self.backend = backend
        self.codec = codec or PushConfigCodec(None)

    async def put(
        self, config: a2a_pb2.TaskPushNotificationConfig, protocol: str = V10
    ) -> a2a_pb2.TaskPushNotificationConfig:
        stored = a2a_pb2.TaskPushNotificationConfig()
        stored.CopyFrom(config)
        if not stored.id:
            stored.id = new_id()
        recorded = "" if protocol == V10 else protocol
        await self._change(stored.task_id, "set", stored.id, self.codec.encode(stored), recorded)
        return stored

    async def _change(self, task_id: str, *change: Any) -> None:
        keys = self.backend.keys
        await self.backend.run_script(
            "PUSH_CHANGE",
            [keys.push(task_id), keys.push_version(task_id), keys.push_protocols(task_id)],
            list(change),
        )

    async def protocols(self, task_id: str) -> dict[str, str]:
        backend = self.backend
        raw = await backend.call(backend.client.hgetall(backend.keys.push_protocols(task_id)))
        return {config_id.decode(): protocol.decode() for config_id, protocol in raw.items()}

    async def for_dispatch(
        self, task_id: str
    ) -> tuple[list[a2a_pb2.TaskPushNotificationConfig], dict[str, str]]:
        """`for_task` and `protocols`, for the replica delivering the task's webhooks; a config
        whose secrets cannot be opened is left out (`PushConfigCodec.decode_deliverable`)."""
        return self.codec.decode_deliverable(await self._raw(task_id)), await self.protocols(
            task_id
        )

    async def count(self, task_id: str) -> int:
        return int(
            await self.backend.call(self.backend.client.hlen(self.backend.keys.push(task_id)))
        )

    async def has(self, task_id: str, config_id: str) -> bool:
        backend = self.backend
        return bool(
            await backend.call(backend.client.hexists(backend.keys.push(task_id), config_id))
        )

    async def get(self, task_id: str, config_id: str) -> a2a_pb2.TaskPushNotificationConfig | None:
        backend = self.backend
        raw = await backend.call(backend.client.hget(backend.keys.push(task_id), config_id))
        return None if raw is None else self.codec.decode(raw)

    async def for_task(self, task_id: str) -> list[a2a_pb2.TaskPushNotificationConfig]:
        return [self.codec.decode(raw) for raw in await self._raw(task_id)]

    async def _raw(self, task_id: str) -> list[bytes]:
        """The task's configs as stored, by id."""
        backend = self.backend
        raw = await backend.call(backend.client.hgetall(backend.keys.push(task_id)))
        return [raw[config_id] for config_id in sorted(raw)]

    async def delete(self, task_id: str, config_id: str) -> None:
        await self._change(task_id, "delete", config_id)

    async def drop_task(self, task_id: str) -> None:
        keys = self.backend.keys
        await self.backend.call(
            self.backend.client.delete(
                keys.push(task_id), keys.push_version(task_id), keys.push_protocols(task_id)
            )
        )

    async def reseal_all(self, batch: int = 256) -> Resealed:
        """Writes every stored config whose secrets are not sealed with the codec's first key
        again, sealed with it (`a2a-grpc store reseal`): the tasks are walked through the set
        of every stored task id (ZSCAN: a task stored throughout is visited), `batch` at a
        time; each config is replaced only if it is still as read (`RESEAL`)."""
        backend, keys, done = self.backend, self.backend.keys, Resealed()
        cursor = 0
        while True:
            cursor, members = await backend.call(
                backend.client.zscan(keys.room_all, cursor, count=batch)
            )
            for member, _ in members:
                task_id = member.decode() if isinstance(member, bytes) else str(member)
                push = keys.push(task_id)
                stored = await backend.call(backend.client.hgetall(push))
                for config_id, raw in sorted(stored.items()):
                    try:
                        resealed = self.codec.resealed(raw)
                    except UnreadableCredentialsError as exc:
                        done.unreadable.append(str(exc))
                        continue
                    if resealed is None:
                        done.count(None)
                        continue
                    wrote = await backend.run_script("RESEAL", [push], [config_id, raw, resealed])
                    done.count(bool(wrote))
            if int(cursor) == 0:
                return done
