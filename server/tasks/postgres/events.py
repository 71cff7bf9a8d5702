"""The events side of the PostgreSQL store: each replica's one LISTEN connection, which feeds its
local streams, and the outcome of a message id whose first delivery another replica runs.

Every write that makes events inserts them into `a2a_events` and, in the same statement,
NOTIFYs channel `a2a_events` once per event; PostgreSQL delivers a transaction's notifications
when it commits, in commit order, to every listening connection. Payloads (text, at most 8000
bytes):

    e\n<task id>\n<seq>\n<flags>\n<StreamResponse, base64, or "" when larger than INLINE_MAX>
    n\n<task id>\n<x | X>\n<google.rpc.Status, base64>      (a notice: see `withdraw`)

and on channel `a2a_cancel`: "<replica id>\n<task id>" (a remote cancel of a run there).

An event too large to ride along is read from `a2a_events` by the replicas that have a stream
of its task (one round trip, in order with the others). Flags: "t" (terminal, or a direct
reply) closes every stream, "i" (interrupted) the send streams. Sequences are the event ids
(core/event_ids.py): per task they only grow.

No polling: the listener waits on its connection's socket. When that connection breaks, every
stream it served ends with UNAVAILABLE (their clients resubscribe for a fresh snapshot) and the
backend's probe brings it back (`restart`).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from a2a_grpc.core import status
from a2a_grpc.core.errors import ServiceUnavailableError, StatusError
from a2a_grpc.core.event_ids import stamp
from a2a_grpc.core.states import SETTLED_STATES
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.base import Scope, StoreUnavailableError
from a2a_grpc.server.tasks.broker import REPLAY_BATCH, SubscriberOverflowError, Subscription
from a2a_grpc.server.tasks.postgres.backend import SLOW_CONNECT

if TYPE_CHECKING:
    from a2a_grpc.server.tasks.postgres.backend import Connection, PostgresBackend

log = logging.getLogger(__name__)

EVENTS_CHANNEL = "a2a_events"
CANCEL_CHANNEL = "a2a_cancel"
INLINE_MAX = 5600
"""Largest event (bytes) whose body rides in its notification (base64 with PostgreSQL's line
breaks stays under the 8000-byte payload limit)."""


def event_payload(task_id: str, seq: int, flags: str, body: bytes) -> str:
    inline = base64.b64encode(body).decode() if len(body) <= INLINE_MAX else ""
    return f"e\n{task_id}\n{seq}\n{flags}\n{inline}"


def notice_payload(task_id: str, every: bool, error: StatusError) -> str:
    encoded = base64.b64encode(status.to_bytes(error)).decode()
    return f"n\n{task_id}\n{'X' if every else 'x'}\n{encoded}"


_Seen = tuple[int, bytes | None, str]
"""An event as a notification told it: (seq, body or None when it is to be read, flags)."""
Replayed = tuple[int, bytes, str]
"""A kept event as read from `a2a_events`: (seq, StreamResponse bytes, flags)."""
ReplayedPage = tuple[Sequence[Replayed], bool]
"""A page of kept events, and whether the task is terminal."""
ReplayPage = Callable[[int, int], Awaitable[ReplayedPage]]
"""Reads the page of at most `count` kept events after a seq."""


class Listener:
    """This replica's one LISTEN connection: the events of every task, and its cancels. Fans
    each event out to the local subscriptions of its task (broker.Subscription, so overflow
    and closing behave as in the in-memory store)."""

    def __init__(
        self,
        backend: PostgresBackend,
        queue_size: int,
        *,
        on_remote_cancel: Callable[[str], None] | None = None,
    ) -> None:
        self.backend = backend
        self.queue_size = queue_size
        self.on_remote_cancel = on_remote_cancel
        self._subscribers: dict[str, list[Subscription]] = {}
        # Subscriptions waiting for their snapshot's sequence, with the events seen meanwhile.
        self._pending: dict[Subscription, list[_Seen]] = {}
        self._after: dict[Subscription, int] = {}
        self._reader: asyncio.Task[None] | None = None
        self.listening = asyncio.Event()
        """Set while LISTEN holds: events reach this replica's streams."""
        self._ready: asyncio.Future[None] | None = None

    async def start(self) -> None:
        """Connects and LISTENs; returns once notifications are on their way here."""
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self._reader = loop.create_task(self._read(self._ready))
        try:
            await asyncio.wait_for(
                asyncio.shield(self._ready), max(self.backend.timeout, SLOW_CONNECT) + 1
            )
        except TimeoutError:
            self._reader.cancel()
            raise StoreUnavailableError(
                "the task store (PostgreSQL) did not take LISTEN in time; retry shortly"
            ) from None

    def restart(self) -> None:
        """After the database came back: a fresh connection."""
        self.listening.clear()
        job = asyncio.get_running_loop().create_task(self._restart())
        job.add_done_callback(lambda done: done.cancelled() or done.exception())

    async def _restart(self) -> None:
        self._fail_all(
            StoreUnavailableError("the task store (PostgreSQL) was unavailable; subscribe again")
        )
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            with contextlib.suppress(BaseException):
                await reader
        try:
            await self.start()
        except StoreUnavailableError as failed:
            # Down again, or too slow to take LISTEN: an outage either way (streams cannot
            # open), so that the backend's probe calls restart() once more when it answers.
            self.backend.report_failure(f"its LISTEN connection did not open again ({failed})")

    async def _read(self, ready: asyncio.Future[None]) -> None:
        try:
            async with self.backend.dedicated() as connection:
                await connection.execute(f"LISTEN {EVENTS_CHANNEL}")
                await connection.execute(f"LISTEN {CANCEL_CHANNEL}")
                self.listening.set()
                ready.set_result(None)
                await self._dispatch_from(connection)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not ready.done():
                ready.set_exception(
                    exc
                    if isinstance(exc, StoreUnavailableError)
                    else StoreUnavailableError(str(exc))
                )
                return
            if self.backend.closing:
                return
            self._fail_all(
                StoreUnavailableError(
                    "the task store (PostgreSQL) connection broke; call SubscribeToTask again"
                )
            )
            self.backend.report_failure(f"its LISTEN connection broke ({type(exc).__name__})")
        finally:
            self.listening.clear()

    async def _dispatch_from(self, connection: Connection) -> None:
        async for notification in connection.notifies():
            if notification.channel == CANCEL_CHANNEL:
                replica, _, task_id = notification.payload.partition("\n")
                if replica == self.backend.replica_id and self.on_remote_cancel is not None:
                    self.on_remote_cancel(task_id)
                continue
            kind, task_id, rest = _split(notification.payload)
            subscribers = self._subscribers.get(task_id)
            if not subscribers:
                continue
            if kind == "n":
                every, _, encoded = rest.partition("\n")
                self._withdrawn(subscribers, _decode(encoded), every=every == "X")
                continue
            seq_text, _, rest = rest.partition("\n")
            flags, _, encoded = rest.partition("\n")
            seq = int(seq_text)
            body = _decode(encoded) if encoded else None
            if body is None:  # too large to ride along: read it (in order with the others)
                body = await self._fetch(task_id, seq)
            self._offer_all(task_id, (seq, body, flags))

    async def _fetch(self, task_id: str, seq: int) -> bytes | None:
        """The body of a large event; None when it is gone (trimmed, or its task evicted)."""
        try:
            row = await self.backend.fetchone(
                "SELECT body FROM a2a_events WHERE task_id = %s AND seq = %s", (task_id, seq)
            )
        except StoreUnavailableError:
            return None
        return None if row is None else bytes(row[0])

    def _offer_all(self, task_id: str, seen: _Seen) -> None:
        for subscription in list(self._subscribers.get(task_id, ())):
            pending = self._pending.get(subscription)
            if pending is not None:
                if len(pending) >= subscription.room:
                    self._overflowed(subscription)
                    continue
                pending.append(seen)
            elif seen[0] > self._after.get(subscription, 0):
                self._deliver(subscription, *seen)

    def ensure_listening(self) -> None:
        """StoreUnavailableError while the LISTEN connection is down (a watch opened now
        would miss events)."""
        if not self.listening.is_set():
            raise StoreUnavailableError(
                "the task store (PostgreSQL) is reconnecting; retry shortly"
            )

    def open(self, task_id: str, until_terminal: bool) -> Subscription:
        """A subscription to the task's events, holding them until `start_after`."""
        self.ensure_listening()
        subscription = Subscription(self, task_id, self.queue_size, until_terminal)
        self._pending[subscription] = []
        self._subscribers.setdefault(task_id, []).append(subscription)
        return subscription

    def start_after(
        self,
        subscription: Subscription,
        seq: int,
        replayed: list[tuple[int, bytes, str]] = [],  # noqa: B006 (never mutated)
    ) -> None:
        """Passes on the events after `seq` (the snapshot's last), now and from now on;
        `replayed` first: (seq, StreamResponse bytes, flags) of the kept events after it."""
        seen = self._pending.pop(subscription, None)
        if seen is None:  # canceled meanwhile
            return
        self._after[subscription] = seq
        for event_seq, payload, flags in replayed:
            self._deliver(subscription, event_seq, payload, flags)
            if subscription not in self._after:  # closed by the event
                return
        after = self._after[subscription]
        for event_seq, body, event_flags in seen:
            if event_seq > after:
                self._deliver(subscription, event_seq, body, event_flags)
                if subscription not in self._after:
                    return

    def replay(
        self,
        subscription: Subscription,
        after: int,
        replayed: Sequence[Replayed],
        terminal: bool,
        *,
        more: int,
        next_page: ReplayPage,
    ) -> None:
        """Passes on the kept events after `after`, a page at a time, then the live ones:
        `replayed` (and `terminal`) is the first page; when it holds `more` events, the next
        pages are read by `next_page` as the reader takes them (broker.py: pacing). Live
        events seen meanwhile wait, counted against the subscription's queue bound, and pass
        on after the last page, those not already replayed."""
        cursor = after
        for seq, payload, flags in replayed:
            self._deliver(subscription, seq, payload, flags)
            if subscription not in self._after:  # closed by the event
                return
            cursor = seq
        if len(replayed) < more:
            self._caught_up(subscription, cursor, terminal)
            return

        async def refill() -> None:
            nonlocal cursor
            pending = self._pending.get(subscription)
            if pending is None:  # canceled meanwhile
                subscription.caught_up()
                return
            count = min(REPLAY_BATCH, subscription.room - len(pending))
            try:
                page, terminal = await next_page(cursor, count)
            except Exception as exc:  # the database is down, or the events are gone
                subscription.caught_up()
                subscription._fail(exc)
                subscription.cancel()
                return
            for seq, payload, flags in page:
                if subscription not in self._pending:
                    return  # ended meanwhile
                self._deliver(subscription, seq, payload, flags)
                if subscription not in self._after:  # closed by the event
                    return
                cursor = seq
            if len(page) < count:
                self._caught_up(subscription, cursor, terminal)

        subscription.refill = refill

    def _caught_up(self, subscription: Subscription, cursor: int, terminal: bool) -> None:
        """The replay read the last kept event, `cursor`: live events from now on."""
        subscription.caught_up()
        self.start_after(subscription, cursor)
        if terminal and subscription in self._after:  # nothing follows what was kept
            subscription._close()
            subscription.cancel()

    def _overflowed(self, subscription: Subscription) -> None:
        """More live events arrived while its replay was read than its queue holds."""
        subscription.caught_up()
        subscription._fail(
            SubscriberOverflowError(
                f"this stream fell more than {self.queue_size} events behind its task while "
                "replaying; resume after the last event id it got, or subscribe again"
            )
        )
        subscription.cancel()

    def _deliver(
        self, subscription: Subscription, seq: int, body: bytes | None, flags: str
    ) -> None:
        self._after[subscription] = seq
        if body is None:
            subscription._fail(
                SubscriberOverflowError(
                    "this stream missed an event the task store no longer keeps; call "
                    "SubscribeToTask for a fresh snapshot"
                )
            )
            subscription.cancel()
            return
        event = a2a_pb2.StreamResponse.FromString(body)
        stamp(event, str(seq))
        if subscription._offer(event) < 0:
            subscription.cancel()
            return
        if flags == "t" or (flags == "i" and not subscription.until_terminal):
            subscription._close()
            subscription.cancel()

    def _withdrawn(
        self, subscribers: list[Subscription], payload: bytes | None, *, every: bool
    ) -> None:
        error = (status.from_bytes(payload) if payload else None) or ServiceUnavailableError(
            "the agent could not work on this message now; send it again later"
        )
        for subscription in list(subscribers):
            if every or not subscription.until_terminal:
                subscription._fail(error)
                subscription.cancel()

    def _remove(self, task_id: str, subscription: Subscription) -> None:
        self._pending.pop(subscription, None)
        self._after.pop(subscription, None)
        subscribers = self._subscribers.get(task_id)
        if subscribers is None or subscription not in subscribers:
            return
        subscribers.remove(subscription)
        if not subscribers:
            del self._subscribers[task_id]

    def _fail_all(self, error: Exception) -> None:
        for subscribers in list(self._subscribers.values()):
            for subscription in list(subscribers):
                subscription._fail(error)
                subscription.cancel()

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.wait([self._reader], timeout=self.backend.timeout)


