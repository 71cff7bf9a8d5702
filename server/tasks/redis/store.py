"""The shared task store: tasks, their events, leases and message ids in Redis (or Valkey), so
every replica serves every task. Keeps the `TaskStore` contract (base.py).

Keys (`a2a` is the default prefix). Every key of one task shares the hash tag `{<task id>}` and
each scope's ListTasks indexes share their tenant's tag, so the same code runs on a Redis
Cluster; the scripts (redis_scripts.py) each touch one slot, but BATCH, which runs a task's
write with its index and room updates as one command where no Cluster splits them (`_batch`).

    a2a:{<task>}:task        hash: the Task (protobuf), its version, scope, state, runner
    a2a:{<task>}:events      stream: every event of the task, trimmed to `stream_length`
    a2a:{t:<tenant>}:o:<owner>:all | :s:<state> | :c:<context>
                             ListTasks indexes: members "<updated ns, 20 digits>|<task id>"
    a2a:{room}:all           every stored task id; score: when it expires (+inf while live)
    a2a:{room}:o:<owner> / :t:<tenant>   live task ids per owner / tenant (the fair shares)
    a2a:{room}:parked        tasks waiting for input, by when they started waiting
    a2a:{room}:replicas      replica id -> lease expiry;  a2a:{room}:r:<replica>  its tasks
    a2a:msg:{<digest>}       the claim on one (tenant, caller, message id): "<digest>|<task>"

Events travel twice, in one atomic script with the write that made them: appended to the task's
stream (the record: a cursor for every reader, trimmed, expired with the task) and published on
the task's channel `a2a:ev:<task>` with their stream id. Each replica reads every channel it
needs on ONE pub/sub connection (`EventReader`, redis_events.py) and fans events out to its
local streams; `watch` subscribes first, then reads the snapshot with the id of its last event,
and passes on only events after that id: no gap, no repeat, and no polling. A finished task
without webhooks drops its stream at once (nothing reads it any more).

Modules: this one (tasks, room, leases), redis_scripts.py (the Lua), redis_events.py (the
pub/sub reader), redis_push.py (push configs), redis_dedup.py (message-id claims).

Writes: the run working on a task keeps the task in memory (`_Owned`) and writes it whole with
the version it read; a version that moved means another replica canceled it (or a reaper failed
it), which raises TaskFinishedError. Leases: each replica renews its lease every third of
`lease` seconds; any replica that finds an expired lease claims the reaping (ZREM) and fails the
tasks that replica was running, with a status message saying why (spec decision §9.11).

Failures: every Redis call is bounded by `timeout`; a refused or slow call raises
StoreUnavailableError and turns `healthy` off until a probe gets through again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

import redis.asyncio as aioredis
import redis.exceptions
from redis.asyncio.cluster import RedisCluster

from a2a_grpc.core.failure_log import FailureLog
from a2a_grpc.core.ids import new_id
from a2a_grpc.core.states import INTERRUPTED_STATES, SETTLED_STATES, TERMINAL_STATES
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.protocol.dedup import Outcome
from a2a_grpc.server.push.webhooks import WebhookDispatcher
from a2a_grpc.server.tasks.base import (
    REPLICA_STOPPED_TEXT,
    EventBuilder,
    FirstStatus,
    LiveTaskLimitError,
    Scope,
    StoreFullError,
    StoreStats,
    StoreUnavailableError,
    TaskBusyError,
    TaskFinishedError,
    TaskQuery,
    eviction_batch,
)
from a2a_grpc.server.tasks.broker import Subscription
from a2a_grpc.server.tasks.changes import StatusClock, apply_status, status_event
from a2a_grpc.server.tasks.index import decode_page_token, encode_page_token, trim_history
from a2a_grpc.server.tasks.redis import client as redis_client
from a2a_grpc.server.tasks.redis import scripts as redis_scripts
from a2a_grpc.server.tasks.redis.events import EventReader, RemoteOutcome, parse_stream_id
from a2a_grpc.server.tasks.redis.push import RedisPushConfigs

log = logging.getLogger(__name__)

T = TypeVar("T")

REDIS_ERRORS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)
"""What a Redis that is down, restarting or unreachable raises (BusyLoadingError is a
ConnectionError)."""


def _scope_text(scope: Scope) -> str:
    return json.dumps([scope.tenant, scope.owner])


def _hex(text: str) -> str:
    return text.encode().hex()


def _member(updated_ns: int, task_id: str) -> str:
    return f"{updated_ns:020d}|{task_id}"


SCOPE_NAMES_CACHED = 4096
"""Scopes whose key names `_Keys.scope` keeps built (all forgotten at once past that)."""
SCOPE_NAMES_MAX_CHARS = 512
"""Tenant and owner together longer than this: the names are built for the call and not kept.
A tenant is the caller's to choose, up to a request's size; the cache holds about six times
its length, so without this bound it could pin gigabytes (at most ~12 MB with it)."""


class _ScopeNames(NamedTuple):
    """What the store names after one scope (tenant, owner), built once."""

    index_prefix: str
    """The scope's ListTasks index keys up to their suffix ("all", "s:<state>", "c:<ctx>")."""
    live_owner: str
    live_tenant: str
    text: str
    """The scope as the room's scripts take it: JSON [tenant, owner]."""


