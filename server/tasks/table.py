"""The in-memory store's table: tasks by id, scoped by tenant and owner, indexed for ListTasks.

Synchronous; `InMemoryTaskStore` (memory.py) puts the `TaskStore` contract over it. Contract:
- Copies in and out: callers never hold a reference to a stored Task, so mutating a returned
  Task changes nothing stored, and mutating an argument after the call changes nothing either.
- Scoping: every read takes a `Scope`; a task of another tenant or owner is reported exactly as
  an unknown id would be (None / not listed).
- Not thread-safe; all calls happen on the server's event loop and none of them awaits.
- Bounded: at most `max_tasks` tasks and `max_bytes` bytes of tasks (their serialized size,
  measured when a task is created and each time it settles, and in between grown by what every
  write adds when it lands: `apply(..., grow=)`, `set_status(..., grow=)`). Terminal tasks are
  evicted oldest-settled first when the store is full (1/64 of the store, at most 64 tasks, at a
  time), and after `terminal_ttl` seconds in any case (`evict_expired`, which the server also
  runs on a timer). When live tasks fill it the store refuses new tasks, and writes that would
  grow a task past the budget, with `StoreFullError` (the write is not applied) rather than drop
  work in progress.
- Fair: one owner may hold at most `max_live_per_owner` live (non-terminal) tasks, one tenant
  at most `max_live_per_tenant`; over that, `reserve` raises `LiveTaskLimitError`.
- Parked tasks (INPUT_REQUIRED / AUTH_REQUIRED) are listed oldest first by `parked_since`, so
  the server can end those that waited longer than it allows.
- A terminal task never changes again, so it is kept serialized (`_Finished`), and every read
  of it parses. Nothing kept per finished task is tracked by the garbage collector: with
  100,000 stored tasks a full collection took ~84 ms when each kept a message and a record.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

from a2a_grpc.core.states import SETTLED_STATES, TERMINAL_STATES
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.base import (
    LiveTaskLimitError,
    Scope,
    StoreFullError,
    TaskFinishedError,
    eviction_batch,
)
from a2a_grpc.server.tasks.changes import StatusClock, apply_status
from a2a_grpc.server.tasks.index import IndexFacts, TaskIndex, TaskQuery, trim_history


@dataclass(slots=True)
class _Record:
    """A task that may still change (not terminal), kept as a message."""

    task: a2a_pb2.Task
    scope: tuple[str, str]  # (tenant, owner), shared by the scope's tasks (TaskIndex.intern)
    updated_ns: int
    size: int  # bytes counted against the store's byte budget


_Finished = tuple[bytes, tuple[str, str], int, str, int]
"""A terminal task: (serialized task, scope, status time in ns, context id, state). A plain
tuple of bytes, strings and ints, which the garbage collector stops tracking."""


class TaskTable:
    """Tasks in process memory. See the module docstring for the contract."""

    def __init__(
        self,
        *,
        max_tasks: int = 100_000,
        max_bytes: int | None = None,
        max_live_per_owner: int | None = None,
        max_live_per_tenant: int | None = None,
        terminal_ttl: float = 3600.0,
        clock_ns: Callable[[], int] = time.time_ns,
        monotonic: Callable[[], float] = time.monotonic,
        on_evict: Callable[[str], None] | None = None,
    ) -> None:
        """`max_bytes`, `max_live_per_owner`, `max_live_per_tenant`: None means no such bound."""
        if max_tasks < 1:
            raise ValueError("max_tasks must be at least 1")
        self.max_tasks = max_tasks
        self.max_bytes = max_bytes
        self.max_live_per_owner = max_live_per_owner
        self.max_live_per_tenant = max_live_per_tenant
        # The eviction runs with its data warm once per batch instead of once per new task
        # (measured: -4.5k instructions per SendMessage, -1.0%; 2342 -> 2386 req/s in an A/B).
        self._eviction_batch = eviction_batch(max_tasks)
        self.terminal_ttl = terminal_ttl
        self._stamp = StatusClock(clock_ns).stamp
        self._monotonic = monotonic
        self.on_evict = on_evict
        """Called with the id of every task the store lets go of (e.g. to drop its webhooks)."""
        self._records: dict[str, _Record] = {}  # tasks that may still change
        self._finished: dict[str, _Finished] = {}  # terminal tasks
        # Terminal tasks in the order they settled, with time.monotonic() then. An OrderedDict,
        # not a dict: tasks leave from the front, and a plain dict must skip every slot freed
        # at its front to find its first key (up to ~100k skipped per eviction with a full
        # store, measured).
        self._terminal: OrderedDict[str, float] = OrderedDict()
        # When the oldest finished task seen last is due to expire (-inf: not known, look at the
        # next call). Tasks finish in clock order, so none is due earlier: evicting the oldest
        # only brings a younger one to the front.
        self._next_expiry = -math.inf
        self._reserved = 0  # room promised to tasks that will be created later
        self._index = TaskIndex(self)
        self._bytes = 0  # sum of the records' sizes
        # Live (non-terminal) tasks, reservations included, per owner and per tenant.
        self._live_by_owner: dict[str, int] = {}
        self._live_by_tenant: dict[str, int] = {}
        # Interrupted tasks by id, oldest interruption first, with time.monotonic() then.
        self._parked: OrderedDict[str, float] = OrderedDict()

    @property
    def bytes(self) -> int:
        """Bytes of tasks counted against `max_bytes` (serialized sizes), with the room
        `reserve` promised to tasks not created yet."""
        return self._bytes

    def reserve(self, scope: Scope, size: int = 0) -> None:
        """Promises room for one task of about `size` bytes that `adopt(..., reserved_size=size)`
        will store later, on behalf of `scope`.

        Raises LiveTaskLimitError when the scope's owner or tenant holds its share of live
        tasks; evicts the oldest finished tasks as needed, and raises StoreFullError when every
        slot or byte left is held by (or promised to) an unfinished task. The `size` counts
        from now on (calls that reserve at once cannot overshoot the budget together). Give
        unused room back with `release(scope, size)`.
        """
        tenant, owner = scope
        owner_live = self._live_by_owner.get(owner, 0)
        tenant_live = self._live_by_tenant.get(tenant, 0)
        self._check_share(owner_live, tenant_live)
        self.evict_expired()
        while len(self._records) + len(self._finished) + self._reserved >= self.max_tasks:
            if not self._evict_oldest_terminal():
                raise StoreFullError(
                    f"the server holds {self.max_tasks} unfinished tasks; retry later"
                )
        if self.max_bytes is not None:
            self.make_room(size)
        self._bytes += size
        self._reserved += 1
        self._live_by_owner[owner] = owner_live + 1
        self._live_by_tenant[tenant] = tenant_live + 1

    def make_room(self, size: int, *, refuse: bool = True) -> None:
        """Makes room for a write of `size` bytes about to land: evicts the oldest finished
        tasks until it fits in `max_bytes`. When live tasks fill the budget, StoreFullError
        (nothing changed), or with `refuse=False` nothing (the write lands over the budget:
        for the server's own short final statuses and cancels)."""
        max_bytes = self.max_bytes
        if max_bytes is None:
            return
        while self._bytes + size > max_bytes:
            if not self._evict_oldest_terminal():
                if not refuse:
                    return
                raise StoreFullError(
                    f"the server's unfinished tasks fill its task memory ({max_bytes} bytes); "
                    "retry later"
                )

    def _check_share(self, owner_live: int, tenant_live: int) -> None:
        most = self.max_live_per_owner
        if most is not None and owner_live >= most:
            raise LiveTaskLimitError(
                f"this caller already has {owner_live} unfinished tasks, the most one caller may "
                "hold: wait for some to finish, or answer or cancel those waiting for input"
            )
        most = self.max_live_per_tenant
        if most is not None and tenant_live >= most:
            raise LiveTaskLimitError(
                f"this tenant already has {tenant_live} unfinished tasks, the most one tenant "
                "may hold: retry when some have finished"
            )

    def release(self, scope: Scope, size: int = 0) -> None:
        """Gives back room promised by `reserve(scope, size)` that no task will use."""
        self._bytes -= size
        self._reserved = max(0, self._reserved - 1)
        self._unlive(scope)

    def _unlive(self, scope: tuple[str, str]) -> None:
        tenant, owner = scope
        _decrement(self._live_by_owner, owner)
        _decrement(self._live_by_tenant, tenant)

    def live_count(self, *, owner: str | None = None, tenant: str | None = None) -> int:
        """Live tasks (reservations included) of one owner or one tenant."""
        if owner is not None:
            return self._live_by_owner.get(owner, 0)
        return self._live_by_tenant.get(tenant or "", 0)

    def count_by_state(self) -> dict[int, int]:
        """Stored tasks per state, from the ListTasks state indexes (no pass over the tasks)."""
        return self._index.count_by_state()

    def __len__(self) -> int:
        return len(self._records) + len(self._finished)

    # -- writes ---------------------------------------------------------------------------

    def create(self, task: a2a_pb2.Task, scope: Scope) -> a2a_pb2.Task:
        """Stores a copy of a new task, stamping its status time; returns a copy as stored."""
        stored = a2a_pb2.Task()
        stored.CopyFrom(task)
        self.adopt(stored, scope)
        return self._copy(stored)

    def adopt(
        self,
        task: a2a_pb2.Task,
        scope: Scope,
        *,
        reserved_size: int | None = None,
        grow: int = 0,
    ) -> None:
        """Stores a new task without copying it: the store takes ownership of `task`.

        For callers that built `task` themselves and never touch it again (the server's task
        runs); everything else should use `create`. Stamps the status time like `create`. With
        `reserved_size` (the size given to `reserve`), the task takes room promised (and already
        counted) by `reserve`, never raises StoreFullError, and counts as that many bytes until
        it settles (measuring
        it would cost a serialization, ~3k instructions, on every new task), plus `grow`: what
        was added to the task beyond the reserved size (e.g. its first status message), counted
        as `apply` counts it (StoreFullError before anything is stored when it does not fit).
        """
        task_id = task.id
        if task_id in self._records or task_id in self._finished:
            raise ValueError(f"task {task_id!r} already exists")
        if reserved_size is not None:
            if grow:
                self.make_room(grow)
            self._reserved = max(0, self._reserved - 1)
            size = reserved_size + grow
        else:
            size = task.ByteSize()
            self.reserve(scope, size)
            self._reserved -= 1
        status = task.status
        now = self._stamp(status)
        self._bytes += grow  # `reserve` counted the rest
        # One Scope object per tenant and owner, shared by their records (fewer objects to track).
        record = _Record(task, self._index.intern(scope), now, size)
        self._records[task_id] = record
        self._index.changed(task_id)
        state = status.state
        if state in SETTLED_STATES:
            self._settled(task_id, record, state)

    def update(
        self, task_id: str, mutate: Callable[[a2a_pb2.Task], None], *, status_changed: bool
    ) -> a2a_pb2.Task:
        """Applies `mutate` to the stored task and returns a copy of the result.

        With `status_changed`, the status is stamped with the server's clock and the task moves to
        the front of ListTasks. A terminal task never changes again: that raises TaskFinishedError.
        """
        return self._copy(self.apply(task_id, mutate, status_changed=status_changed))

    def apply(
        self,
        task_id: str,
        mutate: Callable[[a2a_pb2.Task], None],
        *,
        status_changed: bool,
        grow: int = 0,
    ) -> a2a_pb2.Task:
        """`update` without the copy out: returns the stored task itself, to read and let go.

        The caller must not keep or mutate the returned task (it is the store's own). `grow`:
        the bytes `mutate` adds (e.g. an artifact's serialized size), counted before it runs:
        finished tasks are evicted to make room, and when live tasks fill the budget
        StoreFullError is raised and `mutate` does not run.
        """
        record = self._records.get(task_id) or self._not_live(task_id)
        task = record.task
        if task.status.state in TERMINAL_STATES:  # made terminal without `status_changed`
            raise TaskFinishedError(task_id, task.status.state)
        if grow:
            self.make_room(grow)
            record.size += grow
            self._bytes += grow
        mutate(task)
        if status_changed:
            record.updated_ns = self._stamp(task.status)
            self._index.changed(task_id)
            self._status_changed(task_id, record, task.status.state)
        return task

    def set_status(
        self,
        task_id: str,
        state: int,
        message: a2a_pb2.Message | None = None,
        *,
        grow: int = 0,
        refuse: bool = True,
    ) -> a2a_pb2.Task:
        """A status change: `state`, and `message` as the status message (also appended to the
        history; None clears it). Stamped like `apply(..., status_changed=True)`, and like `apply`
        it returns the stored task itself, to read and let go. A terminal task never changes
        again: that raises TaskFinishedError. `grow`: the bytes the change adds (the message
        twice: status and history), counted as `apply` counts them; with `refuse=False` the
        change lands even when live tasks fill the budget.
        """
        record = self._records.get(task_id) or self._not_live(task_id)
        task = record.task
        if grow:
            self.make_room(grow, refuse=refuse)
            record.size += grow
            self._bytes += grow
        apply_status(task, state, message)
        record.updated_ns = self._stamp(task.status)
        self._index.changed(task_id)
        self._status_changed(task_id, record, state)
        return task

    def parked_since(self, before: float) -> list[str]:
        """Ids of the tasks interrupted (INPUT_REQUIRED / AUTH_REQUIRED) since before
        `before` (a time.monotonic() value), oldest first."""
        expired: list[str] = []
        for task_id, parked_at in self._parked.items():
            if parked_at > before:
                break
            expired.append(task_id)
        return expired

    def evict_expired(self) -> int:
        """Drops terminal tasks older than the TTL; returns how many went."""
        now = self._monotonic()
        if now < self._next_expiry:
            return 0  # the oldest finished task is not due yet: nothing is read (every reserve)
        deadline = now - self.terminal_ttl
        expired: list[str] = []
        self._next_expiry = -math.inf
        for task_id, settled_at in self._terminal.items():  # oldest settled first
            if settled_at > deadline:
                self._next_expiry = settled_at + self.terminal_ttl
                break
            expired.append(task_id)
        for task_id in expired:
            self._delete(task_id)
        return len(expired)

    # -- reads ----------------------------------------------------------------------------

    def get(
        self, task_id: str, scope: Scope, *, history_length: int | None = None
    ) -> a2a_pb2.Task | None:
        """A copy of the task, or None when it is unknown or belongs to another scope."""
        copy = a2a_pb2.Task()
        if not self.copy_into(task_id, scope, copy, history_length=history_length):
            return None
        return copy

    def peek(self, task_id: str) -> a2a_pb2.Task | None:
        """The task, unscoped, for the server's own housekeeping: read it and let go (never
        mutate or keep it, never hand it to a caller)."""
        record = self._records.get(task_id)
        if record is not None:
            return record.task
        finished = self._finished.get(task_id)
        return None if finished is None else a2a_pb2.Task.FromString(finished[0])

    def scope_of(self, task_id: str) -> Scope | None:
        """Who owns a stored task (None when it is not stored)."""
        record = self._records.get(task_id)
        if record is not None:
            return Scope(*record.scope)
        finished = self._finished.get(task_id)
        return None if finished is None else Scope(*finished[1])

    def copy_into(
        self,
        task_id: str,
        scope: Scope,
        target: a2a_pb2.Task,
        *,
        history_length: int | None = None,
    ) -> bool:
        """`get` into a message the caller owns (e.g. a response's task field): no extra copy.

        False, leaving `target` untouched, when the task is unknown or in another scope.
        """
        finished = self._finished.get(task_id)
        if finished is not None:
            if finished[1] != scope:
                return False
            target.ParseFromString(finished[0])
        else:
            record = self._records.get(task_id)
            if record is None or record.scope != scope:
                return False
            target.CopyFrom(record.task)
        if history_length is not None:  # most reads want it all: no call
            trim_history(target, history_length)
        return True

    def list(self, scope: Scope, query: TaskQuery) -> a2a_pb2.ListTasksResponse:
        """One page of the scope's tasks, most recently updated first (see `TaskIndex.page`);
        InvalidPageTokenError for a token this store did not issue."""
        return self._index.page(scope, query)

    # -- internals ------------------------------------------------------------------------

    # -- what the ListTasks indexes read (IndexSource) -----------------------------------

    def index_facts(self, task_id: str) -> IndexFacts:
        finished = self._finished.get(task_id)
        if finished is not None:
            return finished[1], finished[2], finished[3], finished[4]
        record = self._records[task_id]
        task = record.task
        return record.scope, record.updated_ns, task.context_id, task.status.state

    def load_into(self, task_id: str, target: a2a_pb2.Task) -> None:
        finished = self._finished.get(task_id)
        if finished is not None:
            target.ParseFromString(finished[0])
        else:
            target.CopyFrom(self._records[task_id].task)

    # -- internals ------------------------------------------------------------------------

    def _copy(self, task: a2a_pb2.Task) -> a2a_pb2.Task:
        copy = a2a_pb2.Task()
        copy.CopyFrom(task)
        return copy

    def _not_live(self, task_id: str) -> NoReturn:
        finished = self._finished.get(task_id)
        if finished is None:
            raise KeyError(task_id)
        raise TaskFinishedError(task_id, finished[4])

    def _status_changed(self, task_id: str, record: _Record, state: int) -> None:
        if state in SETTLED_STATES:
            self._settled(task_id, record, state)
        elif self._parked:
            self._parked.pop(task_id, None)  # answered: it works again

    def _settled(self, task_id: str, record: _Record, state: int) -> None:
        """A terminal or interrupted state: the task's size is measured again, exactly (the
        writes since it was last measured were counted by what each added, an estimate that
        leaves out field tags). A terminal task is kept serialized from now on."""
        task = record.task
        if state in TERMINAL_STATES:
            serialized = task.SerializeToString()
            self._bytes += len(serialized) - record.size
            del self._records[task_id]
            self._finished[task_id] = (
                serialized,
                record.scope,
                record.updated_ns,
                task.context_id,
                state,
            )
            self._parked.pop(task_id, None)
            self._terminal[task_id] = self._monotonic()
            self._unlive(record.scope)
            return
        size = task.ByteSize()
        self._bytes += size - record.size
        record.size = size
        self._parked[task_id] = self._monotonic()
        self._parked.move_to_end(task_id)

    def remove(self, task_id: str) -> None:
        """Removes a task now, live or finished, as an eviction does (`on_evict` is told);
        nothing for an unknown id."""
        if task_id in self._records or task_id in self._finished:
            self._delete(task_id)

    def _evict_oldest_terminal(self) -> bool:
        """Evicts the `_eviction_batch` oldest finished tasks (fewer if there are fewer)."""
        terminal = self._terminal
        if not terminal:
            return False
        for _ in range(min(self._eviction_batch, len(terminal))):
            self._delete(next(iter(terminal)))
        return True

    def _delete(self, task_id: str) -> None:
        finished = self._finished.pop(task_id, None)
        if finished is not None:
            self._bytes -= len(finished[0])
            del self._terminal[task_id]
        else:  # still live
            record = self._records.pop(task_id)
            self._bytes -= record.size
            self._unlive(record.scope)
            self._parked.pop(task_id, None)
        self._index.forget(task_id)
        if self.on_evict is not None:
            self.on_evict(task_id)


def _decrement(counts: dict[str, int], key: str) -> None:
    left = counts.get(key, 0) - 1
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)  # counters of idle callers do not pile up
