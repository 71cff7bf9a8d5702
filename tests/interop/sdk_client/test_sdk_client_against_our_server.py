"""The official a2a-sdk gRPC client (pinned 1.3.0) as a real peer of our server."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from a2a.client.client import Client, ClientCallContext
from a2a.types import a2a_pb2 as sdk
from a2a.utils import errors

from tests.interop.sdk_client.conftest import make_client

pytestmark = pytest.mark.timeout(60)


def request(text: str, **message_fields: object) -> sdk.SendMessageRequest:
    message = sdk.Message(message_id=str(uuid.uuid4()), role=sdk.ROLE_USER, **message_fields)
    message.parts.add(text=text)
    return sdk.SendMessageRequest(message=message)


async def send(client: Client, req: sdk.SendMessageRequest) -> list[sdk.StreamResponse]:
    return [event async for event in client.send_message(req)]


async def test_blocking_send(blocking_client: Client) -> None:
    (event,) = await send(blocking_client, request("hello"))
    assert event.task.status.state == sdk.TASK_STATE_COMPLETED
    assert event.task.artifacts[0].parts[0].text == "hello"


async def test_direct_reply(blocking_client: Client) -> None:
    (event,) = await send(blocking_client, request("reply hi"))
    assert event.message.parts[0].text == "hi"


async def test_streaming_send(streaming_client: Client) -> None:
    events = await send(streaming_client, request("chunks 3"))
    assert events[0].HasField("task")
    chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
    assert [c.append for c in chunks] == [False, True, True]
    assert chunks[-1].last_chunk
    assert events[-1].status_update.status.state == sdk.TASK_STATE_COMPLETED


@pytest.mark.parametrize("with_context", [False, True])
async def test_input_required_continuation(blocking_client: Client, with_context: bool) -> None:
    (first,) = await send(blocking_client, request("ask"))
    task = first.task
    assert task.status.state == sdk.TASK_STATE_INPUT_REQUIRED
    extra = {"context_id": task.context_id} if with_context else {}
    (second,) = await send(blocking_client, request("green", task_id=task.id, **extra))
    assert second.task.id == task.id
    assert second.task.status.state == sdk.TASK_STATE_COMPLETED


async def test_streaming_continuation_opens_with_the_task(streaming_client: Client) -> None:
    first = await send(streaming_client, request("ask"))
    task_id = first[0].task.id
    second = await send(streaming_client, request("green", task_id=task_id))
    assert second[0].task.id == task_id
    assert second[-1].status_update.status.state == sdk.TASK_STATE_COMPLETED


async def test_get_and_list(blocking_client: Client) -> None:
    context_id = str(uuid.uuid4())
    (sent,) = await send(blocking_client, request("hello", context_id=context_id))
    got = await blocking_client.get_task(sdk.GetTaskRequest(id=sent.task.id, history_length=0))
    assert got.id == sent.task.id and len(got.history) == 0
    listed = await blocking_client.list_tasks(sdk.ListTasksRequest(context_id=context_id))
    assert [t.id for t in listed.tasks] == [sent.task.id]
    assert listed.total_size == 1 and listed.next_page_token == ""


async def test_cancel_a_running_streamed_task(port: int) -> None:
    client = await make_client(port, streaming=True)
    try:
        stream = client.send_message(request("slow 30"))
        first = await anext(stream)
        task_id = first.task.id
        canceled = await client.cancel_task(sdk.CancelTaskRequest(id=task_id))
        assert canceled.status.state == sdk.TASK_STATE_CANCELED
        rest = [event async for event in stream]
        assert rest[-1].status_update.status.state == sdk.TASK_STATE_CANCELED
    finally:
        await client.close()


async def test_subscribe(port: int) -> None:
    client = await make_client(port, streaming=True)
    try:
        stream = client.send_message(request("chunks 5"))
        task_id = (await anext(stream)).task.id
        subscribed = [e async for e in client.subscribe(sdk.SubscribeToTaskRequest(id=task_id))]
        assert subscribed[0].task.id == task_id
        assert subscribed[-1].status_update.status.state == sdk.TASK_STATE_COMPLETED
        _ = [e async for e in stream]
    finally:
        await client.close()


async def test_message_to_a_terminal_task(blocking_client: Client) -> None:
    (done,) = await send(blocking_client, request("hello"))
    with pytest.raises(errors.UnsupportedOperationError):
        await send(blocking_client, request("again", task_id=done.task.id))


async def test_unknown_task_id(blocking_client: Client) -> None:
    with pytest.raises(errors.TaskNotFoundError):
        await blocking_client.get_task(sdk.GetTaskRequest(id="no-such-task"))
    with pytest.raises(errors.TaskNotFoundError):
        await send(blocking_client, request("hi", task_id="no-such-task"))
    with pytest.raises(errors.TaskNotFoundError):
        await blocking_client.cancel_task(sdk.CancelTaskRequest(id="no-such-task"))


async def test_error_classes(blocking_client: Client, streaming_client: Client) -> None:
    (done,) = await send(blocking_client, request("hello"))
    with pytest.raises(errors.TaskNotCancelableError):
        await blocking_client.cancel_task(sdk.CancelTaskRequest(id=done.task.id))
    with pytest.raises(errors.UnsupportedOperationError):
        _ = [
            e async for e in streaming_client.subscribe(sdk.SubscribeToTaskRequest(id=done.task.id))
        ]
    with pytest.raises(errors.InvalidParamsError):
        await blocking_client.list_tasks(sdk.ListTasksRequest(page_size=500))
    with pytest.raises(errors.InvalidParamsError):
        await blocking_client.get_task(sdk.GetTaskRequest(id=done.task.id, history_length=-1))
    with pytest.raises(errors.InvalidParamsError, match="non-public address"):
        await blocking_client.create_task_push_notification_config(
            sdk.TaskPushNotificationConfig(task_id=done.task.id, url="http://127.0.0.1:9/hook")
        )
    old_version = ClientCallContext(service_parameters={"A2A-Version": "0.3"})
    with pytest.raises(errors.VersionNotSupportedError):
        await blocking_client.get_task(sdk.GetTaskRequest(id=done.task.id), context=old_version)


async def test_extended_card_not_offered(port: int) -> None:
    # The SDK client answers from its cached card unless the card claims an extended one, so
    # this client is told it does; our server then says the capability is off.
    client = await make_client(port, streaming=False, extended=True)
    try:
        with pytest.raises(errors.UnsupportedOperationError):
            await client.get_extended_agent_card(sdk.GetExtendedAgentCardRequest())
    finally:
        await client.close()


async def test_content_type_required_extension_and_no_push(strict_port: int) -> None:
    client = await make_client(strict_port, streaming=False)
    try:
        with pytest.raises(errors.ExtensionSupportRequiredError):
            await send(client, request("hello"))
        activated = ClientCallContext(service_parameters={"A2A-Extensions": "urn:x-required"})
        pdf = request("hello")
        pdf.message.parts.add(url="https://x.example/a.pdf", media_type="application/pdf")
        with pytest.raises(errors.ContentTypeNotSupportedError):
            _ = [e async for e in client.send_message(pdf, context=activated)]
        ok = [e async for e in client.send_message(request("hello"), context=activated)]
        assert ok[0].task.status.state == sdk.TASK_STATE_COMPLETED
        with pytest.raises(errors.PushNotificationNotSupportedError):
            await client.create_task_push_notification_config(
                sdk.TaskPushNotificationConfig(task_id=ok[0].task.id, url="https://h.example"),
                context=activated,
            )
    finally:
        await client.close()


async def test_concurrent_sdk_clients(port: int) -> None:
    clients = [await make_client(port, streaming=True) for _ in range(4)]
    try:
        results = await asyncio.gather(*(send(c, request("hello")) for c in clients))
        assert all(r[-1].status_update.status.state == sdk.TASK_STATE_COMPLETED for r in results)
    finally:
        for client in clients:
            await client.close()
