"""Broker fan-out: order, closing, and cutting off a reader that falls behind (no sockets)."""

from __future__ import annotations

import asyncio

import pytest

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.broker import Broker, SubscriberOverflowError


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
    assert not broker.has_subscribers("t")
    broker.publish("t", event(1))  # nobody listening: a no-op


@pytest.mark.parametrize(("queue_size", "mark"), [(1024, 16), (10, 5), (1, 1)])
async def test_publish_reports_a_backlog_at_the_mark(queue_size: int, mark: int) -> None:
    broker = Broker(queue_size=queue_size)
    assert broker.backlog_mark == mark
    assert broker.publish("t", event(0)) is False  # nobody listening: never a backlog
    subscription = broker.subscribe("t")
    reported = [broker.publish("t", event(n)) for n in range(1, mark + 1)]
    assert reported == [False] * (mark - 1) + [True]
    subscription.cancel()
