"""Fan-out of a task's stream events to its subscribers, each behind a bounded queue.

Publishing never waits: a subscriber whose queue is full is cut off (its stream ends with
RESOURCE_EXHAUSTED and the client resubscribes for a fresh snapshot), so one slow reader never
stalls the task or the other readers. Every other subscriber gets every event, in order.

Event ids (core/event_ids.py): a task that a stream ever followed gets an `_EventLog` at its
first subscriber, kept until the task leaves the store (`forget`): a per-task sequence that
numbers every event published from then on, and a ring of the last `replay_length` events, so
a subscriber can resume after an id (`subscribe(..., after=)`). A task nobody streams has no
log: its writes build no events at all (the blocking SendMessage's hot path).

A replay is paced (`Subscription.refill`): kept events are read `REPLAY_BATCH` at a time, and
the next batch only once the reader has taken the last one (the transport writes each event
with the connection's backpressure), with a turn of the event loop between batches. So no
replay holds more than a batch in its queue, and a thousand replays at once take turns with
every other call instead of each filling its queue in one go.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Container
from itertools import islice
from typing import Protocol

from a2a_grpc.core.event_ids import stamp
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.replay_ids import no_longer_kept, not_an_id, parse_sequence

BACKLOG_MARK = 16
"""Default queued events per reader at which publishers are told to yield (at most half the
queue size)."""
REPLAY_BATCH = 64
"""Kept events a replay reads at a time (at most the queue's size): the next batch is read once
the reader has taken this one."""


class SubscriberOverflowError(Exception):
    """This subscriber fell more than its queue size behind and was cut off."""


class SubscriptionOwner(Protocol):
    """Whoever feeds a subscription (a broker); told when the reader stops."""

    def _remove(self, task_id: str, subscription: Subscription) -> None: ...


class Subscription:
    """One reader's view of a task's events. Iterate it; it ends when the stream should close."""

    __slots__ = (
        "_broker",
        "_closed",
        "_error",
        "_events",
        "_limit",
        "_on_caught_up",
        "_task_id",
        "_wakeup",
        "refill",
        "snapshot_id",
        "until_terminal",
    )

    def __init__(
        self, broker: SubscriptionOwner, task_id: str, limit: int, until_terminal: bool
    ) -> None:
        self._broker = broker
        self._task_id = task_id
        self._limit = limit
        self.until_terminal = until_terminal
        """Stays open through interrupted states (SubscribeToTask) instead of closing there."""
        self._events: deque[a2a_pb2.StreamResponse] = deque()
        self._wakeup = asyncio.Event()
        self._closed = False
        self._error: Exception | None = None
        self.snapshot_id = ""
        """The id of the last event before this subscription's first (a snapshot taken with
        it includes that event); "" when unknown."""
        self.refill: Callable[[], Awaitable[None]] | None = None
        """While a replay is under way: reads the next batch of kept events into the queue,
        awaited by the reader whenever the queue is empty; the store's replay sets it, and
        `caught_up()` ends it."""
        self._on_caught_up: Callable[[], None] | None = None

    def _offer(self, event: a2a_pb2.StreamResponse) -> int:
        """Queues `event`; returns how many events wait now, or -1 when this reader overflowed."""
        events = self._events
        if len(events) >= self._limit:
            self._fail(
                SubscriberOverflowError(
                    f"this stream fell more than {self._limit} events behind task "
                    f"{self._task_id}; call SubscribeToTask for a fresh snapshot"
                )
            )
            return -1
        events.append(event)
        self._wakeup.set()
        return len(events)

    def _close(self) -> None:
        self._closed = True
        self._wakeup.set()

    def _fail(self, error: Exception) -> None:
        """Ends the stream with `error` after the events already queued."""
        if self._error is None:
            self._error = error
        self._wakeup.set()

    @property
    def room(self) -> int:
        """Events the queue takes before this reader overflows."""
        return self._limit - len(self._events)

    def when_caught_up(self, callback: Callable[[], None]) -> None:
        """Calls `callback` once this subscription's replay has read every kept event (now,
        when it has no replay under way)."""
        if self.refill is None:
            callback()
        else:
            self._on_caught_up = callback

    def caught_up(self) -> None:
        """The replay has read every kept event: what follows is live (the store calls it)."""
        self.refill = None
        callback, self._on_caught_up = self._on_caught_up, None
        if callback is not None:
            callback()

    async def __aiter__(self) -> AsyncIterator[a2a_pb2.StreamResponse]:
        try:
            while True:
                while self._events:
                    yield self._events.popleft()
                if self._error is not None:
                    raise self._error
                refill = self.refill
                if refill is not None:
                    await refill()
                    continue
                if self._closed:
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
        finally:
            self.cancel()

    def cancel(self) -> None:
        """Stops receiving; safe to call more than once."""
        self.refill = None
        self._on_caught_up = None
        self._broker._remove(self._task_id, self)


class EventObserver(Protocol):
    """Sees every event of the tasks it watches, synchronously (e.g. webhook delivery)."""

    @property
    def watched(self) -> Container[str]:
        """The ids of the tasks it wants events of, kept current by the observer (read live)."""
        ...

    def observe(self, task_id: str, event: a2a_pb2.StreamResponse) -> None: ...


class _EventLog:
    """One task's event sequence and its last events, for replay."""

    __slots__ = ("ended", "events", "floor", "origin_shown", "seq")

    def __init__(self, length: int) -> None:
        self.seq = 0
        """The id of the last event published."""
        self.floor = 0
        """The oldest id a replay may start after (the last one dropped from the ring)."""
        self.events: deque[tuple[int, a2a_pb2.StreamResponse, bool, bool]] = deque(maxlen=length)
        """(id, event, last, interrupted), oldest first."""
        self.ended = False
        """An event published as `last` ended the task's streams: nothing follows."""
        self.origin_shown = False
        """A snapshot went out with id "0" (taken before the log's first event), so "0" is
        an id of the task; otherwise no client holds it and it is refused."""


