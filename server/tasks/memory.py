"""The default task store: the task table and the event broker of this process.

Keeps the `TaskStore` contract (base.py) for one process: nothing is shared, so a task is only
seen by the server that created it and is lost when it stops. No method suspends: each is one
synchronous step on the event loop, which makes every check-then-write atomic here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from a2a_grpc.core.errors import StatusError
from a2a_grpc.core.states import INTERRUPTED_STATES, SETTLED_STATES, TERMINAL_STATES
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.base import (
    EventBuilder,
    FirstStatus,
    Scope,
    StoreKind,
    StoreListener,
    StoreSettings,
    StoreStats,
    TaskBusyError,
    TaskFinishedError,
    TaskQuery,
    Webhooks,
)
from a2a_grpc.server.tasks.broker import Broker, Subscription
from a2a_grpc.server.tasks.changes import apply_status, status_event
from a2a_grpc.server.tasks.table import TaskTable


class InMemoryTaskStore:
    """`TaskTable` + `Broker` behind the `TaskStore` contract. See the module docstring. The
    tasks it lets go of are the table's to tell (`TaskTable(on_evict=...)`); the broker's
    observer sees every event of the tasks it watches (webhooks)."""

    claims = None  # no other process sees it: the idempotency window decides alone
    failures = 0  # no backend to fail
    push_configs = None  # the webhook dispatcher keeps them; evictions drop them
    stopped_run_status: tuple[int, str | None] = (a2a_pb2.TASK_STATE_CANCELED, None)
    """Its tasks go with the process: a run cut short by a stop ends CANCELED."""

    def __init__(self, table: TaskTable, broker: Broker) -> None:
        self.table = table
        self.broker = broker
        self._running: set[str] = set()  # ids of the tasks a run works on
        # Room reserved and not yet used, by task id: its bytes count from `reserve` on, so
        # `release` must know how many to give back.
        self._promised: dict[str, int] = {}

    @classmethod
    def open(
        cls, settings: StoreSettings, listener: StoreListener, webhooks: Webhooks | None
    ) -> InMemoryTaskStore:
        """A store with `settings`' bounds (`StoreFactory`): the tasks it lets go of go to
        `listener.task_evicted`, with their kept events; `webhooks` sees every event of the
        tasks that have webhooks."""
        task_evicted = listener.task_evicted

        def evicted(task_id: str) -> None:
            broker.forget(task_id)  # its kept events go with it
            task_evicted(task_id)

        table = TaskTable(
            max_tasks=settings.max_tasks,
            max_bytes=settings.max_bytes,
            max_live_per_owner=settings.max_live_per_owner,
            max_live_per_tenant=settings.max_live_per_tenant,
            terminal_ttl=settings.terminal_ttl,
            on_evict=evicted,
        )
        # A 0.3 webhook is sent the task as it stands: the table's.
        observer = None if webhooks is None else webhooks.with_snapshot(table.peek)
        broker = Broker(
            settings.queue_size, observer=observer, replay_length=settings.replay_length
        )
        return cls(table, broker)

    def __len__(self) -> int:
        return len(self.table)

    async def reserve(self, scope: Scope, size: int, task_id: str) -> None:
        self.table.reserve(scope, size)
        self._promised[task_id] = size

    async def release(self, scope: Scope, task_id: str) -> None:
        self.table.release(scope, self._promised.pop(task_id, 0))

    async def create(
        self,
        task: a2a_pb2.Task,
        scope: Scope,
        *,
        reserved_size: int,
        first_status: FirstStatus | None = None,
    ) -> bool:
        task_id = task.id
        broker = self.broker
        first_message = None if first_status is None else first_status.message
        if first_message is not None:  # counted when it lands, like any status message
            self.table.make_room(_status_size(first_message))  # StoreFullError: nothing stored
        self._promised.pop(task_id, None)
        if first_status is not None and not broker.has_subscribers(task_id):
            # Nobody sees the task as it was given: it is stored at its first status at once
            # (one stamp and one index entry: 484.9k -> 473.6k instructions per send).
            apply_status(task, first_status.state, first_message)
            grow = 0 if first_message is None else _status_size(first_message)
            self.table.adopt(task, scope, reserved_size=reserved_size, grow=grow)
            if first_status.state not in SETTLED_STATES:
                self._running.add(task_id)
            return False
        self.table.adopt(task, scope, reserved_size=reserved_size)
        self._running.add(task_id)
        if broker.has_subscribers(task_id):
            broker.publish(task_id, a2a_pb2.StreamResponse(task=task))
        if first_status is None:
            return False
        # Its room was made above, before anything was stored.
        return self._set_status(task_id, *first_status, force_room=True)

    async def set_status(
        self,
        task_id: str,
        state: int,
        message: a2a_pb2.Message | None = None,
        *,
        event_metadata: dict[str, Any] | None = None,
        force_room: bool = False,
    ) -> bool:
        return self._set_status(task_id, state, message, event_metadata, force_room=force_room)

    def _set_status(
        self,
        task_id: str,
        state: int,
        message: a2a_pb2.Message | None,
        event_metadata: dict[str, Any] | None = None,
        *,
        force_room: bool = False,
    ) -> bool:
        if message is None:  # the common case: nothing to count until the task settles
            task = self.table.set_status(task_id, state, None)
        else:
            task = self.table.set_status(
                task_id, state, message, grow=_status_size(message), refuse=not force_room
            )
        if state in SETTLED_STATES:
            self._running.discard(task_id)  # the run's claim ends
        broker = self.broker
        # Without subscribers nothing is copied and no event is built (the common case of a
        # blocking SendMessage).
        if not broker.has_subscribers(task_id):
            return False
        return broker.publish(
            task_id,
            status_event(task, event_metadata),
            last=state in TERMINAL_STATES,
            interrupted=state in INTERRUPTED_STATES,
        )

    async def update(
        self,
        task_id: str,
        mutate: Callable[[a2a_pb2.Task], None],
        event: EventBuilder | None = None,
        *,
        size: int = 0,
    ) -> bool:
        self.table.apply(task_id, mutate, status_changed=False, grow=size)
        if event is not None and self.broker.has_subscribers(task_id):
            return self.broker.publish(task_id, event())
        return False

    async def reply(self, task_id: str, message: a2a_pb2.Message) -> None:
        if self.broker.has_subscribers(task_id):
            self.broker.publish(task_id, a2a_pb2.StreamResponse(message=message), last=True)

    async def withdraw(
        self,
        task_id: str,
        scope: Scope,
        error: StatusError,
        waiting: tuple[int, a2a_pb2.Message] | None = None,
    ) -> None:
        broker = self.broker
        broker.fail(task_id, error, every=waiting is None)
        if waiting is not None:
            self._set_status(task_id, *waiting, force_room=True)
            return
        if task_id in self._promised:  # not created: the room it was promised goes back
            self.table.release(scope, self._promised.pop(task_id))
        else:
            self.table.remove(task_id)
        self._running.discard(task_id)
        broker.forget(task_id)

    async def resume(
        self, task_id: str, scope: Scope, message: a2a_pb2.Message
    ) -> a2a_pb2.Task | None:
        table = self.table
        task = table.get(task_id, scope)
        if task is None:
            return None
        state = task.status.state
        if state in TERMINAL_STATES:
            raise TaskFinishedError(task_id, state)
        if task_id in self._running:
            raise TaskBusyError(task_id)
        context_id = task.context_id

        def add(stored_task: a2a_pb2.Task) -> None:
            # Copied once, straight into the history (a copy first, then `append`, which
            # copies again, held the answer twice until the first copy was collected).
            stored = stored_task.history.add()
            stored.CopyFrom(message)
            stored.task_id = task_id
            stored.context_id = context_id

        # The answer is counted when it lands (StoreFullError, with nothing changed, when live
        # tasks fill the budget); ids are counted as at most 2 x 40 bytes more.
        table.apply(task_id, add, status_changed=False, grow=message.ByteSize() + _IDS_SIZE)
        self._running.add(task_id)
        self._set_status(task_id, a2a_pb2.TASK_STATE_SUBMITTED, None)
        return task

    async def cancel(
        self, task_id: str, scope: Scope, message: a2a_pb2.Message | None = None
    ) -> a2a_pb2.Task | None:
        if self.table.scope_of(task_id) != scope:
            return None
        self._set_status(task_id, a2a_pb2.TASK_STATE_CANCELED, message, force_room=True)
        return self.table.get(task_id, scope)

    async def cancel_parked(self, task_id: str, message: a2a_pb2.Message) -> Scope | None:
        task = self.table.peek(task_id)
        if task is None or task_id in self._running or task.status.state not in INTERRUPTED_STATES:
            return None
        message.context_id = task.context_id
        self._set_status(task_id, a2a_pb2.TASK_STATE_CANCELED, message, force_room=True)
        return self.table.scope_of(task_id)

    async def get(
        self, task_id: str, scope: Scope, *, history_length: int | None = None
    ) -> a2a_pb2.Task | None:
        return self.table.get(task_id, scope, history_length=history_length)

    async def copy_into(
        self,
        task_id: str,
        scope: Scope,
        target: a2a_pb2.Task,
        *,
        history_length: int | None = None,
    ) -> bool:
        return self.table.copy_into(task_id, scope, target, history_length=history_length)

    async def list(self, scope: Scope, query: TaskQuery) -> a2a_pb2.ListTasksResponse:
        return self.table.list(scope, query)

    async def watch(
        self, task_id: str, scope: Scope, *, until_terminal: bool, after: str | None = None
    ) -> tuple[a2a_pb2.Task, Subscription] | None:
        if self.table.scope_of(task_id) != scope:  # before a log is made or marked for it
            return None
        subscription = self.broker.subscribe(
            task_id, until_terminal=until_terminal, after=after, snapshot=after is None
        )
        snapshot = self.table.get(task_id, scope)
        if snapshot is None:
            subscription.cancel()
            return None
        return snapshot, subscription

    async def subscribe(self, task_id: str) -> Subscription:
        return self.broker.subscribe(task_id)

    async def parked_longer_than(self, seconds: float) -> Sequence[str]:
        return self.table.parked_since(time.monotonic() - seconds)

    async def evict_expired(self) -> int:
        return self.table.evict_expired()

    async def stats(self) -> StoreStats:
        return StoreStats(len(self.table), self.table.bytes, self.table.count_by_state())

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass


_IDS_SIZE = 80
"""What setting a message's task and context ids may add to its size (two ids and tags)."""


def _status_size(message: a2a_pb2.Message) -> int:
    """What a status message adds to its task: it is kept twice, as the status message and in
    the history."""
    return 2 * message.ByteSize()


def _memory_url_problem(url: str) -> str | None:
    if url.partition("://")[2]:
        return "memory:// takes nothing after the scheme: its tasks stay in this process"
    return None


MEMORY = StoreKind(
    open=lambda url, settings, listener, webhooks: InMemoryTaskStore.open(
        settings, listener, webhooks
    ),
    shared=False,
    check=_memory_url_problem,
)
"""`memory://` (and an empty store URL): this process's memory."""
