"""Validation happens before any task exists or agent code runs, in the documented order."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import struct_pb2

from a2a_grpc.core import status
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from a2a_grpc.server.card import demo_card
from tests.integration.conftest import VERSION, Factory, Harness, error_reason, send_request


class CountingAgent:
    def __init__(self) -> None:
        self.runs = 0

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        self.runs += 1
        await events.complete()


def strict_card() -> a2a_pb2.AgentCard:
    card = demo_card("127.0.0.1:0")
    del card.default_input_modes[:]
    card.default_input_modes.extend(["text/plain", "image/*"])
    card.capabilities.extensions.add(uri="urn:required", required=True)
    card.capabilities.extensions.add(uri="urn:optional")
    return card


@pytest.fixture
async def strict(make_server: Factory) -> tuple[Harness, CountingAgent]:
    agent = CountingAgent()
    return await make_server(agent=agent, card=strict_card(), max_inline_bytes=16), agent


EXT = (("a2a-version", "1.0"), ("a2a-extensions", "urn:required"))


async def _fails(harness: Harness, request: a2a_pb2.SendMessageRequest, metadata=EXT):  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await harness.stub.SendMessage(request, metadata=metadata)
    return caught.value


async def test_required_fields_are_reported_as_field_violations(
    strict: tuple[Harness, CountingAgent],
) -> None:
    harness, agent = strict
    request = a2a_pb2.SendMessageRequest(message=a2a_pb2.Message())
    request.message.parts.add()
    error = await _fails(harness, request)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    decoded = status.decode(error.code(), error.details() or "", error.trailing_metadata())
    assert decoded is not None and decoded.reason == "INVALID_PARAMS"
    assert {v.field for v in decoded.field_violations} == {
        "message.message_id",
        "message.role",
        "message.parts[0]",
    }
    assert "message_id" in (error.details() or "")
    error = await _fails(harness, a2a_pb2.SendMessageRequest())
    assert "message" in (error.details() or "")
    agent_role = send_request()
    agent_role.message.role = a2a_pb2.ROLE_AGENT
    assert "ROLE_USER" in ((await _fails(harness, agent_role)).details() or "")
    assert agent.runs == 0
    assert len(harness.store) == 0


async def test_unsupported_media_type(strict: tuple[Harness, CountingAgent]) -> None:
    harness, agent = strict
    request = send_request()
    request.message.parts.add(url="https://x/y.pdf", media_type="application/pdf")
    error = await _fails(harness, request)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_reason(error) == "CONTENT_TYPE_NOT_SUPPORTED"
    assert "application/pdf" in (error.details() or "")
    ok = send_request()
    ok.message.parts.add(url="https://x/y.png", media_type="image/png")
    await harness.stub.SendMessage(ok, metadata=EXT)
    assert agent.runs == 1


async def test_inline_raw_over_the_cap_asks_for_a_url(
    strict: tuple[Harness, CountingAgent],
) -> None:
    harness, agent = strict
    request = send_request()
    request.message.parts.add(raw=b"x" * 17, media_type="image/png")
    error = await _fails(harness, request)
    assert error_reason(error) == "INVALID_PARAMS"
    assert "url part" in (error.details() or "")
    assert agent.runs == 0


async def test_parts_are_checked_in_order_type_then_size(
    strict: tuple[Harness, CountingAgent],
) -> None:
    harness, agent = strict
    oversized_then_unsupported = send_request()
    oversized_then_unsupported.message.parts.add(raw=b"x" * 17, media_type="image/png")
    oversized_then_unsupported.message.parts.add(
        url="https://x/y.pdf", media_type="application/pdf"
    )
    error = await _fails(harness, oversized_then_unsupported)
    # The first bad part's size is reported, before the next part's type.
    assert error_reason(error) == "INVALID_PARAMS"
    assert "message.parts[1]" in (error.details() or "")  # [0] is the request's text
    unsupported_then_oversized = send_request()
    unsupported_then_oversized.message.parts.add(
        url="https://x/y.pdf", media_type="application/pdf"
    )
    unsupported_then_oversized.message.parts.add(raw=b"x" * 17, media_type="image/png")
    error = await _fails(harness, unsupported_then_oversized)
    assert error_reason(error) == "CONTENT_TYPE_NOT_SUPPORTED"
    assert agent.runs == 0


async def test_required_extension_must_be_activated(
    strict: tuple[Harness, CountingAgent],
) -> None:
    harness, agent = strict
    error = await _fails(harness, send_request(), metadata=(("a2a-version", "1.0"),))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_reason(error) == "EXTENSION_SUPPORT_REQUIRED"
    assert "urn:required" in (error.details() or "")
    call = harness.stub.SendMessage(
        send_request(),
        metadata=(("a2a-version", "1.0"), ("a2a-extensions", "urn:required,urn:unknown")),
    )
    await call
    # Only extensions this agent declares count as activated and are echoed.
    assert ("a2a-extensions", "urn:required") in tuple(await call.initial_metadata())
    assert agent.runs == 1


async def test_unknown_task_context_mismatch_and_terminal_task(demo: Harness) -> None:
    error = await _fails(demo, send_request(task_id="nope"))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert error_reason(error) == "TASK_NOT_FOUND"

    waiting = (await demo.stub.SendMessage(send_request("ask"))).task
    error = await _fails(demo, send_request(task_id=waiting.id, context_id="other"))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    decoded = status.decode(error.code(), error.details() or "", error.trailing_metadata())
    assert decoded is not None and decoded.reason == "INVALID_PARAMS"
    assert [v.field for v in decoded.field_violations] == ["message.context_id"]

    done = (await demo.stub.SendMessage(send_request("hi"))).task
    error = await _fails(demo, send_request(task_id=done.id))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_reason(error) == "UNSUPPORTED_OPERATION"


async def test_validation_order(strict: tuple[Harness, CountingAgent]) -> None:
    """With several problems at once, the earlier check in the documented order wins."""
    harness, _ = strict
    bad = send_request(task_id="nope")
    bad.message.parts.add(raw=b"x" * 100, media_type="application/pdf")
    # media type before inline size, both before the extension and task checks
    assert error_reason(await _fails(harness, bad, metadata=())) == "CONTENT_TYPE_NOT_SUPPORTED"
    del bad.message.parts[1:]
    bad.message.parts.add(raw=b"x" * 100, media_type="image/png")
    assert error_reason(await _fails(harness, bad, metadata=())) == "INVALID_PARAMS"
    del bad.message.parts[1:]
    assert error_reason(await _fails(harness, bad, metadata=())) == "EXTENSION_SUPPORT_REQUIRED"
    assert error_reason(await _fails(harness, bad)) == "TASK_NOT_FOUND"
    bad.message.message_id = ""
    assert error_reason(await _fails(harness, bad)) == "INVALID_PARAMS"


async def test_other_rpcs_validate_ids(demo: Harness) -> None:
    for call in (
        demo.stub.GetTask(a2a_pb2.GetTaskRequest()),
        demo.stub.CancelTask(a2a_pb2.CancelTaskRequest()),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert error_reason(caught.value) == "INVALID_PARAMS"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        async for _ in demo.stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest()):
            pass
    assert error_reason(caught.value) == "INVALID_PARAMS"


async def test_unoffered_capabilities(make_server: Factory) -> None:
    card = demo_card("127.0.0.1:0")
    card.capabilities.push_notifications = False
    demo = await make_server(card=card)
    config = a2a_pb2.TaskPushNotificationConfig(task_id="t", url="https://hook")
    calls = [
        demo.stub.CreateTaskPushNotificationConfig(config),
        demo.stub.GetTaskPushNotificationConfig(
            a2a_pb2.GetTaskPushNotificationConfigRequest(task_id="t", id="c")
        ),
        demo.stub.ListTaskPushNotificationConfigs(
            a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id="t")
        ),
        demo.stub.DeleteTaskPushNotificationConfig(
            a2a_pb2.DeleteTaskPushNotificationConfigRequest(task_id="t", id="c")
        ),
    ]
    for call in calls:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert error_reason(caught.value) == "PUSH_NOTIFICATION_NOT_SUPPORTED"
    inline = send_request(
        configuration=a2a_pb2.SendMessageConfiguration(task_push_notification_config=config)
    )
    assert error_reason(await _fails(demo, inline)) == "PUSH_NOTIFICATION_NOT_SUPPORTED"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await demo.stub.GetExtendedAgentCard(a2a_pb2.GetExtendedAgentCardRequest())
    assert error_reason(caught.value) == "UNSUPPORTED_OPERATION"


async def test_streaming_off_in_the_card(make_server: Factory) -> None:
    card = demo_card("127.0.0.1:0")
    card.capabilities.streaming = False
    harness = await make_server(card=card)
    for stream in (
        harness.stub.SendStreamingMessage(send_request()),
        harness.stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id="x")),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async for _ in stream:
                pass
        assert error_reason(caught.value) == "UNSUPPORTED_OPERATION"


@pytest.mark.parametrize("version", ["0.3", "2.0", "99.0", "garbage", "1"])
async def test_unsupported_versions(demo: Harness, version: str) -> None:
    error = await _fails(demo, send_request(), metadata=(("a2a-version", version),))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_reason(error) == "VERSION_NOT_SUPPORTED"


@pytest.mark.parametrize("version", ["1.0", "1.0.7", " 1.0 "])
async def test_supported_versions(demo: Harness, version: str) -> None:
    response = await demo.stub.SendMessage(send_request(), metadata=(("a2a-version", version),))
    assert response.task.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_missing_version_served_unless_strict(make_server: Factory) -> None:
    lenient = await make_server()
    assert (await lenient.stub.SendMessage(send_request())).task.status.state == 3
    strict = await make_server(strict_version=True)
    error = await _fails(strict, send_request(), metadata=())
    assert error_reason(error) == "VERSION_NOT_SUPPORTED"
    ok = await strict.stub.SendMessage(send_request(), metadata=(("a2a-version", "1.0"),))
    assert ok.task.status.state == 3


async def test_strict_version_says_where_0_3_is_served(make_server: Factory) -> None:
    # The port serves A2A 0.3 on its own service: the refusal says so rather than that the
    # server does not speak 0.3.
    strict = await make_server(strict_version=True)
    error = await _fails(strict, send_request(), metadata=())
    assert error.details() == (
        "no a2a-version metadata: a request without it means A2A 0.3, which this port serves on "
        "A2A 0.3's own service, a2a.v1.A2AService, not on this one (lf.a2a.v1.A2AService, A2A "
        "1.0, which --strict-version keeps to callers that say so): send a2a-version: 1.0, or "
        "call the 0.3 service"
    )
    without_03 = await make_server(strict_version=True, compat_03=False)
    error = await _fails(without_03, send_request(), metadata=())
    assert "which this server does not serve (--no-compat-03)" in (error.details() or "")


def images_only_card() -> a2a_pb2.AgentCard:
    card = demo_card("127.0.0.1:0")
    del card.default_input_modes[:]
    card.default_input_modes.append("image/*")
    return card


async def test_only_a_media_type_a_part_provides_is_checked_against_the_card(
    make_server: Factory,
) -> None:
    # The spec's error is for "a Media Type provided in the request's message parts"
    # (§3.1.1), and media_type is optional on every part (§4.1.6): a part that names none
    # is not refused, whatever its kind, by a card that lists only other types.
    agent = CountingAgent()
    harness = await make_server(agent=agent, card=images_only_card())
    untyped = send_request("plain text, no media type")
    untyped.message.parts.add(data=struct_pb2.Value(string_value="json, no media type"))
    untyped.message.parts.add(raw=b"bytes, no media type")
    untyped.message.parts.add(url="https://example.com/no-media-type")
    task = (await harness.stub.SendMessage(untyped, metadata=VERSION)).task
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED and agent.runs == 1

    for part in (
        a2a_pb2.Part(text="typed text", media_type="text/plain"),
        a2a_pb2.Part(data=struct_pb2.Value(bool_value=True), media_type="application/json"),
        a2a_pb2.Part(url="https://example.com/x.pdf", media_type="application/pdf"),
    ):
        typed = send_request()
        typed.message.parts[0].CopyFrom(part)
        error = await _fails(harness, typed, metadata=VERSION)
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_reason(error) == "CONTENT_TYPE_NOT_SUPPORTED"
        assert f"media type {part.media_type!r}; this agent accepts image/*" in (
            error.details() or ""
        )
    image = send_request()
    image.message.parts[0].CopyFrom(a2a_pb2.Part(raw=b"png", media_type="image/png"))
    await harness.stub.SendMessage(image, metadata=VERSION)
    assert agent.runs == 2
