"""The same scenarios over each binding, gRPC, JSON-RPC and HTTP+JSON, against one real server:
the bindings are adapters over one handler, so they must agree on results and errors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from decimal import Decimal
from typing import Any

import aiohttp
import pytest
from google.protobuf import empty_pb2

from a2a_grpc.core.budget import Money, cost_of, with_budget
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import AgentExecutor
from a2a_grpc.server.card import demo_card
from a2a_grpc.server.transports.http.server import CARD_PATH
from tests.integration.bindings import (
    Binding,
    CallError,
    GrpcBinding,
    JsonRpcBinding,
    RestBinding,
)
from tests.integration.conftest import Factory, Harness, Held, send_request
from tests.integration.test_server_push import Gated, dispatcher
from tests.integration.webhook_receiver import Receiver

Start = Callable[..., Awaitable[tuple[Harness, Binding]]]
BINDINGS = ("grpc", "jsonrpc", "http+json")


@pytest.fixture(params=BINDINGS)
async def over(request: pytest.FixtureRequest, make_server: Factory) -> AsyncIterator[Start]:
    """Starts a server (card port on) and returns it with a client of the binding under test."""
    sessions: list[aiohttp.ClientSession] = []

    async def start(agent: AgentExecutor | None = None, **config: Any) -> tuple[Harness, Binding]:
        card = config.pop("card", None)
        authorization = config.pop("authorization", None)
        harness = await make_server(agent, card, http_port=0, **config)
        if request.param == "grpc":
            return harness, GrpcBinding(harness.stub, harness.channel, authorization)
        session = aiohttp.ClientSession()
        sessions.append(session)
        card_url = harness.running.card_url
        assert card_url is not None
        base = card_url.removesuffix(CARD_PATH)
        if request.param == "jsonrpc":
            return harness, JsonRpcBinding(session, base + "/", authorization)
        return harness, RestBinding(session, base, authorization)

    yield start
    for session in sessions:
        await session.close()


def _blocking(text: str = "hello") -> a2a_pb2.SendMessageRequest:
    return send_request(text)


def _non_blocking(text: str = "hello") -> a2a_pb2.SendMessageRequest:
    return send_request(
        text, configuration=a2a_pb2.SendMessageConfiguration(return_immediately=True)
    )


async def test_send_blocking_returns_the_completed_task(over: Start) -> None:
    _, binding = await over()
    response = await binding.call("SendMessage", _blocking("hi there"))
    assert isinstance(response, a2a_pb2.SendMessageResponse)
    assert response.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert response.task.artifacts[0].parts[0].text == "hi there"


async def test_stream_starts_with_the_task_and_ends_completed(over: Start) -> None:
    _, binding = await over()
    events = [event async for event in binding.stream("SendStreamingMessage", _blocking())]
    assert events[0].WhichOneof("payload") == "task"
    kinds = [event.WhichOneof("payload") for event in events]
    assert "artifact_update" in kinds
    assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_get_and_list_return_the_task(over: Start) -> None:
    _, binding = await over()
    sent = await binding.call("SendMessage", _blocking())
    assert isinstance(sent, a2a_pb2.SendMessageResponse)
    task = await binding.call("GetTask", a2a_pb2.GetTaskRequest(id=sent.task.id, history_length=0))
    assert isinstance(task, a2a_pb2.Task)
    assert task.id == sent.task.id and not task.history
    listed = await binding.call(
        "ListTasks",
        a2a_pb2.ListTasksRequest(
            context_id=sent.task.context_id,
            status=a2a_pb2.TASK_STATE_COMPLETED,
            page_size=10,
            include_artifacts=True,
        ),
    )
    assert isinstance(listed, a2a_pb2.ListTasksResponse)
    assert [t.id for t in listed.tasks] == [sent.task.id]
    assert listed.tasks[0].artifacts and listed.total_size == 1


async def test_cancel_a_working_task(over: Start) -> None:
    held = Held()
    _, binding = await over(held)
    sent = await binding.call("SendMessage", _non_blocking())
    assert isinstance(sent, a2a_pb2.SendMessageResponse)
    await held.entered.wait()
    canceled = await binding.call("CancelTask", a2a_pb2.CancelTaskRequest(id=sent.task.id))
    assert isinstance(canceled, a2a_pb2.Task)
    assert canceled.status.state == a2a_pb2.TASK_STATE_CANCELED
    with pytest.raises(CallError) as again:
        await binding.call("CancelTask", a2a_pb2.CancelTaskRequest(id=sent.task.id))
    assert again.value.reason == "TASK_NOT_CANCELABLE"


async def test_subscribe_follows_a_task_to_its_end(over: Start) -> None:
    held = Held()
    _, binding = await over(held)
    sent = await binding.call("SendMessage", _non_blocking())
    assert isinstance(sent, a2a_pb2.SendMessageResponse)
    await held.entered.wait()
    stream = binding.stream("SubscribeToTask", a2a_pb2.SubscribeToTaskRequest(id=sent.task.id))
    first = await anext(stream)
    assert first.task.id == sent.task.id
    assert first.task.status.state == a2a_pb2.TASK_STATE_WORKING
    held.go.set()
    rest = [event async for event in stream]
    assert rest[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_push_config_create_get_list_delete(over: Start) -> None:
    _, binding = await over(webhooks=dispatcher())
    sent = await binding.call("SendMessage", _blocking())
    assert isinstance(sent, a2a_pb2.SendMessageResponse)
    task_id = sent.task.id
    created = await binding.call(
        "CreateTaskPushNotificationConfig",
        a2a_pb2.TaskPushNotificationConfig(
            task_id=task_id, url="http://127.0.0.1:9/hook", token="t0k"
        ),
    )
    assert isinstance(created, a2a_pb2.TaskPushNotificationConfig)
    assert created.id and created.task_id == task_id
    got = await binding.call(
        "GetTaskPushNotificationConfig",
        a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=task_id, id=created.id),
    )
    assert got == created
    listed = await binding.call(
        "ListTaskPushNotificationConfigs",
        a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task_id),
    )
    assert isinstance(listed, a2a_pb2.ListTaskPushNotificationConfigsResponse)
    assert list(listed.configs) == [created]
    deleted = await binding.call(
        "DeleteTaskPushNotificationConfig",
        a2a_pb2.DeleteTaskPushNotificationConfigRequest(task_id=task_id, id=created.id),
    )
    assert deleted == empty_pb2.Empty()
    with pytest.raises(CallError) as gone:
        await binding.call(
            "GetTaskPushNotificationConfig",
            a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=task_id, id=created.id),
        )
    assert gone.value.reason == "TASK_NOT_FOUND"


@pytest.fixture(params=["memory", "redis"])
def store_url(request: pytest.FixtureRequest) -> str:
    """The task store under test: "" (this process's memory) or a fresh redis-server's URL."""
    if request.param == "memory":
        return ""
    url: str = request.getfixturevalue("redis_server").url
    return url


async def _delivered_until_completed(receiver: Receiver) -> list[str]:
    """The Authorization header of every POST `receiver` got, once it got the task's end."""
    async with asyncio.timeout(10), receiver.arrived:
        await receiver.arrived.wait_for(
            lambda: any(b"TASK_STATE_COMPLETED" in r.body for r in receiver.received)
        )
    return [delivery.headers["Authorization"] for delivery in receiver.received]


async def test_push_credentials_are_write_only(over: Start, store_url: str) -> None:
    """Every config read back (Create's answer, Get, List; one made inline in a send, one by
    Create) has its credentials emptied and its scheme kept; delivery still sends them."""
    agent = Gated()
    _, binding = await over(agent, webhooks=dispatcher(), store=store_url)
    inline_hook, made_hook = await Receiver().start(), await Receiver().start()
    try:
        request = _non_blocking()
        inline = request.configuration.task_push_notification_config
        inline.id, inline.url, inline.token = "inline", inline_hook.url, "tok-inline"
        inline.authentication.scheme = "Bearer"
        inline.authentication.credentials = "inline-secret"
        sent = await binding.call("SendMessage", request)
        assert isinstance(sent, a2a_pb2.SendMessageResponse)
        task_id = sent.task.id
        created = await binding.call(
            "CreateTaskPushNotificationConfig",
            a2a_pb2.TaskPushNotificationConfig(
                task_id=task_id,
                id="made",
                url=made_hook.url,
                token="tok-made",
                authentication=a2a_pb2.AuthenticationInfo(scheme="Basic", credentials="bWFkZQ=="),
            ),
        )
        assert isinstance(created, a2a_pb2.TaskPushNotificationConfig)
        expected = {
            "inline": a2a_pb2.TaskPushNotificationConfig(
                task_id=task_id,
                id="inline",
                url=inline_hook.url,
                token="tok-inline",
                authentication=a2a_pb2.AuthenticationInfo(scheme="Bearer"),
            ),
            "made": a2a_pb2.TaskPushNotificationConfig(
                task_id=task_id,
                id="made",
                url=made_hook.url,
                token="tok-made",
                authentication=a2a_pb2.AuthenticationInfo(scheme="Basic"),
            ),
        }
        assert created == expected["made"]
        for config_id in ("inline", "made"):
            got = await binding.call(
                "GetTaskPushNotificationConfig",
                a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=task_id, id=config_id),
            )
            assert got == expected[config_id]
        listed = await binding.call(
            "ListTaskPushNotificationConfigs",
            a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task_id),
        )
        assert isinstance(listed, a2a_pb2.ListTaskPushNotificationConfigsResponse)
        assert sorted(listed.configs, key=lambda c: c.id) == [expected["inline"], expected["made"]]
        agent.go.set()
        assert set(await _delivered_until_completed(inline_hook)) == {"Bearer inline-secret"}
        assert set(await _delivered_until_completed(made_hook)) == {"Basic bWFkZQ=="}
    finally:
        await inline_hook.stop()
        await made_hook.stop()


