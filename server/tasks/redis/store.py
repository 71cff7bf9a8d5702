"""The shared task store: tasks, their events, leases and message ids in Redis (or Valkey), so
every replica serves every task. Keeps the `TaskStore` contract (base.py). This module is the
contract's writes and the facade over the store's parts, each of which takes the backend:

- backend.py: the client and its cluster switch, the key names (keys.py), the scripts
  (scripts.py), health;
- room.py: room and fair shares; eviction.py: tasks leaving the store;
- reads.py: one task, ListTasks; events.py: the pub/sub reader and remote outcomes;
- deliveries.py: webhook delivery and takeover; push.py: push configs;
- leases.py: replica leases and reaping; claims.py: message-id claims.

Events travel twice, in one atomic script with the write that made them: appended to the task's
stream (the record: a cursor for every reader, trimmed, expired with the task) and published on
the task's channel `a2a:ev:<task>` with their stream id. Each replica reads every channel it
needs on ONE pub/sub connection (`EventReader`, events.py) and fans events out to its local
streams; `watch` subscribes first, then reads the snapshot with the id of its last event, and
passes on only events after that id: no gap, no repeat, and no polling. A finished task
without webhooks drops its stream at once (nothing reads it any more).

Writes: the run working on a task keeps the task in memory (`_Owned`) and writes it whole with
the version it read; a version that moved means another replica canceled it (or a reaper failed
it), which raises TaskFinishedError. When a replica's lease runs out (leases.py), the replica
that reaps it fails the tasks it was running, with a status message saying why (spec decision
§9.11), and goes on with its webhook deliveries.

Failures: every Redis call is bounded by `timeout`; a refused or slow call raises
StoreUnavailableError and turns `healthy` off until a probe gets through again (backend.py).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from a2a_grpc.core import status
from a2a_grpc.core.errors import StatusError
from a2a_grpc.core.ids import new_id
from a2a_grpc.core.states import INTERRUPTED_STATES, SETTLED_STATES, TERMINAL_STATES
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.base import (
    REPLICA_STOPPED_TEXT,
    EventBuilder,
    FirstStatus,
    Scope,
    StoreFullError,
    StoreListener,
    StoreStats,
    StoreUnavailableError,
    TaskBusyError,
    TaskFinishedError,
    TaskQuery,
    Webhooks,
)
from a2a_grpc.server.tasks.broker import Subscription
from a2a_grpc.server.tasks.changes import StatusClock, apply_status, status_event
from a2a_grpc.server.tasks.index import trim_history
from a2a_grpc.server.tasks.redis import reads, replays
from a2a_grpc.server.tasks.redis.backend import STORE_LOGGER, RedisBackend, ScriptCall
from a2a_grpc.server.tasks.redis.claims import RedisClaims
from a2a_grpc.server.tasks.redis.deliveries import Deliveries
from a2a_grpc.server.tasks.redis.events import EventReader
from a2a_grpc.server.tasks.redis.eviction import Eviction
from a2a_grpc.server.tasks.redis.keys import Keys, index_member
from a2a_grpc.server.tasks.redis.leases import Leases
from a2a_grpc.server.tasks.redis.push import RedisPushConfigs
from a2a_grpc.server.tasks.redis.reads import Loaded
from a2a_grpc.server.tasks.redis.room import Room
from a2a_grpc.server.tasks.sealing import CredentialKeys, PushConfigCodec

log = logging.getLogger(STORE_LOGGER)

__all__ = ["REPLICA_STOPPED_TEXT", "RedisTaskStore"]

SETTLED_COPIES = 4096
"""Tasks this replica settled whose last write it keeps for `SETTLED_COPY_AGE` seconds, for
the blocking caller's reply (`copy_into`, a moment later): one read of Redis less per blocking
SendMessage."""
SETTLED_COPY_AGE = 1.0
STREAMED_MARKS = 65_536
"""Send streams opened here whose task's first write is still to come, at most (see
`_streamed`)."""


class _VersionMoved(Exception):
    """Another replica wrote the task since this one read it (`state`: what is stored now)."""

    def __init__(self, task_id: str, state: int) -> None:
        super().__init__(task_id, state)
        self.task_id = task_id
        self.state = state

    def finished(self) -> TaskFinishedError:
        """For the run's own writes: only a cancel or a reaper (terminal states) writes over a
        running task, or its deletion (no state: reported as CANCELED)."""
        return TaskFinishedError(self.task_id, self.state or a2a_pb2.TASK_STATE_CANCELED)


class _Stopped(_VersionMoved):
    """A cancel is in progress (STOP): only forced writes change the task now."""


@dataclass(slots=True)
class _Owned:
    """A task this replica's run works on: the store's last write of it, and its version."""

    task: a2a_pb2.Task
    scope: Scope
    version: int
    member: str  # its ListTasks index member as written
    written_to: tuple[list[str], str] | None = None
    """The task's keys (`Keys.of_task`) and event channel, named at its first write."""


