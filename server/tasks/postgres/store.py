"""The PostgreSQL task store: tasks, their events, leases and message ids in one database, so
every replica serves every task. Keeps the `TaskStore` contract (base.py), with the guarantees
of the Redis store. This module is the contract's writes and the facade over the parts, each of
which takes the backend:

- backend.py: connections, bounded round trips, health; schema.py: tables and migrations;
- batch.py: the writes of concurrent calls in one transaction (every message's claim,
  reservation, creation and updates go through it);
- writes.py: the write statements; reads.py: one task, ListTasks, replay;
- room.py: room, fair shares, pruning; events.py: the LISTEN connection, remote outcomes;
- push.py: push configs and webhook delivery; leases.py: leases and reaping;
- claims.py: message-id claims.

Writes: the run working on a task keeps it in memory (`_Owned`) and writes it whole, with its
new events, in one statement that names the version it read (writes.py); a version that moved
means another replica canceled it (or a reaper failed it), which raises TaskFinishedError.
Everyone else's writes (a cancel, a resume, a reaper's FAILED) lock the row first (`SELECT ...
FOR UPDATE`), read it and write it in one transaction: a run's write in between waits, then
finds the version moved. So a cancel never loses to a run that writes in a tight loop, and
two replicas resuming one task resume it once.

Writes of concurrent calls are committed together, one batch at a time (batch.py): the
run's writes, the claims and the reservations; a lone write runs alone as before.

Events are stored with the write that made them (the last `stream_length` per task) and
announced by NOTIFY in the same transaction; `watch` registers with this replica's listener
first, then reads the snapshot with its last event's sequence, and passes on only later events:
no gap, no repeat, and no polling.

Failures: every round trip is bounded by `timeout`; a refused or slow one raises
StoreUnavailableError and turns `healthy` off until a probe gets through again (backend.py).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from a2a_grpc.core.errors import EventIdExpiredError, StatusError
from a2a_grpc.core.ids import new_id
from a2a_grpc.core.states import INTERRUPTED_STATES, SETTLED_STATES, TERMINAL_STATES
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.base import (
    REPLICA_STOPPED_TEXT,
    EventBuilder,
    FirstStatus,
    Scope,
    StoreListener,
    StoreStats,
    StoreUnavailableError,
    TaskBusyError,
    TaskFinishedError,
    TaskQuery,
    Webhooks,
)
from a2a_grpc.server.tasks.broker import REPLAY_BATCH, Subscription
from a2a_grpc.server.tasks.changes import StatusClock, apply_status, status_event
from a2a_grpc.server.tasks.index import trim_history
from a2a_grpc.server.tasks.postgres import reads, schema, writes
from a2a_grpc.server.tasks.postgres.backend import (
    MAX_CONNECTIONS,
    STORE_LOGGER,
    Connection,
    PostgresBackend,
)
from a2a_grpc.server.tasks.postgres.batch import CREATE, UPDATE, WriteBatch
from a2a_grpc.server.tasks.postgres.claims import PostgresClaims
from a2a_grpc.server.tasks.postgres.events import (
    Listener,
    Replayed,
    ReplayedPage,
    event_payload,
    notice_payload,
)
from a2a_grpc.server.tasks.postgres.leases import Leases
from a2a_grpc.server.tasks.postgres.push import Deliveries, PostgresPushConfigs
from a2a_grpc.server.tasks.postgres.reads import Loaded
from a2a_grpc.server.tasks.postgres.room import Room
from a2a_grpc.server.tasks.replay_ids import no_longer_kept, not_an_id, parse_sequence
from a2a_grpc.server.tasks.sealing import CredentialKeys, PushConfigCodec

log = logging.getLogger(STORE_LOGGER)

__all__ = ["REPLICA_STOPPED_TEXT", "PostgresTaskStore"]

SETTLED_COPIES = 4096
"""Tasks this replica settled whose last write it keeps for `SETTLED_COPY_AGE` seconds, for
the blocking caller's reply (`copy_into`, a moment later)."""
SETTLED_COPY_AGE = 1.0


