"""A streaming send whose connection breaks before its first event reaches the client is sent
again with the same message_id, against our real server: the server recognises the repeat and
streams the task the first attempt started, so the agent runs once.

Through a real nginx whose upstream fails after the response's headers, the client sees what
gRPC reports for a removed or reset stream (UNKNOWN or INTERNAL, no A2A error in it), and sends
again all the same; an INTERNAL the server sends as an A2A error is not sent again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from a2a_grpc.client import A2AClient, Backoff
from a2a_grpc.client.messages import user_message
from a2a_grpc.core.errors import InternalError
from a2a_grpc.core.service import method_path
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.server.agent import RequestContext, TaskEvents
from tests.integration.conftest import VERSION, Factory, send_request
from tests.integration.scripted_agent import Peer, abort_with, peer
from tests.integration.tcp_proxy import Ending, ResponseCutter
from tests.nginx_proxy import NginxGrpcProxy, require_nginx

__all__ = ["peer"]


class Counted:
    """Completes each task with an artifact; counts its runs."""

    def __init__(self) -> None:
        self.runs = 0

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        self.runs += 1
        await events.working()
        await events.add_artifact([a2a_pb2.Part(text="done")], name="result")
        await events.complete()


class BreakFirstSendStream(grpc.aio.UnaryStreamClientInterceptor):  # type: ignore[misc]
    """Lets the first SendStreamingMessage reach the server and waits for its first event (the
    server has then taken the message and started the task), then fails the call as a reset
    connection does, before the client saw anything."""

    def __init__(self) -> None:
        self.broken = 0

    async def intercept_unary_stream(
        self, continuation: Any, client_call_details: Any, request: Any
    ) -> Any:
        call = await continuation(client_call_details, request)
        method = client_call_details.method
        name = method.decode() if isinstance(method, bytes) else method
        if name != method_path("SendStreamingMessage") or self.broken:
            return call
        self.broken += 1
        await call.read()  # the server's first event: the task exists and runs
        call.cancel()

        async def reset() -> AsyncIterator[bytes]:
            raise grpc.aio.AioRpcError(
                grpc.StatusCode.UNAVAILABLE,
                grpc.aio.Metadata(),
                grpc.aio.Metadata(),
                details="Connection reset by peer",
            )
            yield b""  # an async generator

        return reset()


async def test_a_send_stream_broken_before_its_first_event_runs_the_task_once(
    make_server: Factory,
) -> None:
    agent = Counted()
    harness = await make_server(agent=agent)
    breaker = BreakFirstSendStream()
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    channel = grpc.aio.insecure_channel(harness.running.address, interceptors=[breaker])
    async with A2AClient(channel, owns_channel=True, backoff=Backoff(sleep=sleep)) as client:
        message = user_message("hello")
        items = [item async for item in client.send_streaming_message(message)]
    assert breaker.broken == 1 and len(sleeps) == 1  # one retry, after one backoff
    events, views = zip(*items, strict=True)
    assert events[0].HasField("task")  # the repeat's stream opens with the task as it stands
    view = views[-1]
    assert view.state == a2a_pb2.TASK_STATE_COMPLETED
    assert view.task is not None
    assert [artifact.parts[0].text for artifact in view.task.artifacts] == ["done"]
    assert agent.runs == 1  # the retry did not run the message again
    stored = await harness.stub.ListTasks(a2a_pb2.ListTasksRequest())
    assert [task.id for task in stored.tasks] == [view.task_id]


CUT_STATUS = {
    Ending.END_STREAM: (
        grpc.StatusCode.UNKNOWN,
        "Stream removed (Data frame with END_STREAM flag received)",
    ),
    Ending.GOAWAY: (
        grpc.StatusCode.INTERNAL,
        "Stream removed (RST_STREAM (Received RST_STREAM with error code 2))",
    ),
}
"""What gRPC reports when nginx passes on an upstream that failed after the response's headers."""


@pytest.mark.parametrize("ending", list(Ending))
async def test_a_send_stream_nginx_cuts_before_its_first_event_is_sent_again(
    make_server: Factory, ending: Ending
) -> None:
    require_nginx()
    agent = Counted()
    harness = await make_server(agent=agent)
    cutter = await ResponseCutter(int(harness.running.address.rpartition(":")[2])).start()
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    try:
        with NginxGrpcProxy([cutter.port]) as nginx:
            # What the caller sees without a retry: the status gRPC reports, no A2A error.
            cutter.cut_next_response(ending)
            async with grpc.aio.insecure_channel(nginx.target) as channel:
                stub = a2a_pb2_grpc.A2AServiceStub(channel)
                with pytest.raises(grpc.aio.AioRpcError) as raised:
                    async for _ in stub.SendStreamingMessage(send_request(), metadata=VERSION):
                        pytest.fail("an event passed the cut")
            assert (raised.value.code(), raised.value.details()) == CUT_STATUS[ending]
            if ending is Ending.GOAWAY:
                assert any("upstream sent goaway with error 2" in line for line in nginx.lines())
            # Our client sends the message again, with its message_id: the task runs once.
            cutter.cut_next_response(ending)
            async with A2AClient.connect(nginx.target, backoff=Backoff(sleep=sleep)) as client:
                message = user_message("hello")
                items = [item async for item in client.send_streaming_message(message)]
    finally:
        await cutter.close()
    assert cutter.cuts == 2 and len(sleeps) == 1  # one retry, after one backoff
    events, views = zip(*items, strict=True)
    assert events[0].HasField("task")
    view = views[-1]
    assert view.state == a2a_pb2.TASK_STATE_COMPLETED
    assert view.task is not None
    assert [artifact.parts[0].text for artifact in view.task.artifacts] == ["done"]
    assert agent.runs == 2  # the bare call's task and ours, each once
    stored = await harness.stub.ListTasks(a2a_pb2.ListTasksRequest())
    assert view.task_id in [task.id for task in stored.tasks] and len(stored.tasks) == 2


async def test_an_internal_error_the_server_sends_is_not_sent_again(peer: Peer) -> None:
    async def failing(request: a2a_pb2.SendMessageRequest, context: Any) -> AsyncIterator[bytes]:
        await abort_with(context, InternalError("the agent's store failed"))
        yield b""  # an async generator

    peer.agent.handlers["SendStreamingMessage"] = failing
    with pytest.raises(InternalError):
        async for _ in peer.client().send_streaming_message(user_message("hello")):
            pytest.fail("no event was sent")
    assert len(peer.agent.calls_to("SendStreamingMessage")) == 1 and peer.sleeps == []
