"""Streams, subscriptions and cancellation: order, fan-out, closing, disconnects."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.server.agent import RequestContext, TaskEvents
from tests.integration.conftest import (
    Factory,
    Harness,
    Held,
    collect,
    error_reason,
    send_request,
)


def kinds(events: list[a2a_pb2.StreamResponse]) -> list[str]:
    return [e.WhichOneof("payload") or "" for e in events]


async def test_new_task_stream_opens_with_the_task_and_closes_at_completion(
    demo: Harness,
) -> None:
    events = await collect(demo.stub.SendStreamingMessage(send_request("hello")))
    assert kinds(events) == ["task", "status_update", "artifact_update", "status_update"]
    task_id = events[0].task.id
    assert events[0].task.status.state == a2a_pb2.TASK_STATE_SUBMITTED
    assert all(getattr(e, e.WhichOneof("payload") or "").task_id == task_id for e in events[1:])
    assert events[1].status_update.status.state == a2a_pb2.TASK_STATE_WORKING
    assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_chunked_artifact_streams_with_append_and_last_chunk(demo: Harness) -> None:
    events = await collect(demo.stub.SendStreamingMessage(send_request("chunks 3")))
    chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
    assert [(c.append, c.last_chunk) for c in chunks] == [
        (False, False),
        (True, False),
        (True, True),
    ]
    assert len({c.artifact.artifact_id for c in chunks}) == 1
    task = await demo.stub.GetTask(a2a_pb2.GetTaskRequest(id=events[0].task.id))
    assert [p.text for p in task.artifacts[0].parts] == [
        "chunk 1 of 3\n",
        "chunk 2 of 3\n",
        "chunk 3 of 3\n",
    ]


async def test_direct_reply_stream_is_one_message(demo: Harness) -> None:
    events = await collect(demo.stub.SendStreamingMessage(send_request("reply yo")))
    assert kinds(events) == ["message"]


async def test_stream_closes_at_input_required_and_continuation_opens_with_the_task(
    demo: Harness,
) -> None:
    first = await collect(demo.stub.SendStreamingMessage(send_request("ask")))
    assert first[-1].status_update.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    task_id = first[0].task.id
    second = await collect(demo.stub.SendStreamingMessage(send_request("red", task_id=task_id)))
    assert kinds(second)[0] == "task"
    assert second[0].task.id == task_id
    assert second[0].task.history[-1].parts[0].text == "red"
    assert second[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_subscription_to_an_input_required_task_stays_open_until_it_is_terminal(
    demo: Harness,
) -> None:
    # Spec §3.1.6 / decision §9.1: SubscribeToTask ends at a terminal state only.
    task = (await demo.stub.SendMessage(send_request("ask"))).task
    subscription = demo.stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=task.id))
    snapshot = await subscription.read()
    assert snapshot.task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    answered = await demo.stub.SendMessage(send_request("red", task_id=task.id))
    assert answered.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    rest = await collect(subscription)
    states = [e.status_update.status.state for e in rest if e.HasField("status_update")]
    assert states[0] == a2a_pb2.TASK_STATE_SUBMITTED
    assert states[-1] == a2a_pb2.TASK_STATE_COMPLETED
    assert any(e.HasField("artifact_update") for e in rest)


async def test_subscription_stays_open_through_input_required_the_send_stream_closes(
    make_server: Factory,
) -> None:
    release = asyncio.Event()

    class AsksWhenReleased:
        async def execute(self, context: RequestContext, events: TaskEvents) -> None:
            if context.task is not None:
                await events.complete("thanks")
                return
            await events.working()
            await release.wait()
            await events.require_input("which colour?")

    harness = await make_server(AsksWhenReleased())
    sender = harness.stub.SendStreamingMessage(send_request("go"))
    task_id = (await sender.read()).task.id
    assert (await sender.read()).status_update.status.state == a2a_pb2.TASK_STATE_WORKING
    subscription = harness.stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=task_id))
    assert (await subscription.read()).task.status.state == a2a_pb2.TASK_STATE_WORKING
    release.set()
    sent = await collect(sender)  # the send stream closes at INPUT_REQUIRED
    assert sent[-1].status_update.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    asked = await subscription.read()
    assert asked.status_update.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    await harness.stub.CancelTask(a2a_pb2.CancelTaskRequest(id=task_id))
    rest = await collect(subscription)
    assert [e.status_update.status.state for e in rest] == [a2a_pb2.TASK_STATE_CANCELED]


async def test_concurrent_streams_get_the_same_events(demo: Harness) -> None:
    origin = demo.stub.SendStreamingMessage(send_request("chunks 5"))
    first = await origin.read()
    task_id = first.task.id
    subscribers = [
        demo.stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=task_id)) for _ in range(3)
    ]
    heads = [await s.read() for s in subscribers]
    assert all(h.task.id == task_id for h in heads)  # the current Task comes first
    rest_origin = await collect(origin)
    rests = [await collect(s) for s in subscribers]
    # Every subscriber ends with the same suffix of events as the originating stream.
    for head, rest in zip(heads, rests, strict=True):
        seen = len(head.task.artifacts[0].parts) if head.task.artifacts else 0
        updates = [e for e in rest if e.HasField("artifact_update")]
        assert len(updates) == 5 - seen
        assert rest[-1] == rest_origin[-1]
    assert rest_origin[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_client_disconnect_never_cancels_the_task(make_server: Factory) -> None:
    agent = Held()
    harness = await make_server(agent=agent)
    stream = harness.stub.SendStreamingMessage(send_request("hold"))
    task_id = (await stream.read()).task.id
    watcher = harness.stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=task_id))
    assert (await watcher.read()).task.status.state == a2a_pb2.TASK_STATE_WORKING
    stream.cancel()
    # Sent after the cancellation on the same connection, so the server sees that first. (The
    # unit suite, tests/unit/test_handler.py, pins the exact order without a network.)
    still = await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id))
    assert still.status.state == a2a_pb2.TASK_STATE_WORKING
    agent.go.set()
    rest = await asyncio.wait_for(collect(watcher), 10)
    assert rest[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
    task = await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id))
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_cancel_running_task_closes_every_stream(demo: Harness) -> None:
    origin = demo.stub.SendStreamingMessage(send_request("slow 30"))
    task_id = (await origin.read()).task.id
    subscriber = demo.stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=task_id))
    await subscriber.read()
    canceled = await demo.stub.CancelTask(a2a_pb2.CancelTaskRequest(id=task_id))
    assert canceled.status.state == a2a_pb2.TASK_STATE_CANCELED
    for stream in (origin, subscriber):
        rest = await asyncio.wait_for(collect(stream), 5)
        assert rest[-1].status_update.status.state == a2a_pb2.TASK_STATE_CANCELED
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await demo.stub.CancelTask(a2a_pb2.CancelTaskRequest(id=task_id))
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_reason(caught.value) == "TASK_NOT_CANCELABLE"


async def test_cancel_reaches_the_agent(make_server: Factory) -> None:
    cancelled = asyncio.Event()

    class Waits:
        async def execute(self, context: RequestContext, events: TaskEvents) -> None:
            await events.working()
            try:
                await asyncio.Event().wait()  # until cancelled
            except asyncio.CancelledError:
                cancelled.set()
                raise

    harness = await make_server(agent=Waits())
    configuration = a2a_pb2.SendMessageConfiguration(return_immediately=True)
    task = (await harness.stub.SendMessage(send_request(configuration=configuration))).task
    await harness.stub.CancelTask(a2a_pb2.CancelTaskRequest(id=task.id))
    await asyncio.wait_for(cancelled.wait(), 5)


async def test_cancel_input_required_task(demo: Harness) -> None:
    task = (await demo.stub.SendMessage(send_request("ask"))).task
    canceled = await demo.stub.CancelTask(a2a_pb2.CancelTaskRequest(id=task.id))
    assert canceled.status.state == a2a_pb2.TASK_STATE_CANCELED


async def test_subscribe_errors(demo: Harness) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await collect(demo.stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id="nope")))
    assert error_reason(caught.value) == "TASK_NOT_FOUND"
    done = (await demo.stub.SendMessage(send_request())).task
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await collect(demo.stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=done.id)))
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_reason(caught.value) == "UNSUPPORTED_OPERATION"


async def test_slow_subscriber_is_cut_off_without_stalling_others(make_server: Factory) -> None:
    release = asyncio.Event()
    read = asyncio.Queue[None]()  # one entry per artifact chunk the fast reader has received

    class Burst:
        async def execute(self, context: RequestContext, events: TaskEvents) -> None:
            await events.working()
            await release.wait()
            for index in range(50):
                await events.add_artifact(
                    [a2a_pb2.Part(text=f"{index:03d}" + "x" * 50_000)],
                    artifact_id="a",
                    append=index > 0,
                    last_chunk=index == 49,
                )
                await read.get()  # paced by the fast reader, never by the slow one
            await events.complete()

    async def read_fast(stream: grpc.aio.UnaryStreamCall) -> list[a2a_pb2.StreamResponse]:
        events = []
        while (event := await stream.read()) is not grpc.aio.EOF:
            events.append(event)
            if event.HasField("artifact_update"):
                read.put_nowait(None)
        return events

    harness = await make_server(agent=Burst(), subscriber_queue_size=8)
    configuration = a2a_pb2.SendMessageConfiguration(return_immediately=True)
    task = (await harness.stub.SendMessage(send_request(configuration=configuration))).task
    fast = harness.stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=task.id))
    # Without BDP probing the slow reader's HTTP/2 window stays small, so unread events back up.
    slow_channel = grpc.aio.insecure_channel(
        f"127.0.0.1:{harness.running.port}", options=[("grpc.http2.bdp_probe", 0)]
    )
    slow = a2a_pb2_grpc.A2AServiceStub(slow_channel).SubscribeToTask(
        a2a_pb2.SubscribeToTaskRequest(id=task.id)
    )
    await fast.read()
    await slow.read()
    # The fast reader drains as events come; the slow one reads nothing, so once HTTP/2 flow
    # control stops its writes (the events are 50 kB each), its queue fills and it is cut off.
    fast_events = asyncio.ensure_future(read_fast(fast))
    release.set()
    done = await asyncio.wait_for(fast_events, 10)
    assert done[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await collect(slow)
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "SubscribeToTask" in (caught.value.details() or "")
    await slow_channel.close()
    stored = await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id))
    assert len(stored.artifacts[0].parts) == 50
