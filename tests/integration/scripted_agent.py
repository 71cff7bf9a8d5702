"""A scripted A2A gRPC peer for client tests: each RPC does what the test says, raw bytes allowed.

It records every call's request and metadata. Handlers are registered through a generic handler
whose serializer passes `bytes` through untouched, so a test can send malformed responses.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from google.protobuf import empty_pb2

from a2a_grpc.client import A2AClient, Backoff
from a2a_grpc.core import status
from a2a_grpc.core.errors import A2AError
from a2a_grpc.generated import a2a_pb2

SERVICE = "lf.a2a.v1.A2AService"

_REQUESTS: dict[str, tuple[type[Any], bool]] = {
    "SendMessage": (a2a_pb2.SendMessageRequest, False),
    "SendStreamingMessage": (a2a_pb2.SendMessageRequest, True),
    "GetTask": (a2a_pb2.GetTaskRequest, False),
    "ListTasks": (a2a_pb2.ListTasksRequest, False),
    "CancelTask": (a2a_pb2.CancelTaskRequest, False),
    "SubscribeToTask": (a2a_pb2.SubscribeToTaskRequest, True),
    "CreateTaskPushNotificationConfig": (a2a_pb2.TaskPushNotificationConfig, False),
    "GetTaskPushNotificationConfig": (a2a_pb2.GetTaskPushNotificationConfigRequest, False),
    "ListTaskPushNotificationConfigs": (a2a_pb2.ListTaskPushNotificationConfigsRequest, False),
    "GetExtendedAgentCard": (a2a_pb2.GetExtendedAgentCardRequest, False),
    "DeleteTaskPushNotificationConfig": (a2a_pb2.DeleteTaskPushNotificationConfigRequest, False),
}


@dataclass
class Call:
    method: str
    request: Any
    metadata: dict[str, str]
    entries: list[tuple[str, str]] = field(default_factory=list)
    """Every metadata entry as received, repeats included."""


@dataclass
class ScriptedAgent:
    """Set `handlers[method]` to `async def (request, context)` (unary) or an async generator."""

    handlers: dict[str, Callable[..., Any]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)

    def calls_to(self, method: str) -> list[Call]:
        return [call for call in self.calls if call.method == method]

    def generic_handler(self) -> Any:
        handlers = {}
        for method, (request_type, streaming) in _REQUESTS.items():
            if streaming:
                handlers[method] = grpc.unary_stream_rpc_method_handler(
                    self._stream(method),
                    request_deserializer=request_type.FromString,
                    response_serializer=_serialize,
                )
            else:
                handlers[method] = grpc.unary_unary_rpc_method_handler(
                    self._unary(method),
                    request_deserializer=request_type.FromString,
                    response_serializer=_serialize,
                )
        return grpc.method_handlers_generic_handler(SERVICE, handlers)

    def _record(self, method: str, request: Any, context: Any) -> None:
        entries = list(context.invocation_metadata())
        self.calls.append(Call(method, request, dict(entries), entries))

    def _unary(self, method: str) -> Callable[..., Any]:
        async def handle(request: Any, context: Any) -> Any:
            self._record(method, request, context)
            handler = self.handlers.get(method)
            if handler is None:
                await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{method} is not scripted")
            return await handler(request, context)

        return handle

    def _stream(self, method: str) -> Callable[..., Any]:
        async def handle(request: Any, context: Any) -> AsyncIterator[Any]:
            self._record(method, request, context)
            handler = self.handlers.get(method)
            if handler is None:
                await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{method} is not scripted")
            async for item in handler(request, context):
                yield item

        return handle


def _serialize(message: Any) -> bytes:
    return message if isinstance(message, bytes) else message.SerializeToString()


async def abort_with(context: Any, error: A2AError) -> None:
    """Fails the call the way an A2A server must: status plus ErrorInfo in the trailer."""
    code, message, trailers = status.encode(error)
    context.set_trailing_metadata(trailers)
    await context.abort(code, message)


def task(task_id: str = "t1", state: int = a2a_pb2.TASK_STATE_WORKING, **kw: Any) -> a2a_pb2.Task:
    return a2a_pb2.Task(id=task_id, context_id="c1", status=a2a_pb2.TaskStatus(state=state), **kw)


def status_event(state: int, task_id: str = "t1", text: str = "") -> a2a_pb2.StreamResponse:
    task_status = a2a_pb2.TaskStatus(state=state)
    if text:
        task_status.message.CopyFrom(
            a2a_pb2.Message(
                message_id="s", role=a2a_pb2.ROLE_AGENT, parts=[a2a_pb2.Part(text=text)]
            )
        )
    return a2a_pb2.StreamResponse(
        status_update=a2a_pb2.TaskStatusUpdateEvent(
            task_id=task_id, context_id="c1", status=task_status
        )
    )


def chunk_event(
    text: str, *, append: bool = False, last_chunk: bool = False, task_id: str = "t1"
) -> a2a_pb2.StreamResponse:
    return a2a_pb2.StreamResponse(
        artifact_update=a2a_pb2.TaskArtifactUpdateEvent(
            task_id=task_id,
            context_id="c1",
            artifact=a2a_pb2.Artifact(artifact_id="a1", parts=[a2a_pb2.Part(text=text)]),
            append=append,
            last_chunk=last_chunk,
        )
    )


EMPTY = empty_pb2.Empty()


@dataclass
class Peer:
    agent: ScriptedAgent
    target: str
    sleeps: list[float]
    clients: list[A2AClient]

    def client(self, **kwargs: Any) -> A2AClient:
        """A client whose backoff sleeps are recorded, not slept."""

        async def sleep(seconds: float) -> None:
            self.sleeps.append(seconds)

        kwargs.setdefault("backoff", Backoff(sleep=sleep))
        client = A2AClient.connect(self.target, **kwargs)
        self.clients.append(client)
        return client


@pytest.fixture
async def peer() -> AsyncIterator[Peer]:
    agent = ScriptedAgent()
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((agent.generic_handler(),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    harness = Peer(agent, f"127.0.0.1:{port}", [], [])
    yield harness
    for client in harness.clients:
        await client.close()
    await server.stop(None)