class _Keys:
    """Key and channel names (see the module docstring)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        room = f"{prefix}:{{room}}"
        self.room_all = f"{room}:all"
        self.parked = f"{room}:parked"
        self.replicas = f"{room}:replicas"
        self._room = room
        # Every write names its scope's keys 3-5 times, each a hex encoding of the tenant and
        # the owner (tests.load.instructions --redis: 1,485,680 -> see the commit).
        self._scopes: dict[Scope, _ScopeNames] = {}

    def scope(self, scope: Scope) -> _ScopeNames:
        names = self._scopes.get(scope)
        if names is None:
            tenant, owner = scope
            names = _ScopeNames(
                index_prefix=f"{self.prefix}:{{t:{_hex(tenant)}}}:o:{_hex(owner)}:",
                live_owner=f"{self._room}:o:{_hex(owner)}",
                live_tenant=f"{self._room}:t:{_hex(tenant)}",
                text=_scope_text(scope),
            )
            if len(tenant) + len(owner) <= SCOPE_NAMES_MAX_CHARS:
                if len(self._scopes) >= SCOPE_NAMES_CACHED:
                    self._scopes.clear()
                self._scopes[scope] = names
        return names

    def task(self, task_id: str) -> str:
        return f"{self.prefix}:{{{task_id}}}:task"

    def events(self, task_id: str) -> str:
        return f"{self.prefix}:{{{task_id}}}:events"

    def push(self, task_id: str) -> str:
        return f"{self.prefix}:{{{task_id}}}:push"

    def push_version(self, task_id: str) -> str:
        return f"{self.prefix}:{{{task_id}}}:pushv"

    def push_cursors(self, task_id: str) -> str:
        return f"{self.prefix}:{{{task_id}}}:pushc"

    def push_protocols(self, task_id: str) -> str:
        return f"{self.prefix}:{{{task_id}}}:pushp"

    def of_task(self, task_id: str) -> list[str]:
        """Every key of one task, in the order WRITE and FORGET take them."""
        return [
            self.task(task_id),
            self.events(task_id),
            self.push(task_id),
            self.push_version(task_id),
            self.push_cursors(task_id),
            self.push_protocols(task_id),
        ]

    def replica_deliveries(self, replica: str) -> str:
        return f"{self._room}:d:{replica}"

    def channel(self, task_id: str) -> str:
        return f"{self.prefix}:ev:{task_id}"

    def cancel_channel(self, replica: str) -> str:
        return f"{self.prefix}:cancel:{replica}"

    def replica_tasks(self, replica: str) -> str:
        return f"{self._room}:r:{replica}"

    def index(self, scope: Scope, suffix: str) -> str:
        return self.scope(scope).index_prefix + suffix

    def indexes(self, scope: Scope, state: int, context_id: str) -> list[str]:
        """A task's ListTasks index keys: all of the scope's, its state's, its context's."""
        index = self.scope(scope).index_prefix
        names = [index + "all", f"{index}s:{state}"]
        if context_id:
            names.append(f"{index}c:{_hex(context_id)}")
        return names

    def claim(self, digest: str) -> str:
        return f"{self.prefix}:msg:{{{digest}}}"


_ScriptCall = tuple[str, list[str], list[Any]]
"""(script name, keys, arguments)."""

SETTLED_COPIES = 4096
"""Tasks this replica settled whose last write it keeps for `SETTLED_COPY_AGE` seconds, for
the blocking caller's reply (`copy_into`, a moment later): one read of Redis less per blocking
SendMessage."""
SETTLED_COPY_AGE = 1.0


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
    """The task's keys (`_Keys.of_task`) and event channel, named at its first write."""


@dataclass(slots=True)
class _Creation:
    """A task's creating WRITE, written in one batch with its first status change."""

    write: _ScriptCall
    member: str
    event: a2a_pb2.StreamResponse


@dataclass(slots=True)
class _Loaded:
    task: a2a_pb2.Task
    scope: Scope
    version: int
    runner: str
    member: str


