"""The official a2a-sdk's A2A 0.3 gRPC client (its compatibility layer) against our server.

The SDK picks its 0.3 transport for a card whose gRPC interface says protocolVersion 0.3; it
calls `a2a.v1.A2AService` with `a2a-version: 0.3`. The tasks it makes are then read with our
own 1.0 client, the `a2a-grpc` CLI, in a child process (this process holds the SDK's
descriptors, which collide with ours).
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest
from a2a.client.client import Client, ClientCallContext
from a2a.client.errors import A2AClientError
from a2a.types import a2a_pb2 as sdk
from a2a.utils import errors

from tests.interop.sdk_client.conftest import make_client

pytestmark = pytest.mark.timeout(60)

AUTH = ClientCallContext(service_parameters={"Authorization": "Bearer sdk-token"})


def request(text: str, **message_fields: object) -> sdk.SendMessageRequest:
    message = sdk.Message(message_id=str(uuid.uuid4()), role=sdk.ROLE_USER, **message_fields)
    message.parts.add(text=text)
    return sdk.SendMessageRequest(message=message)


async def send(
    client: Client, req: sdk.SendMessageRequest, context: ClientCallContext | None = None
) -> list[sdk.StreamResponse]:
    return [event async for event in client.send_message(req, context=context)]


def read_with_our_client(port: int, task_id: str, *extra: str) -> dict[str, object]:
    """The task as our 1.0 client (`a2a-grpc get --json`) sees it."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "a2a_grpc.cli.main",
            "get",
            f"127.0.0.1:{port}",
            task_id,
            "--json",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode in (0, 3, 4), done.stderr
    task: dict[str, object] = json.loads(done.stdout.splitlines()[0])
    return task


async def test_send_and_get_and_our_client_reads_the_task(port: int) -> None:
    client = await make_client(port, streaming=False, version="0.3")
    try:
        (event,) = await send(client, request("hello"))
        task = event.task
        assert task.status.state == sdk.TASK_STATE_COMPLETED
        assert task.artifacts[0].parts[0].text == "hello"
        got = await client.get_task(sdk.GetTaskRequest(id=task.id))
        assert got.id == task.id and got.status.state == sdk.TASK_STATE_COMPLETED
        ours = read_with_our_client(port, task.id)
        assert ours["id"] == task.id
        assert ours["status"]["state"] == "TASK_STATE_COMPLETED"  # type: ignore[index]
        assert ours["contextId"] == task.context_id
    finally:
        await client.close()


async def test_input_required_and_its_answer(port: int) -> None:
    client = await make_client(port, streaming=False, version="0.3")
    try:
        (first,) = await send(client, request("ask"))
        assert first.task.status.state == sdk.TASK_STATE_INPUT_REQUIRED
        (second,) = await send(
            client, request("green", task_id=first.task.id, context_id=first.task.context_id)
        )
        assert second.task.status.state == sdk.TASK_STATE_COMPLETED
        ours = read_with_our_client(port, first.task.id)
        assert len(ours["history"]) >= 3  # type: ignore[arg-type]
    finally:
        await client.close()


async def test_stream(port: int) -> None:
    client = await make_client(port, streaming=True, version="0.3")
    try:
        events = await send(client, request("chunks 3"))
        assert events[0].HasField("task")
        chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
        assert [c.append for c in chunks] == [False, True, True]
        assert chunks[-1].last_chunk
        assert events[-1].status_update.status.state == sdk.TASK_STATE_COMPLETED
    finally:
        await client.close()


async def test_cancel_and_resubscribe(port: int) -> None:
    client = await make_client(port, streaming=True, version="0.3")
    try:
        stream = client.send_message(request("slow 30"))
        task_id = (await anext(stream)).task.id
        subscription = client.subscribe(sdk.SubscribeToTaskRequest(id=task_id))
        assert (await anext(subscription)).task.id == task_id
        canceled = await client.cancel_task(sdk.CancelTaskRequest(id=task_id))
        assert canceled.status.state == sdk.TASK_STATE_CANCELED  # 0.3's CANCELLED, mapped back
        rest = [event async for event in subscription]
        assert rest[-1].status_update.status.state == sdk.TASK_STATE_CANCELED
        _ = [event async for event in stream]
        ours = read_with_our_client(port, task_id)
        assert ours["status"]["state"] == "TASK_STATE_CANCELED"  # type: ignore[index]
        with pytest.raises(errors.TaskNotCancelableError):
            await client.cancel_task(sdk.CancelTaskRequest(id=task_id))
    finally:
        await client.close()