class _VersionMoved(Exception):
    """Another replica wrote the task since this one read it (`state`: what is stored now, 0
    when it is gone)."""

    def __init__(self, task_id: str, state: int) -> None:
        super().__init__(task_id, state)
        self.task_id = task_id
        self.state = state

    def finished(self) -> TaskFinishedError:
        """Only a cancel or a reaper (terminal states) writes over a running task, or its
        deletion (no state: reported as CANCELED)."""
        return TaskFinishedError(self.task_id, self.state or a2a_pb2.TASK_STATE_CANCELED)


@dataclass(slots=True)
class _Owned:
    """A task this replica's run works on: the store's last write of it, its version, its last
    event's sequence and its ListTasks time."""

    task: a2a_pb2.Task
    scope: Scope
    version: int
    last_event: int
    updated_ns: int


class PostgresTaskStore:
    """Tasks in PostgreSQL, shared by every replica that uses the same database. See the module
    docstring; `connect` builds one from a URL."""

    stopped_run_status: tuple[int, str | None] = (a2a_pb2.TASK_STATE_FAILED, REPLICA_STOPPED_TEXT)
    """Another replica takes the next request: a run cut short by a stop ends as the lease
    reaper ends those of a replica that died (spec decision §9.11)."""

    def __init__(
        self,
        backend: PostgresBackend,
        *,
        listener: StoreListener | None = None,
        webhooks: Webhooks | None = None,
        max_tasks: int = 100_000,
        max_live_per_owner: int | None = None,
        max_live_per_tenant: int | None = None,
        terminal_ttl: float = 3600.0,
        lease: float = 10.0,
        queue_size: int = 1024,
        stream_length: int = 1000,
        push_credentials: CredentialKeys | None = None,
        migrate: bool = True,
        migrations: tuple[schema.Migration, ...] = schema.MIGRATIONS,
    ) -> None:
        """`listener` hears of evicted tasks and of remote cancels of this replica's runs (the
        backend tells its health to the `on_health` it was given). `webhooks` delivers the
        events this replica writes to their tasks' webhooks. `push_credentials`: the keys push
        configs' secrets are sealed with (tasks/sealing.py; None: stored as written).
        `migrate`: `start` brings the schema to the last of `migrations` (this release's),
        else it must be there already."""
        self.backend = backend
        self.max_tasks = max_tasks
        self.terminal_ttl = terminal_ttl
        self.lease = lease
        self.stream_length = stream_length
        self.migrate = migrate
        self.migrations = migrations
        self._owned: dict[str, _Owned] = {}
        self._stamp = StatusClock().stamp
        self.batch = WriteBatch(backend)
        """The writes of every message (claim, reservation, creation, updates), committed
        together with concurrent ones (batch.py)."""
        self.events = Listener(
            backend,
            queue_size,
            on_remote_cancel=None if listener is None else listener.canceled_elsewhere,
        )
        backend.after_outage(self.events.restart)
        self.push_configs = PostgresPushConfigs(backend, PushConfigCodec(push_credentials))
        self.deliveries = Deliveries(backend, self.push_configs, webhooks)
        self.room = Room(
            backend,
            self.batch,
            max_tasks=max_tasks,
            max_live_per_owner=max_live_per_owner,
            max_live_per_tenant=max_live_per_tenant,
            on_evict=None if listener is None else listener.task_evicted,
        )
        self.leases = Leases(backend, lease=lease, on_dead=self._reap)
        self.claims = PostgresClaims(backend, self.batch, self.events, self.room)
        """The message-id claims of the idempotency window shared by replicas."""
        self._settled_copies: OrderedDict[str, tuple[Scope, bytes, float]] = OrderedDict()
        self._started = False

    @classmethod
    def connect(
        cls,
        url: str,
        *,
        timeout: float = 2.0,
        replica_id: str | None = None,
        listener: StoreListener | None = None,
        max_connections: int = MAX_CONNECTIONS,
        busy_wait: float | None = None,
        **options: Any,
    ) -> PostgresTaskStore:
        """A store on the database at `url` (postgresql:// or postgres://, libpq's URL: user,
        password, host or Unix socket directory, port, database, and parameters such as
        sslmode); its backend tells `listener` of its health. `max_connections` and
        `busy_wait`: see backend.py."""
        backend = PostgresBackend(
            url,
            timeout=timeout,
            replica_id=replica_id,
            on_health=None if listener is None else listener.health_changed,
            max_connections=max_connections,
            busy_wait=busy_wait,
        )
        return cls(backend, listener=listener, **options)

    # -- the parts' state, as the server and the tests read it -------------------------------

    @property
    def replica_id(self) -> str:
        return self.backend.replica_id

    @property
    def healthy(self) -> bool:
        return self.backend.healthy

    @property
    def webhooks(self) -> Webhooks | None:
        return self.deliveries.webhooks

    @property
    def failures(self) -> int:
        return self.backend.outage.failures + self.leases.failures.failures

    # -- room -----------------------------------------------------------------------------

    async def reserve(self, scope: Scope, size: int, task_id: str) -> None:
        await self.room.reserve(scope, task_id)

    async def release(self, scope: Scope, task_id: str) -> None:
        await self.room.release(task_id)

    # -- writes ---------------------------------------------------------------------------

    def _write(
        self,
        owned: _Owned,
        events: list[a2a_pb2.StreamResponse],
        *,
        flags: str = "",
        runner: str | None = None,
    ) -> writes.Write:
        """The write of `owned.task` as it stands, with `events` (the last one with `flags`);
        what the task's state settles goes with it."""
        task = owned.task
        state = task.status.state
        terminal = state in TERMINAL_STATES
        park = ""
        if state in SETTLED_STATES:
            runner = ""
            park = "unpark" if terminal else "park"
        elif runner is not None and runner:
            park = "unpark"
        encoded = [(event.SerializeToString(), "") for event in events]
        if encoded:
            encoded[-1] = (encoded[-1][0], flags)
        return writes.Write(
            task_id=task.id,
            version=owned.version,
            body=task.SerializeToString(),
            state=state,
            updated_ns=owned.updated_ns,
            last_event=owned.last_event,
            events=encoded,
            runner=runner,
            terminal=terminal,
            park=park,
            ttl=self.terminal_ttl,
            deliverer=None if self.deliveries.webhooks is None else self.backend.replica_id,
            keep_events=self.stream_length,
        )

    async def _apply(
        self,
        owned: _Owned,
        write: writes.Write,
        events: list[a2a_pb2.StreamResponse],
        *,
        create: bool = False,
        connection: Connection | None = None,
    ) -> int:
        """Runs `write` (on `connection`, inside the caller's transaction, when given) and
        records the new version; returns the push configs' version. _VersionMoved when the
        version moved (the task is let go)."""
        task_id = owned.task.id
        if create:
            write.tenant = owned.scope.tenant
            write.owner = owned.scope.owner
            write.context_id = owned.task.context_id
            statement = writes.CREATE
        else:
            statement = writes.UPDATE
        if connection is None:
            order = (CREATE if create else UPDATE) + task_id
            row = await self.batch.fetchone(statement, write, order)
        else:
            row = await statement.one(connection, write)
        if row is None:
            self._owned.pop(task_id, None)
            now = await self.backend.fetchone(writes.STATE_OF, (task_id,))
            raise _VersionMoved(task_id, 0 if now is None else int(now[0]))
        owned.version = 0 if create else owned.version + 1
        owned.last_event = int(row[0])
        return int(row[1])

    async def _deliver(
        self, owned: _Owned, events: list[a2a_pb2.StreamResponse], push_version: int
    ) -> None:
        """The events just written go to the task's webhooks (the writer delivers them)."""
        if not events or self.deliveries.webhooks is None or not push_version:
            return
        first = owned.last_event - len(events) + 1
        terminal = owned.task.status.state in TERMINAL_STATES
        for offset, event in enumerate(events):
            last = offset == len(events) - 1
            await self.deliveries.deliver(
                owned.task.id, push_version, event, terminal and last, first + offset, owned.task
            )

    def _settled(self, owned: _Owned) -> None:
        task = owned.task
        if task.status.state not in SETTLED_STATES:
            return
        self._owned.pop(task.id, None)
        self._settled_copies[task.id] = (owned.scope, task.SerializeToString(), time.monotonic())
        if len(self._settled_copies) > SETTLED_COPIES:
            self._settled_copies.popitem(last=False)

    async def create(
        self,
        task: a2a_pb2.Task,
        scope: Scope,
        *,
        reserved_size: int,
        first_status: FirstStatus | None = None,
    ) -> bool:
        owned = _Owned(task, scope, -1, 0, self._stamp(task.status))
        events = [a2a_pb2.StreamResponse(task=task)]  # a copy: the task as it was given
        flags = ""
        if first_status is not None:
            state, message, event_metadata = first_status
            apply_status(task, state, message)
            owned.updated_ns = self._stamp(task.status)
            events.append(status_event(task, event_metadata))
            flags = _flags(state)
        write = self._write(owned, events, flags=flags, runner=self.backend.replica_id)
        try:
            push_version = await self._apply(owned, write, events, create=True)
        except _VersionMoved as moved:
            raise moved.finished() from None
        self._owned[task.id] = owned
        await self._deliver(owned, events, push_version)
        self._settled(owned)
        return False

    async def set_status(
        self,
        task_id: str,
        state: int,
        message: a2a_pb2.Message | None = None,
        *,
        event_metadata: dict[str, Any] | None = None,
        force_room: bool = False,  # no byte budget here (base.py): nothing to count
    ) -> bool:
        owned = self._owned.get(task_id) or await self._adopt(task_id)
        if owned.task.status.state in TERMINAL_STATES:
            self._owned.pop(task_id, None)
            raise TaskFinishedError(task_id, owned.task.status.state)
        apply_status(owned.task, state, message)
        owned.updated_ns = self._stamp(owned.task.status)
        events = [status_event(owned.task, event_metadata)]
        write = self._write(owned, events, flags=_flags(state))
        try:
            push_version = await self._apply(owned, write, events)
        except _VersionMoved as moved:
            raise moved.finished() from None
        except BaseException:
            self._owned.pop(task_id, None)  # not written (or not known to be): read it again
            raise
        await self._deliver(owned, events, push_version)
        self._settled(owned)
        return False  # each write awaits the database: the readers get their turn anyway

    async def update(
        self,
        task_id: str,
        mutate: Callable[[a2a_pb2.Task], None],
        event: EventBuilder | None = None,
        *,
        size: int = 0,  # no byte budget here (base.py): nothing to count
    ) -> bool:
        owned = self._owned.get(task_id) or await self._adopt(task_id)
        state = owned.task.status.state
        if state in TERMINAL_STATES:
            self._owned.pop(task_id, None)
            raise TaskFinishedError(task_id, state)
        mutate(owned.task)
        events = [] if event is None else [event()]
        try:
            push_version = await self._apply(owned, self._write(owned, events), events)
        except _VersionMoved as moved:
            raise moved.finished() from None
        except BaseException:
            self._owned.pop(task_id, None)
            raise
        await self._deliver(owned, events, push_version)
        return False

    async def _adopt(self, task_id: str) -> _Owned:
        """Reads a task this replica writes without having created it."""
        loaded = await reads.load(self.backend, task_id)
        if loaded is None:
            raise TaskFinishedError(task_id, a2a_pb2.TASK_STATE_CANCELED)
        owned = _owned_from(loaded)
        self._owned[task_id] = owned
        return owned

    async def reply(self, task_id: str, message: a2a_pb2.Message) -> None:
        body = a2a_pb2.StreamResponse(message=message).SerializeToString()
        await self.backend.execute(
            "WITH kept AS (INSERT INTO a2a_replies VALUES (%(id)s, %(body)s, clock_timestamp() "
            "+ make_interval(secs => %(ttl)s)) ON CONFLICT (task_id) DO UPDATE SET "
            "body = EXCLUDED.body, expires_at = EXCLUDED.expires_at RETURNING 1) "
            "SELECT pg_notify('a2a_events', %(payload)s) FROM kept",
            {
                "id": task_id,
                "body": body,
                "ttl": self.terminal_ttl,
                "payload": event_payload(task_id, 1, "t", body),
            },
        )

    async def withdraw(
        self,
        task_id: str,
        scope: Scope,
        error: StatusError,
        waiting: tuple[int, a2a_pb2.Message] | None = None,
    ) -> None:
        if waiting is None:  # the task goes first: a stream opened after finds none
            self._owned.pop(task_id, None)
            self._settled_copies.pop(task_id, None)
            await self.room.forget([task_id])
        # Not an event of the task (nothing is stored): a notice to the replicas' listeners
        # (events.py), sent after the run's last event.
        await self.backend.execute(
            "SELECT pg_notify('a2a_events', %s)",
            (notice_payload(task_id, waiting is None, error),),
        )
        if waiting is not None:  # send streams ended above: this reaches subscribers alone
            await self.set_status(task_id, *waiting)

    async def resume(
        self, task_id: str, scope: Scope, message: a2a_pb2.Message
    ) -> a2a_pb2.Task | None:
        async def locked(connection: Connection) -> tuple[a2a_pb2.Task, _Owned, int] | None:
            loaded = await reads.load_locked(connection, task_id)
            if loaded is None or loaded.scope != scope:
                return None
            state = loaded.task.status.state
            if state in TERMINAL_STATES:
                raise TaskFinishedError(task_id, state)
            if loaded.runner or state not in INTERRUPTED_STATES:
                raise TaskBusyError(task_id)
            before = a2a_pb2.Task()
            before.CopyFrom(loaded.task)
            stored = loaded.task.history.add()
            stored.CopyFrom(message)
            stored.task_id = task_id
            stored.context_id = loaded.task.context_id
            owned = _owned_from(loaded)
            apply_status(owned.task, a2a_pb2.TASK_STATE_SUBMITTED, None)
            owned.updated_ns = self._stamp(owned.task.status)
            events = [status_event(owned.task, None)]
            write = self._write(owned, events, runner=self.backend.replica_id)
            push_version = await self._apply(owned, write, events, connection=connection)
            return before, owned, push_version

        resumed = await self.backend.transaction(locked)
        if resumed is None:
            return None
        before, owned, push_version = resumed
        self._owned[task_id] = owned
        await self._deliver(owned, [status_event(owned.task, None)], push_version)
        return before

    async def cancel(
        self, task_id: str, scope: Scope, message: a2a_pb2.Message | None = None
    ) -> a2a_pb2.Task | None:
        async def locked(connection: Connection) -> tuple[_Owned, str, int] | None:
            loaded = await reads.load_locked(connection, task_id)
            if loaded is None or loaded.scope != scope:
                return None
            return await self._end(connection, loaded, a2a_pb2.TASK_STATE_CANCELED, message)

        ended = await self.backend.transaction(locked)
        if ended is None:
            return None
        return await self._ended(*ended)

    async def _end(
        self,
        connection: Connection,
        loaded: Loaded,
        state: int,
        message: a2a_pb2.Message | None,
    ) -> tuple[_Owned, str, int]:
        """Writes `state` over a task locked in the caller's transaction and tells its runner
        on another replica (the notification goes out as the transaction commits).
        TaskFinishedError when it is terminal."""
        task = loaded.task
        if task.status.state in TERMINAL_STATES:
            raise TaskFinishedError(task.id, task.status.state)
        if message is not None:
            message.context_id = task.context_id
        owned = _owned_from(loaded)
        apply_status(owned.task, state, message)
        owned.updated_ns = self._stamp(owned.task.status)
        events = [status_event(owned.task, None)]
        write = self._write(owned, events, flags=_flags(state))
        push_version = await self._apply(owned, write, events, connection=connection)
        runner = loaded.runner
        if runner and runner != self.backend.replica_id:
            await connection.execute(
                "SELECT pg_notify('a2a_cancel', %s)", (f"{runner}\n{task.id}",)
            )
        return owned, runner, push_version

    async def _ended(self, owned: _Owned, runner: str, push_version: int) -> a2a_pb2.Task:
        """After `_end` committed: this replica's own run stops, webhooks hear of it."""
        task_id = owned.task.id
        self._owned.pop(task_id, None)
        if runner == self.backend.replica_id and self.events.on_remote_cancel is not None:
            self.events.on_remote_cancel(task_id)
        await self._deliver(owned, [status_event(owned.task, None)], push_version)
        result = a2a_pb2.Task()
        result.CopyFrom(owned.task)
        return result

    async def cancel_parked(self, task_id: str, message: a2a_pb2.Message) -> Scope | None:
        async def locked(connection: Connection) -> tuple[_Owned, str, int] | None:
            loaded = await reads.load_locked(connection, task_id)
            if loaded is None:
                return None
            if loaded.runner or loaded.task.status.state not in INTERRUPTED_STATES:
                await connection.execute(
                    "UPDATE a2a_tasks SET parked_at = NULL WHERE id = %s", (task_id,)
                )
                return None
            return await self._end(connection, loaded, a2a_pb2.TASK_STATE_CANCELED, message)

        ended = await self.backend.transaction(locked)
        if ended is None:
            return None
        await self._ended(*ended)
        return ended[0].scope

    # -- reads ----------------------------------------------------------------------------

    async def get(
        self, task_id: str, scope: Scope, *, history_length: int | None = None
    ) -> a2a_pb2.Task | None:
        task = a2a_pb2.Task()
        found = await reads.read_into(self.backend, task_id, scope, task, history_length)
        return task if found else None

    async def copy_into(
        self,
        task_id: str,
        scope: Scope,
        target: a2a_pb2.Task,
        *,
        history_length: int | None = None,
    ) -> bool:
        settled = self._settled_copies.pop(task_id, None)
        if (
            settled is not None
            and settled[0] == scope
            and time.monotonic() - settled[2] < SETTLED_COPY_AGE
        ):
            target.ParseFromString(settled[1])
            trim_history(target, history_length)
            return True
        return await reads.read_into(self.backend, task_id, scope, target, history_length)

    async def list(self, scope: Scope, query: TaskQuery) -> a2a_pb2.ListTasksResponse:
        return await reads.list_page(self.backend, scope, query)

    async def watch(
        self, task_id: str, scope: Scope, *, until_terminal: bool, after: str | None = None
    ) -> tuple[a2a_pb2.Task, Subscription] | None:
        subscription = self.events.open(task_id, until_terminal)
        try:
            if after is not None:
                return await self._replayed(task_id, scope, subscription, after)
            row = await self.backend.fetchone(
                "SELECT body, tenant, owner, last_event FROM a2a_tasks "
                "WHERE id = %s AND body IS NOT NULL",
                (task_id,),
            )
        except BaseException:
            subscription.cancel()
            raise
        if row is None or Scope(row[1], row[2]) != scope:
            subscription.cancel()
            return None
        subscription.snapshot_id = str(row[3])
        self.events.start_after(subscription, int(row[3]))
        return a2a_pb2.Task.FromString(row[0]), subscription

    async def _replayed(
        self, task_id: str, scope: Scope, subscription: Subscription, after: str
    ) -> tuple[a2a_pb2.Task, Subscription] | None:
        """`watch(after=)`: the kept events after the id, then the live ones."""
        seq = parse_sequence(after)
        count = min(REPLAY_BATCH, subscription.room)
        try:
            row, events = await self._replay_page(task_id, scope, seq, after, count)
        except BaseException:
            subscription.cancel()
            raise
        if row is None:
            subscription.cancel()
            return None
        assert seq is not None  # "ok" only for a sequence
        subscription.snapshot_id = after

        async def next_page(cursor: int, count: int) -> ReplayedPage:
            row, events = await self._replay_page(task_id, scope, cursor, str(cursor), count)
            if row is None:
                raise EventIdExpiredError(
                    f"task {task_id} is no longer stored: its events after {cursor} are gone"
                )
            return events, int(row[3]) in TERMINAL_STATES

        self.events.replay(
            subscription,
            seq,
            events,
            int(row[3]) in TERMINAL_STATES,
            more=count,
            next_page=next_page,
        )
        return a2a_pb2.Task.FromString(row[0]), subscription

    async def _replay_page(
        self, task_id: str, scope: Scope, seq: int | None, after: str, count: int
    ) -> tuple[Any, Sequence[Replayed]]:
        """The task's row and `count` kept events after `seq`; (None, ()) when the task is
        not stored in `scope`; EventIdExpiredError when they are not all kept."""
        row, verdict, events = await reads.replay(self.backend, task_id, seq, count)
        if row is None or Scope(row[1], row[2]) != scope:
            return None, ()
        if verdict != "ok":
            if verdict == "unknown":
                raise not_an_id(task_id, after)
            raise no_longer_kept(task_id, after, self.stream_length)
        return row, events

    async def subscribe(self, task_id: str) -> Subscription:
        subscription = self.events.open(task_id, until_terminal=False)
        self.events.start_after(subscription, 0)
        return subscription

    # -- housekeeping ---------------------------------------------------------------------

    async def parked_longer_than(self, seconds: float) -> Sequence[str]:
        return await self.room.parked_longer_than(seconds)

    async def stats(self) -> StoreStats:
        """The stored tasks only (one row of `a2a_counts`)."""
        return StoreStats(await self.room.count(), None, None)

    async def evict_expired(self) -> int:
        return await self.room.evict_expired()

    async def start(self) -> None:
        """Checks that the database answers (StoreUnavailableError otherwise), brings its
        schema to this release's version (ValueError when it cannot: a newer schema, or a user
        that may not change it), opens the listener and starts the lease keeper."""
        await self.backend.start()
        needed = self.migrations[-1].version
        async with self.backend.dedicated() as connection:
            if self.migrate:
                try:
                    await schema.migrate(connection, self.migrations)
                except psycopg.OperationalError as exc:
                    raise StoreUnavailableError(f"migrating its schema failed: {exc}") from exc
                except psycopg.Error as exc:  # e.g. a user that may not create tables
                    raise ValueError(
                        f"its schema could not be migrated to version {needed}: "
                        f"{type(exc).__name__}: {str(exc).strip()}"
                    ) from exc
            elif (found := await schema.schema_version(connection)) != needed:
                raise schema.SchemaTooNewError(
                    f"the database's a2a schema is at version {found}, this release needs "
                    f"{needed}: run `a2a-grpc store migrate URL`"
                )
        await self.events.start()
        await self.leases.start()
        self._started = True

    async def _reap(self, replica: str) -> None:
        """Goes on with the stopped `replica`'s webhook deliveries, gives back the room it had
        reserved for tasks it never created, then marks FAILED every task it was running (spec
        decision §9.11)."""
        await self.deliveries.take_over(replica)
        await self.backend.execute(
            "WITH released AS (DELETE FROM a2a_tasks WHERE runner = %s AND body IS NULL "
            "RETURNING 1) UPDATE a2a_counts SET tasks = tasks - (SELECT count(*) FROM released) "
            "WHERE id = 1",
            (replica,),
        )
        orphans = await self.backend.fetchall(
            "SELECT id FROM a2a_tasks WHERE runner = %s AND body IS NOT NULL", (replica,)
        )
        failed = 0
        for (task_id,) in orphans:

            async def locked(
                connection: Connection, task_id: str = task_id
            ) -> tuple[_Owned, str, int] | None:
                loaded = await reads.load_locked(connection, task_id)
                if loaded is None or loaded.runner != replica:
                    return None
                text = a2a_pb2.Message(
                    message_id=new_id(), role=a2a_pb2.ROLE_AGENT, task_id=task_id
                )
                text.parts.add().text = REPLICA_STOPPED_TEXT
                return await self._end(connection, loaded, a2a_pb2.TASK_STATE_FAILED, text)

            with contextlib.suppress(TaskFinishedError):
                ended = await self.backend.transaction(locked)
                if ended is not None:
                    await self._ended(*ended)
                    failed += 1
        if failed:
            log.warning("replica %s stopped: %d of its tasks were marked FAILED", replica, failed)

    def abandon(self) -> None:
        """Stops renewing this replica's lease and leaves everything as it is, as a crash
        would: within the lease another replica takes over."""
        self.backend.closing = True
        self.leases.abandon()

    async def close(self) -> None:
        """Stops the lease keeper and the listener, and lets this replica's lease run out now:
        the next replica to renew its own lease takes over what is left."""
        self.backend.closing = True
        self.backend.stop_probe()
        if self._started:  # a store that never started holds no lease (nor, maybe, tables)
            await self.leases.close()
        await self.events.close()
        await self.backend.close()


def _flags(state: int) -> str:
    return "t" if state in TERMINAL_STATES else "i" if state in INTERRUPTED_STATES else ""


def _owned_from(loaded: Loaded) -> _Owned:
    return _Owned(loaded.task, loaded.scope, loaded.version, loaded.last_event, loaded.updated_ns)
