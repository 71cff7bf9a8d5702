"""The official a2a-sdk client (pinned 1.3.0) over our JSON-RPC and HTTP+JSON bindings.

The client finds the bindings as any SDK client would: it reads our served card from the HTTP
port and picks the interface of the binding it is configured for.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.client.client import Client, ClientCallContext
from a2a.types import a2a_pb2 as sdk
from a2a.utils import errors

pytestmark = pytest.mark.timeout(60)

HTTP_BINDINGS = ("JSONRPC", "HTTP+JSON")
AUTH = ClientCallContext(service_parameters={"Authorization": "Bearer sdk-token"})


def request(text: str, **message_fields: object) -> sdk.SendMessageRequest:
    message = sdk.Message(message_id=str(uuid.uuid4()), role=sdk.ROLE_USER, **message_fields)
    message.parts.add(text=text)
    return sdk.SendMessageRequest(message=message)


async def connect(url: str, binding: str, *, streaming: bool) -> Client:
    config = ClientConfig(streaming=streaming, supported_protocol_bindings=[binding])
    return await ClientFactory(config).create_from_url(url)


@pytest.fixture(params=HTTP_BINDINGS)
async def blocking_client(request: pytest.FixtureRequest, http_url: str) -> AsyncIterator[Client]:
    client = await connect(http_url, request.param, streaming=False)
    yield client
    await client.close()


@pytest.fixture(params=HTTP_BINDINGS)
async def streaming_client(request: pytest.FixtureRequest, http_url: str) -> AsyncIterator[Client]:
    client = await connect(http_url, request.param, streaming=True)
    yield client
    await client.close()


async def send(client: Client, req: sdk.SendMessageRequest) -> list[sdk.StreamResponse]:
    return [event async for event in client.send_message(req)]


async def test_blocking_send_get_list(blocking_client: Client) -> None:
    (event,) = await send(blocking_client, request("hello"))
    task = event.task
    assert task.status.state == sdk.TASK_STATE_COMPLETED
    assert task.artifacts[0].parts[0].text == "hello"
    got = await blocking_client.get_task(sdk.GetTaskRequest(id=task.id, history_length=1))
    assert got.id == task.id and len(got.history) <= 1
    listed = await blocking_client.list_tasks(
        sdk.ListTasksRequest(context_id=task.context_id, include_artifacts=True)
    )
    assert [t.id for t in listed.tasks] == [task.id]


async def test_direct_reply(blocking_client: Client) -> None:
    (event,) = await send(blocking_client, request("reply hi"))
    assert event.message.parts[0].text == "hi"


async def test_streaming_send(streaming_client: Client) -> None:
    events = await send(streaming_client, request("chunks 3"))
    assert events[0].HasField("task")
    chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
    assert [c.append for c in chunks] == [False, True, True]
    assert events[-1].status_update.status.state == sdk.TASK_STATE_COMPLETED


async def test_input_required_then_subscribe_and_cancel(streaming_client: Client) -> None:
    first = await send(streaming_client, request("ask"))
    task_id = first[0].task.id
    assert first[-1].status_update.status.state == sdk.TASK_STATE_INPUT_REQUIRED
    subscription = streaming_client.subscribe(sdk.SubscribeToTaskRequest(id=task_id))
    opening = await anext(subscription)
    assert opening.task.id == task_id
    canceled = await streaming_client.cancel_task(sdk.CancelTaskRequest(id=task_id))
    assert canceled.status.state == sdk.TASK_STATE_CANCELED
    rest = [event async for event in subscription]
    assert rest[-1].status_update.status.state == sdk.TASK_STATE_CANCELED


async def test_errors_map_to_the_sdks_classes(blocking_client: Client) -> None:
    with pytest.raises(errors.TaskNotFoundError):
        await blocking_client.get_task(sdk.GetTaskRequest(id="no-such-task"))
    (event,) = await send(blocking_client, request("hello"))
    with pytest.raises(errors.TaskNotCancelableError):
        await blocking_client.cancel_task(sdk.CancelTaskRequest(id=event.task.id))
    with pytest.raises(errors.InvalidParamsError):
        await blocking_client.get_task(sdk.GetTaskRequest(id=event.task.id, history_length=-1))


@pytest.mark.parametrize("binding", HTTP_BINDINGS)
async def test_push_configs_and_extended_card_with_a_bearer_token(
    secure_http_url: str, binding: str
) -> None:
    client = await connect(secure_http_url, binding, streaming=False)
    try:
        (event,) = [e async for e in client.send_message(request("ask"), context=AUTH)]
        task_id = event.task.id
        created = await client.create_task_push_notification_config(
            sdk.TaskPushNotificationConfig(task_id=task_id, url="http://127.0.0.1:9/hook"),
            context=AUTH,
        )
        assert created.id and created.task_id == task_id
        got = await client.get_task_push_notification_config(
            sdk.GetTaskPushNotificationConfigRequest(task_id=task_id, id=created.id),
            context=AUTH,
        )
        assert got.url == "http://127.0.0.1:9/hook"
        listed = await client.list_task_push_notification_configs(
            sdk.ListTaskPushNotificationConfigsRequest(task_id=task_id), context=AUTH
        )
        assert [c.id for c in listed.configs] == [created.id]
        await client.delete_task_push_notification_config(
            sdk.DeleteTaskPushNotificationConfigRequest(task_id=task_id, id=created.id),
            context=AUTH,
        )
        with pytest.raises(errors.TaskNotFoundError):
            await client.get_task_push_notification_config(
                sdk.GetTaskPushNotificationConfigRequest(task_id=task_id, id=created.id),
                context=AUTH,
            )
        card = await client.get_extended_agent_card(sdk.GetExtendedAgentCardRequest(), context=AUTH)
        assert "members" in [skill.id for skill in card.skills]
        with pytest.raises(errors.A2AError):
            await client.get_task(sdk.GetTaskRequest(id=task_id))  # no token
    finally:
        await client.close()


@pytest.mark.parametrize("binding", HTTP_BINDINGS)
async def test_required_extension_content_type_and_no_push(
    strict_http_url: str, binding: str
) -> None:
    client = await connect(strict_http_url, binding, streaming=False)
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


@pytest.mark.parametrize("binding", HTTP_BINDINGS)
async def test_a_streamed_error_reaches_the_sdk_as_its_class(http_url: str, binding: str) -> None:
    client = await connect(http_url, binding, streaming=True)
    try:
        with pytest.raises(errors.TaskNotFoundError):
            _ = [e async for e in client.subscribe(sdk.SubscribeToTaskRequest(id="no-such"))]
        (event,) = [e async for e in client.send_message(request("hello"))][:1]
        done = event.task.id
        with pytest.raises(errors.UnsupportedOperationError):  # subscribe to a terminal task
            _ = [e async for e in client.subscribe(sdk.SubscribeToTaskRequest(id=done))]
    finally:
        await client.close()
