"""The webhook registrations of this process: each task's push-notification configs.

`PushConfigStore` keeps a copy of each config by task id and config id, in creation order, and
gives out copies; `stored_for` alone gives the stored objects, so delivery can tell a config
replaced by Create (a new object) from the one it is sending to. A config registered through
the 0.3 service has its protocol version kept beside it, and stays the 1.0 message every
reader sees. A shared store's configs are mirrored in (`mirror`), keeping the object of every
config that did not change. Synchronous; runs on the event loop. Checking a config (its URL,
headers, the cap per task) is the caller's, before `put`.
"""

from __future__ import annotations

from collections.abc import Container

from a2a_grpc.core.ids import new_id
from a2a_grpc.generated import a2a_pb2

V10 = "1.0"
"""The protocol version of a webhook registered through the 1.0 service (the default)."""


class PushConfigStore:
    """Webhook registrations by task id. Synchronous; runs on the event loop."""

    def __init__(self) -> None:
        self._configs: dict[str, dict[str, a2a_pb2.TaskPushNotificationConfig]] = {}
        # The protocol version of every config not registered in 1.0, by task id then config
        # id: kept beside the config, which stays the 1.0 message every reader sees.
        self._protocols: dict[str, dict[str, str]] = {}
        self.watched: Container[str] = self._configs.keys()
        """The ids of the tasks that have configs (a live view)."""

    def put(
        self, config: a2a_pb2.TaskPushNotificationConfig, protocol: str = V10
    ) -> a2a_pb2.TaskPushNotificationConfig:
        """Stores a copy (minting an id when it has none), registered in `protocol` (the
        version its webhook is sent in), and returns a copy as stored."""
        stored = a2a_pb2.TaskPushNotificationConfig()
        stored.CopyFrom(config)
        if not stored.id:
            stored.id = new_id()
        self._configs.setdefault(stored.task_id, {})[stored.id] = stored
        self._set_protocol(stored.task_id, stored.id, protocol)
        return _copy(stored)

    def protocol(self, task_id: str, config_id: str) -> str:
        """The protocol version the config was registered in (V10 for an unknown one)."""
        protocols = self._protocols.get(task_id)
        return V10 if protocols is None else protocols.get(config_id, V10)

    def protocols(self, task_id: str) -> dict[str, str]:
        """The protocol version of each of the task's configs not registered in 1.0."""
        return dict(self._protocols.get(task_id, {}))

    def _set_protocol(self, task_id: str, config_id: str, protocol: str) -> None:
        if protocol != V10:
            self._protocols.setdefault(task_id, {})[config_id] = protocol
            return
        protocols = self._protocols.get(task_id)
        if protocols is not None:
            protocols.pop(config_id, None)
            if not protocols:
                del self._protocols[task_id]

    def count(self, task_id: str) -> int:
        return len(self._configs.get(task_id, ()))

    def has(self, task_id: str, config_id: str) -> bool:
        return config_id in self._configs.get(task_id, ())

    def get(self, task_id: str, config_id: str) -> a2a_pb2.TaskPushNotificationConfig | None:
        config = self._configs.get(task_id, {}).get(config_id)
        return None if config is None else _copy(config)

    def for_task(self, task_id: str) -> list[a2a_pb2.TaskPushNotificationConfig]:
        """Copies of the task's configs, in creation order."""
        return [_copy(c) for c in self._configs.get(task_id, {}).values()]

    def delete(self, task_id: str, config_id: str) -> None:
        configs = self._configs.get(task_id)
        if configs is not None:
            configs.pop(config_id, None)
            if not configs:
                del self._configs[task_id]
        self._set_protocol(task_id, config_id, V10)

    def drop_task(self, task_id: str) -> None:
        self._configs.pop(task_id, None)
        self._protocols.pop(task_id, None)

    def mirror(
        self,
        task_id: str,
        configs: list[a2a_pb2.TaskPushNotificationConfig],
        protocols: dict[str, str] | None = None,
    ) -> None:
        """Makes the task's configs `configs` (read from a shared store, with the `protocols`
        of those not registered in 1.0), keeping the stored object of every config that did
        not change, so its delivery goes on undisturbed."""
        protocols = protocols or {}
        current = self._configs.get(task_id, {})
        mirrored: dict[str, a2a_pb2.TaskPushNotificationConfig] = {}
        for config in configs:
            kept = current.get(config.id)
            same = kept is not None and kept == config
            same = same and self.protocol(task_id, config.id) == protocols.get(config.id, V10)
            mirrored[config.id] = kept if same and kept is not None else config
        if mirrored:
            self._configs[task_id] = mirrored
        else:
            self._configs.pop(task_id, None)
        kept_protocols = {
            config_id: protocol
            for config_id, protocol in protocols.items()
            if config_id in mirrored and protocol != V10
        }
        if kept_protocols:
            self._protocols[task_id] = kept_protocols
        else:
            self._protocols.pop(task_id, None)

    def stored_for(self, task_id: str) -> list[a2a_pb2.TaskPushNotificationConfig]:
        """The stored objects themselves (read-only use by the dispatcher)."""
        return list(self._configs.get(task_id, {}).values())


def _copy(config: a2a_pb2.TaskPushNotificationConfig) -> a2a_pb2.TaskPushNotificationConfig:
    copy = a2a_pb2.TaskPushNotificationConfig()
    copy.CopyFrom(config)
    return copy
