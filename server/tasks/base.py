"""The task-store contract: what the handler and the task runs need of a store, kept by every
store (in process memory, Redis shared by replicas, or one a package adds), plus the errors a
store raises and how a store is opened.

This module is the supported way to add a store (docs/stores.md, "Writing a store"): a class
that keeps `TaskStore`, a `StoreKind` that opens it from a URL, registered under its URL scheme
in the `a2a_grpc.stores` entry point group (tasks/registry.py), and the contract suite
`a2a_grpc.server.tasks.contract`, which every store passes. What differs between stores (a
dedup window other processes share, remote cancels, leases, replay, where push configs live,
how a run cut short by a stop ends) is asked of the store through this contract, never by
testing which class it is.

Contract of every `TaskStore`:
- Concurrency: all calls happen on the server's event loop. The in-memory store never suspends
  inside a call; a shared store does, so every check that must hold at the time of a write is
  made by the store itself, atomically (`resume`, `cancel`, the version check of each write).
- Copies: a task handed to `create` belongs to the store afterwards; every task the store
  returns is a copy the caller owns.
- Scoping: every read takes a `Scope`; a task of another tenant or owner is reported exactly as
  an unknown id would be (None / not listed).
- Writers: the run working on a task (on this replica) writes it. A write to a task that turned
  terminal meanwhile (canceled by another caller or replica, or failed by a lease reaper) changes
  nothing and raises `TaskFinishedError`.
- Events: every write publishes its stream event to the task's subscribers, on every replica
  that shares the store, in the order of the writes; `watch` gives a snapshot and then exactly
  the events after it (no gap, no repeat).
- Event ids (core/event_ids.py): every event a subscription yields carries its id, stamped on
  the subscription's own copy (stored tasks never carry one); per task the ids only grow, and
  every subscriber on every replica sees the same id for the same event. `watch(after=id)`
  yields exactly the events after that id, kept ones first, then live ones, while the task
  runs and after it finished, as long as the task is stored (memory: the last
  `replay_length` events of a task a stream followed; Redis and PostgreSQL: the task's last
  `stream_length` events, exactly); EventIdExpiredError when they are no longer all kept, and
  for any text that is not an id the store issued for this task (malformed, out of range,
  another task's: never a replay of the whole stream, never another error; replay_ids.py).
- Listener: what a store tells the server (a task it let go of, a remote cancel of a task a
  run here works on, its backend's health) goes to the `StoreListener` it is opened with
  (`StoreFactory`); nothing is wired onto a store after it is built.
- Life: the server opens a store (`StoreKind.open` or a `StoreFactory`), calls `start` once on
  its event loop before the first call, and `close` once after the last one; it never calls
  anything else before `start` or after `close`.
- Failures: a shared store that cannot reach its backend within its timeout raises
  `StoreUnavailableError` (retryable); nothing half-written is visible afterwards.
- Byte budget (a store that has one: the in-memory store's `--max-store-bytes`): every write is
  counted when it lands, not only when a task is created or settles: the room `reserve`
  promises a new task, an answer `resume` adds, an artifact (`update(..., size=)`), a status
  message (`set_status`, `create`'s first status). A write that does not fit evicts finished
  tasks, oldest first; when live tasks fill the budget it raises `StoreFullError` and changes
  nothing, so nothing accepted before is lost. Only `force_room` status changes (the server's
  own short final statuses, and cancels) land regardless, counted. The Redis store counts no
  bytes itself (its bound is Redis's own `maxmemory`, with `noeviction`): it takes the same
  arguments, and a write Redis refuses at its maxmemory raises `StoreFullError` and changes
  nothing, as over a budget (but no finished task is evicted to make room, and a `force_room`
  write is refused too while Redis stays full).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

from a2a_grpc.core.errors import StatusError
from a2a_grpc.core.metadata import PROTOCOL_VERSION
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.broker import EventObserver
from a2a_grpc.server.tasks.index import InvalidPageTokenError, TaskQuery

if TYPE_CHECKING:
    from a2a_grpc.server.tasks.sealing import CredentialKeys

__all__ = [
    "REPLICA_STOPPED_TEXT",
    "Claims",
    "ClaimsWithRoom",
    "DeliveryRecorder",
    "EventBuilder",
    "InvalidPageTokenError",
    "LiveTaskLimitError",
    "Outcome",
    "PushConfigs",
    "Scope",
    "StoreFactory",
    "StoreFullError",
    "StoreKind",
    "StoreListener",
    "StoreSettings",
    "StoreStats",
    "StoreUnavailableError",
    "Subscription",
    "TaskBusyError",
    "TaskFinishedError",
    "TaskQuery",
    "TaskStore",
    "WebhookConfigs",
    "Webhooks",
]


REPLICA_STOPPED_TEXT = (
    "the replica running this task stopped before it finished; the task was not re-run: "
    "send the request again as a new task"
)
"""The status message of a task FAILED because its replica stopped (spec decision §9.11)."""


class Scope(NamedTuple):
    """Who may see a task: the request's tenant and the authenticated caller.

    A NamedTuple rather than a dataclass: it is made and hashed on every request, and a tuple's
    hash and equality are C code (85 ns for both, 236 ns for a frozen slotted dataclass).
    """

    tenant: str
    owner: str


class StoreStats(NamedTuple):
    """What a store tells about its size (for /metrics); None where it cannot say cheaply."""

    tasks: int
    """Tasks stored (live and finished)."""
    bytes: int | None
    """Bytes of tasks counted against the store's byte budget."""
    by_state: dict[int, int] | None
    """Stored tasks per TaskState."""


