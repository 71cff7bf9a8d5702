"""The official SDK client for the push-config RPCs, bearer auth and the extended card."""

from __future__ import annotations

import uuid

import grpc
import pytest
from a2a.client.client import ClientCallContext
from a2a.types import a2a_pb2 as sdk
from a2a.utils import errors

from tests.interop.sdk_client.conftest import make_client

AUTH = ClientCallContext(service_parameters={"Authorization": "Bearer sdk-token"})


def ask() -> sdk.SendMessageRequest:
    message = sdk.Message(message_id=str(uuid.uuid4()), role=sdk.ROLE_USER)
    message.parts.add(text="ask")
    return sdk.SendMessageRequest(message=message)


async def test_push_config_rpcs(secure_port: int) -> None:
    client = await make_client(secure_port, streaming=False)
    try:
        (event,) = [e async for e in client.send_message(ask(), context=AUTH)]
        task_id = event.task.id
        created = await client.create_task_push_notification_config(
            sdk.TaskPushNotificationConfig(
                task_id=task_id,
                url="http://127.0.0.1:9/hook",
                token="t",
                authentication=sdk.AuthenticationInfo(scheme="Bearer", credentials="c"),
            ),
            context=AUTH,
        )
        assert created.id and created.task_id == task_id
        got = await client.get_task_push_notification_config(
            sdk.GetTaskPushNotificationConfigRequest(task_id=task_id, id=created.id),
            context=AUTH,
        )
        assert got.url == "http://127.0.0.1:9/hook"
        assert got.authentication.scheme == "Bearer"
        listed = await client.list_task_push_notification_configs(
            sdk.ListTaskPushNotificationConfigsRequest(task_id=task_id), context=AUTH
        )
        assert [c.id for c in listed.configs] == [created.id]
        for _ in range(2):  # delete is idempotent
            await client.delete_task_push_notification_config(
                sdk.DeleteTaskPushNotificationConfigRequest(task_id=task_id, id=created.id),
                context=AUTH,
            )
        with pytest.raises(errors.TaskNotFoundError):
            await client.get_task_push_notification_config(
                sdk.GetTaskPushNotificationConfigRequest(task_id=task_id, id=created.id),
                context=AUTH,
            )
        with pytest.raises(errors.TaskNotFoundError):
            await client.create_task_push_notification_config(
                sdk.TaskPushNotificationConfig(task_id="no-such-task", url="http://127.0.0.1:9"),
                context=AUTH,
            )
    finally:
        await client.close()


async def test_extended_card_for_an_authenticated_sdk_client(secure_port: int) -> None:
    client = await make_client(secure_port, streaming=False, extended=True)
    try:
        card = await client.get_extended_agent_card(sdk.GetExtendedAgentCardRequest(), context=AUTH)
        assert "members" in [skill.id for skill in card.skills]
    finally:
        await client.close()


async def test_extended_card_offered_but_not_configured(unconfigured_port: int) -> None:
    client = await make_client(unconfigured_port, streaming=False, extended=True)
    try:
        with pytest.raises(errors.ExtendedAgentCardNotConfiguredError):
            await client.get_extended_agent_card(sdk.GetExtendedAgentCardRequest(), context=AUTH)
    finally:
        await client.close()


async def test_missing_credentials_are_unauthenticated(secure_port: int) -> None:
    client = await make_client(secure_port, streaming=False)
    try:
        with pytest.raises(errors.A2AError) as caught:
            await client.get_task(sdk.GetTaskRequest(id="anything"))
        cause = caught.value.__cause__
        assert isinstance(cause, grpc.aio.AioRpcError)
        assert cause.code() == grpc.StatusCode.UNAUTHENTICATED
    finally:
        await client.close()


async def test_an_sdk_client_that_knows_none_of_our_extensions_is_served(
    secure_port: int,
) -> None:
    """Signed messages (optional), budgets, audit and tracing are all on; the SDK sends none."""
    client = await make_client(secure_port, streaming=True)
    try:
        message = sdk.Message(message_id=str(uuid.uuid4()), role=sdk.ROLE_USER)
        message.parts.add(text="hello")
        events = [
            e
            async for e in client.send_message(
                sdk.SendMessageRequest(message=message), context=AUTH
            )
        ]
        assert events[-1].status_update.status.state == sdk.TASK_STATE_COMPLETED
        card = await client.get_extended_agent_card(sdk.GetExtendedAgentCardRequest(), context=AUTH)
        assert card.name
    finally:
        await client.close()