EXPECTED_INVALID = {
    "grpc": {"grpc_code": "INVALID_ARGUMENT"},
    "jsonrpc": {"jsonrpc_code": -32602, "http_status": 200},
    "http+json": {"grpc_code": "INVALID_ARGUMENT", "http_status": 400},
}


async def test_invalid_params(over: Start) -> None:
    _, binding = await over()
    with pytest.raises(CallError) as error:
        await binding.call("GetTask", a2a_pb2.GetTaskRequest(id="x", history_length=-1))
    assert error.value.reason == "INVALID_PARAMS"
    for key, value in EXPECTED_INVALID[binding.name].items():
        assert getattr(error.value, key) == value


EXPECTED_NOT_FOUND = {
    "grpc": {"grpc_code": "NOT_FOUND"},
    "jsonrpc": {"jsonrpc_code": -32001, "http_status": 200},
    "http+json": {"grpc_code": "NOT_FOUND", "http_status": 404},
}


async def test_task_not_found(over: Start) -> None:
    _, binding = await over()
    with pytest.raises(CallError) as error:
        await binding.call("GetTask", a2a_pb2.GetTaskRequest(id="no-such-task"))
    assert error.value.reason == "TASK_NOT_FOUND"
    for key, value in EXPECTED_NOT_FOUND[binding.name].items():
        assert getattr(error.value, key) == value
    with pytest.raises(CallError) as streamed:
        await anext(
            binding.stream("SubscribeToTask", a2a_pb2.SubscribeToTaskRequest(id="no-such-task"))
        )
    assert streamed.value.reason == "TASK_NOT_FOUND"