def eviction_batch(max_tasks: int) -> int:
    """Finished tasks a full store evicts at once: up to 64, at most 1/64 of its size, so the
    eviction's cost is paid once per batch rather than once per new task."""
    return max(1, min(64, max_tasks // 64))


class FirstStatus(NamedTuple):
    """The status change a task's creation is written together with (`TaskStore.create`)."""

    state: int
    message: a2a_pb2.Message | None = None
    event_metadata: dict[str, Any] | None = None


class StoreFullError(Exception):
    """The store has no room for another task: every slot, or its byte budget, is taken by live
    (non-terminal) tasks. Retrying later can help."""


class LiveTaskLimitError(StoreFullError):
    """The caller (or its tenant) already holds as many live tasks as it may."""


class StoreUnavailableError(Exception):
    """The store's backend (e.g. Redis) did not answer in time or refused the connection.
    Nothing was written; the same request may succeed later."""


class TaskFinishedError(Exception):
    """The task is terminal (e.g. canceled meanwhile): the write was not applied."""

    def __init__(self, task_id: str, state: int) -> None:
        super().__init__(f"task {task_id} is {a2a_pb2.TaskState.Name(state)}")
        self.task_id = task_id
        """The task written to."""
        self.state = state
        """The terminal state it is in."""


class TaskBusyError(Exception):
    """A run is still working on the task (an earlier message), here or on another replica."""


class Subscription(Protocol):
    """One reader's view of a task's events: iterate it; it ends when the stream should close.

    Raises `SubscriberOverflowError` (broker.py) when the reader fell too far behind.

    One that replays kept events a batch at a time (`watch(after=)`) also has
    `when_caught_up(callback)`, which calls back once every kept event is read, as
    broker.Subscription does; without it, the replay is taken as read at once.
    """

    snapshot_id: str
    """The id of the last event before the subscription's first one (core/event_ids.py): a
    snapshot `watch` returns with it includes that event. "" when unknown."""

    def __aiter__(self) -> AsyncIterator[a2a_pb2.StreamResponse]: ...

    def cancel(self) -> None:
        """Stops receiving; safe to call more than once."""
        ...


class Outcome(Protocol):
    """What a message led to: a run in progress, or the settled result of one."""

    @property
    def task_id(self) -> str:
        """The task the message made or answered (a direct reply's id, when it made none)."""
        ...

    @property
    def scope(self) -> Scope:
        """The scope of that task."""
        ...

    @property
    def reply_message(self) -> a2a_pb2.Message | None:
        """The agent's direct reply (no task stored), once settled; None otherwise."""
        ...

    @property
    def started(self) -> asyncio.Event:
        """Set once the task exists (or the reply is known)."""
        ...

    @property
    def settled(self) -> asyncio.Event:
        """Set once the run ended or was interrupted (implies `started`)."""
        ...

    @property
    def unavailable(self) -> StatusError | None:
        """Once settled: why the message was not taken (its agent could not work on it now),
        None when it was."""
        ...


class Claims(Protocol):
    """Claims on message ids that every process sharing a store sees (the Redis store's
    `claims`): what the idempotency window shared by replicas decides with
    (`protocol.dedup.SharedDedupWindow`)."""

    async def claim(self, digest: str, value: str, window: float) -> str | None:
        """Sets the claim `value` on `digest` for `window` seconds unless one exists; returns
        the existing one."""
        ...

    async def unclaim(self, digest: str, value: str) -> None:
        """Gives back the claim `value` on `digest` (only if it still holds it)."""
        ...

    async def outcome(
        self, task_id: str, scope: Scope, message_id: str, claim: tuple[str, str]
    ) -> Outcome:
        """What the first delivery of message `message_id`, as task `task_id` (the task it
        made, or the one it answered), led to, on any process: only what follows its arrival
        in the task's history counts (the task an answer continues may not have taken it yet).

        `claim` is that delivery's claim, (digest, value). When nothing of the delivery is
        stored yet and the claim no longer holds, the delivery was withdrawn before this
        outcome's stream opened (its notice came too early to be seen: a delivery gives its id
        back before `TaskStore.withdraw` removes the task it made): the outcome is returned
        settled, `unavailable`, rather than waiting on a task that will not come."""
        ...


@runtime_checkable
class ClaimsWithRoom(Claims, Protocol):
    """Claims that can also reserve a new task's room in the store with the claim, atomically
    (the PostgreSQL store's): one write and one commit fewer per new task than a claim and then
    `TaskStore.reserve`. `SharedDedupWindow` uses it where the store's `claims` offer it."""

    async def claim_with_room(
        self, digest: str, value: str, window: float, scope: Scope, size: int, task_id: str
    ) -> str | None:
        """`claim`; when this claim is set, the room of task `task_id` is reserved as
        `TaskStore.reserve(scope, size, task_id)` would, in the same step. A reservation
        refused raises its error (StoreFullError, LiveTaskLimitError) and sets no claim."""
        ...


DeliveryRecorder = Callable[[str, str, str], Awaitable[None]]
"""Awaited with (task id, config id, position) once an event reached a webhook."""


class WebhookConfigs(Protocol):
    """The push configs a webhook dispatcher delivers to (`push.configs.PushConfigStore`)."""

    def mirror(
        self,
        task_id: str,
        configs: list[a2a_pb2.TaskPushNotificationConfig],
        protocols: dict[str, str] | None = None,
    ) -> None:
        """Makes the task's configs `configs` (read from a shared store, with the protocol
        versions of those not registered in 1.0)."""
        ...

    def stored_for(self, task_id: str) -> list[a2a_pb2.TaskPushNotificationConfig]:
        """The task's configs as this process last read them."""
        ...


class PushConfigs(Protocol):
    """Where push-notification configs are kept (`TaskStore.push_configs`): beside the tasks
    in a store other processes share, or this process's (`protocol.push_config_rpcs.
    LocalPushConfigs`). The version a webhook speaks is kept beside its config, never in it."""

    async def put(
        self, config: a2a_pb2.TaskPushNotificationConfig, protocol: str = PROTOCOL_VERSION
    ) -> a2a_pb2.TaskPushNotificationConfig:
        """Stores a copy (minting an id when it has none), registered in `protocol`, the
        version its webhook speaks (kept beside the config, which stays as a 1.0 reader sees
        it); returns a copy as stored."""
        ...

    async def protocols(self, task_id: str) -> dict[str, str]:
        """The protocol version of each of the task's configs not registered in 1.0."""
        ...

    async def count(self, task_id: str) -> int:
        """How many configs the task has."""
        ...

    async def has(self, task_id: str, config_id: str) -> bool:
        """Whether the task has a config of that id."""
        ...

    async def get(self, task_id: str, config_id: str) -> a2a_pb2.TaskPushNotificationConfig | None:
        """A copy of the config, or None. A store that seals configs' secrets
        (`StoreSettings.push_credentials`) raises `sealing.UnreadableCredentialsError` for a
        config whose secrets none of its keys opens."""
        ...

    async def for_task(self, task_id: str) -> list[a2a_pb2.TaskPushNotificationConfig]:
        """Copies of the task's configs, by id (`UnreadableCredentialsError` as `get`)."""
        ...

    async def delete(self, task_id: str, config_id: str) -> None:
        """Forgets the config (and its protocol version); nothing when there is none."""
        ...

    async def drop_task(self, task_id: str) -> None:
        """Forgets every config of the task."""
        ...


class Webhooks(Protocol):
    """What a store needs of the webhook dispatcher (`push.delivery.WebhookDispatcher`): in a
    store other processes share, the writer of an event delivers it, and a replica taking over
    a stopped one re-queues what it had not delivered; a store of this process alone hands its
    events to `with_snapshot`'s observer."""

    @property
    def configs(self) -> WebhookConfigs:
        """The configs the dispatcher delivers to."""
        ...

    def observe(
        self,
        task_id: str,
        event: a2a_pb2.StreamResponse,
        position: str | None = None,
        task: a2a_pb2.Task | None = None,
        *,
        on_delivered: DeliveryRecorder | None = None,
    ) -> None:
        """Queues the event for every webhook of the task (`position`: its place in the
        store's log, awaited with `on_delivered` once delivered; `task`: the task as the event
        left it). Never waits."""
        ...

    def replay(
        self,
        config: a2a_pb2.TaskPushNotificationConfig,
        events: list[tuple[str, bytes]],
        task: a2a_pb2.Task | None = None,
        *,
        on_delivered: DeliveryRecorder | None = None,
    ) -> None:
        """Queues `events` ((position, serialized StreamResponse), oldest first) for one
        webhook."""
        ...

    def with_snapshot(self, snapshot: Callable[[str], a2a_pb2.Task | None]) -> EventObserver:
        """The dispatcher as an event observer (`tasks.broker.Broker`) that asks `snapshot`
        for the task as it stands, by id (the body of a 0.3 webhook)."""
        ...


EventBuilder = Callable[[], a2a_pb2.StreamResponse]
"""Builds a write's stream event; a store calls it only when someone may read the event."""


class StoreListener(Protocol):
    """What a store tells the server, given to the store's constructor (the memory store's
    table takes `task_evicted` alone: it has no backend and no other replica)."""

    def task_evicted(self, task_id: str) -> None:
        """The store let go of this task (e.g. its webhooks go too)."""
        ...

    def canceled_elsewhere(self, task_id: str) -> None:
        """A caller on another replica canceled a task that a run on this replica works on
        (its run must stop; the task is already CANCELED). Only a shared store calls it."""
        ...

    def health_changed(self, healthy: bool) -> None:
        """False when the store's backend stops answering, True when it answers again (never
        called by a store without a backend)."""
        ...


class TaskStore(Protocol):
    """Tasks, their events and the room they take. See the module docstring for the contract."""

    @property
    def claims(self) -> Claims | None:
        """Claims on message ids that every process using the store sees, which decide the
        idempotency window across them (`protocol.dedup.window_for`); None for a store no other
        process sees, whose window decides alone. A shared store must have them: without, a
        message repeated to another replica would run again."""
        ...

    @property
    def failures(self) -> int:
        """Failed round trips to the backend since start (always 0 without one), for metrics:
        the log summarizes their repeats (core/failure_log.py)."""
        ...

    @property
    def push_configs(self) -> PushConfigs | None:
        """Where the push configs of its tasks are kept when the store keeps them, beside the
        tasks (a store other processes share must: a config registered on one replica is
        delivered by the one that writes the event); None: the webhook dispatcher keeps them
        in this process, and the store's evictions drop them (`StoreListener.task_evicted`)."""
        ...

    @property
    def stopped_run_status(self) -> tuple[int, str | None]:
        """The state, and the status text, a task ends in when its run here is cut short as
        this process stops (past the shutdown grace). A store other processes share says
        (FAILED, `REPLICA_STOPPED_TEXT`), as its lease reaper does for a process that died:
        another replica takes the next request (spec decision §9.11); a store of this process
        alone, (CANCELED, None)."""
        ...

    # -- room -----------------------------------------------------------------------------

    async def reserve(self, scope: Scope, size: int, task_id: str) -> None:
        """Promises room for the new task `task_id` of about `size` bytes (`create` stores it).

        LiveTaskLimitError when the scope's owner or tenant holds its share of live tasks,
        StoreFullError when live tasks fill the store. Unused room goes back with `release`.
        """
        ...

    async def release(self, scope: Scope, task_id: str) -> None:
        """Gives back room promised by `reserve` that no task will use."""
        ...

    # -- writes by the run working on the task -----------------------------------------------

    async def create(
        self,
        task: a2a_pb2.Task,
        scope: Scope,
        *,
        reserved_size: int,
        first_status: FirstStatus | None = None,
    ) -> bool:
        """Stores a new task (taking ownership of `task`) in the room `reserve` promised,
        stamps its status time, marks it worked on by this replica, and publishes it (a
        StreamResponse with the task) to subscribers of its id. A first status message beyond
        that room is counted: StoreFullError, nothing stored, when it does not fit.

        With `first_status`, then changes its status as `set_status` does, in the same write
        (readers see the task first as it was given, then the status update); returns what
        `set_status` returns. Without it, False.
        """
        ...

    async def set_status(
        self,
        task_id: str,
        state: int,
        message: a2a_pb2.Message | None = None,
        *,
        event_metadata: dict[str, Any] | None = None,
        force_room: bool = False,
    ) -> bool:
        """A status change: `state`, and `message` as the status message (also appended to the
        history; None clears it), stamped with the store's clock, published as a status update
        (with `event_metadata`). Streams close after a terminal state; send streams also after
        an interrupted one. Returns True when a reader has a backlog (the writer should yield).

        TaskFinishedError when the task is already terminal. StoreFullError, nothing changed,
        when the message does not fit in the byte budget, unless `force_room` (counted anyway).
        """
        ...

    async def update(
        self,
        task_id: str,
        mutate: Callable[[a2a_pb2.Task], None],
        event: EventBuilder | None = None,
        *,
        size: int = 0,
    ) -> bool:
        """Applies `mutate` to the task (not its status) and publishes `event()` when given.
        Returns the backlog signal like `set_status`. TaskFinishedError when terminal.

        `size`: the bytes `mutate` adds (an artifact's parts), counted before it runs;
        StoreFullError, with `mutate` not run, when they do not fit in the byte budget."""
        ...

    async def reply(self, task_id: str, message: a2a_pb2.Message) -> None:
        """Publishes a direct reply (no task is stored) to subscribers of `task_id`, last."""
        ...

    async def withdraw(
        self,
        task_id: str,
        scope: Scope,
        error: StatusError,
        waiting: tuple[int, a2a_pb2.Message] | None = None,
    ) -> None:
        """The message a run here worked on was not taken (its agent could not work on it now:
        `error`). Every stream of the task that closes at an interrupted state (send streams,
        and what other replicas follow of the run) ends with `error`, on every replica.

        With `waiting` (state, status message): the message answered the task, which goes
        back to that interrupted state, published to the streams that stay open; what the run
        recorded stays. Without: the task is the message's own and goes, with its events,
        index entries and room (or, not created yet, the room `reserve` promised it), and
        every stream of it ends with `error`."""
        ...

    async def resume(
        self, task_id: str, scope: Scope, message: a2a_pb2.Message
    ) -> a2a_pb2.Task | None:
        """A follow-up message to an interrupted task, atomically: the message joins the
        history, the task is SUBMITTED again (published) and worked on by this replica.

        Returns the task as it was before, None when it is unknown in `scope`. TaskBusyError
        while a run works on it; TaskFinishedError when it is terminal; StoreFullError when the
        message does not fit in the byte budget (the task stays as it was, waiting).
        """
        ...

    async def cancel(
        self, task_id: str, scope: Scope, message: a2a_pb2.Message | None = None
    ) -> a2a_pb2.Task | None:
        """CANCELED now, with `message` as the status message, published; a run working on it
        on another replica is told (its store's listener hears `canceled_elsewhere` there).
        Returns the task after, or None when it is unknown in `scope`. TaskFinishedError when
        it is already terminal.
        """
        ...

    async def cancel_parked(self, task_id: str, message: a2a_pb2.Message) -> Scope | None:
        """`cancel` for the housekeeper: only when the task still waits for input (no run works
        on it). The store sets the message's context id. Returns the task's scope when it was
        canceled, None otherwise."""
        ...

    # -- reads ----------------------------------------------------------------------------

    async def get(
        self, task_id: str, scope: Scope, *, history_length: int | None = None
    ) -> a2a_pb2.Task | None:
        """A copy of the task, or None when it is unknown or belongs to another scope."""
        ...

    async def copy_into(
        self,
        task_id: str,
        scope: Scope,
        target: a2a_pb2.Task,
        *,
        history_length: int | None = None,
    ) -> bool:
        """`get` into a message the caller owns; False (target untouched) when not found. A
        shared store may answer from its copy of a task it settled within the last second (the
        blocking caller's reply), as the task stood when it settled."""
        ...

    async def list(self, scope: Scope, query: TaskQuery) -> a2a_pb2.ListTasksResponse:
        """One page of the scope's tasks, most recently updated first; page tokens are valid on
        every replica sharing the store. InvalidPageTokenError for a token no store issued."""
        ...

    async def watch(
        self, task_id: str, scope: Scope, *, until_terminal: bool, after: str | None = None
    ) -> tuple[a2a_pb2.Task, Subscription] | None:
        """The task now, and a subscription to exactly the events after that snapshot; None
        when the task is unknown in `scope`. See `subscribe` for `until_terminal`.

        With `after` (an event id): the subscription yields exactly the events after that id
        instead (the snapshot is only for the caller's checks); EventIdExpiredError (core)
        when the store no longer keeps them all, or `after` is not an id of the task's (any
        text at all: the caller's header, unchecked; replay_ids.py parses it)."""
        ...

    async def subscribe(self, task_id: str) -> Subscription:
        """Every event of a task this replica is about to create or resume, from the next one
        on. It closes after a terminal state, an interrupted one, or a direct reply."""
        ...

    # -- housekeeping ---------------------------------------------------------------------

    async def parked_longer_than(self, seconds: float) -> Sequence[str]:
        """Ids of tasks waiting for input (INPUT_REQUIRED / AUTH_REQUIRED) for longer than
        `seconds`, oldest first."""
        ...

    async def evict_expired(self) -> int:
        """Drops terminal tasks past their time to live; returns how many went (a store whose
        backend expires them itself returns 0)."""
        ...

    async def stats(self) -> StoreStats:
        """The store's size now; a shared store fills in only what one round trip tells."""
        ...

    async def start(self) -> None:
        """Starts the store's background work (connections, leases). Call on the server loop."""
        ...

    async def close(self) -> None:
        """Stops the background work; for a shared store, gives up this replica's leases."""
        ...


# -- opening a store ----------------------------------------------------------------------


@dataclass(frozen=True)
class StoreSettings:
    """The bounds a store is opened with: the server's settings (`serve`'s options) that
    concern its store. A store keeps each one it can; what it cannot is said in its docs."""

    max_tasks: int = 100_000
    """Tasks stored at most, live and finished (`--max-tasks`). A full store evicts finished
    tasks, oldest first (`eviction_batch` at a time); when live tasks fill it, `reserve`
    raises StoreFullError."""
    max_bytes: int | None = None
    """Bytes of tasks the store may hold (`--max-store-bytes`), for a store that counts them
    (the module docstring's byte budget); None: no budget. A store bounded otherwise (Redis:
    its own maxmemory) ignores it."""
    max_live_per_owner: int | None = None
    """Live tasks one caller may hold at once (`--live-tasks-per-principal`); None: no bound."""
    max_live_per_tenant: int | None = None
    """Live tasks one tenant may hold at once (`--live-tasks-per-tenant`); None: no bound."""
    terminal_ttl: float = 3600.0
    """Seconds a finished task stays stored (`--task-ttl`); 0: it goes at the next sweep."""
    lease: float = 10.0
    """Seconds a process's lease on the tasks it runs lasts, for a store other processes share
    (`--task-lease`): a task whose process stopped renewing it is FAILED within this time."""
    queue_size: int = 1024
    """Events a subscriber may fall behind by before its stream ends
    (`--subscriber-queue-size`)."""
    replay_length: int = 1000
    """Events of a task kept for `watch(after=...)` (`--replay-events`)."""
    push_credentials: CredentialKeys | None = None
    """The keys that seal push configs' token and credentials at rest
    (`--push-credentials-keys[-file]`; tasks/sealing.py), for a store that keeps push configs
    where others can read them: it writes and reads them through `sealing.PushConfigCodec`.
    None: they are stored as written. A store of this process's memory ignores it."""


class StoreFactory(Protocol):
    """Makes a store, not started yet, for one server: what `ServerPlan(store=...)` takes
    besides a store, and what the contract suite (`a2a_grpc.server.tasks.contract`) tests.

    `listener` hears what the store tells the server; `webhooks` is the server's webhook
    dispatcher, None when the agent offers no push notifications."""

    def __call__(
        self, settings: StoreSettings, listener: StoreListener, webhooks: Webhooks | None
    ) -> TaskStore:
        """A new store, not started, with `settings`, telling `listener`."""
        ...


def _any_url(url: str) -> str | None:
    return None


@dataclass(frozen=True)
class StoreKind:
    """A kind of store, as the scheme of a store URL names it (`serve --store SCHEME://...`):
    what the registry (tasks/registry.py) finds under a built-in scheme or under the name of an
    `a2a_grpc.stores` entry point."""

    open: Callable[[str, StoreSettings, StoreListener, Webhooks | None], TaskStore]
    """Makes a store, not started, on the URL (`StoreFactory`'s arguments after it)."""
    shared: bool
    """Whether processes that open the same URL see the same tasks, so that `--workers` and
    replicas may use it. Such a store keeps the contract across them: message-id `claims`,
    remote cancels (`StoreListener.canceled_elsewhere`), leases, events on every replica."""
    check: Callable[[str], str | None] = _any_url
    """Why a URL of this kind cannot serve, in one line that shows no password, or None. Run
    when the settings are read, before anything is opened (default: every URL serves)."""

    def factory(self, url: str) -> StoreFactory:
        """The `StoreFactory` of stores on `url`."""

        def make(
            settings: StoreSettings, listener: StoreListener, webhooks: Webhooks | None
        ) -> TaskStore:
            return self.open(url, settings, listener, webhooks)

        return make
