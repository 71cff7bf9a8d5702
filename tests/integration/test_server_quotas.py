"""Bounds that keep one caller from taking the server's memory or locking others out."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from google.protobuf import struct_pb2

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents, TaskMemoryFullError
from a2a_grpc.server.push.configs import PushConfigStore
from a2a_grpc.server.push.delivery import DeliveryPolicy, WebhookDispatcher
from tests.integration.conftest import Factory, error_reason, send_request
from tests.integration.test_server_retry_classes import details

TOKENS = {"alice-token": "alice", "bob-token": "bob"}
ALICE = (("authorization", "Bearer alice-token"),)
BOB = (("authorization", "Bearer bob-token"),)


def refused_for_now(error: grpc.aio.AioRpcError) -> None:
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    info, delay = details(error)
    assert info.metadata["retryable"] == "true" and delay == 1.0


async def test_text_and_data_parts_count_toward_the_message_size_limit(
    make_server: Factory,
) -> None:
    harness = await make_server(max_message_bytes=64 * 1024, max_inline_bytes=1024)
    big_text = send_request("x" * 70_000)
    big_data = send_request("small")
    big_data.message.parts.add().data.CopyFrom(struct_pb2.Value(string_value="y" * 70_000))
    for request in (big_text, big_data):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await harness.stub.SendMessage(request)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_reason(caught.value) == "INVALID_PARAMS"
        assert "limit is 65536" in (caught.value.details() or "")
    ok = await harness.stub.SendMessage(send_request("x" * 60_000))
    assert ok.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert len(harness.store) == 1  # the refused ones stored nothing


async def test_store_byte_budget_refuses_new_work_when_live_tasks_fill_it(
    make_server: Factory,
) -> None:
    harness = await make_server(max_store_bytes=100_000)
    for _ in range(3):  # finished tasks make room for new ones
        done = await harness.stub.SendMessage(send_request("x" * 40_000))
        assert done.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    for _ in range(2):  # parked tasks cannot be evicted
        asked = await harness.stub.SendMessage(send_request("ask " + "y" * 40_000))
        assert asked.task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await harness.stub.SendMessage(send_request("x" * 40_000))
    refused_for_now(caught.value)
    assert "task memory" in (caught.value.details() or "")
    small = await harness.stub.SendMessage(send_request("hi"))  # what still fits is served
    assert small.task.status.state == a2a_pb2.TASK_STATE_COMPLETED


class Filler:
    """`park N`: asks for input holding N bytes; anything else: a small artifact, then one of
    60,000 bytes (the exception that second write raised, if any, in `raised`)."""

    def __init__(self) -> None:
        self.raised: Exception | None = None

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        if context.text().startswith("park"):
            await events.require_input("x" * int(context.text().split()[1]))
            return
        await events.working()
        await events.add_artifact([a2a_pb2.Part(text="small")], name="first")
        try:
            await events.add_artifact([a2a_pb2.Part(text="z" * 60_000)], name="big")
        except TaskMemoryFullError as exc:
            self.raised = exc
            raise


async def test_an_agent_s_write_past_the_byte_budget_fails_its_task_keeping_the_rest(
    make_server: Factory,
) -> None:
    agent = Filler()
    harness = await make_server(agent, max_store_bytes=100_000)
    # The question is kept twice (status message and history): 60 KB of live task.
    parked = await harness.stub.SendMessage(send_request("park 30000"))
    assert parked.task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    done = await harness.stub.SendMessage(send_request("fill"))
    task = done.task
    assert task.status.state == a2a_pb2.TASK_STATE_FAILED
    assert "task memory is full" in task.status.message.parts[0].text
    assert "artifact (60004 bytes)" in task.status.message.parts[0].text  # the part, serialized
    assert [artifact.name for artifact in task.artifacts] == ["first"]  # what landed is kept
    assert task.history[0].parts[0].text == "fill"
    assert isinstance(agent.raised, TaskMemoryFullError)
    kept = await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id=parked.task.id))
    assert kept.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED  # the parked task is intact
    assert harness.store.bytes <= 100_000


async def test_an_answer_that_does_not_fit_beside_live_tasks_is_refused(
    make_server: Factory,
) -> None:
    harness = await make_server(max_store_bytes=100_000)
    asked = []
    for _ in range(2):  # parked tasks cannot be evicted
        reply = await harness.stub.SendMessage(send_request("ask " + "y" * 40_000))
        asked.append(reply.task)
    answer = send_request("z" * 30_000)
    answer.message.task_id = asked[0].id
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await harness.stub.SendMessage(answer)
    refused_for_now(caught.value)
    assert "task memory" in (caught.value.details() or "")
    # Nothing accepted is lost: the task waits as it was, and takes an answer that fits.
    kept = await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id=asked[0].id))
    assert kept.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    assert len(kept.history) == len(asked[0].history)
    short = send_request("a short answer")
    short.message.task_id = asked[0].id
    done = await harness.stub.SendMessage(short)
    assert done.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert harness.store.bytes <= 100_000


async def test_one_caller_cannot_hold_the_whole_store(make_server: Factory) -> None:
    harness = await make_server(tokens=TOKENS, max_tasks=20, max_live_tasks_per_principal=3)
    for tenant in ("", "", "other"):
        await harness.stub.SendMessage(send_request("ask", tenant=tenant), metadata=ALICE)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await harness.stub.SendMessage(send_request("ask", tenant="third"), metadata=ALICE)
    refused_for_now(caught.value)
    assert "this caller already has 3 unfinished tasks" in (caught.value.details() or "")
    served = await harness.stub.SendMessage(send_request("ask"), metadata=BOB)
    assert served.task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    # Finished work does not count: alice answers one of hers and may start another.
    tasks = await harness.stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=ALICE)
    answer = send_request("blue", task_id=tasks.tasks[0].id)
    await harness.stub.SendMessage(answer, metadata=ALICE)
    await harness.stub.SendMessage(send_request("ask"), metadata=ALICE)


async def test_one_tenant_cannot_hold_the_whole_store(make_server: Factory) -> None:
    harness = await make_server(tokens=TOKENS, max_tasks=20, max_live_tasks_per_tenant=2)
    await harness.stub.SendMessage(send_request("ask", tenant="acme"), metadata=ALICE)
    await harness.stub.SendMessage(send_request("ask", tenant="acme"), metadata=BOB)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await harness.stub.SendMessage(send_request("ask", tenant="acme"), metadata=BOB)
    refused_for_now(caught.value)
    assert "tenant" in (caught.value.details() or "")
    other = await harness.stub.SendMessage(send_request("ask", tenant="globex"), metadata=BOB)
    assert other.task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED


class Forgetting(WebhookDispatcher):
    """A dispatcher that tells when the store let go of a task (its webhooks go with it)."""

    def __init__(self) -> None:
        super().__init__(PushConfigStore(), DeliveryPolicy())
        self.forgotten = asyncio.Event()

    def forget_task(self, task_id: str) -> None:
        super().forget_task(task_id)
        self.forgotten.set()


async def test_finished_tasks_expire_without_new_traffic(make_server: Factory) -> None:
    webhooks = Forgetting()
    harness = await make_server(task_ttl=0.05, webhooks=webhooks)
    task = (await harness.stub.SendMessage(send_request())).task
    # The housekeeping timer, not a new request.
    await asyncio.wait_for(webhooks.forgotten.wait(), 10)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id))
    assert error_reason(caught.value) == "TASK_NOT_FOUND"


async def test_a_task_left_waiting_for_input_is_canceled(make_server: Factory) -> None:
    harness = await make_server(interrupted_ttl=0.05)
    task = (await harness.stub.SendMessage(send_request("ask"))).task
    subscription = harness.stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=task.id))
    assert (await subscription.read()).task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    update = (await asyncio.wait_for(subscription.read(), 10)).status_update
    assert update.status.state == a2a_pb2.TASK_STATE_CANCELED
    assert "no answer arrived within 0.05 s" in update.status.message.parts[0].text
    assert await subscription.read() is grpc.aio.EOF
    stored = await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id))
    assert stored.status.state == a2a_pb2.TASK_STATE_CANCELED
