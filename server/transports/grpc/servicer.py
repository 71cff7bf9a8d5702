"""The grpc.aio servicer of lf.a2a.v1.A2AService: service parameters in, statuses out.

Every RPC goes through one unary wrapper or the one stream wrapper. They read `a2a-version`,
`a2a-extensions` and the trace context from the metadata, pass the call through the call gate
(protocol/gate.py: admission, identity, version, tracing, audit, metrics), call the handler,
echo the activated extensions, and turn the gate's errors into the spec's rich statuses.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import DecodeError

from a2a_grpc.core import status
from a2a_grpc.core.errors import InvalidRequestError, StatusError
from a2a_grpc.core.event_ids import LAST_EVENT_ID_KEY
from a2a_grpc.core.metadata import EXTENSIONS_KEY, VERSION_KEY
from a2a_grpc.core.service import SERVICE
from a2a_grpc.core.tracing import TRACE_HEADERS
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.server.protocol.call_context import CallContext
from a2a_grpc.server.protocol.gate import CallGate, ServiceParams
from a2a_grpc.server.protocol.handler import RequestHandler

log = logging.getLogger(__name__)

Context = grpc.aio.ServicerContext[Any, Any]
"""grpc's servicer context (typed by types-grpcio); requests and responses vary per RPC."""
Request = TypeVar("Request")
Response = TypeVar("Response")
TRANSPORT = "grpc"


class A2AServicer(a2a_pb2_grpc.A2AServiceServicer):
    """lf.a2a.v1.A2AService over a RequestHandler, every call through `gate`."""

    def __init__(self, handler: RequestHandler, gate: CallGate) -> None:
        self.handler = handler
        self.gate = gate

    # -- RPCs -----------------------------------------------------------------------------

    async def SendMessage(self, request: a2a_pb2.SendMessageRequest, context: Context) -> Any:
        return await self._unary("SendMessage", self.handler.send_message, request, context)

    async def SendStreamingMessage(
        self, request: a2a_pb2.SendMessageRequest, context: Context
    ) -> AsyncIterator[a2a_pb2.StreamResponse]:
        stream = self._stream(
            "SendStreamingMessage", self.handler.send_streaming_message, request, context
        )
        async for event in stream:
            yield event

    async def SubscribeToTask(
        self, request: a2a_pb2.SubscribeToTaskRequest, context: Context
    ) -> AsyncIterator[a2a_pb2.StreamResponse]:
        stream = self._stream("SubscribeToTask", self.handler.subscribe_to_task, request, context)
        async for event in stream:
            yield event

    async def GetTask(self, request: a2a_pb2.GetTaskRequest, context: Context) -> Any:
        return await self._unary("GetTask", self.handler.get_task, request, context)

    async def ListTasks(self, request: a2a_pb2.ListTasksRequest, context: Context) -> Any:
        return await self._unary("ListTasks", self.handler.list_tasks, request, context)

    async def CancelTask(self, request: a2a_pb2.CancelTaskRequest, context: Context) -> Any:
        return await self._unary("CancelTask", self.handler.cancel_task, request, context)

    async def CreateTaskPushNotificationConfig(
        self, request: a2a_pb2.TaskPushNotificationConfig, context: Context
    ) -> Any:
        return await self._unary(
            "CreateTaskPushNotificationConfig",
            self.handler.create_task_push_notification_config,
            request,
            context,
        )

    async def GetTaskPushNotificationConfig(
        self, request: a2a_pb2.GetTaskPushNotificationConfigRequest, context: Context
    ) -> Any:
        return await self._unary(
            "GetTaskPushNotificationConfig",
            self.handler.get_task_push_notification_config,
            request,
            context,
        )

    async def ListTaskPushNotificationConfigs(
        self, request: a2a_pb2.ListTaskPushNotificationConfigsRequest, context: Context
    ) -> Any:
        return await self._unary(
            "ListTaskPushNotificationConfigs",
            self.handler.list_task_push_notification_configs,
            request,
            context,
        )

    async def DeleteTaskPushNotificationConfig(
        self, request: a2a_pb2.DeleteTaskPushNotificationConfigRequest, context: Context
    ) -> Any:
        return await self._unary(
            "DeleteTaskPushNotificationConfig",
            self.handler.delete_task_push_notification_config,
            request,
            context,
        )

    async def GetExtendedAgentCard(
        self, request: a2a_pb2.GetExtendedAgentCardRequest, context: Context
    ) -> Any:
        return await self._unary(
            "GetExtendedAgentCard", self.handler.get_extended_agent_card, request, context
        )

    # -- the two wrappers -----------------------------------------------------------------

    async def _unary(
        self,
        rpc: str,
        method: Callable[[Request, CallContext], Awaitable[Response]],
        request: Request,
        context: Context,
    ) -> Response:
        call = self.gate.begin(rpc, read_params(context), TRANSPORT)
        try:
            handler_call, activated = call.admit()
            if activated:
                await send_activated(context, activated)
            check_parsed(request)
            call.parsed(request)
            result = await method(request, handler_call)
        except Exception as exc:
            await abort(context, call.failed(exc))
        except BaseException:  # the caller went away (cancelled) or the server is stopping
            call.cancelled()
            raise
        call.ok(result)
        return result

    async def _stream(
        self,
        rpc: str,
        method: Callable[[Request, CallContext], AsyncIterator[a2a_pb2.StreamResponse]],
        request: Request,
        context: Context,
    ) -> AsyncIterator[a2a_pb2.StreamResponse]:
        call = self.gate.begin(rpc, read_params(context), TRANSPORT, stream=True)
        first = True
        try:
            handler_call, activated = call.admit()
            if activated:
                await send_activated(context, activated)
            check_parsed(request)
            call.parsed(request)
            async for event in method(request, handler_call):
                if first:
                    first = False
                    call.first_event(event)
                yield event
        except Exception as exc:
            await abort(context, call.failed(exc))
        except BaseException:  # the caller went away (cancelled) or the server is stopping
            call.cancelled()
            log.debug("%s cancelled (caller gone or server stopping); slot freed", rpc)
            raise
        call.ok()


