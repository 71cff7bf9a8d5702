"""A2AClient unary calls against a scripted gRPC peer: metadata, tenant, errors, retry, deadline."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from a2a_grpc.client import (
    BearerToken,
    DeadlineExceededError,
    RetryPolicy,
    RpcFailedError,
    UnavailableError,
)
from a2a_grpc.client.messages import user_message
from a2a_grpc.core.errors import InvalidAgentResponseError, InvalidParamsError, TaskNotFoundError
from a2a_grpc.generated import a2a_pb2
from tests.integration.scripted_agent import EMPTY, Peer, abort_with, peer, task

__all__ = ["peer"]


def answer(value: Any) -> Any:
    async def handler(request: Any, context: Any) -> Any:
        return value

    return handler


async def test_every_call_sends_version_extensions_credentials_and_tenant(peer: Peer) -> None:
    peer.agent.handlers["GetTask"] = answer(task())
    peer.agent.handlers["SendMessage"] = answer(a2a_pb2.SendMessageResponse(task=task()))
    peer.agent.handlers["ListTaskPushNotificationConfigs"] = answer(
        a2a_pb2.ListTaskPushNotificationConfigsResponse()
    )
    client = peer.client(
        tenant="acme",
        extensions=["urn:a", "urn:b"],
        credentials=BearerToken("s3cret"),
        metadata=[("X-Trace", "abc")],
    )
    request = a2a_pb2.GetTaskRequest(id="t1")
    await client.get_task(request, metadata=[("X-Call", "1")])
    await client.send_message(user_message("hi"))
    await client.list_task_push_notification_configs(
        a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id="t1")
    )
    await client.get_task(a2a_pb2.GetTaskRequest(id="t1", tenant="explicit"))

    get, send, list_configs, explicit = peer.agent.calls
    for call in peer.agent.calls:
        assert call.metadata["a2a-version"] == "1.0"
        assert call.metadata["a2a-extensions"] == "urn:a,urn:b"
        assert call.metadata["authorization"] == "Bearer s3cret"
        assert call.metadata["x-trace"] == "abc"
    assert get.metadata["x-call"] == "1" and "x-call" not in send.metadata
    assert get.request.tenant == "acme"
    assert send.request.tenant == "acme"
    assert list_configs.request.tenant == "acme"  # field 4 in this one request
    assert explicit.request.tenant == "explicit"
    assert request.tenant == ""  # the caller's request is not mutated


async def test_per_call_metadata_replaces_the_clients_entry_for_the_same_key(peer: Peer) -> None:
    # Spec decision §9.10: one entry per key, the most specific layer winning.
    peer.agent.handlers["GetTask"] = answer(task())
    client = peer.client(
        credentials=BearerToken("default"),
        metadata=[("X-Team", "red"), ("X-Keep", "1")],
    )
    await client.get_task(
        "t1",
        metadata=[
            ("A2A-Version", "1.0.1"),
            ("authorization", "Bearer per-call"),
            ("x-team", "blue"),
            ("x-team", "green"),
        ],
    )
    (call,) = peer.agent.calls
    assert [v for k, v in call.entries if k == "a2a-version"] == ["1.0.1"]
    assert [v for k, v in call.entries if k == "authorization"] == ["Bearer per-call"]
    assert [v for k, v in call.entries if k == "x-team"] == ["blue", "green"]
    assert [v for k, v in call.entries if k == "x-keep"] == ["1"]


async def test_no_tenant_and_no_extensions_by_default(peer: Peer) -> None:
    peer.agent.handlers["GetTask"] = answer(task())
    await peer.client().get_task("t1")
    (call,) = peer.agent.calls
    assert call.request.tenant == ""
    assert "a2a-extensions" not in call.metadata and "authorization" not in call.metadata


async def test_every_rpc_has_its_method(peer: Peer) -> None:
    config = a2a_pb2.TaskPushNotificationConfig(id="p1", task_id="t1", url="https://hook")
    handlers = {
        "GetTask": task(),
        "ListTasks": a2a_pb2.ListTasksResponse(tasks=[task()], page_size=1, total_size=1),
        "CancelTask": task(state=a2a_pb2.TASK_STATE_CANCELED),
        "CreateTaskPushNotificationConfig": config,
        "GetTaskPushNotificationConfig": config,
        "ListTaskPushNotificationConfigs": a2a_pb2.ListTaskPushNotificationConfigsResponse(
            configs=[config]
        ),
        "GetExtendedAgentCard": a2a_pb2.AgentCard(name="secret card"),
        "DeleteTaskPushNotificationConfig": EMPTY,
    }
    for name, value in handlers.items():
        peer.agent.handlers[name] = answer(value)
    client = peer.client()
    assert (await client.get_task("t1")).id == "t1"
    assert (await client.list_tasks()).total_size == 1
    assert (await client.cancel_task("t1")).status.state == a2a_pb2.TASK_STATE_CANCELED
    assert (await client.create_task_push_notification_config(config)).id == "p1"
    get_config = a2a_pb2.GetTaskPushNotificationConfigRequest(task_id="t1", id="p1")
    assert (await client.get_task_push_notification_config(get_config)).url == "https://hook"
    list_configs = a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id="t1")
    assert len((await client.list_task_push_notification_configs(list_configs)).configs) == 1
    assert (await client.get_extended_agent_card()).name == "secret card"
    delete = a2a_pb2.DeleteTaskPushNotificationConfigRequest(task_id="t1", id="p1")
    assert await client.delete_task_push_notification_config(delete) is None
    assert [call.method for call in peer.agent.calls] == list(handlers)


async def test_a2a_errors_are_decoded_into_the_shared_classes(peer: Peer) -> None:
    async def not_found(request: Any, context: Any) -> Any:
        await abort_with(context, TaskNotFoundError("no task t9", metadata={"taskId": "t9"}))

    peer.agent.handlers["GetTask"] = not_found
    with pytest.raises(TaskNotFoundError) as raised:
        await peer.client().get_task("t9")
    assert raised.value.message == "no task t9"
    assert raised.value.metadata == {"taskId": "t9"}
    assert isinstance(raised.value.__cause__, grpc.aio.AioRpcError)


async def test_a_failure_without_error_info_is_generic(peer: Peer) -> None:
    with pytest.raises(RpcFailedError) as raised:
        await peer.client().list_tasks()  # not scripted: UNIMPLEMENTED
    assert raised.value.code is grpc.StatusCode.UNIMPLEMENTED


async def test_send_message_returns_task_or_direct_answer(peer: Peer) -> None:
    reply = a2a_pb2.Message(
        message_id="r", role=a2a_pb2.ROLE_AGENT, parts=[a2a_pb2.Part(text="hi")]
    )
    peer.agent.handlers["SendMessage"] = answer(a2a_pb2.SendMessageResponse(message=reply))
    assert await peer.client().send_message(user_message("hello")) == reply


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        a2a_pb2.SendMessageResponse(task=task()).SerializeToString()
        + a2a_pb2.SendMessageResponse(message=a2a_pb2.Message(message_id="m")).SerializeToString(),
        a2a_pb2.SendMessageResponse(task=a2a_pb2.Task()).SerializeToString(),
    ],
    ids=["no-payload", "two-payloads", "task-without-id"],
)
async def test_malformed_send_message_response(peer: Peer, raw: bytes) -> None:
    peer.agent.handlers["SendMessage"] = answer(raw)
    with pytest.raises(InvalidAgentResponseError):
        await peer.client().send_message(user_message("hello"))


async def test_continuation_answered_for_another_task_is_an_error(peer: Peer) -> None:
    peer.agent.handlers["SendMessage"] = answer(a2a_pb2.SendMessageResponse(task=task("other")))
    with pytest.raises(InvalidAgentResponseError, match="other"):
        await peer.client().send_message(user_message("more", task_id="t1", context_id="c1"))


async def test_send_message_retries_unavailable_with_the_same_message_id(peer: Peer) -> None:
    failures = [2]

    async def flaky(request: Any, context: Any) -> Any:
        if failures[0]:
            failures[0] -= 1
            await context.abort(grpc.StatusCode.UNAVAILABLE, "restarting")
        return a2a_pb2.SendMessageResponse(task=task())

    peer.agent.handlers["SendMessage"] = flaky
    request = a2a_pb2.SendMessageRequest(
        message=a2a_pb2.Message(role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text="x")])
    )
    result = await peer.client().send_message(request)
    assert isinstance(result, a2a_pb2.Task)
    ids = [call.request.message.message_id for call in peer.agent.calls_to("SendMessage")]
    assert len(ids) == 3 and len(set(ids)) == 1 and ids[0]  # minted once, reused
    assert len(peer.sleeps) == 2
    assert request.message.message_id == ""  # minted on a copy


async def test_send_message_never_retries_an_a2a_error(peer: Peer) -> None:
    async def invalid(request: Any, context: Any) -> Any:
        await abort_with(context, InvalidParamsError("bad context"))

    peer.agent.handlers["SendMessage"] = invalid
    with pytest.raises(InvalidParamsError):
        await peer.client().send_message(user_message("x"))
    assert len(peer.agent.calls_to("SendMessage")) == 1
    assert peer.sleeps == []


async def test_send_message_gives_up_after_the_policy(peer: Peer) -> None:
    async def down(request: Any, context: Any) -> Any:
        await context.abort(grpc.StatusCode.UNAVAILABLE, "down")

    peer.agent.handlers["SendMessage"] = down
    client = peer.client(retry=RetryPolicy(max_attempts=3))
    with pytest.raises(UnavailableError):
        await client.send_message(user_message("x"))
    assert len(peer.agent.calls_to("SendMessage")) == 3


async def test_channel_retries_reads_but_never_send_message(peer: Peer) -> None:
    failures = {"GetTask": 2, "SendMessage": 2}

    def flaky(method: str, value: Any) -> Any:
        async def handler(request: Any, context: Any) -> Any:
            if failures[method]:
                failures[method] -= 1
                await context.abort(grpc.StatusCode.UNAVAILABLE, "restarting")
            return value

        return handler

    peer.agent.handlers["GetTask"] = flaky("GetTask", task())
    peer.agent.handlers["SendMessage"] = flaky(
        "SendMessage", a2a_pb2.SendMessageResponse(task=task())
    )
    client = peer.client(retry=RetryPolicy(max_attempts=1))
    assert (await client.get_task("t1")).id == "t1"
    assert len(peer.agent.calls_to("GetTask")) == 3
    with pytest.raises(UnavailableError):
        await client.send_message(user_message("x"))
    assert len(peer.agent.calls_to("SendMessage")) == 1


async def test_deadline_expires(peer: Peer) -> None:
    async def hang(request: Any, context: Any) -> Any:
        await asyncio.Event().wait()

    peer.agent.handlers["GetTask"] = hang
    peer.agent.handlers["SendMessage"] = hang
    client = peer.client()
    with pytest.raises(DeadlineExceededError):
        await client.get_task("t1", timeout=0.2)
    with pytest.raises(DeadlineExceededError):
        await client.send_message(user_message("x"), timeout=0.2)


async def test_unreachable_server_is_unavailable() -> None:
    from a2a_grpc.client import A2AClient

    async with A2AClient.connect("127.0.0.1:1") as client:
        with pytest.raises(UnavailableError):
            await client.get_task("t1", timeout=5)


async def test_send_message_retries_what_the_server_marks_retryable(peer: Peer) -> None:
    from a2a_grpc.core.errors import ResourceExhaustedError

    failures = [1]

    async def busy(request: Any, context: Any) -> Any:
        if failures[0]:
            failures[0] -= 1
            await abort_with(context, ResourceExhaustedError("full", retry_delay=0.75))
        return a2a_pb2.SendMessageResponse(task=task())

    peer.agent.handlers["SendMessage"] = busy
    result = await peer.client().send_message(user_message("x"))
    assert isinstance(result, a2a_pb2.Task)
    ids = {call.request.message.message_id for call in peer.agent.calls_to("SendMessage")}
    assert len(ids) == 1
    assert peer.sleeps and peer.sleeps[0] >= 0.75  # at least the RetryInfo delay


async def test_send_message_honours_a_not_retryable_claim(peer: Peer) -> None:
    from a2a_grpc.core.errors import ResourceExhaustedError

    async def refuses(request: Any, context: Any) -> Any:
        await abort_with(context, ResourceExhaustedError("quota spent", retryable=False))

    peer.agent.handlers["SendMessage"] = refuses
    with pytest.raises(ResourceExhaustedError) as caught:
        await peer.client().send_message(user_message("x"))
    assert caught.value.retryable is False
    assert len(peer.agent.calls_to("SendMessage")) == 1
