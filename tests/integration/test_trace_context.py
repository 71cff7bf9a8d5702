"""A caller's trace crosses client → server → agent → webhook, and the agent's own calls."""

from __future__ import annotations

from collections.abc import Iterator

import aiohttp
import grpc
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from a2a_grpc.client import A2AClient
from a2a_grpc.client.messages import user_message
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from tests.integration.conftest import Factory
from tests.integration.spans import record_spans
from tests.integration.test_server_push import dispatcher
from tests.integration.webhook_receiver import Receiver

EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def sdk() -> Iterator[None]:
    record_spans(EXPORTER)
    yield


def trace_id_of_current_span() -> int:
    return trace.get_current_span().get_span_context().trace_id


async def test_trace_id_crosses_client_server_agent_webhook_and_onward_calls(
    make_server: Factory,
) -> None:
    EXPORTER.clear()
    downstream = await make_server()  # the agent calls this one with our client
    seen: dict[str, int] = {}

    class Relaying:
        async def execute(self, context: RequestContext, events: TaskEvents) -> None:
            seen["agent"] = trace_id_of_current_span()
            async with A2AClient.connect(downstream.running.address) as client:
                await client.send_message(user_message("from the agent"))
            await events.add_artifact([a2a_pb2.Part(text="done")])
            await events.complete()

    receiver = await Receiver().start()
    try:
        upstream = await make_server(agent=Relaying(), webhooks=dispatcher())
        request = user_message("start")
        with trace.get_tracer("test").start_as_current_span("caller") as caller:
            trace_id = caller.get_span_context().trace_id
            async with A2AClient.connect(upstream.running.address) as client:
                send = a2a_pb2.SendMessageRequest(message=request)
                send.configuration.task_push_notification_config.url = receiver.url
                task = await client.send_message(send)
                assert isinstance(task, a2a_pb2.Task)
        received = await receiver.wait_for(2)
    finally:
        await receiver.stop()

    assert seen["agent"] == trace_id
    spans = EXPORTER.get_finished_spans()
    servers = [s for s in spans if s.name == "lf.a2a.v1.A2AService/SendMessage"]
    assert len(servers) == 2  # upstream and downstream
    assert {s.context.trace_id for s in servers} == {trace_id}
    upstream_span = next(s for s in servers if s.attributes.get("a2a.task_id") == task.id)
    assert upstream_span.parent is not None
    assert upstream_span.parent.span_id == caller.get_span_context().span_id
    assert upstream_span.attributes["a2a.context_id"] == task.context_id
    agent_spans = [s for s in spans if s.name == "a2a.agent.execute"]
    assert {s.context.trace_id for s in agent_spans} == {trace_id}
    hex_id = f"{trace_id:032x}"
    assert all(hex_id in r.headers["traceparent"] for r in received)


async def test_errors_mark_the_server_span(make_server: Factory) -> None:
    EXPORTER.clear()
    harness = await make_server()
    with pytest.raises(grpc.aio.AioRpcError):
        await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id="nope"))
    (span,) = [s for s in EXPORTER.get_finished_spans() if s.name.endswith("/GetTask")]
    assert span.attributes["rpc.grpc.status_code"] == "NOT_FOUND"
    assert span.attributes["a2a.task_id"] == "nope"
    assert span.status.status_code == trace.StatusCode.ERROR


async def test_http_bindings_open_server_spans_in_the_callers_trace(
    make_server: Factory,
) -> None:
    EXPORTER.clear()
    harness = await make_server(http_port=0)
    assert harness.running.http_server is not None
    base = harness.running.http_server.base_url
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    headers = {"traceparent": f"00-{trace_id}-00f067aa0ba902b7-01"}
    message = {"messageId": "t-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    async with aiohttp.ClientSession() as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        async with http.post(base + "/", json=body, headers=headers) as response:
            assert "result" in await response.json()
        async with http.get(base + "/tasks/nope", headers=headers) as response:
            assert response.status == 404
    spans = {
        s.attributes["rpc.system"]: s
        for s in EXPORTER.get_finished_spans()
        if s.attributes and "rpc.system" in s.attributes
    }
    assert spans["jsonrpc"].name == "lf.a2a.v1.A2AService/SendMessage"
    assert spans["http"].name == "lf.a2a.v1.A2AService/GetTask"
    assert spans["http"].attributes["rpc.grpc.status_code"] == "NOT_FOUND"
    assert {s.context.trace_id for s in spans.values()} == {int(trace_id, 16)}
