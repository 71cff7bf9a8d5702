"""An example task store added to a2a-grpc from outside it: `example://NAME`.

It keeps its tasks in this process's memory by wrapping a store it opens through a2a-grpc's
public store API (the registry's `memory://`), and forwards every call of the `TaskStore`
contract to it, so that it shows what a store implements and how it is registered:

- `ExampleTaskStore`: the contract's properties and methods (a2a_grpc.server.tasks.base);
- `EXAMPLE`: the `StoreKind` the entry point `example` (group `a2a_grpc.stores`, in this
  package's pyproject.toml) names, with the check of its URLs.

It uses nothing of a2a-grpc but `a2a_grpc.server.tasks.base` and `.registry`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from a2a_grpc.core.errors import StatusError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.base import (
    Claims,
    EventBuilder,
    FirstStatus,
    PushConfigs,
    Scope,
    StoreKind,
    StoreListener,
    StoreSettings,
    StoreStats,
    Subscription,
    TaskQuery,
    TaskStore,
    Webhooks,
)
from a2a_grpc.server.tasks.registry import open_store

__all__ = ["EXAMPLE", "ExampleTaskStore"]

NAME = re.compile(r"[a-z0-9-]+")


class ExampleTaskStore:
    """A `TaskStore` named `name` over `inner`, to which it forwards every call."""

    def __init__(self, name: str, inner: TaskStore) -> None:
        self.name = name
        self._inner = inner
        self.started = False

    @property
    def claims(self) -> Claims | None:
        return self._inner.claims

    @property
    def failures(self) -> int:
        return self._inner.failures

    @property
    def push_configs(self) -> PushConfigs | None:
        return self._inner.push_configs

    @property
    def stopped_run_status(self) -> tuple[int, str | None]:
        return self._inner.stopped_run_status

    async def reserve(self, scope: Scope, size: int, task_id: str) -> None:
        await self._inner.reserve(scope, size, task_id)

    async def release(self, scope: Scope, task_id: str) -> None:
        await self._inner.release(scope, task_id)

    async def create(
        self,
        task: a2a_pb2.Task,
        scope: Scope,
        *,
        reserved_size: int,
        first_status: FirstStatus | None = None,
    ) -> bool:
        return await self._inner.create(
            task, scope, reserved_size=reserved_size, first_status=first_status
        )

    async def set_status(
        self,
        task_id: str,
        state: int,
        message: a2a_pb2.Message | None = None,
        *,
        event_metadata: dict[str, Any] | None = None,
        force_room: bool = False,
    ) -> bool:
        return await self._inner.set_status(
            task_id, state, message, event_metadata=event_metadata, force_room=force_room
        )

    async def update(
        self,
        task_id: str,
        mutate: Callable[[a2a_pb2.Task], None],
        event: EventBuilder | None = None,
        *,
        size: int = 0,
    ) -> bool:
        return await self._inner.update(task_id, mutate, event, size=size)

    async def reply(self, task_id: str, message: a2a_pb2.Message) -> None:
        await self._inner.reply(task_id, message)

    async def withdraw(
        self,
        task_id: str,
        scope: Scope,
        error: StatusError,
        waiting: tuple[int, a2a_pb2.Message] | None = None,
    ) -> None:
        await self._inner.withdraw(task_id, scope, error, waiting)

    async def resume(
        self, task_id: str, scope: Scope, message: a2a_pb2.Message
    ) -> a2a_pb2.Task | None:
        return await self._inner.resume(task_id, scope, message)

    async def cancel(
        self, task_id: str, scope: Scope, message: a2a_pb2.Message | None = None
    ) -> a2a_pb2.Task | None:
        return await self._inner.cancel(task_id, scope, message)

    async def cancel_parked(self, task_id: str, message: a2a_pb2.Message) -> Scope | None:
        return await self._inner.cancel_parked(task_id, message)

    async def get(
        self, task_id: str, scope: Scope, *, history_length: int | None = None
    ) -> a2a_pb2.Task | None:
        return await self._inner.get(task_id, scope, history_length=history_length)

    async def copy_into(
        self,
        task_id: str,
        scope: Scope,
        target: a2a_pb2.Task,
        *,
        history_length: int | None = None,
    ) -> bool:
        return await self._inner.copy_into(task_id, scope, target, history_length=history_length)

    async def list(self, scope: Scope, query: TaskQuery) -> a2a_pb2.ListTasksResponse:
        return await self._inner.list(scope, query)

    async def watch(
        self, task_id: str, scope: Scope, *, until_terminal: bool, after: str | None = None
    ) -> tuple[a2a_pb2.Task, Subscription] | None:
        return await self._inner.watch(task_id, scope, until_terminal=until_terminal, after=after)

    async def subscribe(self, task_id: str) -> Subscription:
        return await self._inner.subscribe(task_id)

    async def parked_longer_than(self, seconds: float) -> Sequence[str]:
        return await self._inner.parked_longer_than(seconds)

    async def evict_expired(self) -> int:
        return await self._inner.evict_expired()

    async def stats(self) -> StoreStats:
        return await self._inner.stats()

    async def start(self) -> None:
        if self.started:
            raise RuntimeError("started twice")
        self.started = True
        await self._inner.start()

    async def close(self) -> None:
        await self._inner.close()


def _problem(url: str) -> str | None:
    name = url.partition("://")[2]
    if not NAME.fullmatch(name):
        return (
            f"an example:// store URL needs a name (a-z, 0-9, -), as in example://demo; got {url!r}"
        )
    return None


def _open(
    url: str, settings: StoreSettings, listener: StoreListener, webhooks: Webhooks | None
) -> ExampleTaskStore:
    inner = open_store("memory://", settings, listener, webhooks)
    return ExampleTaskStore(url.partition("://")[2], inner)


EXAMPLE = StoreKind(open=_open, shared=False, check=_problem)
"""`example://NAME`: tasks in this process's memory, under a name."""
