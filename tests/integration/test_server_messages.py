"""SendMessage: blocking, return_immediately, history, direct replies, continuations, failures."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import struct_pb2

from a2a_grpc.core import status
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from tests.integration.conftest import (
    VERSION,
    Factory,
    Harness,
    Held,
    collect,
    error_reason,
    send_request,
)


async def test_blocking_send_echoes_every_part_and_completes(demo: Harness) -> None:
    request = send_request("hello")
    data = struct_pb2.Value()
    data.struct_value.update({"a": 1})
    request.message.parts.add(data=data)
    request.message.parts.add(raw=b"\x00\x01", media_type="application/octet-stream")
    request.message.parts.add(url="https://example.com/x.png", media_type="image/png")
    response = await demo.stub.SendMessage(request, metadata=VERSION)
    task = response.task
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert task.id and task.context_id  # both minted by the server
    assert [p.WhichOneof("content") for p in task.artifacts[0].parts] == [
        "text",
        "data",
        "raw",
        "url",
    ]
    assert task.artifacts[0].parts[2].raw == b"\x00\x01"
    assert task.history[0].message_id == request.message.message_id
    assert task.history[0].task_id == task.id
    assert task.status.timestamp.seconds > 0


async def test_client_context_id_is_kept(demo: Harness) -> None:
    response = await demo.stub.SendMessage(send_request(context_id="ctx-1"), metadata=VERSION)
    assert response.task.context_id == "ctx-1"


async def test_return_immediately_returns_before_the_task_settles(make_server: Factory) -> None:
    agent = Held()
    harness = await make_server(agent=agent)
    configuration = a2a_pb2.SendMessageConfiguration(return_immediately=True)
    response = await harness.stub.SendMessage(
        send_request("hold", configuration=configuration), metadata=VERSION
    )
    assert response.task.status.state in (a2a_pb2.TASK_STATE_SUBMITTED, a2a_pb2.TASK_STATE_WORKING)
    task_id = response.task.id
    watcher = harness.stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=task_id))
    assert (await watcher.read()).task.status.state != a2a_pb2.TASK_STATE_COMPLETED
    agent.go.set()
    rest = await collect(watcher)
    assert rest[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
    task = await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id))
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED


@pytest.mark.parametrize(("length", "expected"), [(None, 3), (0, 0), (1, 1), (2, 2)])
async def test_history_length(demo: Harness, length: int | None, expected: int) -> None:
    first = (await demo.stub.SendMessage(send_request("ask"))).task
    configuration = a2a_pb2.SendMessageConfiguration()
    if length is not None:
        configuration.history_length = length
    response = await demo.stub.SendMessage(
        send_request("answer", task_id=first.id, configuration=configuration)
    )
    # history: user "ask", agent question, user "answer", agent thanks
    assert len(response.task.history) == (4 if length is None else expected)
    got = await demo.stub.GetTask(a2a_pb2.GetTaskRequest(id=first.id, history_length=1))
    assert [m.role for m in got.history] == [a2a_pb2.ROLE_AGENT]


async def test_negative_history_length_is_invalid_params(demo: Harness) -> None:
    configuration = a2a_pb2.SendMessageConfiguration(history_length=-1)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await demo.stub.SendMessage(send_request(configuration=configuration))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_reason(caught.value) == "INVALID_PARAMS"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await demo.stub.GetTask(a2a_pb2.GetTaskRequest(id="x", history_length=-2))
    assert error_reason(caught.value) == "INVALID_PARAMS"


async def test_direct_reply_is_a_message_without_a_task(demo: Harness) -> None:
    response = await demo.stub.SendMessage(send_request("reply hi there"))
    assert response.WhichOneof("payload") == "message"
    assert response.message.role == a2a_pb2.ROLE_AGENT
    assert response.message.parts[0].text == "hi there"
    assert response.message.context_id
    listed = await demo.stub.ListTasks(a2a_pb2.ListTasksRequest())
    assert listed.total_size == 0


@pytest.mark.parametrize("with_context", [False, True])
async def test_input_required_then_continue(demo: Harness, with_context: bool) -> None:
    first = (await demo.stub.SendMessage(send_request("ask"))).task
    assert first.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    assert "echo" in first.status.message.parts[0].text
    extra = {"context_id": first.context_id} if with_context else {}
    second = (await demo.stub.SendMessage(send_request("blue", task_id=first.id, **extra))).task
    assert second.id == first.id
    assert second.context_id == first.context_id
    assert second.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert second.artifacts[0].parts[0].text == "blue"


async def test_reference_task_ids_reach_the_agent(make_server: Factory) -> None:
    seen: list[RequestContext] = []

    class Recorder:
        async def execute(self, context: RequestContext, events: TaskEvents) -> None:
            seen.append(context)
            await events.complete()

    harness = await make_server(agent=Recorder())
    request = send_request("refine", reference_task_ids=["t-1", "t-2"])
    request.metadata.update({"k": "v"})
    await harness.stub.SendMessage(
        request, metadata=(("a2a-version", "1.0"), ("a2a-extensions", "urn:a, urn:b"))
    )
    assert seen[0].reference_task_ids == ("t-1", "t-2")
    assert seen[0].requested_extensions == ("urn:a", "urn:b")
    assert seen[0].metadata == {"k": "v"}
    assert seen[0].text() == "refine"


async def test_failure_keyword_ends_failed(demo: Harness) -> None:
    task = (await demo.stub.SendMessage(send_request("fail"))).task
    assert task.status.state == a2a_pb2.TASK_STATE_FAILED
    assert "gave up" in task.status.message.parts[0].text


async def test_agent_exception_fails_the_task_generically_and_server_keeps_serving(
    demo: Harness,
) -> None:
    task = (await demo.stub.SendMessage(send_request("crash"))).task
    assert task.status.state == a2a_pb2.TASK_STATE_FAILED
    assert "crashed on purpose" not in str(task)
    again = (await demo.stub.SendMessage(send_request("hello"))).task
    assert again.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_server_exception_is_internal_error_with_generic_message(
    demo: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("secret detail")

    monkeypatch.setattr(demo.running.handler.store, "get", broken)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await demo.stub.GetTask(a2a_pb2.GetTaskRequest(id="x"))
    assert caught.value.code() == grpc.StatusCode.INTERNAL
    assert error_reason(caught.value) == "INTERNAL_ERROR"
    assert "secret" not in (caught.value.details() or "")
    monkeypatch.undo()
    assert (await demo.stub.SendMessage(send_request())).task.status.state == 3


async def test_error_status_details_match_the_call(demo: Harness) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await demo.stub.GetTask(a2a_pb2.GetTaskRequest(id="missing"))
    error = caught.value
    raw = dict(error.trailing_metadata())[status.STATUS_DETAILS_KEY]
    from google.rpc import error_details_pb2, status_pb2

    rich = status_pb2.Status.FromString(raw)
    assert rich.code == grpc.StatusCode.NOT_FOUND.value[0]
    assert rich.message == error.details()
    info = error_details_pb2.ErrorInfo()
    rich.details[0].Unpack(info)
    assert (info.domain, info.reason) == ("a2a-protocol.org", "TASK_NOT_FOUND")


async def test_accepted_output_modes_reach_the_agent(
    demo: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    request = send_request("hello")
    request.message.parts.add().data.struct_value.update({"n": 1})
    as_sent = (await demo.stub.SendMessage(request)).task.artifacts[0].parts
    assert as_sent[1].HasField("data")  # no modes stated: echoed as it came
    request = send_request("hello")
    request.message.parts.add().data.struct_value.update({"n": 1})
    request.configuration.accepted_output_modes.append("text/plain")
    as_text = (await demo.stub.SendMessage(request)).task.artifacts[0].parts
    assert [part.text for part in as_text] == ["hello", '{"n": 1.0}']
    request = send_request("hello")
    request.configuration.accepted_output_modes.append("image/png")  # the agent cannot comply
    with caplog.at_level("WARNING", logger="a2a_grpc.server.protocol.run"):
        task = (await demo.stub.SendMessage(request)).task
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED  # delivered all the same
    assert "the caller accepts only image/png" in caplog.text
