"""The events side of the Redis task store: each replica's one pub/sub reader, which feeds its
local streams, and the outcome of a message id whose first delivery another replica runs.

Events are published by the store's write scripts on the task's channel, as "<stream id>\n
<flags>\n<StreamResponse bytes>"; flags "t" (terminal, or a direct reply) closes every stream,
"i" (interrupted) the send streams. A message that was not taken (`withdraw`) is a notice, not
an event: "0-0\n<x or X>\n<google.rpc.Status bytes>" ends the send streams ("x") or every
stream ("X", the task is gone) with that error. See store.py for the contract and keys.py for
the names.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from a2a_grpc.core import status
from a2a_grpc.core.errors import ServiceUnavailableError, StatusError
from a2a_grpc.core.event_ids import stamp
from a2a_grpc.core.states import SETTLED_STATES
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.base import Scope, StoreUnavailableError
from a2a_grpc.server.tasks.broker import REPLAY_BATCH, SubscriberOverflowError, Subscription

if TYPE_CHECKING:
    from a2a_grpc.server.tasks.redis.backend import RedisBackend

log = logging.getLogger(__name__)

ReplayedEvent = tuple[str, bytes, str]
"""A kept event as read from a task's stream: (its id, StreamResponse bytes, flags)."""
ReplayedPage = tuple[list[ReplayedEvent], bool]
"""A page of kept events, and whether the task is terminal."""
ReplayPage = Callable[[str, int], Awaitable[ReplayedPage]]
"""Reads the page of at most `count` kept events after an id."""


def parse_stream_id(text: str) -> tuple[int, int]:
    """A stream entry id ("<ms>-<seq>") as a tuple that orders like the ids."""
    milliseconds, _, sequence = text.partition("-")
    return int(milliseconds), int(sequence or 0)


