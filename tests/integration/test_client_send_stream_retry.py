"""A streaming send whose connection breaks before its first event reaches the client is sent
again with the same message_id, against our real server: the server recognises the repeat and
streams the task the first attempt started, so the agent runs once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc

from a2a_grpc.client import A2AClient, Backoff
from a2a_grpc.client.messages import user_message
from a2a_grpc.core.service import method_path
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from tests.integration.conftest import Factory


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