def _split(payload: str) -> tuple[str, str, str]:
    kind, _, rest = payload.partition("\n")
    task_id, _, rest = rest.partition("\n")
    return kind, task_id, rest


def _decode(encoded: str) -> bytes | None:
    try:
        return base64.b64decode(encoded)
    except (binascii.Error, ValueError):
        return None


class RemoteOutcome:
    """The outcome of a message id's first delivery, which another replica (or an earlier
    process) runs: followed through the task's events, like a stream would."""

    def __init__(self, task_id: str, scope: Scope) -> None:
        self.task_id = task_id
        self.scope = scope
        self.reply_message: a2a_pb2.Message | None = None
        self.unavailable: StatusError | None = None
        self.started = asyncio.Event()
        self.settled = asyncio.Event()
        self._follower: asyncio.Task[None] | None = None

    @classmethod
    async def follow(
        cls,
        backend: PostgresBackend,
        listener: Listener,
        task_id: str,
        scope: Scope,
        message_id: str,
        claim: tuple[str, str],
    ) -> RemoteOutcome:
        """Follows the delivery of message `message_id` as task `task_id`. A task whose
        history does not hold the message yet (an answer the delivery has not handed to the
        task so far) is not its outcome: only the events after it are. With nothing of it
        stored, `claim` (digest, value) tells a delivery not made yet (it still holds) from
        one withdrawn before this subscription opened (see `Claims.outcome`)."""
        outcome = cls(task_id, scope)
        subscription = listener.open(task_id, until_terminal=False)
        try:
            row = await backend.fetchone(
                "SELECT body, last_event FROM a2a_tasks WHERE id = %s AND body IS NOT NULL",
                (task_id,),
            )
            if row is not None:
                task = a2a_pb2.Task.FromString(row[0])
                if any(message.message_id == message_id for message in task.history):
                    outcome._saw(a2a_pb2.StreamResponse(task=task))
                listener.start_after(subscription, int(row[1]))
            else:  # not created yet, or a direct reply: read what there is from the start
                listener.start_after(subscription, 0)
                reply = await backend.fetchone(
                    "SELECT body FROM a2a_replies WHERE task_id = %s", (task_id,)
                )
                if reply is not None:
                    outcome._saw(a2a_pb2.StreamResponse.FromString(reply[0]))
                for (body,) in await backend.fetchall(
                    "SELECT body FROM a2a_events WHERE task_id = %s ORDER BY seq LIMIT 4",
                    (task_id,),
                ):
                    outcome._saw(a2a_pb2.StreamResponse.FromString(body))
            if not outcome.started.is_set():
                holder = await backend.fetchone(
                    "SELECT value FROM a2a_claims WHERE digest = %s AND expires_at > now()",
                    (claim[0],),
                )
                if holder is None or holder[0] != claim[1]:
                    outcome._not_taken(message_id)
        except BaseException:
            subscription.cancel()
            raise
        if outcome.settled.is_set():
            subscription.cancel()
        else:
            outcome._follower = asyncio.get_running_loop().create_task(
                outcome._follow(subscription)
            )
        return outcome

    async def _follow(self, subscription: Subscription) -> None:
        try:
            async for event in subscription:
                self._saw(event)
                if self.settled.is_set():
                    return
        except ServiceUnavailableError as withdrawn:  # the run did not take the message
            self.unavailable = withdrawn
        except Exception:
            log.debug("lost the events of task %s", self.task_id, exc_info=True)
        finally:
            subscription.cancel()
            self.started.set()
            self.settled.set()

    def _not_taken(self, message_id: str) -> None:
        """The delivery was withdrawn, and its notice was not seen here."""
        self.unavailable = ServiceUnavailableError(
            f"the first delivery of message {message_id!r} was not taken (its agent could "
            "not work on it then); send it again"
        )
        self.started.set()
        self.settled.set()

    def _saw(self, event: a2a_pb2.StreamResponse) -> None:
        kind = event.WhichOneof("payload")
        if kind == "message":
            self.reply_message = event.message
            self.started.set()
            self.settled.set()
        elif kind == "task":
            self.started.set()
            if event.task.status.state in SETTLED_STATES:
                self.settled.set()
        elif kind == "status_update":
            self.started.set()
            if event.status_update.status.state in SETTLED_STATES:
                self.settled.set()


__all__ = ["CANCEL_CHANNEL", "EVENTS_CHANNEL", "Listener", "RemoteOutcome"]
