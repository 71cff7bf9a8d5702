"""A2AClient streams against a scripted peer: views, contract checks, and resume after a drop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from a2a_grpc.client import (
    ChannelOptions,
    DeadlineExceededError,
    RetryPolicy,
    StreamResumeError,
    TaskView,
)
from a2a_grpc.client.messages import continue_task, user_message
from a2a_grpc.core.errors import (
    InvalidAgentResponseError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a_grpc.generated import a2a_pb2
from tests.integration.scripted_agent import (
    Peer,
    abort_with,
    chunk_event,
    peer,
    status_event,
    task,
)

__all__ = ["peer"]

WORKING = a2a_pb2.TASK_STATE_WORKING
COMPLETED = a2a_pb2.TASK_STATE_COMPLETED


def script(*items: Any, then: Any = None) -> Any:
    """A stream handler yielding `items` (StreamResponse or raw bytes), then calling `then`."""

    async def handler(request: Any, context: Any) -> AsyncIterator[Any]:
        for item in items:
            yield item
        if then is not None:
            await then(context)

    return handler


def snapshot(state: int = WORKING, **kw: Any) -> a2a_pb2.StreamResponse:
    return a2a_pb2.StreamResponse(task=task(state=state, **kw))


async def collect(stream: AsyncIterator[tuple[a2a_pb2.StreamResponse, TaskView]]) -> list[Any]:
    return [item async for item in stream]


async def unavailable(context: Any) -> None:
    await context.abort(grpc.StatusCode.UNAVAILABLE, "connection reset")


async def test_stream_yields_each_event_with_the_running_view(peer: Peer) -> None:
    peer.agent.handlers["SendStreamingMessage"] = script(
        snapshot(a2a_pb2.TASK_STATE_SUBMITTED),
        chunk_event("Hel"),
        chunk_event("lo", append=True, last_chunk=True),
        status_event(COMPLETED),
    )
    items = await collect(peer.client(tenant="acme").send_streaming_message(user_message("hi")))
    kinds = [event.WhichOneof("payload") for event, _ in items]
    assert kinds == ["task", "artifact_update", "artifact_update", "status_update"]
    parts = [[p.text for p in view.task.artifacts[0].parts] for _, view in items[1:3]]
    assert parts == [["Hel"], ["Hel", "lo"]]
    final = items[-1][1]
    assert final.done and final.state == COMPLETED and final.completed_artifacts == {"a1"}
    (call,) = peer.agent.calls
    assert call.request.tenant == "acme" and call.metadata["a2a-version"] == "1.0"


async def test_direct_message_stream(peer: Peer) -> None:
    reply = a2a_pb2.Message(
        message_id="r", role=a2a_pb2.ROLE_AGENT, parts=[a2a_pb2.Part(text="hi")]
    )
    peer.agent.handlers["SendStreamingMessage"] = script(a2a_pb2.StreamResponse(message=reply))
    ((event, view),) = await collect(peer.client().send_streaming_message(user_message("hi")))
    assert view.done and view.message == reply == event.message


@pytest.mark.parametrize(
    ("items", "match"),
    [
        ([b""], "no payload"),
        ([snapshot(), a2a_pb2.StreamResponse()], "no payload"),
        ([snapshot(), status_event(COMPLETED, task_id="other")], "other"),
        ([status_event(WORKING)], "first event is a status_update"),
        ([chunk_event("x")], "first event is a artifact_update"),
        (
            [
                a2a_pb2.StreamResponse(task=task()).SerializeToString()
                + a2a_pb2.StreamResponse(
                    message=a2a_pb2.Message(message_id="m")
                ).SerializeToString()
            ],
            "2 payloads",
        ),
        ([b"\xff\xff"], "malformed"),
    ],
    ids=["empty", "empty-later", "other-task", "opens-status", "opens-artifact", "two", "garbage"],
)
async def test_contract_breaks_are_invalid_agent_responses(
    peer: Peer, items: list[Any], match: str
) -> None:
    peer.agent.handlers["SendStreamingMessage"] = script(*items, status_event(COMPLETED))
    with pytest.raises(InvalidAgentResponseError, match=match):
        await collect(peer.client().send_streaming_message(user_message("hi")))
    assert not peer.agent.calls_to("SubscribeToTask")  # a contract break is never resumed


async def test_continuation_may_open_with_a_status_update(peer: Peer) -> None:
    # What the official SDK server does; the spec wants a Task first.
    peer.agent.handlers["SendStreamingMessage"] = script(
        status_event(WORKING), chunk_event("done", last_chunk=True), status_event(COMPLETED)
    )
    items = await collect(peer.client().send_streaming_message(continue_task("t1", "c1", "Ada")))
    assert items[-1][1].done and items[-1][1].task.id == "t1"


async def test_continuation_update_for_another_task_is_an_error(peer: Peer) -> None:
    peer.agent.handlers["SendStreamingMessage"] = script(status_event(WORKING, task_id="t2"))
    with pytest.raises(InvalidAgentResponseError, match="t2"):
        await collect(peer.client().send_streaming_message(continue_task("t1", "c1", "Ada")))


@pytest.mark.parametrize("drop", [None, unavailable], ids=["clean-end", "unavailable"])
async def test_dropped_stream_resumes_with_subscribe(peer: Peer, drop: Any) -> None:
    peer.agent.handlers["SendStreamingMessage"] = script(
        snapshot(), chunk_event("part 1"), then=drop
    )
    artifact = a2a_pb2.Artifact(artifact_id="a1", parts=[a2a_pb2.Part(text="part 1")])
    peer.agent.handlers["SubscribeToTask"] = script(
        snapshot(artifacts=[artifact]),
        chunk_event(" part 2", append=True, last_chunk=True),
        status_event(COMPLETED),
    )
    client = peer.client(tenant="acme", metadata=[("x-trace", "abc")])
    items = await collect(client.send_streaming_message(user_message("hi")))
    kinds = [event.WhichOneof("payload") for event, _ in items]
    assert kinds == ["task", "artifact_update", "task", "artifact_update", "status_update"]
    final = items[-1][1]
    assert final.state == COMPLETED
    assert [p.text for p in final.task.artifacts[0].parts] == ["part 1", " part 2"]
    assert len(peer.agent.calls_to("SendStreamingMessage")) == 1  # never re-sent
    (subscribe,) = peer.agent.calls_to("SubscribeToTask")
    assert subscribe.request.id == "t1" and subscribe.request.tenant == "acme"
    assert subscribe.metadata["x-trace"] == "abc" and subscribe.metadata["a2a-version"] == "1.0"


def subscribe_failing_twice(peer: Peer) -> list[int]:
    """SubscribeToTask answers UNAVAILABLE twice, then the snapshot and COMPLETED; returns the
    attempt counter."""
    attempts = [0]

    async def subscribe(request: Any, context: Any) -> AsyncIterator[Any]:
        attempts[0] += 1
        if attempts[0] < 3:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "still down")
        yield snapshot()
        yield status_event(COMPLETED)

    peer.agent.handlers["SubscribeToTask"] = subscribe
    return attempts


async def test_resume_retries_until_subscribe_works(peer: Peer) -> None:
    peer.agent.handlers["SendStreamingMessage"] = script(snapshot(), then=unavailable)
    attempts = subscribe_failing_twice(peer)
    # Channel retries off, so the client's own resumption is what retries.
    client = peer.client(channel_options=ChannelOptions(transport_retry_attempts=1))
    items = await collect(client.send_streaming_message(user_message("hi")))
    assert items[-1][1].state == COMPLETED
    assert attempts[0] == 3 and len(peer.sleeps) == 3


async def test_channel_retries_subscribe_before_its_first_event(peer: Peer) -> None:
    peer.agent.handlers["SendStreamingMessage"] = script(snapshot())
    attempts = subscribe_failing_twice(peer)
    items = await collect(peer.client().send_streaming_message(user_message("hi")))
    assert items[-1][1].state == COMPLETED
    assert attempts[0] == 3
    assert len(peer.sleeps) == 1  # one client backoff after the drop; gRPC retried the rest


async def test_resume_gives_up_with_a_clear_error(peer: Peer) -> None:
    peer.agent.handlers["SendStreamingMessage"] = script(snapshot(), then=unavailable)
    peer.agent.handlers["SubscribeToTask"] = script(then=unavailable)
    client = peer.client(
        resume=RetryPolicy(max_attempts=3, deadline_s=30),
        channel_options=ChannelOptions(transport_retry_attempts=1),
    )
    with pytest.raises(StreamResumeError, match="task t1 ended while it was working") as raised:
        await collect(client.send_streaming_message(user_message("hi")))
    assert raised.value.task_id == "t1" and raised.value.last_state == WORKING
    assert len(peer.agent.calls_to("SubscribeToTask")) == 3


async def test_resume_that_only_replays_a_snapshot_counts_as_a_failure(peer: Peer) -> None:
    peer.agent.handlers["SendStreamingMessage"] = script(snapshot())
    peer.agent.handlers["SubscribeToTask"] = script(snapshot())
    client = peer.client(resume=RetryPolicy(max_attempts=4, deadline_s=30))
    with pytest.raises(StreamResumeError):
        await collect(client.send_streaming_message(user_message("hi")))
    assert len(peer.agent.calls_to("SubscribeToTask")) == 4


async def test_resume_off(peer: Peer) -> None:
    peer.agent.handlers["SendStreamingMessage"] = script(snapshot(), then=unavailable)
    with pytest.raises(StreamResumeError, match="resumption is off"):
        await collect(peer.client().send_streaming_message(user_message("hi"), resume=False))
    assert not peer.agent.calls_to("SubscribeToTask")


async def test_task_finished_while_away_is_fetched_with_get_task(peer: Peer) -> None:
    peer.agent.handlers["SendStreamingMessage"] = script(snapshot(), then=unavailable)

    async def terminal(request: Any, context: Any) -> AsyncIterator[Any]:
        await abort_with(context, UnsupportedOperationError("task t1 is completed"))
        yield  # pragma: no cover - makes this an async generator

    async def get_task(request: Any, context: Any) -> Any:
        return task(state=COMPLETED)

    peer.agent.handlers["SubscribeToTask"] = terminal
    peer.agent.handlers["GetTask"] = get_task
    items = await collect(peer.client().send_streaming_message(user_message("hi")))
    assert items[-1][1].state == COMPLETED and items[-1][0].HasField("task")


async def test_send_stream_failing_before_its_first_event_is_sent_again(peer: Peer) -> None:
    failures = [2]

    async def flaky(request: Any, context: Any) -> AsyncIterator[Any]:
        if failures[0]:
            failures[0] -= 1
            await context.abort(grpc.StatusCode.UNAVAILABLE, "restarting")
        yield snapshot()
        yield status_event(COMPLETED)

    peer.agent.handlers["SendStreamingMessage"] = flaky
    items = await collect(peer.client().send_streaming_message(user_message("hi")))
    assert items[-1][1].state == COMPLETED
    ids = [call.request.message.message_id for call in peer.agent.calls_to("SendStreamingMessage")]
    assert len(ids) == 3 and len(set(ids)) == 1 and ids[0]  # minted once, reused
    assert len(peer.sleeps) == 2
    assert peer.agent.calls_to("SubscribeToTask") == []


async def test_send_stream_refused_as_retryable_is_sent_again(peer: Peer) -> None:
    from a2a_grpc.core.errors import ResourceExhaustedError

    failures = [1]

    async def busy(request: Any, context: Any) -> AsyncIterator[Any]:
        if failures[0]:
            failures[0] -= 1
            await abort_with(context, ResourceExhaustedError("full", retry_delay=0.75))
        yield snapshot()
        yield status_event(COMPLETED)

    peer.agent.handlers["SendStreamingMessage"] = busy
    items = await collect(peer.client().send_streaming_message(user_message("hi")))
    assert items[-1][1].state == COMPLETED
    ids = {call.request.message.message_id for call in peer.agent.calls_to("SendStreamingMessage")}
    assert len(ids) == 1 and len(peer.agent.calls_to("SendStreamingMessage")) == 2
    assert peer.sleeps and peer.sleeps[0] >= 0.75  # at least the RetryInfo delay


async def test_send_stream_failing_before_any_event_gives_up_after_the_policy(
    peer: Peer,
) -> None:
    from a2a_grpc.client import UnavailableError

    peer.agent.handlers["SendStreamingMessage"] = script(then=unavailable)
    client = peer.client(retry=RetryPolicy(max_attempts=3))
    with pytest.raises(UnavailableError):
        await collect(client.send_streaming_message(user_message("hi")))
    assert len(peer.agent.calls_to("SendStreamingMessage")) == 3


async def test_send_stream_never_resends_after_an_a2a_error(peer: Peer) -> None:
    async def refuse(request: Any, context: Any) -> AsyncIterator[Any]:
        await abort_with(context, TaskNotFoundError("no such task"))
        yield snapshot()  # never reached

    peer.agent.handlers["SendStreamingMessage"] = refuse
    with pytest.raises(TaskNotFoundError):
        await collect(peer.client().send_streaming_message(user_message("hi")))
    assert len(peer.agent.calls_to("SendStreamingMessage")) == 1
    assert peer.sleeps == []


async def test_send_stream_broken_after_its_first_event_is_never_sent_again(peer: Peer) -> None:
    peer.agent.handlers["SendStreamingMessage"] = script(snapshot(), then=unavailable)
    peer.agent.handlers["SubscribeToTask"] = script(snapshot(), status_event(COMPLETED))
    items = await collect(peer.client().send_streaming_message(user_message("hi")))
    assert items[-1][1].state == COMPLETED
    assert len(peer.agent.calls_to("SendStreamingMessage")) == 1
    assert len(peer.agent.calls_to("SubscribeToTask")) == 1


async def test_subscribe_must_open_with_the_task(peer: Peer) -> None:
    peer.agent.handlers["SubscribeToTask"] = script(status_event(COMPLETED))
    with pytest.raises(InvalidAgentResponseError, match="expected a Task"):
        await collect(peer.client().subscribe_to_task("t1"))


async def test_subscribe_follows_to_an_interrupted_state(peer: Peer) -> None:
    peer.agent.handlers["SubscribeToTask"] = script(
        snapshot(), status_event(a2a_pb2.TASK_STATE_INPUT_REQUIRED, text="your name?")
    )
    items = await collect(peer.client().subscribe_to_task("t1"))
    view = items[-1][1]
    assert view.done and view.question is not None
    assert view.question.parts[0].text == "your name?"


@pytest.mark.timeout(20)
async def test_resumed_send_stream_ends_at_an_interrupted_state(peer: Peer) -> None:
    # The resumed SubscribeToTask stays open through INPUT_REQUIRED (spec §3.1.6); the send
    # stream it continues ends there, as the original would have.
    held_open = asyncio.Event()
    peer.agent.handlers["SendStreamingMessage"] = script(snapshot(), then=unavailable)

    async def subscribe(request: Any, context: Any) -> AsyncIterator[Any]:
        yield snapshot()
        yield status_event(a2a_pb2.TASK_STATE_INPUT_REQUIRED, text="your name?")
        await held_open.wait()  # a real server's stream stays open until the task is terminal

    peer.agent.handlers["SubscribeToTask"] = subscribe
    items = await collect(peer.client().send_streaming_message(user_message("hi")))
    held_open.set()
    assert items[-1][1].state == a2a_pb2.TASK_STATE_INPUT_REQUIRED


async def test_subscribe_to_unknown_task(peer: Peer) -> None:
    async def unknown(request: Any, context: Any) -> AsyncIterator[Any]:
        await abort_with(context, TaskNotFoundError("no such task"))
        yield  # pragma: no cover

    peer.agent.handlers["SubscribeToTask"] = unknown
    with pytest.raises(TaskNotFoundError):
        await collect(peer.client().subscribe_to_task("nope"))


async def test_stream_deadline(peer: Peer) -> None:
    async def slow(request: Any, context: Any) -> AsyncIterator[Any]:
        yield snapshot()
        await asyncio.Event().wait()

    peer.agent.handlers["SendStreamingMessage"] = slow
    with pytest.raises(DeadlineExceededError):
        await collect(peer.client().send_streaming_message(user_message("hi"), timeout=0.3))


async def test_breaking_out_cancels_the_call(peer: Peer) -> None:
    cancelled = asyncio.Event()

    async def endless(request: Any, context: Any) -> AsyncIterator[Any]:
        try:
            yield snapshot()
            await asyncio.Event().wait()
        finally:
            cancelled.set()

    peer.agent.handlers["SendStreamingMessage"] = endless
    stream = peer.client().send_streaming_message(user_message("hi"))
    async for _event, view in stream:
        assert view.task_id == "t1"
        break
    await stream.aclose()
    await asyncio.wait_for(cancelled.wait(), 10)