EXPECTED_UNKNOWN_METHOD = {
    # grpc itself answers an unknown method, without an ErrorInfo
    "grpc": {"reason": None, "grpc_code": "UNIMPLEMENTED"},
    "jsonrpc": {"reason": "METHOD_NOT_FOUND", "jsonrpc_code": -32601},
    "http+json": {"reason": "METHOD_NOT_FOUND", "http_status": 404},
}


async def test_unknown_method(over: Start) -> None:
    _, binding = await over()
    error = await binding.unknown_method()
    for key, value in EXPECTED_UNKNOWN_METHOD[binding.name].items():
        assert getattr(error, key) == value


async def test_a_task_made_over_one_binding_is_seen_over_grpc(over: Start) -> None:
    harness, binding = await over()
    sent = await binding.call("SendMessage", _blocking())
    assert isinstance(sent, a2a_pb2.SendMessageResponse)
    task = await asyncio.wait_for(
        harness.stub.GetTask(
            a2a_pb2.GetTaskRequest(id=sent.task.id), metadata=(("a2a-version", "1.0"),)
        ),
        10,
    )
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_extended_card_not_offered(over: Start) -> None:
    _, binding = await over()
    with pytest.raises(CallError) as error:
        await binding.call("GetExtendedAgentCard", a2a_pb2.GetExtendedAgentCardRequest())
    assert error.value.reason == "UNSUPPORTED_OPERATION"