@dataclass(slots=True)
class _Creation:
    """A task's creating WRITE, written in one batch with its first status change."""

    write: ScriptCall
    member: str
    event: a2a_pb2.StreamResponse


class RedisTaskStore:
    """Tasks in Redis, shared by every replica that uses the same Redis. See the module
    docstring; `connect` builds one from a URL."""

    stopped_run_status: tuple[int, str | None] = (a2a_pb2.TASK_STATE_FAILED, REPLICA_STOPPED_TEXT)
    """Another replica takes the next request: a run cut short by a stop ends as the lease
    reaper ends those of a replica that died (spec decision §9.11)."""

    def __init__(
        self,
        backend: RedisBackend,
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
    ) -> None:
        """`listener` hears of evicted tasks and of remote cancels of this replica's runs
        (the backend tells its health to the `on_health` it was given; `connect` gives it the
        listener's). `webhooks` delivers the events this replica writes to their tasks'
        webhooks (None when the agent offers no push notifications). `push_credentials`: the keys
        push configs' secrets are sealed with (tasks/sealing.py; None: stored as written)."""
        self.backend = backend
        self.max_tasks = max_tasks
        self.terminal_ttl = terminal_ttl
        self.lease = lease
        self.stream_length = stream_length
        # One entry more than the events kept: the oldest is the last one let go of, which a
        # stream may still resume after (nothing after it is gone); Redis does not tell which
        # entry a trim took last (XINFO's max-deleted-entry-id follows XDEL only).
        self._trim_length = stream_length + 1
        self._owned: dict[str, _Owned] = {}
        self._stamp = StatusClock().stamp
        self._listener = listener
        self.events = EventReader(backend, queue_size, on_remote_cancel=self._canceled_elsewhere)
        backend.after_outage(self.events.restart)
        self.push_configs = RedisPushConfigs(backend, PushConfigCodec(push_credentials))
        self.deliveries = Deliveries(backend, self.push_configs, webhooks)
        self.eviction = Eviction(
            backend,
            self.deliveries,
            on_evict=None if listener is None else listener.task_evicted,
        )
        self.room = Room(
            backend,
            self.eviction,
            max_tasks=max_tasks,
            max_live_per_owner=max_live_per_owner,
            max_live_per_tenant=max_live_per_tenant,
            terminal_ttl=terminal_ttl,
        )
        self.leases = Leases(backend, lease=lease, on_dead=self._reap)
        self.claims = RedisClaims(backend, self.events)
        """The message-id claims of the idempotency window shared by replicas."""
        self._settled_copies: OrderedDict[str, tuple[Scope, bytes, float]] = OrderedDict()
        # Tasks a send stream here follows from their first event: the next write marks them
        # (field rs), so their stream is kept after they finish, for resumed streams.
        self._streamed: set[str] = set()

    def _canceled_elsewhere(self, task_id: str) -> None:
        """A run here was canceled (on any replica): it writes no more, so its `_Owned` goes."""
        self._owned.pop(task_id, None)
        if self._listener is not None:
            self._listener.canceled_elsewhere(task_id)

    @classmethod
    def connect(
        cls,
        url: str,
        *,
        timeout: float = 2.0,
        prefix: str = "a2a",
        replica_id: str | None = None,
        listener: StoreListener | None = None,
        cluster: bool = False,
        **options: Any,
    ) -> RedisTaskStore:
        """A store on the Redis at `url` (redis://, rediss://, unix://; password in the URL),
        under the key `prefix`; its backend tells `listener` of its health. With `cluster`,
        `start` refuses a Redis that is not a Cluster node (without, it finds one by itself).

        No retries inside the client: a refused call fails within `timeout` and the caller's
        own retry (our client honours RetryInfo) decides.
        """
        backend = RedisBackend.connect(
            url,
            timeout=timeout,
            prefix=prefix,
            replica_id=replica_id,
            on_health=None if listener is None else listener.health_changed,
            cluster=cluster,
        )
        return cls(backend, listener=listener, **options)

    # -- the parts' state, as the server and the tests read it -------------------------------

    @property
    def client(self) -> Any:
        return self.backend.client

    @property
    def keys(self) -> Keys:
        return self.backend.keys

    @property
    def pubsub_client(self) -> Any:
        return self.backend.pubsub_client

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
        await self.room.reserve(scope, size, task_id)

    async def release(self, scope: Scope, task_id: str) -> None:
        await self.room.settle(task_id, scope, "release")

    # -- writes ---------------------------------------------------------------------------

    async def create(
        self,
        task: a2a_pb2.Task,
        scope: Scope,
        *,
        reserved_size: int,
        first_status: FirstStatus | None = None,
    ) -> bool:
        task_id = task.id
        member = index_member(self._stamp(task.status), task_id)
        owned = _Owned(task, scope, -1, "")
        event = a2a_pb2.StreamResponse(task=task)
        extra = ["tenant", scope.tenant, "owner", scope.owner, "ctx", task.context_id]
        write = self._write_call(owned, member, event, "", self.backend.replica_id, extra)
        if first_status is not None:
            # One batch for the creation and the status change: one Redis command instead of
            # two on a standalone Redis (with BATCH: ghz c=32, 1284 -> 1481 req/s on Redis).
            self._owned[task_id] = owned
            state, message, event_metadata = first_status
            creation = _Creation(write, member, event)
            await self._change_status(
                owned, state, message, event_metadata, runner=None, creation=creation
            )
            return False
        written, _ = await self.backend.batch(
            [write, self._index_call(scope, task, "", -1, member)]
        )
        await self._written(owned, member, event, written)
        self._owned[task_id] = owned
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
        owned = self._owned.get(task_id)
        if owned is None:
            owned = await self._adopt(task_id)
        try:
            await self._change_status(owned, state, message, event_metadata, runner=None)
        except _VersionMoved as moved:
            raise await self._refused(moved) from None
        except (StoreFullError, StoreUnavailableError):
            # Not written (or not known to be): the copy holds the change, so the task is read
            # again for the next write, which otherwise would find it already in `state`.
            self._owned.pop(task_id, None)
            raise
        return False  # each write awaits Redis: the readers get their turn anyway

    async def _change_status(
        self,
        owned: _Owned,
        state: int,
        message: a2a_pb2.Message | None,
        event_metadata: dict[str, Any] | None,
        *,
        runner: str | None,
        force: bool = False,
        creation: _Creation | None = None,
        ran_on: str | None = None,
    ) -> None:
        """Writes a status change of `owned` (its runner too, when given), after its
        `creation` in the same batch when given; `ran_on`: the replica running it, if not this
        one. _VersionMoved when another replica wrote the task since it was read (`_write`)."""
        task = owned.task
        previous_state = task.status.state
        calls: list[ScriptCall] = []
        if creation is not None:
            calls.append(creation.write)
            owned.version += 1  # what the creation's write makes it, before the next one
        apply_status(task, state, message)
        member = index_member(self._stamp(task.status), task.id)
        event = status_event(task, event_metadata)
        terminal = state in TERMINAL_STATES
        flags = "t" if terminal else "i" if state in INTERRUPTED_STATES else ""
        if runner is None:
            runner = "" if state in SETTLED_STATES else "-"
        calls += (
            self._write_call(owned, member, event, flags, runner, [], terminal, force),
            self._index_call(owned.scope, task, owned.member, previous_state, member),
        )
        if terminal:
            calls.append(self.room.settle_call(task.id, owned.scope, "terminal", ran_on))
        elif state in INTERRUPTED_STATES:
            calls.append(self.room.settle_call(task.id, owned.scope, "interrupted", ran_on))
        results = await self.backend.batch(calls)
        if creation is not None:
            await self._written(owned, creation.member, creation.event, results[0])
            results = results[1:]
        await self._written(owned, member, event, results[0], terminal)
        if state in SETTLED_STATES:
            self._owned.pop(task.id, None)
            copies, now = self._settled_copies, time.monotonic()  # expired ones go as new come
            copies[task.id] = (owned.scope, task.SerializeToString(), now + SETTLED_COPY_AGE)
            while len(copies) > SETTLED_COPIES or next(iter(copies.values()))[2] < now:
                copies.popitem(last=False)

    async def _write(
        self,
        owned: _Owned,
        member: str,
        event: a2a_pb2.StreamResponse | None,
        flags: str,
        runner: str,
        extra: list[str],
    ) -> None:
        """Writes `owned.task` alone (see `_write_call`, `_written`)."""
        result = await self.backend.run_script(
            *self._write_call(owned, member, event, flags, runner, extra)
        )
        await self._written(owned, member, event, result)

    def _write_call(
        self,
        owned: _Owned,
        member: str,
        event: a2a_pb2.StreamResponse | None,
        flags: str,
        runner: str,
        extra: list[str],
        terminal: bool = False,
        force: bool = False,
    ) -> ScriptCall:
        """The WRITE of `owned.task` if its version is still `owned.version` (`force`: also
        over a cancel in progress), with `event` appended and published."""
        task = owned.task
        written_to = owned.written_to
        if written_to is None:  # named once per run: a send writes its task 3-4 times
            task_id = task.id
            written_to = owned.written_to = (
                self.backend.keys.of_task(task_id),
                self.backend.keys.channel(task_id),
            )
        task_keys, channel = written_to
        if self._streamed and task.id in self._streamed:
            self._streamed.discard(task.id)
            extra = [*extra, "rs", "1"]
        ttl = int(self.terminal_ttl * 2000) + 60_000 if terminal else 0  # backstop, see sweep
        return (
            "WRITE",
            task_keys,
            [
                owned.version,
                task.SerializeToString(),
                task.status.state,
                member.partition("|")[0],
                member,
                b"" if event is None else event.SerializeToString(),
                flags,
                self._trim_length,
                ttl,
                runner,
                channel,
                "1" if force else "0",
                *extra,
            ],
        )

    async def _written(
        self,
        owned: _Owned,
        member: str,
        event: a2a_pb2.StreamResponse | None,
        result: Any,
        terminal: bool = False,
    ) -> None:
        """After a WRITE: the new version, or _VersionMoved / _Stopped (and the task is let
        go); the event goes to the task's webhooks."""
        task_id = owned.task.id
        if result[0] != 1:
            self._owned.pop(task_id, None)
            moved = _Stopped if result[0] == 2 else _VersionMoved
            raise moved(task_id, int(result[1]))
        owned.version = int(result[1])
        owned.member = member
        if event is not None and self.deliveries.webhooks is not None and int(result[4]):
            position = result[2].decode() if isinstance(result[2], bytes) else str(result[2])
            await self.deliveries.deliver(
                task_id, int(result[4]), event, terminal, position, owned.task
            )

    def _index_call(
        self, scope: Scope, task: a2a_pb2.Task, old_member: str, old_state: int, member: str
    ) -> ScriptCall:
        """Moves the task in its scope's ListTasks indexes from `old_member` to `member`."""
        index_keys = self.backend.keys.indexes(scope, task.status.state, task.context_id)
        index_keys.insert(1, self.backend.keys.index(scope, f"s:{old_state}"))  # INDEX's KEYS order
        return ("INDEX", index_keys, [old_member, member])

    async def update(
        self,
        task_id: str,
        mutate: Callable[[a2a_pb2.Task], None],
        event: EventBuilder | None = None,
        *,
        size: int = 0,  # no byte budget here (base.py): nothing to count
    ) -> bool:
        owned = self._owned.get(task_id)
        if owned is None:
            owned = await self._adopt(task_id)
        state = owned.task.status.state
        if state in TERMINAL_STATES:
            raise TaskFinishedError(task_id, state)
        mutate(owned.task)
        built = None if event is None else event()
        try:
            await self._write(owned, owned.member, built, "", "-", [])
        except _VersionMoved as moved:
            raise await self._refused(moved) from None
        except (StoreFullError, StoreUnavailableError):
            self._owned.pop(task_id, None)  # `mutate` was not written: read the task again
            raise
        return False

    async def _refused(self, moved: _VersionMoved) -> TaskFinishedError:
        """A run's write was refused: the task was ended elsewhere, or is being canceled (then
        the run writes CANCELED itself if the canceller has not yet, so that a canceller that
        died halfway never leaves the task stuck)."""
        if isinstance(moved, _Stopped):
            for _ in range(8):
                loaded = await reads.load(self.backend, moved.task_id)
                if loaded is None or loaded.task.status.state in TERMINAL_STATES:
                    break
                if await self._end(loaded, a2a_pb2.TASK_STATE_CANCELED, None) is not None:
                    break
            return TaskFinishedError(moved.task_id, a2a_pb2.TASK_STATE_CANCELED)
        return moved.finished()

    async def _adopt(self, task_id: str) -> _Owned:
        """Reads a task this replica writes without having created it (e.g. a status change
        after a restart of the run's bookkeeping)."""
        loaded = await reads.load(self.backend, task_id)
        state = a2a_pb2.TASK_STATE_CANCELED if loaded is None else loaded.task.status.state
        if loaded is None or state in TERMINAL_STATES:  # finished: written no more, not kept
            raise TaskFinishedError(task_id, state)
        owned = _Owned(loaded.task, loaded.scope, loaded.version, loaded.member)
        self._owned[task_id] = owned
        return owned

    async def reply(self, task_id: str, message: a2a_pb2.Message) -> None:
        keys = self.backend.keys
        await self.backend.run_script(
            "EMIT",
            [keys.events(task_id)],
            [
                a2a_pb2.StreamResponse(message=message).SerializeToString(),
                "t",
                self._trim_length,
                keys.channel(task_id),
                int(self.terminal_ttl * 1000),
            ],
        )

    async def withdraw(
        self,
        task_id: str,
        scope: Scope,
        error: StatusError,
        waiting: tuple[int, a2a_pb2.Message] | None = None,
    ) -> None:
        backend = self.backend
        if waiting is None:  # the task goes first: a stream opened after finds none
            self._owned.pop(task_id, None)
            self._settled_copies.pop(task_id, None)
            self._streamed.discard(task_id)
            await self.room.settle(task_id, scope, "release")
            await self.eviction.forget([task_id])
        # Not an event of the task (nothing is added to its stream): a notice to the
        # replicas' readers (events.py), published after the run's last event.
        notice = b"0-0\n" + (b"x" if waiting else b"X") + b"\n" + status.to_bytes(error)
        keys = backend.keys
        await backend.run_script("NOTICE", [keys.events(task_id)], [keys.channel(task_id), notice])
        if waiting is not None:  # send streams ended above: this reaches subscribers alone
            await self.set_status(task_id, *waiting)

    async def resume(
        self, task_id: str, scope: Scope, message: a2a_pb2.Message
    ) -> a2a_pb2.Task | None:
        for _ in range(8):  # another replica's write between our read and write: read again
            loaded = await reads.load(self.backend, task_id)
            if loaded is None or loaded.scope != scope:
                return None
            before = a2a_pb2.Task()
            before.CopyFrom(loaded.task)
            state = loaded.task.status.state
            if state in TERMINAL_STATES:
                raise TaskFinishedError(task_id, state)
            if loaded.runner or state not in INTERRUPTED_STATES:
                raise TaskBusyError(task_id)
            stored = loaded.task.history.add()
            stored.CopyFrom(message)
            stored.task_id = task_id
            stored.context_id = loaded.task.context_id
            owned = _Owned(loaded.task, scope, loaded.version, loaded.member)
            try:
                await self._change_status(
                    owned, a2a_pb2.TASK_STATE_SUBMITTED, None, None, runner=self.backend.replica_id
                )
            except _VersionMoved:
                continue  # another replica wrote it meanwhile: see what happened
            self._owned[task_id] = owned
            await self.room.settle(task_id, scope, "working")
            return before
        raise TaskBusyError(task_id)

    async def cancel(
        self, task_id: str, scope: Scope, message: a2a_pb2.Message | None = None
    ) -> a2a_pb2.Task | None:
        loaded = await reads.load(self.backend, task_id)
        if loaded is None or loaded.scope != scope:
            return None
        if loaded.task.status.state in TERMINAL_STATES:
            raise TaskFinishedError(task_id, loaded.task.status.state)
        # First stop the run's writes (see STOP), then write CANCELED over the last of them.
        await self.backend.run_script("STOP", [self.backend.keys.task(task_id)], [])
        for _ in range(8):
            canceled = await self._end(loaded, a2a_pb2.TASK_STATE_CANCELED, message)
            if canceled is not None:
                return canceled
            reloaded = await reads.load(self.backend, task_id)
            if reloaded is None:
                return None
            if reloaded.task.status.state == a2a_pb2.TASK_STATE_CANCELED:
                return reloaded.task  # the run, refused by STOP, wrote it for this cancel
            loaded = reloaded
        raise StoreUnavailableError(f"task {task_id} kept changing while it was canceled")

    async def _end(
        self, loaded: Loaded, state: int, message: a2a_pb2.Message | None
    ) -> a2a_pb2.Task | None:
        """Writes `state` over a task read with `_load`; tells its runner on another replica.
        None when the version moved meanwhile (read it again); TaskFinishedError when it is
        terminal."""
        task = loaded.task
        if task.status.state in TERMINAL_STATES:
            raise TaskFinishedError(task.id, task.status.state)
        if message is not None:
            message.context_id = task.context_id
        owned = _Owned(task, loaded.scope, loaded.version, loaded.member)
        try:
            await self._change_status(
                owned, state, message, None, runner="", force=True, ran_on=loaded.runner or None
            )
        except _VersionMoved:
            return None  # e.g. the run wrote an event meanwhile: read it again
        runner = loaded.runner
        if runner and runner != self.backend.replica_id:
            await self.backend.call(
                self.backend.client.publish(self.backend.keys.cancel_channel(runner), task.id)
            )
        elif runner == self.backend.replica_id and self.events.on_remote_cancel is not None:
            self.events.on_remote_cancel(task.id)
        result = a2a_pb2.Task()
        result.CopyFrom(task)
        return result

    async def cancel_parked(self, task_id: str, message: a2a_pb2.Message) -> Scope | None:
        loaded = await reads.load(self.backend, task_id)
        if loaded is None:
            await self.backend.call(self.backend.client.zrem(self.backend.keys.parked, task_id))
            return None
        state = loaded.task.status.state
        if loaded.runner or state not in INTERRUPTED_STATES:
            await self.backend.call(self.backend.client.zrem(self.backend.keys.parked, task_id))
            return None
        try:
            ended = await self._end(loaded, a2a_pb2.TASK_STATE_CANCELED, message)
        except TaskFinishedError:
            return None
        return None if ended is None else loaded.scope

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
        if settled is not None and settled[0] == scope and time.monotonic() < settled[2]:
            # Settled here a moment ago (the blocking reply, or a repeat of its message): a
            # terminal task no longer changes, an interrupted one is answered as it settled.
            target.ParseFromString(settled[1])
            trim_history(target, history_length)
            return True
        return await reads.read_into(self.backend, task_id, scope, target, history_length)

    async def list(self, scope: Scope, query: TaskQuery) -> a2a_pb2.ListTasksResponse:
        return await reads.list_page(self.backend, scope, query)

    async def watch(
        self, task_id: str, scope: Scope, *, until_terminal: bool, after: str | None = None
    ) -> tuple[a2a_pb2.Task, Subscription] | None:
        subscription = await self.events.open(task_id, until_terminal)
        keys = self.backend.keys
        try:
            if after is not None:
                return await replays.watch_after(
                    self.backend,
                    self.events,
                    self.stream_length,
                    task_id,
                    scope,
                    subscription,
                    after,
                )
            fields = await self.backend.run_script(
                "SNAPSHOT", [keys.task(task_id), keys.events(task_id)], ["1"]
            )
        except BaseException:
            subscription.cancel()
            raise
        body, tenant, owner = fields[0], fields[1], fields[2]
        if body is None or Scope(tenant.decode(), owner.decode()) != scope:
            subscription.cancel()
            return None
        subscription.snapshot_id = fields[6].decode()
        self.events.start_after(subscription, subscription.snapshot_id)
        return a2a_pb2.Task.FromString(body), subscription

    async def subscribe(self, task_id: str) -> Subscription:
        subscription = await self.events.open(task_id, until_terminal=False)
        self.events.start_after(subscription, "0-0")
        if len(self._streamed) >= STREAMED_MARKS:  # ids whose task was never written
            self._streamed.clear()  # at worst a finished task's stream goes: replay falls back
        self._streamed.add(task_id)
        return subscription

    # -- housekeeping ---------------------------------------------------------------------

    async def parked_longer_than(self, seconds: float) -> Sequence[str]:
        return await self.room.parked_longer_than(seconds)

    async def stats(self) -> StoreStats:
        """The stored tasks only (one ZCARD): counting them by state or bytes would walk every
        scope's indexes or every task, too much for each scrape of a shared store."""
        return StoreStats(await self.room.count(), None, None)

    async def evict_expired(self) -> int:
        return await self.eviction.evict_expired()

    async def start(self) -> None:
        """Checks that Redis answers (StoreUnavailableError otherwise), opens the event reader
        and starts the lease keeper."""
        await self.backend.start()
        await self.events.start()
        await self.leases.start()

    async def _reap(self, replica: str) -> None:
        """Goes on with the stopped `replica`'s webhook deliveries, then marks FAILED every
        task it was running (spec decision §9.11)."""
        await self.deliveries.take_over(replica)
        backend = self.backend
        keys = backend.keys
        tasks = await backend.call(backend.client.hgetall(keys.replica_tasks(replica)))
        orphans: list[Loaded] = []
        for task_member, scope_text in tasks.items():  # rooms first: a FAILED seen means all done
            task_id = task_member.decode()
            loaded = await reads.load(backend, task_id)
            if loaded is None:  # reserved, never created: its room goes back
                scope = Scope(*json.loads(scope_text))
                await self.room.settle(task_id, scope, "release")
            elif loaded.runner == replica and loaded.task.status.state not in TERMINAL_STATES:
                orphans.append(loaded)
        failed = 0
        for loaded in orphans:
            task_id = loaded.task.id
            text = a2a_pb2.Message(message_id=new_id(), role=a2a_pb2.ROLE_AGENT, task_id=task_id)
            text.parts.add().text = REPLICA_STOPPED_TEXT
            with contextlib.suppress(TaskFinishedError):
                if await self._end(loaded, a2a_pb2.TASK_STATE_FAILED, text) is not None:
                    failed += 1
        await backend.call(backend.client.delete(keys.replica_tasks(replica)))
        if failed:
            log.warning("replica %s stopped: %d of its tasks were marked FAILED", replica, failed)

    def abandon(self) -> None:
        """Stops renewing this replica's lease and leaves everything as it is, as a crash
        would: within the lease another replica takes over. For a process about to exit
        without draining, and for tests of the takeover."""
        self.backend.closing = True
        self.leases.abandon()

    async def close(self) -> None:
        """Stops the lease keeper and the event reader, and lets this replica's lease run out
        now: the next replica to renew its own lease takes over what is left (webhook events
        not yet delivered, any task the drain could not settle)."""
        self.backend.closing = True
        self.backend.stop_probe()
        await self.leases.close()
        await self.events.close()
        await self.backend.close()