class Broker:
    """Subscribers by task id. All methods are synchronous and run on the event loop."""

    def __init__(
        self,
        queue_size: int = 1024,
        observer: EventObserver | None = None,
        *,
        replay_length: int = 1000,
    ) -> None:
        if queue_size < 1:
            raise ValueError("queue_size must be at least 1")
        if replay_length < 1:
            raise ValueError("replay_length must be at least 1")
        self.queue_size = queue_size
        self.replay_length = replay_length
        self.backlog_mark = max(1, min(BACKLOG_MARK, queue_size // 2))
        """Queued events at which `publish` reports a backlog (readers should get a turn)."""
        self.observer = observer
        # Read on every event of every task, so held directly rather than asked through the
        # observer's property (measured: 3.6k instructions per blocking SendMessage, 0.8 %).
        self._watched: Container[str] = () if observer is None else observer.watched
        self._subscribers: dict[str, list[Subscription]] = {}
        self._logs: dict[str, _EventLog] = {}

    def subscribe(
        self,
        task_id: str,
        *,
        until_terminal: bool = False,
        after: str | None = None,
        snapshot: bool = False,
    ) -> Subscription:
        """A new reader of the task's events. It closes after an event published as `last`,
        and also after one published as `interrupted` unless `until_terminal`. `snapshot`:
        its `snapshot_id` goes out with a snapshot (a client may resume after it).

        With `after` (an event id), it first gets the task's kept events after that id, then
        the live ones; EventIdExpiredError when the ring no longer holds all of them, or the
        id is not one of the task's."""
        log = self._logs.get(task_id)
        if after is not None:
            return self._replay(task_id, log, after, until_terminal)
        if log is None:
            log = self._logs[task_id] = _EventLog(self.replay_length)
        subscription = Subscription(self, task_id, self.queue_size, until_terminal)
        subscription.snapshot_id = str(log.seq)
        if snapshot and log.seq == 0:
            log.origin_shown = True
        self._subscribers.setdefault(task_id, []).append(subscription)
        return subscription

    def _replay(
        self, task_id: str, log: _EventLog | None, after: str, until_terminal: bool
    ) -> Subscription:
        cursor = parse_sequence(after)
        if (
            log is None
            or cursor is None
            or cursor > log.seq
            or (cursor == 0 and not log.origin_shown)
        ):
            raise not_an_id(task_id, after)
        if cursor < log.floor:
            raise no_longer_kept(task_id, after, self.replay_length)
        subscription = Subscription(self, task_id, self.queue_size, until_terminal)
        subscription.snapshot_id = after
        replay = _Replay(self, task_id, log, subscription, cursor)
        subscription.refill = replay.refill
        self._subscribers.setdefault(task_id, []).append(subscription)
        replay.read()  # the first batch at once: a short replay is done here
        return subscription

    def forget(self, task_id: str) -> None:
        """The task left the store: its kept events go too."""
        self._logs.pop(task_id, None)

    def has_subscribers(self, task_id: str) -> bool:
        """Whether anyone (a stream, a task's event log or the observer) would see an event of
        this task."""
        return task_id in self._subscribers or task_id in self._logs or task_id in self._watched

    def publish(
        self,
        task_id: str,
        event: a2a_pb2.StreamResponse,
        *,
        last: bool = False,
        interrupted: bool = False,
    ) -> bool:
        """Hands `event` to every subscriber of the task; with `last` (a terminal state or a
        direct reply), then closes their streams; with `interrupted` (INPUT_REQUIRED or
        AUTH_REQUIRED), closes those that do not stay open `until_terminal`.

        Returns True when some subscriber now has `backlog_mark` events queued: a producer that
        can wait should then let the readers run (see TaskRun) before it publishes more.
        """
        if self.observer is not None and task_id in self._watched:
            self.observer.observe(task_id, event)
            log = self._logs.get(task_id)
            if log is not None:  # the observer may keep the event: streams get their own copy
                copy = a2a_pb2.StreamResponse()
                copy.CopyFrom(event)
                event = copy
        else:
            log = self._logs.get(task_id)
        if log is not None:
            log.seq += 1
            stamp(event, str(log.seq))
            ring = log.events
            if len(ring) == ring.maxlen:
                log.floor = ring[0][0]
            ring.append((log.seq, event, last, interrupted))
            if last:
                log.ended = True
        subscribers = self._subscribers.get(task_id)
        if not subscribers:
            return False
        deepest = 0
        for subscription in list(subscribers):
            if subscription.refill is not None:
                continue  # replaying: it reads this event from the ring in its turn
            queued = subscription._offer(event)
            if queued < 0:
                self._remove(task_id, subscription)
            elif queued > deepest:
                deepest = queued
        if last:
            self.close(task_id)
        elif interrupted:
            for subscription in list(subscribers):
                if not subscription.until_terminal:
                    self._remove(task_id, subscription)
                    subscription._close()
        return deepest >= self.backlog_mark

    def close(self, task_id: str) -> None:
        """Ends every open stream on the task after the events already queued."""
        for subscription in self._subscribers.pop(task_id, ()):
            subscription._close()

    def fail(self, task_id: str, error: Exception, *, every: bool) -> None:
        """Ends the task's streams that close at an interrupted state (every one with `every`)
        with `error`, after the events already queued. Nothing is published or kept."""
        for subscription in list(self._subscribers.get(task_id, ())):
            if every or not subscription.until_terminal:
                self._remove(task_id, subscription)
                subscription._fail(error)

    def _remove(self, task_id: str, subscription: Subscription) -> None:
        subscribers = self._subscribers.get(task_id)
        if subscribers is None or subscription not in subscribers:
            return
        subscribers.remove(subscription)
        if not subscribers:
            del self._subscribers[task_id]


class _Replay:
    """A subscription's replay from an `_EventLog`: kept events after `cursor`, `REPLAY_BATCH`
    at a time, then the live ones. Until it has caught up, `publish` passes the subscription
    by: an event published meanwhile is read from the ring with the others (closes and
    failures reach it as they reach any subscriber)."""

    __slots__ = ("broker", "cursor", "log", "subscription", "task_id")

    def __init__(
        self, broker: Broker, task_id: str, log: _EventLog, subscription: Subscription, cursor: int
    ) -> None:
        self.broker = broker
        self.task_id = task_id
        self.log = log
        self.subscription = subscription
        self.cursor = cursor

    async def refill(self) -> None:
        await asyncio.sleep(0)  # a turn for everyone else between two batches
        self.read()

    def read(self) -> None:
        """The next batch into the queue, or the switch to live events once none is left."""
        log, subscription = self.log, self.subscription
        if subscription.refill is None:  # canceled meanwhile
            return
        if subscription._error is not None:  # failed: the error ends the stream now
            subscription.caught_up()
            return
        if self.cursor < log.floor:
            subscription.caught_up()
            subscription.cancel()
            # The ring moved on past what this replay had not read yet.
            subscription._fail(
                no_longer_kept(self.task_id, str(self.cursor), self.broker.replay_length)
            )
            return
        events = subscription._events
        batch = min(REPLAY_BATCH, subscription.room)
        ring = log.events
        # The ring holds consecutive ids: the first one after the cursor is at this index.
        start = max(0, self.cursor - ring[0][0] + 1) if ring else 0
        for sequence, event, last, interrupted in islice(ring, start, None):
            if batch == 0:
                subscription._wakeup.set()
                return
            events.append(event)
            self.cursor = sequence
            batch -= 1
            if last or (interrupted and not subscription.until_terminal):
                subscription._close()
                subscription.caught_up()
                subscription.cancel()
                return
        if events:
            subscription._wakeup.set()
        subscription.caught_up()
        if log.ended:
            subscription._close()
            subscription.cancel()