async def test_extended_card_offered(over: Start) -> None:
    card = demo_card("127.0.0.1:0")
    card.capabilities.extended_agent_card = True
    extended = demo_card("127.0.0.1:0")
    extended.skills.add(id="members", name="Members", description="extra", tags=["x"])
    _, binding = await over(
        card=card,
        extended_card=extended,
        tokens={"s3cret": "alice"},
        authorization="Bearer s3cret",
    )
    got = await binding.call("GetExtendedAgentCard", a2a_pb2.GetExtendedAgentCardRequest())
    assert isinstance(got, a2a_pb2.AgentCard)
    assert "members" in [skill.id for skill in got.skills]


async def test_an_error_after_the_first_event_ends_the_stream(over: Start) -> None:
    # A one-event subscriber queue overflows at once under a burst of chunks.
    _, binding = await over(subscriber_queue_size=1)
    received: list[a2a_pb2.StreamResponse] = []
    with pytest.raises(CallError) as error:
        async for event in binding.stream("SendStreamingMessage", _blocking("chunks 50")):
            received.append(event)
    assert received and received[0].WhichOneof("payload") == "task"
    assert error.value.reason == "RESOURCE_EXHAUSTED"


async def test_one_task_across_all_three_bindings(make_server: Factory) -> None:
    """Streams of one task on different bindings see the same events; a message id repeated
    over another binding is the same task; a task made over one is cancelled over another."""
    held = Held()
    harness = await make_server(held, None, http_port=0)
    card_url = harness.running.card_url
    assert card_url is not None
    base = card_url.removesuffix(CARD_PATH)
    async with aiohttp.ClientSession() as session:
        bindings: list[Binding] = [
            GrpcBinding(harness.stub, harness.channel, None),
            JsonRpcBinding(session, base + "/", None),
            RestBinding(session, base, None),
        ]
        request = _non_blocking("hold")
        sent = await bindings[1].call("SendMessage", request)
        assert isinstance(sent, a2a_pb2.SendMessageResponse)
        for binding in (bindings[0], bindings[2]):  # the same message id: the same task
            again = await binding.call("SendMessage", request)
            assert isinstance(again, a2a_pb2.SendMessageResponse)
            assert again.task.id == sent.task.id
        assert held.runs == 1
        await held.entered.wait()
        streams = [
            binding.stream("SubscribeToTask", a2a_pb2.SubscribeToTaskRequest(id=sent.task.id))
            for binding in bindings
        ]
        for stream in streams:  # each has its snapshot: subscribed
            assert (await anext(stream)).task.id == sent.task.id
        held.go.set()
        seen = [[event.SerializeToString() async for event in stream] for stream in streams]
        assert seen[0] == seen[1] == seen[2] and seen[0]
        held.go.clear()  # the next run holds again
        other = await bindings[2].call("SendMessage", _non_blocking("hold"))
        assert isinstance(other, a2a_pb2.SendMessageResponse)
        canceled = await bindings[0].call("CancelTask", a2a_pb2.CancelTaskRequest(id=other.task.id))
        assert isinstance(canceled, a2a_pb2.Task)
        assert canceled.status.state == a2a_pb2.TASK_STATE_CANCELED


async def test_a_budget_and_its_cost(over: Start) -> None:
    _, binding = await over()
    request = send_request("spend 0.02")
    request.message.CopyFrom(with_budget(request.message, "0.10", "EUR"))
    sent = await binding.call("SendMessage", request)
    assert isinstance(sent, a2a_pb2.SendMessageResponse)
    assert cost_of(sent.task) == Money(Decimal("0.02"), "EUR")
    over_budget = send_request("spend 1")
    over_budget.message.CopyFrom(with_budget(over_budget.message, "0.10", "EUR"))
    refused = await binding.call("SendMessage", over_budget)
    assert isinstance(refused, a2a_pb2.SendMessageResponse)
    assert refused.task.status.state == a2a_pb2.TASK_STATE_REJECTED