class EventReader:
    """This replica's one pub/sub connection: the channels of the tasks its streams watch, and
    its cancel channel. Fans each event out to the local subscriptions (broker.Subscription,
    so overflow and closing behave as in the in-memory store)."""

    def __init__(
        self,
        backend: RedisBackend,
        queue_size: int,
        *,
        on_remote_cancel: Callable[[str], None] | None = None,
    ) -> None:
        """`on_remote_cancel` is called with the id of a task a run here works on, canceled
        by a caller on another replica."""
        self.backend = backend
        self.queue_size = queue_size
        self._pubsub: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._subscribers: dict[str, list[Subscription]] = {}  # by task id
        # Subscriptions waiting for their snapshot's stream id, with the events seen meanwhile.
        self._pending: dict[Subscription, list[tuple[tuple[int, int], str, bytes, str]]] = {}
        self._after: dict[Subscription, tuple[int, int]] = {}
        self._confirmations: dict[str, list[asyncio.Future[None]]] = {}
        self._cancel_channel = backend.keys.cancel_channel(backend.replica_id)
        self.on_remote_cancel = on_remote_cancel
        self._restarting: asyncio.Task[None] | None = None
        self._unsubscribing: set[asyncio.Task[None]] = set()
        self._closed = False

    async def start(self) -> None:
        if self._closed:
            raise StoreUnavailableError("the task store (Redis) is closed")
        self._pubsub = self.backend.pubsub_client.pubsub()
        await self._subscribe_channel(self._cancel_channel)

    def restart(self) -> None:
        """After Redis came back: a fresh connection (the streams it served already ended)."""
        if not self._closed:
            self._restarting = asyncio.get_running_loop().create_task(self._restart())

    async def _restart(self) -> None:
        # Streams open now may have missed events while Redis did not answer: they end
        # (UNAVAILABLE) and their clients resubscribe for a fresh snapshot.
        self._fail_all(
            StoreUnavailableError("the task store (Redis) was unavailable; subscribe again")
        )
        await self._stop_reading()
        with contextlib.suppress(StoreUnavailableError):
            await self.start()  # down again: the backend's probe calls restart() once more

    async def _stop_reading(self) -> None:
        """Stops the reader, then closes its pub/sub connection (it goes back to the pool)."""
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            # Bounded: on Python 3.11 a cancel that lands inside a Redis read can be lost.
            await asyncio.wait([reader], timeout=self.backend.timeout)
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            with contextlib.suppress(Exception):
                await pubsub.aclose()

    async def _subscribe_channel(self, channel: str) -> None:
        """SUBSCRIBE, and wait until Redis confirmed it (only then is no event missed)."""
        if self._pubsub is None:  # between a failure and the reader's restart
            raise StoreUnavailableError("the task store (Redis) is reconnecting; retry shortly")
        confirmed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # Failed by `_fail_all` after a timeout here gave up on it: retrieve it, unlogged.
        confirmed.add_done_callback(lambda future: future.cancelled() or future.exception())
        self._confirmations.setdefault(channel, []).append(confirmed)
        await self.backend.call(self._pubsub.subscribe(channel))
        if self._reader is None or self._reader.done():
            self._reader = asyncio.get_running_loop().create_task(self._read())
        try:
            # Not a Redis call, so bounded here: the store's timeout, as a read would be.
            await self.backend.call(
                asyncio.wait_for(asyncio.shield(confirmed), self.backend.timeout)
            )
        finally:
            waiting = self._confirmations.get(channel)
            if waiting is not None and confirmed in waiting:
                waiting.remove(confirmed)
            if not waiting:  # no list left behind per channel ever subscribed
                self._confirmations.pop(channel, None)

    async def open(self, task_id: str, until_terminal: bool) -> Subscription:
        subscription = Subscription(self, task_id, self.queue_size, until_terminal)
        self._pending[subscription] = []
        subscribers = self._subscribers.get(task_id)
        if subscribers is None:
            self._subscribers[task_id] = [subscription]
            try:
                await self._subscribe_channel(self.backend.keys.channel(task_id))
            except BaseException:
                subscription.cancel()
                raise
        else:
            subscribers.append(subscription)
        return subscription

    def start_after(
        self,
        subscription: Subscription,
        stream_id: str,
        replayed: list[tuple[str, bytes, str]] = [],  # noqa: B006 (never mutated)
    ) -> None:
        """Passes on the events after `stream_id` (the snapshot's last), now and from now on;
        `replayed` first: (id, StreamResponse bytes, flags) of the kept events after it, as
        read from the task's stream after this subscription opened."""
        after = parse_stream_id(stream_id)
        seen = self._pending.pop(subscription, None)
        if seen is None:  # canceled meanwhile
            return
        self._after[subscription] = after
        for text, payload, flags in replayed:
            event_id = parse_stream_id(text)
            self._deliver(subscription, event_id, text, payload, flags)
            if subscription not in self._after:  # closed by the event
                return
            after = event_id
        for event_id, text, payload, flags in seen:
            if event_id > after:
                self._deliver(subscription, event_id, text, payload, flags)
                if subscription not in self._after:
                    return

    def replay(
        self,
        subscription: Subscription,
        after: str,
        replayed: list[ReplayedEvent],
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
        for text, payload, flags in replayed:
            self._deliver(subscription, parse_stream_id(text), text, payload, flags)
            if subscription not in self._after:  # closed by the event
                return
            cursor = text
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
            except Exception as exc:  # Redis is down, or the events are no longer kept
                subscription.caught_up()
                subscription._fail(exc)
                subscription.cancel()
                return
            for text, payload, flags in page:
                if subscription not in self._pending:
                    return  # ended meanwhile
                self._deliver(subscription, parse_stream_id(text), text, payload, flags)
                if subscription not in self._after:  # closed by the event
                    return
                cursor = text
            if len(page) < count:
                self._caught_up(subscription, cursor, terminal)

        subscription.refill = refill

    def _caught_up(self, subscription: Subscription, cursor: str, terminal: bool) -> None:
        """The replay read the last kept event, `cursor`: live events from now on."""
        subscription.caught_up()
        self.start_after(subscription, cursor)
        if terminal and subscription in self._after:  # nothing follows what was kept
            subscription._close()
            subscription.cancel()

    async def _read(self) -> None:
        pubsub = self._pubsub
        try:
            while True:
                message = await pubsub.parse_response(block=True)
                if message[0] == b"unsubscribe":
                    # redis-py forgets an unsubscribed channel in its own handle_message only:
                    # without it, its `channels` and `pending_unsubscribe_channels` kept every
                    # channel this replica ever followed (~1 MiB a minute in tests.load.soak),
                    # and a reconnect would subscribe to them all again.
                    await pubsub.handle_message(message)
                    continue
                self._dispatch(message)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._fail_all(
                StoreUnavailableError(
                    "the task store (Redis) connection broke; call SubscribeToTask again"
                )
            )
            self.backend.report_failure(f"its event connection broke ({exc})")

    def _dispatch(self, message: Any) -> None:
        kind = message[0].decode() if isinstance(message[0], bytes) else str(message[0])
        channel = message[1].decode()
        if kind == "subscribe":
            waiting = self._confirmations.get(channel)
            if waiting:
                future = waiting.pop(0)
                if not future.done():
                    future.set_result(None)
            return
        if kind != "message":
            return
        data: bytes = message[2]
        if channel == self._cancel_channel:
            callback = self.on_remote_cancel
            if callback is not None:
                callback(data.decode())
            return
        task_id = channel[len(self.backend.keys.prefix) + 4 :]  # after "<prefix>:ev:"
        subscribers = self._subscribers.get(task_id)
        if not subscribers:
            return
        head, _, rest = data.partition(b"\n")
        flag_bytes, _, payload = rest.partition(b"\n")
        flags = flag_bytes.decode()
        if flags in ("x", "X"):
            self._withdrawn(subscribers, payload, every=flags == "X")
            return
        text = head.decode()
        event_id = parse_stream_id(text)
        for subscription in list(subscribers):
            pending = self._pending.get(subscription)
            if pending is not None:
                if len(pending) >= subscription.room:
                    self._overflowed(subscription)
                    continue
                pending.append((event_id, text, payload, flags))
            elif event_id > self._after.get(subscription, (0, 0)):
                self._deliver(subscription, event_id, text, payload, flags)

    def _deliver(
        self,
        subscription: Subscription,
        event_id: tuple[int, int],
        text: str,
        payload: bytes,
        flags: str,
    ) -> None:
        self._after[subscription] = event_id
        event = a2a_pb2.StreamResponse.FromString(payload)  # this subscription's own copy
        stamp(event, text)
        if subscription._offer(event) < 0:
            subscription.cancel()
            return
        if flags == "t" or (flags == "i" and not subscription.until_terminal):
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

    def _withdrawn(self, subscribers: list[Subscription], payload: bytes, *, every: bool) -> None:
        """Ends the send streams (every stream with `every`) of a task whose message was not
        taken, with the error the notice carries, after the events they already have."""
        error = status.from_bytes(payload) or ServiceUnavailableError(
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
            pubsub = self._pubsub
            if pubsub is not None and self.backend.healthy and not self._closed:
                job = asyncio.get_running_loop().create_task(self._unsubscribe(pubsub, task_id))
                self._unsubscribing.add(job)
                job.add_done_callback(self._unsubscribing.discard)

    async def _unsubscribe(self, pubsub: Any, task_id: str) -> None:
        if task_id in self._subscribers:
            return  # someone subscribed again meanwhile
        with contextlib.suppress(Exception):
            await pubsub.unsubscribe(self.backend.keys.channel(task_id))

    def _fail_all(self, error: Exception) -> None:
        for subscribers in list(self._subscribers.values()):
            for subscription in list(subscribers):
                subscription._fail(error)
                subscription.cancel()
        for waiting in self._confirmations.values():
            for future in waiting:
                if not future.done():
                    future.set_exception(error)
        self._confirmations.clear()

    async def close(self) -> None:
        """Stops the reader and closes its connection, once a restart (after an outage) or an
        UNSUBSCRIBE under way has ended: left running, either would open a pub/sub connection
        on the closed store's pool, which nobody closes (and a reader with it)."""
        self._closed = True
        jobs = [job for job in (self._restarting, *self._unsubscribing) if job is not None]
        for job in jobs:
            job.cancel()
        if jobs:
            # Not bounded: each of their Redis calls is (the store's timeout), so they end even
            # when a cancel is lost, and what they opened is closed just below.
            await asyncio.wait(jobs)
        await self._stop_reading()


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
        backend: RedisBackend,
        events: EventReader,
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
        subscription = await events.open(task_id, until_terminal=False)
        try:
            fields = await backend.run_script(
                "SNAPSHOT", [backend.keys.task(task_id), backend.keys.events(task_id)], []
            )
            body = fields[0]
            if body is not None:
                task = a2a_pb2.Task.FromString(body)
                if any(message.message_id == message_id for message in task.history):
                    outcome._saw(a2a_pb2.StreamResponse(task=task))
                events.start_after(subscription, fields[6].decode())
            else:  # not created yet, or a direct reply: read its events from the start
                events.start_after(subscription, "0-0")
                for _, entry in await backend.call(
                    backend.client.xrange(backend.keys.events(task_id), "-", "+", count=4)
                ):
                    outcome._saw(a2a_pb2.StreamResponse.FromString(entry[b"e"]))
            if not outcome.started.is_set():
                holder = await backend.call(backend.client.get(backend.keys.claim(claim[0])))
                if holder is None or holder.decode() != claim[1]:
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
            self.started.set()  # whoever waits reads the task as it stands
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