async def send_activated(context: Context, activated: Sequence[str]) -> None:
    """Echoes the extensions a call activated, in its initial metadata."""
    await context.send_initial_metadata(((EXTENSIONS_KEY, ",".join(activated)),))


async def abort(context: Context, error: StatusError) -> NoReturn:
    """Ends the call with `error` as the spec's rich status."""
    code, message, trailers = status.encode(error)
    await context.abort(code, message, trailing_metadata=trailers)
    raise AssertionError("context.abort returned")  # it always raises


@dataclass(frozen=True, slots=True)
class MalformedRequest:
    """What a request that is not valid protobuf for its RPC deserializes to.

    grpc would answer such bytes with UNKNOWN and the parser's exception text; the wrappers turn
    this into INVALID_ARGUMENT / INVALID_REQUEST with a message that says what was expected.
    """

    expected: str
    problem: str


def _lenient_parser(message_class: Any) -> Callable[[bytes], Any]:
    def parse(data: bytes) -> Any:
        try:
            return message_class.FromString(data)
        except DecodeError as exc:
            return MalformedRequest(message_class.DESCRIPTOR.full_name, str(exc))

    return parse


def add_to_server(servicer: Any, server: Any, service: ServiceDescriptor | None = None) -> None:
    """Registers the servicer like the generated `add_A2AServiceServicer_to_server`, with request
    parsers that hand malformed bytes to the servicer instead of failing inside grpc.

    `service`: the service it implements (default: lf.a2a.v1.A2AService); the servicer has one
    method per RPC, named like it."""
    service = service or SERVICE
    handlers = {}
    for method in service.methods:
        request_class = message_factory.GetMessageClass(method.input_type)
        response_class = message_factory.GetMessageClass(method.output_type)
        make = (
            grpc.unary_stream_rpc_method_handler
            if method.server_streaming
            else grpc.unary_unary_rpc_method_handler
        )
        handlers[method.name] = make(
            getattr(servicer, method.name),
            request_deserializer=_lenient_parser(request_class),
            response_serializer=response_class.SerializeToString,
        )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(service.full_name, handlers),)
    )


def check_parsed(request: Any) -> None:
    if type(request) is MalformedRequest:
        raise InvalidRequestError(
            f"the request is not a valid {request.expected} ({request.problem}): send a "
            "protobuf-encoded message of that type"
        )


def read_params(
    context: Context, extension_keys: tuple[str, ...] = (EXTENSIONS_KEY,)
) -> ServiceParams:
    """The service parameters in a call's metadata, read in one pass (no validation yet); its
    extensions come from the keys in `extension_keys` (A2A 0.3 has a second one)."""
    version = None
    extension_values: list[str] | tuple[()] = ()
    trace_headers: list[tuple[str, str]] | tuple[()] = ()
    last_event_id = None
    # Only keys ending in -bin carry bytes (gRPC); these three never do.
    # Annotated rather than cast(): a cast is a function call on every request.
    entries: Sequence[tuple[str, str]] = context.invocation_metadata() or ()  # type: ignore[assignment]
    for key, value in entries:
        if key == VERSION_KEY:
            version = value
        elif key in extension_keys:
            extension_values = [*extension_values, value]
        elif key in TRACE_HEADERS:
            trace_headers = [*trace_headers, (key, value)]
        elif key == LAST_EVENT_ID_KEY:
            last_event_id = value
    return ServiceParams(version, extension_values, trace_headers, last_event_id)