class RedisTaskStore:
    """Tasks in Redis, shared by every replica that uses the same Redis. See the module
    docstring; `connect` builds one from a URL."""

    shared = True

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        max_tasks: int = 100_000,
        max_live_per_owner: int | None = None,
        max_live_per_tenant: int | None = None,
        terminal_ttl: float = 3600.0,
        lease: float = 10.0,
        queue_size: int = 1024,
        timeout: float = 2.0,
        stream_length: int = 1000,
        prefix: str = "a2a",
        replica_id: str | None = None,
    ) -> None:
        # Typed Any: redis-py's command stubs return unions of every RESP shape; the shapes
        # used here are fixed by the commands and scripts.
        self.client: Any = client
        self.keys = _Keys(prefix)
        self.max_tasks = max_tasks
        self._eviction_batch = eviction_batch(max_tasks)
        self.max_live_per_owner = max_live_per_owner
        self.max_live_per_tenant = max_live_per_tenant
        self.terminal_ttl = terminal_ttl
        self.lease = lease
        self.timeout = timeout
        self.stream_length = stream_length
        self.replica_id = replica_id or new_id()
        self.pubsub_client: Any = client
        """Where the event reader subscribes: `client`, or on a Cluster one node of it (a
        PUBLISH reaches the subscribers of every node)."""
        self.url: str | None = None
        """The URL `connect` was given: `start` switches to a Cluster client when the server
        there is a Cluster node."""
        self.on_remote_cancel: Callable[[str], None] | None = None
        self.on_evict: Callable[[str], None] | None = None
        self.on_health: Callable[[bool], None] | None = None
        """Called with False when Redis stops answering and True when it answers again."""
        self.healthy = True
        self._owned: dict[str, _Owned] = {}
        self._stamp = StatusClock().stamp
        self._scripts = self._register(client)
        self._coalescing = isinstance(client, redis_client.CoalescingRedis)
        self._on_cluster = isinstance(client, RedisCluster)
        self.events = EventReader(self, queue_size)
        self.webhooks: WebhookDispatcher | None = None
        """Delivers the events this replica writes to their tasks' webhooks (set by the
        server when the agent offers push notifications)."""
        self.push_configs = RedisPushConfigs(self)
        self._push_versions: dict[str, int] = {}  # configs version last mirrored, per task
        self._settled_copies: OrderedDict[str, tuple[Scope, bytes, float]] = OrderedDict()
        self._delivering: set[str] = set()  # tasks in this replica's delivery set
        self._background: list[asyncio.Task[None]] = []
        self._closing = False
        self._started = False
        self._probe: asyncio.Task[None] | None = None
        self.outage = FailureLog(log, "the task store (Redis)")
        """Its failed round trips, logged quietly and counted (`a2a_store_failures_total`)."""
        self._lease_failures = FailureLog(log, "lease renewal", level=logging.ERROR)

    @classmethod
    def connect(cls, url: str, *, timeout: float = 2.0, **options: Any) -> RedisTaskStore:
        """A store on the Redis at `url` (redis://, rediss://, unix://; password in the URL).

        No retries inside the client: a refused call fails within `timeout` and the caller's
        own retry (our client honours RetryInfo) decides.
        """
        client = redis_client.connect(url, timeout)
        store = cls(client, timeout=timeout, **options)
        store.url = url
        return store

    @staticmethod
    def _register(client: Any) -> dict[str, Any]:
        names = (
            "WRITE", "EMIT", "SNAPSHOT", "RESERVE", "SETTLE", "INDEX", "CLAIM", "UNCLAIM",
            "HEARTBEAT", "PUSH_CHANGE", "STOP", "UNINDEX", "BATCH", "FORGET",
        )  # fmt: skip
        return {name: client.register_script(getattr(redis_scripts, name)) for name in names}

    async def _use_cluster_if_there_is_one(self) -> None:
        """Switches to a Cluster client when `url` names a Cluster node: every key then goes to
        the node of its slot (all keys of one script share a slot). The node in the URL stays
        the pub/sub connection."""
        if self.url is None or self.client is not self.pubsub_client:
            return
        info = await self.call(self.client.info("cluster"))
        if not info.get("cluster_enabled"):
            return
        cluster = RedisCluster.from_url(self.url, **redis_client.client_options(self.timeout))
        await self.call(cluster.initialize())
        for node in cluster.get_nodes():
            redis_client.pack_in_c(node)
        self.client = cluster
        self._scripts = self._register(cluster)
        self._coalescing = False
        self._on_cluster = True

    # -- plumbing -------------------------------------------------------------------------

    async def call(self, awaitable: Awaitable[T]) -> T:
        """One Redis round trip, bounded by `timeout` (the client's connect and read timeouts:
        an asyncio.timeout around each call as well cost 6 % of a send's CPU);
        StoreUnavailableError when it fails; StoreFullError when Redis refuses a write at its
        `maxmemory` (the store's only byte bound: see base.py)."""
        try:
            result = await awaitable
        except redis.exceptions.OutOfMemoryError as exc:  # maxmemory with noeviction: it answers
            raise StoreFullError(
                "the task store (Redis) is at its maxmemory and refuses writes; retry later"
            ) from exc
        except redis.exceptions.AuthenticationError as exc:  # a ConnectionError, but not "down"
            self.report_failure(f"refuses the credentials in its URL ({exc})")
            raise StoreUnavailableError(
                f"the task store (Redis) refused the credentials in its URL: {exc}"
            ) from exc
        except (*REDIS_ERRORS, TimeoutError) as exc:
            self.report_failure(f"does not answer ({type(exc).__name__}: {exc})")
            raise StoreUnavailableError(
                f"the task store (Redis) did not answer: {type(exc).__name__}; retry shortly"
            ) from exc
        if not self.healthy:
            self.set_healthy(True)
        return result

    async def run_script(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """One of redis_scripts.py's scripts; loaded into Redis again when Redis lost it."""
        client = self.client
        if self._coalescing:
            # Queued as EVALSHA directly, without redis-py's Script call around it (measured,
            # tests.load.redis_profile c=32, medians of 5, with hiredis packing the batch:
            # 167 -> 146 us per send on Redis).
            script = self._scripts[name]
            try:
                return await self.call(client.queue("EVALSHA", script.sha, len(keys), *keys, *args))
            except redis.exceptions.NoScriptError:
                pass  # Redis restarted (it keeps no scripts): the Script call loads it
        return await self.call(self._scripts[name](keys=list(keys), args=list(args)))

    @property
    def failures(self) -> int:
        return self.outage.failures + self._lease_failures.failures

    def report_failure(self, problem: str) -> None:
        """A round trip failed (`problem` says how): counted and logged quietly (`outage`: one
        WARNING as the outage starts, at most one line a minute while it lasts), and health
        turns off until Redis answers again."""
        if not self._started:
            return  # before start(), a failure is start()'s error, not an outage
        self.outage.failed(f"{problem}; calls fail with UNAVAILABLE")
        self.set_healthy(False)

    def set_healthy(self, healthy: bool) -> None:
        if healthy == self.healthy or not self._started:
            return  # before start(), a failure is start()'s error, not a health change
        self.healthy = healthy
        if healthy:
            self.outage.recovered("answers again")
        else:
            if self._probe is None or self._probe.done():
                self._probe = asyncio.get_running_loop().create_task(self._recover())
        if self.on_health is not None:
            self.on_health(healthy)

    async def _recover(self) -> None:
        """Pings until Redis answers (there is no event to wait on for a server coming back),
        then reopens the event reader."""
        while not self.healthy and not self._closing:
            with contextlib.suppress(StoreUnavailableError):
                await self.call(self.client.ping())
            if not self.healthy:
                await asyncio.sleep(min(1.0, self.timeout / 2))
        self.events.restart()

    def _expiry_ms(self) -> int:
        return int((time.time() + self.terminal_ttl) * 1000)

    # -- room -----------------------------------------------------------------------------

    async def reserve(self, scope: Scope, size: int, task_id: str) -> None:
        keys = self.keys
        names = keys.scope(scope)
        result = await self.run_script(
            "RESERVE",
            [
                keys.room_all,
                names.live_owner,
                names.live_tenant,
                keys.replica_tasks(self.replica_id),
            ],
            [
                task_id,
                int(time.time() * 1000),
                self.max_tasks,
                "" if self.max_live_per_owner is None else self.max_live_per_owner,
                "" if self.max_live_per_tenant is None else self.max_live_per_tenant,
                names.text,
                self._eviction_batch,
            ],
        )
        verdict = result[0].decode()
        if verdict == "ok":
            # The room of finished tasks the reservation evicted (they left the room with it):
            # their keys go now, together.
            evicted = [member.decode() for member in result[1:]]
            if evicted:
                await self._forget(evicted)
            return
        if verdict == "owner":
            raise LiveTaskLimitError(
                f"this caller already has {result[1]} unfinished tasks, the most one caller "
                "may hold: wait for some to finish, or answer or cancel those waiting for input"
            )
        if verdict == "tenant":
            raise LiveTaskLimitError(
                f"this tenant already has {result[1]} unfinished tasks, the most one tenant may "
                "hold: retry when some have finished"
            )
        raise StoreFullError(f"the store holds {self.max_tasks} unfinished tasks; retry later")

    async def release(self, scope: Scope, task_id: str) -> None:
        await self._settle_room(task_id, scope, "release")

    async def _settle_room(self, task_id: str, scope: Scope, how: str) -> None:
        await self.run_script(*self._settle_call(task_id, scope, how))

    def _settle_call(self, task_id: str, scope: Scope, how: str) -> _ScriptCall:
        keys = self.keys
        names = keys.scope(scope)
        return (
            "SETTLE",
            [
                keys.room_all,
                names.live_owner,
                names.live_tenant,
                keys.parked,
                keys.replica_tasks(self.replica_id),
            ],
            [task_id, how, int(time.time() * 1000), self._expiry_ms(), names.text],
        )

    async def _batch(self, calls: list[_ScriptCall]) -> list[Any]:
        """WRITEs of one task, then the INDEX and SETTLE that go with them, in this order: their
        replies. The parts after a WRITE that was refused do not run (their replies are 0).

        On a standalone Redis the parts run as one script (BATCH): one command instead of two
        to four, and atomic (measured, tests.load.redis_profile c=32: CPU per send on Redis
        205 -> 174 us). A Cluster refuses a script whose keys span slots: there the WRITEs go
        first, one after another, and the rest together after them, each atomic, the batch
        not (the index tolerates that: see `list`)."""
        if self._on_cluster:
            replies: list[Any] = []
            for name, call_keys, call_args in calls:
                if name != "WRITE":
                    break
                replies.append(reply := await self.run_script(name, call_keys, call_args))
                if reply[0] != 1:
                    return [*replies, *(0 for _ in calls[len(replies) :])]
            rest = calls[len(replies) :]
            return [*replies, *await asyncio.gather(*(self.run_script(*call) for call in rest))]
        keys: list[str] = []
        header: list[Any] = [len(calls)]
        args: list[Any] = []
        for name, call_keys, call_args in calls:
            header += (name, len(call_keys), len(call_args))
            keys += call_keys
            args += call_args
        args[:0] = header
        return list(await self.run_script("BATCH", keys, args))

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
        member = _member(self._stamp(task.status), task_id)
        owned = _Owned(task, scope, -1, "")
        event = a2a_pb2.StreamResponse(task=task)
        extra = ["tenant", scope.tenant, "owner", scope.owner, "ctx", task.context_id]
        write = self._write_call(owned, member, event, "", self.replica_id, extra)
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
        written, _ = await self._batch([write, self._index_call(scope, task, "", -1, member)])
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
        except StoreFullError:
            self._owned.pop(task_id, None)  # the change was not written: read the task again
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
    ) -> None:
        """Writes a status change of `owned` (its runner too, when given), after its
        `creation` in the same batch when given. _VersionMoved when another replica wrote the
        task since it was read (see `_write`)."""
        task = owned.task
        previous_state = task.status.state
        calls: list[_ScriptCall] = []
        if creation is not None:
            calls.append(creation.write)
            owned.version += 1  # what the creation's write makes it, before the next one
        apply_status(task, state, message)
        member = _member(self._stamp(task.status), task.id)
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
            calls.append(self._settle_call(task.id, owned.scope, "terminal"))
        elif state in INTERRUPTED_STATES:
            calls.append(self._settle_call(task.id, owned.scope, "interrupted"))
        results = await self._batch(calls)
        if creation is not None:
            await self._written(owned, creation.member, creation.event, results[0])
            results = results[1:]
        await self._written(owned, member, event, results[0], terminal)
        if state in SETTLED_STATES:
            self._owned.pop(task.id, None)
            copy = (owned.scope, task.SerializeToString(), time.monotonic())
            self._settled_copies[task.id] = copy
            if len(self._settled_copies) > SETTLED_COPIES:
                self._settled_copies.popitem(last=False)

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
        result = await self.run_script(
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
    ) -> _ScriptCall:
        """The WRITE of `owned.task` if its version is still `owned.version` (`force`: also
        over a cancel in progress), with `event` appended and published."""
        task = owned.task
        written_to = owned.written_to
        if written_to is None:  # named once per run: a send writes its task 3-4 times
            task_id = task.id
            written_to = owned.written_to = (self.keys.of_task(task_id), self.keys.channel(task_id))
        task_keys, channel = written_to
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
                self.stream_length,
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
        if event is not None and self.webhooks is not None and int(result[4]):
            position = result[2].decode() if isinstance(result[2], bytes) else str(result[2])
            await self._deliver(task_id, int(result[4]), event, terminal, position, owned.task)

    async def _deliver(
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
        if task_id not in self._delivering:
            key = self.keys.replica_deliveries(self.replica_id)
            await self.call(self.client.sadd(key, task_id))
            self._delivering.add(task_id)
        if self._push_versions.get(task_id) != version:
            configs, protocols = await self.push_configs.for_dispatch(task_id)
            webhooks.configs.mirror(task_id, configs, protocols)
            self._push_versions[task_id] = version
        webhooks.observe(task_id, event, position, task)
        if terminal:
            self._push_versions.pop(task_id, None)

    async def _delivered(self, task_id: str, config_id: str, position: str) -> None:
        """The webhook's cursor: events up to `position` reached it."""
        await self.call(self.client.hset(self.keys.push_cursors(task_id), config_id, position))

    async def _take_over_deliveries(self, replica: str) -> None:
        """Re-queues, per webhook, the events the stopped `replica` recorded for its tasks but
        had not delivered (after each webhook's cursor), in order: at least once."""
        webhooks = self.webhooks
        if webhooks is None:
            return
        keys = self.keys
        members = await self.call(self.client.smembers(keys.replica_deliveries(replica)))
        for member in members:
            task_id = member.decode()
            configs, protocols = await self.push_configs.for_dispatch(task_id)
            if not configs:
                continue
            webhooks.configs.mirror(task_id, configs, protocols)
            cursors = await self.call(self.client.hgetall(keys.push_cursors(task_id)))
            entries = await self.call(self.client.xrange(keys.events(task_id), "-", "+"))
            # A 0.3 webhook is sent the task as it stands (read after its events).
            loaded = await self._load(task_id) if protocols else None
            for config in webhooks.configs.stored_for(task_id):
                cursor = parse_stream_id((cursors.get(config.id.encode()) or b"0-0").decode())
                missed = [
                    (entry_id.decode(), fields[b"e"])
                    for entry_id, fields in entries
                    if parse_stream_id(entry_id.decode()) > cursor
                ]
                webhooks.replay(config, missed, None if loaded is None else loaded.task)
            if task_id not in self._delivering:
                await self.call(self.client.sadd(keys.replica_deliveries(self.replica_id), task_id))
                self._delivering.add(task_id)
        await self.call(self.client.delete(keys.replica_deliveries(replica)))

    def _index_call(
        self, scope: Scope, task: a2a_pb2.Task, old_member: str, old_state: int, member: str
    ) -> _ScriptCall:
        """Moves the task in its scope's ListTasks indexes from `old_member` to `member`."""
        index_keys = self.keys.indexes(scope, task.status.state, task.context_id)
        index_keys.insert(1, self.keys.index(scope, f"s:{old_state}"))  # INDEX's KEYS order
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
        except StoreFullError:
            self._owned.pop(task_id, None)  # `mutate` was not written: read the task again
            raise
        return False

    async def _refused(self, moved: _VersionMoved) -> TaskFinishedError:
        """A run's write was refused: the task was ended elsewhere, or is being canceled (then
        the run writes CANCELED itself if the canceller has not yet, so that a canceller that
        died halfway never leaves the task stuck)."""
        if isinstance(moved, _Stopped):
            for _ in range(8):
                loaded = await self._load(moved.task_id)
                if loaded is None or loaded.task.status.state in TERMINAL_STATES:
                    break
                if await self._end(loaded, a2a_pb2.TASK_STATE_CANCELED, None) is not None:
                    break
            return TaskFinishedError(moved.task_id, a2a_pb2.TASK_STATE_CANCELED)
        return moved.finished()

    async def _adopt(self, task_id: str) -> _Owned:
        """Reads a task this replica writes without having created it (e.g. a status change
        after a restart of the run's bookkeeping)."""
        loaded = await self._load(task_id)
        if loaded is None:
            raise TaskFinishedError(task_id, a2a_pb2.TASK_STATE_CANCELED)
        owned = _Owned(loaded.task, loaded.scope, loaded.version, loaded.member)
        self._owned[task_id] = owned
        return owned

    async def reply(self, task_id: str, message: a2a_pb2.Message) -> None:
        keys = self.keys
        await self.run_script(
            "EMIT",
            [keys.events(task_id)],
            [
                a2a_pb2.StreamResponse(message=message).SerializeToString(),
                "t",
                self.stream_length,
                keys.channel(task_id),
                int(self.terminal_ttl * 1000),
            ],
        )

    async def resume(
        self, task_id: str, scope: Scope, message: a2a_pb2.Message
    ) -> a2a_pb2.Task | None:
        for _ in range(8):  # another replica's write between our read and write: read again
            loaded = await self._load(task_id)
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
                    owned, a2a_pb2.TASK_STATE_SUBMITTED, None, None, runner=self.replica_id
                )
            except _VersionMoved:
                continue  # another replica wrote it meanwhile: see what happened
            self._owned[task_id] = owned
            await self._settle_room(task_id, scope, "working")
            return before
        raise TaskBusyError(task_id)

    async def cancel(
        self, task_id: str, scope: Scope, message: a2a_pb2.Message | None = None
    ) -> a2a_pb2.Task | None:
        loaded = await self._load(task_id)
        if loaded is None or loaded.scope != scope:
            return None
        if loaded.task.status.state in TERMINAL_STATES:
            raise TaskFinishedError(task_id, loaded.task.status.state)
        # First stop the run's writes (see STOP), then write CANCELED over the last of them.
        await self.run_script("STOP", [self.keys.task(task_id)], [])
        for _ in range(8):
            canceled = await self._end(loaded, a2a_pb2.TASK_STATE_CANCELED, message)
            if canceled is not None:
                return canceled
            reloaded = await self._load(task_id)
            if reloaded is None:
                return None
            if reloaded.task.status.state == a2a_pb2.TASK_STATE_CANCELED:
                return reloaded.task  # the run, refused by STOP, wrote it for this cancel
            loaded = reloaded
        raise StoreUnavailableError(f"task {task_id} kept changing while it was canceled")

    async def _end(
        self, loaded: _Loaded, state: int, message: a2a_pb2.Message | None
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
            await self._change_status(owned, state, message, None, runner="", force=True)
        except _VersionMoved:
            return None  # e.g. the run wrote an event meanwhile: read it again
        runner = loaded.runner
        if runner and runner != self.replica_id:
            await self.call(self.client.publish(self.keys.cancel_channel(runner), task.id))
        elif runner == self.replica_id and self.on_remote_cancel is not None:
            self.on_remote_cancel(task.id)
        result = a2a_pb2.Task()
        result.CopyFrom(task)
        return result

    async def cancel_parked(self, task_id: str, message: a2a_pb2.Message) -> Scope | None:
        loaded = await self._load(task_id)
        if loaded is None:
            await self.call(self.client.zrem(self.keys.parked, task_id))
            return None
        state = loaded.task.status.state
        if loaded.runner or state not in INTERRUPTED_STATES:
            await self.call(self.client.zrem(self.keys.parked, task_id))
            return None
        try:
            ended = await self._end(loaded, a2a_pb2.TASK_STATE_CANCELED, message)
        except TaskFinishedError:
            return None
        return None if ended is None else loaded.scope

    # -- reads ----------------------------------------------------------------------------

    async def _load(self, task_id: str) -> _Loaded | None:
        fields = await self.call(
            self.client.hmget(
                self.keys.task(task_id), ["body", "tenant", "owner", "ver", "runner", "ik"]
            )
        )
        body, tenant, owner, version, runner, member = fields
        if body is None:
            return None
        task = a2a_pb2.Task.FromString(body)
        return _Loaded(
            task,
            Scope(tenant.decode(), owner.decode()),
            int(version),
            (runner or b"").decode(),
            (member or b"").decode(),
        )

    async def get(
        self, task_id: str, scope: Scope, *, history_length: int | None = None
    ) -> a2a_pb2.Task | None:
        task = a2a_pb2.Task()
        found = await self._read_into(task_id, scope, task, history_length)
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
            # Settled here a moment ago (the blocking reply, or a repeat of its message): a
            # terminal task no longer changes, an interrupted one is answered as it settled.
            target.ParseFromString(settled[1])
            trim_history(target, history_length)
            return True
        return await self._read_into(task_id, scope, target, history_length)

    async def _read_into(
        self, task_id: str, scope: Scope, target: a2a_pb2.Task, history_length: int | None
    ) -> bool:
        body, tenant, owner = await self.call(
            self.client.hmget(self.keys.task(task_id), ["body", "tenant", "owner"])
        )
        if body is None or Scope(tenant.decode(), owner.decode()) != scope:
            return False
        target.ParseFromString(body)
        trim_history(target, history_length)
        return True

    async def list(self, scope: Scope, query: TaskQuery) -> a2a_pb2.ListTasksResponse:
        response = a2a_pb2.ListTasksResponse(page_size=query.page_size)
        keys = self.keys
        predicate_state = 0
        if query.context_id:
            key = keys.index(scope, f"c:{_hex(query.context_id)}")
            predicate_state = query.state
        elif query.state:
            key = keys.index(scope, f"s:{query.state}")
        else:
            key = keys.index(scope, "all")
        floor = f"[{query.updated_after_ns:020d}|" if query.updated_after_ns else "-"
        ceiling = "+"
        if query.page_token:
            updated, last_id = decode_page_token(query.page_token)
            ceiling = f"({_member(updated, last_id)}"
        page: list[tuple[str, a2a_pb2.Task]] = []
        stale: list[str] = []
        exhausted = False
        batch = max(16, query.page_size + 1)
        while len(page) <= query.page_size and not exhausted:
            members = await self.call(
                self.client.zrange(key, ceiling, floor, desc=True, bylex=True, offset=0, num=batch)
            )
            exhausted = len(members) < batch
            if not members:
                break
            decoded = [member.decode() for member in members]
            ceiling = f"({decoded[-1]}"
            async with self.client.pipeline(transaction=False) as pipe:
                for member in decoded:
                    pipe.hmget(keys.task(member.partition("|")[2]), ["body", "ik"])
                rows = await self.call(pipe.execute())
            for member, (body, current) in zip(decoded, rows, strict=True):
                if body is None or (current or b"").decode() != member:
                    stale.append(member)  # expired, or re-indexed under a newer member
                    continue
                task = a2a_pb2.Task.FromString(body)
                if predicate_state and task.status.state != predicate_state:
                    continue
                page.append((member, task))
                if len(page) > query.page_size:
                    break
        if len(page) > query.page_size:
            page.pop()
            last_member = page[-1][0]
            updated_text, _, last_id = last_member.partition("|")
            response.next_page_token = encode_page_token((int(updated_text), last_id))
        for _, task in page:
            if not query.include_artifacts:
                del task.artifacts[:]
            trim_history(task, query.history_length)
            response.tasks.append(task)
        if stale:
            await self.call(self.client.zrem(key, *stale))
        response.total_size = await self._count(key, floor, predicate_state, len(page))
        return response

    async def _count(self, key: str, floor: str, state: int, at_least: int) -> int:
        """Tasks matching a ListTasks filter (stale members not yet swept may count too)."""
        if not state:
            return int(await self.call(self.client.zlexcount(key, floor, "+")))
        # context and state together: walk the context's index (it has no state index)
        members = await self.call(self.client.zrange(key, floor, "+", bylex=True))
        async with self.client.pipeline(transaction=False) as pipe:
            for member in members:
                pipe.hget(self.keys.task(member.decode().partition("|")[2]), "state")
            states = await self.call(pipe.execute())
        return max(
            at_least, sum(1 for value in states if value is not None and int(value) == state)
        )

    async def watch(
        self, task_id: str, scope: Scope, *, until_terminal: bool
    ) -> tuple[a2a_pb2.Task, Subscription] | None:
        subscription = await self.events.open(task_id, until_terminal)
        try:
            fields = await self.run_script(
                "SNAPSHOT", [self.keys.task(task_id), self.keys.events(task_id)], []
            )
        except BaseException:
            subscription.cancel()
            raise
        body, tenant, owner = fields[0], fields[1], fields[2]
        if body is None or Scope(tenant.decode(), owner.decode()) != scope:
            subscription.cancel()
            return None
        self.events.start_after(subscription, fields[6].decode())
        return a2a_pb2.Task.FromString(body), subscription

    async def subscribe(self, task_id: str) -> Subscription:
        subscription = await self.events.open(task_id, until_terminal=False)
        self.events.start_after(subscription, "0-0")
        return subscription

    async def outcome(self, task_id: str, scope: Scope) -> Outcome:
        """What the first delivery of a message id, on any replica, led to (see dedup)."""
        return await RemoteOutcome.follow(self, task_id, scope)

    # -- message-id claims ----------------------------------------------------------------

    async def claim(self, digest: str, value: str, window: float) -> str | None:
        """Sets the claim `value` on `digest` unless one exists; returns the existing one."""
        existing = await self.run_script(
            "CLAIM", [self.keys.claim(digest)], [value, max(1, int(window * 1000))]
        )
        return None if existing is None else existing.decode()

    async def unclaim(self, digest: str, value: str) -> None:
        await self.run_script("UNCLAIM", [self.keys.claim(digest)], [value])

    # -- housekeeping ---------------------------------------------------------------------

    async def parked_longer_than(self, seconds: float) -> Sequence[str]:
        before = int((time.time() - seconds) * 1000)
        members = await self.call(self.client.zrangebyscore(self.keys.parked, "-inf", before))
        return [member.decode() for member in members]

    async def stats(self) -> StoreStats:
        """The stored tasks only (one ZCARD): counting them by state or bytes would walk every
        scope's indexes or every task, too much for each scrape of a shared store."""
        return StoreStats(await self.call(self.client.zcard(self.keys.room_all)), None, None)

    async def evict_expired(self) -> int:
        """Deletes finished tasks past their time to live, with their events and index
        entries (their keys also expire on their own a while later, as a backstop)."""
        now_ms = int(time.time() * 1000)
        expired = await self.call(
            self.client.zrangebyscore(self.keys.room_all, "-inf", now_ms, start=0, num=256)
        )
        gone = 0
        for member in expired:
            gone += await self._delete(member.decode())
        return gone

    async def _delete(self, task_id: str) -> int:
        """Deletes one finished task (whoever wins the ZREM does it); 1 when this call did."""
        if not await self.call(self.client.zrem(self.keys.room_all, task_id)):
            return 0
        await self._forget([task_id])
        return 1

    async def _forget(self, task_ids: Sequence[str]) -> None:
        """Deletes the keys and index entries of tasks that left the room. On a standalone
        Redis two commands for them all, the second after the first (it names the index keys
        the first read); on a Cluster, where a script reaches one slot, those two per task.

        Measured (tests.load.instructions --redis, a full store of 2,000, so one deletion per
        send): 1,685k -> 1,485k instructions per send, against loading the whole task first
        and four commands one after another; 1,402k -> 1,233k with a whole eviction batch
        (up to 64 tasks) in the two commands, against two per task."""
        if self._on_cluster and len(task_ids) > 1:
            await asyncio.gather(*(self._forget([task_id]) for task_id in task_ids))
            return
        keys = self.keys
        task_keys = [key for task_id in task_ids for key in keys.of_task(task_id)]
        found = await self.run_script("FORGET", task_keys, [])
        delivering = [task_id for task_id in task_ids if task_id in self._delivering]
        if delivering:  # (this replica's delivery set holds only those)
            self._delivering.difference_update(delivering)
            await self.call(self.client.srem(keys.replica_deliveries(self.replica_id), *delivering))
        index_keys: list[str] = []
        members: list[Any] = []
        for tenant, owner, state, context_id, member in found:
            if member and tenant is not None and owner is not None:
                scope = Scope(tenant.decode(), owner.decode())
                names = keys.indexes(scope, int(state or 0), (context_id or b"").decode())
                index_keys += names
                members += (len(names), member)
        if members:
            await self.run_script("UNINDEX", index_keys, members)
        if self.on_evict is not None:
            for task_id in task_ids:
                self.on_evict(task_id)

    async def start(self) -> None:
        """Checks that Redis answers (StoreUnavailableError otherwise), opens the event reader
        and starts the lease keeper."""
        await self.call(self.client.ping())
        await self._use_cluster_if_there_is_one()
        if self.webhooks is not None:
            self.webhooks.on_delivered = self._delivered
        self._started = True
        await self.events.start()
        await self._heartbeat()
        loop = asyncio.get_running_loop()
        self._background.append(loop.create_task(self._keep_lease()))

    async def _keep_lease(self) -> None:
        while not self._closing:
            await asyncio.sleep(self.lease / 3)
            try:
                await self._heartbeat()
            except StoreUnavailableError:
                pass  # counted and logged as the store's outage; the next beat tries again
            except Exception as exc:
                self._lease_failures.failed(f"{type(exc).__name__}: {exc}", traceback=exc)
            else:
                self._lease_failures.recovered()

    async def _heartbeat(self) -> None:
        """Renews this replica's lease, and reaps the replicas whose lease ran out."""
        now = time.time()
        dead = await self.run_script(
            "HEARTBEAT",
            [self.keys.replicas],
            [self.replica_id, int((now + self.lease) * 1000), int(now * 1000)],
        )
        for replica in dead:
            name = replica.decode()
            if name != self.replica_id and await self.call(
                self.client.zrem(self.keys.replicas, name)
            ):
                await self._reap(name)

    async def _reap(self, replica: str) -> None:
        """Goes on with the stopped `replica`'s webhook deliveries, then marks FAILED every
        task it was running (spec decision §9.11)."""
        await self._take_over_deliveries(replica)
        keys = self.keys
        tasks = await self.call(self.client.hgetall(keys.replica_tasks(replica)))
        orphans: list[_Loaded] = []
        for member, scope_text in tasks.items():  # rooms first: a FAILED seen means all done
            task_id = member.decode()
            loaded = await self._load(task_id)
            if loaded is None:  # reserved, never created: its room goes back
                scope = Scope(*json.loads(scope_text))
                await self._settle_room(task_id, scope, "release")
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
        await self.call(self.client.delete(keys.replica_tasks(replica)))
        if failed:
            log.warning("replica %s stopped: %d of its tasks were marked FAILED", replica, failed)

    def abandon(self) -> None:
        """Stops renewing this replica's lease and leaves everything as it is, as a crash
        would: within the lease another replica takes over. For a process about to exit
        without draining, and for tests of the takeover."""
        self._closing = True
        for task in self._background:
            task.cancel()

    async def close(self) -> None:
        """Stops the lease keeper and the event reader, and lets this replica's lease run out
        now: the next replica to renew its own lease takes over what is left (webhook events
        not yet delivered, any task the drain could not settle)."""
        self._closing = True
        for task in self._background:
            task.cancel()
        if self._probe is not None:
            self._probe.cancel()
        if self._background:
            # Bounded: a cancel that lands inside a Redis call can be lost on Python 3.11
            # (asyncio.timeout and redis-py's connection handling); the flag ends the loop.
            await asyncio.wait(self._background, timeout=self.timeout + self.lease)
        self._background.clear()
        with contextlib.suppress(StoreUnavailableError):
            expired = int(time.time() * 1000) - 1
            await self.call(self.client.zadd(self.keys.replicas, {self.replica_id: expired}))
        await self.events.close()
        await self.client.aclose()
        if self.pubsub_client is not self.client:
            await self.pubsub_client.aclose()