async def test_errors_arrive_as_typed_errors(port: int) -> None:
    client = await make_client(port, streaming=True, version="0.3")
    try:
        with pytest.raises(errors.TaskNotFoundError, match="no-such-task"):
            await client.get_task(sdk.GetTaskRequest(id="no-such-task"))
        with pytest.raises(errors.TaskNotFoundError):
            await send(client, request("hi", task_id="no-such-task"))
        (done,) = [e async for e in client.send_message(request("hello"))][-1:]
        task_id = done.status_update.task_id
        with pytest.raises(errors.UnsupportedOperationError):
            _ = [e async for e in client.subscribe(sdk.SubscribeToTaskRequest(id=task_id))]
        with pytest.raises(errors.InvalidParamsError):  # the SSRF guard, as over 1.0
            await client.create_task_push_notification_config(
                sdk.TaskPushNotificationConfig(task_id=task_id, url="http://127.0.0.1:9/hook")
            )
    finally:
        await client.close()


async def test_push_configs(secure_port: int) -> None:
    client = await make_client(secure_port, streaming=False, version="0.3")
    try:
        (event,) = await send(client, request("ask"), AUTH)
        task_id = event.task.id
        created = await client.create_task_push_notification_config(
            sdk.TaskPushNotificationConfig(
                task_id=task_id,
                id="hook-1",
                url="http://127.0.0.1:9/hook",
                token="t",
                authentication=sdk.AuthenticationInfo(scheme="Bearer", credentials="c"),
            ),
            context=AUTH,
        )
        assert (created.id, created.task_id) == ("hook-1", task_id)
        got = await client.get_task_push_notification_config(
            sdk.GetTaskPushNotificationConfigRequest(task_id=task_id, id="hook-1"), context=AUTH
        )
        assert got.url == "http://127.0.0.1:9/hook"
        assert got.authentication.scheme == "Bearer"
        listed = await client.list_task_push_notification_configs(
            sdk.ListTaskPushNotificationConfigsRequest(task_id=task_id), context=AUTH
        )
        assert [c.id for c in listed.configs] == ["hook-1"]
        await client.delete_task_push_notification_config(
            sdk.DeleteTaskPushNotificationConfigRequest(task_id=task_id, id="hook-1"),
            context=AUTH,
        )
        with pytest.raises(errors.TaskNotFoundError):
            await client.get_task_push_notification_config(
                sdk.GetTaskPushNotificationConfigRequest(task_id=task_id, id="hook-1"),
                context=AUTH,
            )
    finally:
        await client.close()


async def test_the_card_over_0_3(secure_port: int) -> None:
    client = await make_client(secure_port, streaming=False, extended=True, version="0.3")
    try:
        card = await client.get_extended_agent_card(sdk.GetExtendedAgentCardRequest(), context=AUTH)
        assert "members" in [skill.id for skill in card.skills]  # the extended card
        first = card.supported_interfaces[0]
        # at the card's gRPC url (our_server's card file names port 0)
        assert (first.url, first.protocol_binding, first.protocol_version) == (
            "127.0.0.1:0",
            "GRPC",
            "0.3",
        )
        assert "bearer" in card.security_schemes
        with pytest.raises(A2AClientError, match="UNAUTHENTICATED"):
            await client.get_extended_agent_card(sdk.GetExtendedAgentCardRequest())
    finally:
        await client.close()


async def test_no_compat_03_is_unimplemented_for_0_3_clients(no_compat_port: int) -> None:
    client = await make_client(no_compat_port, streaming=False, version="0.3")
    try:
        with pytest.raises(A2AClientError, match="UNIMPLEMENTED"):
            await send(client, request("hello"))
    finally:
        await client.close()
    modern = await make_client(no_compat_port, streaming=False)
    try:
        (event,) = await send(modern, request("hello"))
        assert event.task.status.state == sdk.TASK_STATE_COMPLETED
    finally:
        await modern.close()
