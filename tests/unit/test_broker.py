"""Broker fan-out: order, closing, and cutting off a reader that falls behind (no sockets)."""

from __future__ import annotations

import asyncio

import pytest

from a2a_grpc.core.errors import EventIdExpiredError
from a2a_grpc.core.event_ids import event_id
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.broker import REPLAY_BATCH, Broker, SubscriberOverflowError


def event(n: int) -> a2a_pb2.StreamResponse:
    return a2a_pb2.StreamResponse(message=a2a_pb2.Message(message_id=str(n)))


async def drain(subscription: object) -> list[str]:
    return [e.message.message_id async for e in subscription]  # type: ignore[attr-defined]


async def test_every_subscriber_gets_every_event_in_order_then_closes() -> None:
    broker = Broker(queue_size=10)
    subs = [broker.subscribe("t") for _ in range(3)]
    for n in range(5):
        broker.publish("t", event(n), last=n == 4)
    results = await asyncio.gather(*(drain(s) for s in subs))
    assert results == [["0", "1", "2", "3", "4"]] * 3
    broker.forget("t")  # the task left the store: nothing is kept for it any more
    assert not broker.has_subscribers("t")


async def test_a_full_queue_cuts_off_only_that_subscriber() -> None:
    broker = Broker(queue_size=2)
    slow = broker.subscribe("t")
    fast = broker.subscribe("t")
    fast_events = asyncio.Queue[str]()

    async def read_fast() -> None:
        async for e in fast:
            fast_events.put_nowait(e.message.message_id)

    reader = asyncio.ensure_future(read_fast())
    for n in range(6):
        broker.publish("t", event(n), last=n == 5)
        # The fast reader takes each event before the next is published; the slow one never reads.
        assert await asyncio.wait_for(fast_events.get(), 2) == str(n)
    await asyncio.wait_for(reader, 2)
    with pytest.raises(SubscriberOverflowError, match="SubscribeToTask"):
        await drain(slow)


async def test_cancel_unsubscribes() -> None:
    broker = Broker()
    sub = broker.subscribe("t")
    sub.cancel()
    sub.cancel()
    broker.publish("t", event(1))  # nobody listening: only kept for a resumed stream
    broker.forget("t")
    assert not broker.has_subscribers("t")


@pytest.mark.parametrize(("queue_size", "mark"), [(1024, 16), (10, 5), (1, 1)])
async def test_publish_reports_a_backlog_at_the_mark(queue_size: int, mark: int) -> None:
    broker = Broker(queue_size=queue_size)
    assert broker.backlog_mark == mark
    assert broker.publish("t", event(0)) is False  # nobody listening: never a backlog
    subscription = broker.subscribe("t")
    reported = [broker.publish("t", event(n)) for n in range(1, mark + 1)]
    assert reported == [False] * (mark - 1) + [True]
    subscription.cancel()


async def drain_ids(subscription: object) -> list[tuple[str | None, str]]:
    return [(event_id(e), e.message.message_id) async for e in subscription]  # type: ignore[attr-defined]


async def test_events_of_a_followed_task_carry_growing_ids_for_every_subscriber() -> None:
    broker = Broker()
    first = broker.subscribe("t")
    assert first.snapshot_id == "0"
    broker.publish("t", event(1))
    second = broker.subscribe("t")
    assert second.snapshot_id == "1"
    broker.publish("t", event(2), last=True)
    assert await drain_ids(first) == [("1", "1"), ("2", "2")]
    assert await drain_ids(second) == [("2", "2")]


async def test_a_replay_gives_exactly_the_events_after_the_id_then_live_ones() -> None:
    broker = Broker()
    follower = broker.subscribe("t")
    for n in range(1, 4):
        broker.publish("t", event(n))
    follower.cancel()  # the stream broke; its events are still kept
    resumed = broker.subscribe("t", until_terminal=True, after="1")
    broker.publish("t", event(4), last=True)
    assert await drain_ids(resumed) == [("2", "2"), ("3", "3"), ("4", "4")]
    # After the end, from the kept events alone.
    assert await drain_ids(broker.subscribe("t", after="3")) == [("4", "4")]
    assert await drain_ids(broker.subscribe("t", after="4")) == []


async def test_an_id_the_ring_no_longer_holds_is_refused() -> None:
    broker = Broker(replay_length=2)
    broker.subscribe("t").cancel()
    for n in range(1, 5):
        broker.publish("t", event(n))
    assert await asyncio.wait_for(
        drain_ids(_closing(broker, broker.subscribe("t", after="2"))), 2
    ) == [("3", "3"), ("4", "4")]
    with pytest.raises(EventIdExpiredError, match="no longer keeps"):
        broker.subscribe("t", after="1")
    with pytest.raises(EventIdExpiredError, match="not an event id"):
        broker.subscribe("t", after="5")
    with pytest.raises(EventIdExpiredError, match="not an event id"):
        broker.subscribe("u", after="0")


async def test_a_replay_is_read_a_batch_at_a_time_as_its_reader_takes_them() -> None:
    broker = Broker(replay_length=1000)
    broker.subscribe("t").cancel()
    for n in range(1, 301):
        broker.publish("t", event(n))
    caught_up = asyncio.Event()
    resumed = broker.subscribe("t", until_terminal=True, after="10")
    resumed.when_caught_up(caught_up.set)
    # Only the first batch is queued: the rest waits in the ring until the reader takes it.
    assert resumed.room == broker.queue_size - REPLAY_BATCH
    reading = aiter(resumed)
    got = [(await anext(reading)).message.message_id for _ in range(REPLAY_BATCH)]
    assert not caught_up.is_set() and resumed.room == broker.queue_size
    broker.publish("t", event(301))  # live while replaying: read from the ring in its turn
    while not caught_up.is_set():
        got.append((await anext(reading)).message.message_id)
    broker.publish("t", event(302), last=True)  # live again: straight into the queue
    got += [e.message.message_id async for e in reading]
    assert got == [str(n) for n in range(11, 303)]


async def test_a_replay_that_falls_out_of_the_ring_ends_with_its_id_expired() -> None:
    broker = Broker(replay_length=100)
    broker.subscribe("t").cancel()
    for n in range(1, 101):
        broker.publish("t", event(n))
    resumed = broker.subscribe("t", until_terminal=True, after="1")
    for n in range(101, 201):  # the ring moves past what the replay has not read yet
        broker.publish("t", event(n))
    expired = "no longer keeps the events of task t after '65'"
    with pytest.raises(EventIdExpiredError, match=expired):
        await drain(resumed)  # the first batch (2 to 65) read, the rest gone


def _closing(broker: Broker, subscription: object) -> object:
    broker.close("t")
    return subscription


async def test_webhooks_never_see_the_streams_ids() -> None:
    seen: list[a2a_pb2.StreamResponse] = []

    class Observer:
        watched = frozenset({"t"})

        def observe(self, task_id: str, event: a2a_pb2.StreamResponse) -> None:
            seen.append(event)

    broker = Broker(observer=Observer())
    sub = broker.subscribe("t")
    broker.publish("t", event(1), last=True)
    assert await drain_ids(sub) == [("1", "1")]
    assert [event_id(e) for e in seen] == [None]
