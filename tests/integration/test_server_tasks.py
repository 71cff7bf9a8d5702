"""ListTasks, GetTask, idempotent repeats and tenant isolation."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from google.protobuf import timestamp_pb2

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from tests.integration.conftest import (
    Factory,
    Harness,
    Held,
    collect,
    error_reason,
    send_request,
)


async def _send_many(harness: Harness, count: int, **fields: object) -> list[a2a_pb2.Task]:
    return [(await harness.stub.SendMessage(send_request(**fields))).task for _ in range(count)]


async def test_list_pages_newest_first_with_total_size(demo: Harness) -> None:
    sent = await _send_many(demo, 7)
    seen: list[str] = []
    token = ""
    while True:
        page = await demo.stub.ListTasks(a2a_pb2.ListTasksRequest(page_size=3, page_token=token))
        assert page.total_size == 7
        assert page.page_size == 3
        seen += [t.id for t in page.tasks]
        token = page.next_page_token
        if not token:
            break
    assert seen == [t.id for t in reversed(sent)]


async def test_list_default_page_size_and_artifacts(demo: Harness) -> None:
    await _send_many(demo, 2)
    page = await demo.stub.ListTasks(a2a_pb2.ListTasksRequest())
    assert page.page_size == 50
    assert page.next_page_token == ""
    assert all(len(t.artifacts) == 0 for t in page.tasks)
    with_artifacts = await demo.stub.ListTasks(
        a2a_pb2.ListTasksRequest(include_artifacts=True, history_length=0)
    )
    assert all(len(t.artifacts) == 1 and len(t.history) == 0 for t in with_artifacts.tasks)


@pytest.mark.parametrize("size", [0, -1, 101])
async def test_list_page_size_bounds(demo: Harness, size: int) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await demo.stub.ListTasks(a2a_pb2.ListTasksRequest(page_size=size))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_reason(caught.value) == "INVALID_PARAMS"


async def test_list_bad_page_token(demo: Harness) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await demo.stub.ListTasks(a2a_pb2.ListTasksRequest(page_token="!!not-ours"))
    assert error_reason(caught.value) == "INVALID_PARAMS"


async def test_list_filters(demo: Harness) -> None:
    await _send_many(demo, 2, context_id="a")
    waiting = (await demo.stub.SendMessage(send_request("ask", context_id="a"))).task
    await _send_many(demo, 3, context_id="b")
    by_context = await demo.stub.ListTasks(a2a_pb2.ListTasksRequest(context_id="a"))
    assert by_context.total_size == 3
    assert {t.context_id for t in by_context.tasks} == {"a"}
    by_state = await demo.stub.ListTasks(
        a2a_pb2.ListTasksRequest(status=a2a_pb2.TASK_STATE_INPUT_REQUIRED)
    )
    assert [t.id for t in by_state.tasks] == [waiting.id]
    both = await demo.stub.ListTasks(
        a2a_pb2.ListTasksRequest(context_id="b", status=a2a_pb2.TASK_STATE_COMPLETED)
    )
    assert both.total_size == 3
    after = timestamp_pb2.Timestamp()
    after.CopyFrom(waiting.status.timestamp)
    recent = await demo.stub.ListTasks(a2a_pb2.ListTasksRequest(status_timestamp_after=after))
    assert recent.total_size == 4  # the waiting task (>= is inclusive) and the three after it
    assert recent.tasks[-1].id == waiting.id


async def test_get_returns_copies(demo: Harness) -> None:
    task = (await demo.stub.SendMessage(send_request())).task
    got = await demo.stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id))
    assert got == task


class CountingAgent:
    def __init__(self) -> None:
        self.runs = 0

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        self.runs += 1
        await events.complete()


async def test_repeated_message_id_gets_the_original_outcome(make_server: Factory) -> None:
    agent = CountingAgent()
    harness = await make_server(agent=agent)
    request = send_request("hello")
    first = (await harness.stub.SendMessage(request)).task
    again = (await harness.stub.SendMessage(request)).task
    assert again.id == first.id
    assert agent.runs == 1
    streamed = [e async for e in harness.stub.SendStreamingMessage(request)]
    assert streamed[0].task.id == first.id
    assert agent.runs == 1


async def test_concurrent_repeats_run_the_agent_once(make_server: Factory) -> None:
    agent = Held()  # the run holds until the test lets it go: repeats find it in progress
    harness = await make_server(agent=agent)
    request = send_request("hello")
    sends = asyncio.gather(*(harness.stub.SendMessage(request) for _ in range(10)))
    await asyncio.wait_for(agent.entered.wait(), 10)
    # A repeat while the run is held follows that run: its stream opens with the same task.
    repeat = harness.stub.SendStreamingMessage(request)
    head = await repeat.read()
    assert head.task.status.state == a2a_pb2.TASK_STATE_WORKING
    agent.go.set()
    responses = await asyncio.wait_for(sends, 10)
    assert {r.task.id for r in responses} == {head.task.id}
    assert {r.task.status.state for r in responses} == {a2a_pb2.TASK_STATE_COMPLETED}
    assert (await collect(repeat))[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert agent.runs == 1
    listed = await harness.stub.ListTasks(a2a_pb2.ListTasksRequest())
    assert listed.total_size == 1


class AskThenHoldTheAnswer:
    """Asks which one; works on an answer until `go` is set, then completes the task."""

    def __init__(self) -> None:
        self.answering = asyncio.Event()
        self.go = asyncio.Event()
        self.answers = 0

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        if context.task is None:
            await events.require_input("which one?")
            return
        self.answers += 1
        await events.working()
        self.answering.set()
        await self.go.wait()
        await events.complete("thanks")


async def test_a_repeated_answer_gets_the_first_outcome_while_it_runs_and_after(
    make_server: Factory,
) -> None:
    """The same answer again (its message_id) is a repeat, not a message to a task whose state
    refuses it: while its run works on the task (else "still working on an earlier message")
    and once that run finished the task (else "takes no more messages")."""
    agent = AskThenHoldTheAnswer()
    harness = await make_server(agent=agent)
    asked = (await harness.stub.SendMessage(send_request("ask"))).task
    answer = send_request("the blue one", task_id=asked.id)
    first = asyncio.ensure_future(harness.stub.SendMessage(answer))
    await asyncio.wait_for(agent.answering.wait(), 10)
    repeat = harness.stub.SendStreamingMessage(answer)  # follows the run working on it
    assert (await repeat.read()).task.status.state == a2a_pb2.TASK_STATE_WORKING
    agent.go.set()
    done = (await asyncio.wait_for(first, 10)).task
    assert done.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert (await collect(repeat))[-1].status_update.status.state == done.status.state
    again = (await harness.stub.SendMessage(answer)).task
    assert again == done
    streamed = [event async for event in harness.stub.SendStreamingMessage(answer)]
    assert [(event.task.id, event.task.status) for event in streamed] == [(done.id, done.status)]
    assert agent.answers == 1


async def test_same_message_id_with_other_content_is_invalid(demo: Harness) -> None:
    request = send_request("one")
    await demo.stub.SendMessage(request)
    request.message.parts[0].text = "two"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await demo.stub.SendMessage(request)
    assert error_reason(caught.value) == "INVALID_PARAMS"
    assert "message_id" in (caught.value.details() or "")


async def test_direct_reply_repeat_returns_the_same_message(demo: Harness) -> None:
    request = send_request("reply once")
    first = await demo.stub.SendMessage(request)
    again = await demo.stub.SendMessage(request)
    assert again.message == first.message


async def test_other_tenants_tasks_look_unknown(demo: Harness) -> None:
    mine = (await demo.stub.SendMessage(send_request(tenant="acme"))).task
    waiting = (await demo.stub.SendMessage(send_request("ask", tenant="acme"))).task
    for tenant in ("", "globex"):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await demo.stub.GetTask(a2a_pb2.GetTaskRequest(id=mine.id, tenant=tenant))
        unknown = None
        try:
            await demo.stub.GetTask(a2a_pb2.GetTaskRequest(id="no-such-task", tenant=tenant))
        except grpc.aio.AioRpcError as error:
            unknown = error
        assert unknown is not None
        assert caught.value.code() == unknown.code() == grpc.StatusCode.NOT_FOUND
        assert error_reason(caught.value) == error_reason(unknown) == "TASK_NOT_FOUND"
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await demo.stub.CancelTask(a2a_pb2.CancelTaskRequest(id=waiting.id, tenant=tenant))
        assert error_reason(caught.value) == "TASK_NOT_FOUND"
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await demo.stub.SendMessage(send_request(task_id=waiting.id, tenant=tenant))
        assert error_reason(caught.value) == "TASK_NOT_FOUND"
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async for _ in demo.stub.SubscribeToTask(
                a2a_pb2.SubscribeToTaskRequest(id=waiting.id, tenant=tenant)
            ):
                pass
        assert error_reason(caught.value) == "TASK_NOT_FOUND"
        listed = await demo.stub.ListTasks(a2a_pb2.ListTasksRequest(tenant=tenant))
        assert listed.total_size == 0
    listed = await demo.stub.ListTasks(a2a_pb2.ListTasksRequest(tenant="acme"))
    assert listed.total_size == 2


async def test_same_message_id_in_another_tenant_is_a_new_message(make_server: Factory) -> None:
    agent = CountingAgent()
    harness = await make_server(agent=agent)
    request = send_request("hello", tenant="a")
    first = (await harness.stub.SendMessage(request)).task
    request.tenant = "b"
    second = (await harness.stub.SendMessage(request)).task
    assert first.id != second.id
    assert agent.runs == 2
