"""The grpc.aio servicer: service parameters in, errors out, and nothing else.

Every RPC goes through one unary wrapper or is the one stream wrapper, which admit it (or refuse
it when the server is at capacity), read `a2a-version`, `a2a-extensions` and the trace context,
open the call's server span, call the handler, echo the activated extensions, and turn
exceptions into the spec's rich statuses. An unexpected exception becomes INTERNAL /
INTERNAL_ERROR with a generic message (the details go to the log), and the server keeps serving.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any, NamedTuple, NoReturn, TypeVar, cast

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import DecodeError
from opentelemetry.trace import Span

from a2a_grpc.core import metadata as service_params
from a2a_grpc.core import status
from a2a_grpc.core.errors import (
    InternalError,
    InvalidRequestError,
    ResourceExhaustedError,
    ServiceUnavailableError,
    StatusError,
    UnauthenticatedError,
    VersionNotSupportedError,
)
from a2a_grpc.core.metadata import EXTENSIONS_KEY, VERSION_KEY
from a2a_grpc.core.tracing import TRACE_HEADERS
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.server.ops.metrics import RpcMetrics
from a2a_grpc.server.ops.telemetry import RpcTracing, annotate, failed, task_id_of
from a2a_grpc.server.protocol import log_context
from a2a_grpc.server.protocol.handler import CallContext, RequestHandler
from a2a_grpc.server.tasks.base import StoreFullError, StoreUnavailableError
from a2a_grpc.server.tasks.broker import SubscriberOverflowError
from a2a_grpc.server.trust.auth import AuthenticationError, current_principal

log = logging.getLogger(__name__)

Context = grpc.aio.ServicerContext[Any, Any]
"""grpc's servicer context (typed by types-grpcio); requests and responses vary per RPC."""
Request = TypeVar("Request")
Response = TypeVar("Response")

INTERNAL_MESSAGE = "internal error: the server failed to handle this request"
_SERVED_VERSIONS: set[str] = set()
"""a2a-version values already found acceptable, so the common case is one set lookup (without
it, 10.8k more instructions per blocking SendMessage, +2.4%, tests.load.instructions)."""
AUDIT_RETRY_DELAY = 1.0
"""Seconds a caller refused because the audit trail cannot be written is told to wait."""
STORE_FULL_RETRY_DELAY = 1.0
"""Seconds a caller refused for a full store is told to wait (finished tasks expire meanwhile)."""
STORE_DOWN_RETRY_DELAY = 1.0
"""RetryInfo of UNAVAILABLE when the shared task store (Redis) does not answer."""
AT_CAPACITY_RETRY_DELAY = 1.0
"""Seconds a caller refused at max_concurrent_calls / max_open_streams is told to wait: a burst
of demo-agent calls at the default limit drains in well under that."""
REFUSAL_LOG_INTERVAL = 10.0
"""At most one warning per this many seconds while calls or streams are being refused."""


class A2AServicer(a2a_pb2_grpc.A2AServiceServicer):
    """lf.a2a.v1.A2AService over a RequestHandler.

    Admission: at most `config.max_concurrent_calls` unary calls and, counted apart,
    `config.max_open_streams` streams are handled at once; past either, a call or stream is
    refused at once with RESOURCE_EXHAUSTED, retryable, with RetryInfo.
    """

    def __init__(
        self,
        handler: RequestHandler,
        *,
        strict_version: bool = False,
        metrics: RpcMetrics | None = None,
    ) -> None:
        self.handler = handler
        self.strict_version = strict_version
        self.metrics = metrics
        """Where every finished call and stream is counted (any transport); None: nowhere."""
        self.tracing = RpcTracing()
        self._declared_extensions = frozenset(
            ext.uri for ext in handler.card.capabilities.extensions
        )
        self.calls = 0
        """Unary calls being handled now."""
        self.streams = 0
        """Streams open now."""
        self._max_calls = handler.config.max_concurrent_calls
        self._max_streams = handler.config.max_open_streams
        self._last_refusal_log = float("-inf")

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
        started = perf_counter()
        params = ServiceParams.read(context)
        with self.tracing.span(rpc, params.trace_headers) as span:
            if self.calls >= self._max_calls:
                await self._abort(context, self._at_capacity("calls"), span, rpc, request, started)
            self.calls += 1
            try:
                call = await self._call_context(context, params)
                check_parsed(request)
                log_context.CALL.set((rpc, call.principal, request))
                result = await method(request, call)
            except Exception as exc:
                await self._abort(context, exc, span, rpc, request, started)
            finally:
                self.calls -= 1
            if span is not None:
                annotate(span, request, result)
            if self.handler.audit is not None:
                self.audit(rpc, request, "OK", result)
            if self.metrics is not None:
                self.metrics.observe(rpc, "OK", "grpc", perf_counter() - started)
            return result

    def _at_capacity(self, kind: str) -> ResourceExhaustedError:
        """The refusal for a call or stream past its limit (warned about now and then)."""
        now = time.monotonic()
        if now - self._last_refusal_log >= REFUSAL_LOG_INTERVAL:
            self._last_refusal_log = now
            log.warning(
                "at capacity: refusing new %s with RESOURCE_EXHAUSTED (%d calls, %d streams "
                "open; limits %d and %d)",
                kind,
                self.calls,
                self.streams,
                self._max_calls,
                self._max_streams,
            )
        return ResourceExhaustedError(
            f"the server is handling as many {kind} as it takes at once; retry after the delay "
            "in RetryInfo",
            retry_delay=AT_CAPACITY_RETRY_DELAY,
        )

    async def _stream(
        self,
        rpc: str,
        method: Callable[[Request, CallContext], AsyncIterator[a2a_pb2.StreamResponse]],
        request: Request,
        context: Context,
    ) -> AsyncIterator[a2a_pb2.StreamResponse]:
        started = perf_counter()
        params = ServiceParams.read(context)
        with self.tracing.span(rpc, params.trace_headers) as span:
            if self.streams >= self._max_streams:
                await self._abort(
                    context, self._at_capacity("streams"), span, rpc, request, started
                )
            self.streams += 1
            first: a2a_pb2.StreamResponse | None = None
            cancelled = False
            try:
                call = await self._call_context(context, params)
                check_parsed(request)
                log_context.CALL.set((rpc, call.principal, request))
                async for event in method(request, call):
                    if first is None:
                        first = event
                        annotate(span, request, event)
                    yield event
            except Exception as exc:
                await self._abort(context, exc, span, rpc, request, started)
            except BaseException:  # the caller went away (cancelled) or the server is stopping
                self.finished(rpc, "CANCELLED", "grpc", started)
                self.audit(rpc, request, "CANCELLED", first)
                cancelled = True
                raise
            finally:
                self.streams -= 1
                if cancelled:
                    log.debug("%s cancelled (caller gone or server stopping); slot freed", rpc)
            self.finished(rpc, "OK", "grpc", started)
            self.audit(rpc, request, "OK", first)

    async def _call_context(self, context: Context, params: ServiceParams) -> CallContext:
        call, activated = self.open_call(params.version, params.extension_values)
        if activated:
            await context.send_initial_metadata(
                ((service_params.EXTENSIONS_KEY, ",".join(activated)),)
            )
        return call

    def open_call(
        self,
        version: str | None,
        extension_values: Sequence[str],
        check_version: Callable[[str | None], None] | None = None,
    ) -> tuple[CallContext, Sequence[str]]:
        """The handler's CallContext for a call with these service parameters, and the
        extensions to echo as activated; raises what refuses the call (any transport).

        The caller's principal first (UNAUTHENTICATED before anything is looked up), then a
        fail-closed audit trail, then the version (by `check_version` when given: another
        protocol version's service), then the requested extensions.
        """
        principal = current_principal()
        audit = self.handler.audit
        if audit is not None and audit.refusing:
            raise ServiceUnavailableError(
                "the audit trail cannot be written and this server does not serve unaudited "
                "requests; retry later",
                retry_delay=AUDIT_RETRY_DELAY,
            )
        (check_version or self._check_version)(version)
        if not extension_values:
            return CallContext(principal, ()), ()
        requested = service_params.parse_extensions(extension_values)
        activated = [uri for uri in requested if uri in self._declared_extensions]
        return CallContext(principal=principal, extensions=requested), activated

    def admit(self, *, stream: bool) -> None:
        """Counts a call or stream of another transport in (release it with `release`), or
        raises RESOURCE_EXHAUSTED past the limit the gRPC calls share."""
        if stream:
            if self.streams >= self._max_streams:
                raise self._at_capacity("streams")
            self.streams += 1
        else:
            if self.calls >= self._max_calls:
                raise self._at_capacity("calls")
            self.calls += 1

    def release(self, *, stream: bool) -> None:
        if stream:
            self.streams -= 1
        else:
            self.calls -= 1

    def _check_version(self, version: str | None) -> None:
        if version is None or not version.strip():
            if self.strict_version:
                raise VersionNotSupportedError(
                    "no a2a-version metadata: a request without it means A2A 0.3, which this "
                    "server does not speak; send a2a-version: 1.0",
                    metadata={"supportedVersions": service_params.PROTOCOL_VERSION},
                )
            return
        if version in _SERVED_VERSIONS:
            return
        if service_params.major_minor(version) in service_params.SUPPORTED_VERSIONS:
            if len(_SERVED_VERSIONS) < 64:  # remember a few spellings ("1.0", "1.0.2", ...)
                _SERVED_VERSIONS.add(version)
            return
        raise VersionNotSupportedError(
            f"a2a-version {version!r} is not supported: this server speaks A2A "
            f"{service_params.PROTOCOL_VERSION}",
            metadata={"supportedVersions": service_params.PROTOCOL_VERSION},
        )

    async def _abort(
        self,
        context: Context,
        exc: Exception,
        span: Span | None,
        rpc: str,
        request: Any,
        started: float,
    ) -> NoReturn:
        error = self.failure(exc, span, rpc, request, started)
        code, message, trailers = status.encode(error)
        await context.abort(code, message, trailing_metadata=trailers)
        raise AssertionError("context.abort returned")  # it always raises

    def failure(
        self,
        exc: Exception,
        span: Span | None,
        rpc: str,
        request: Any,
        started: float,
        transport: str = "grpc",
    ) -> StatusError:
        """The error a failed call answers with (any transport), traced, audited and counted
        (`started`: its `perf_counter()` on arrival); an unexpected exception is logged and
        becomes INTERNAL with a generic message."""
        error = as_status_error(exc)
        if error is None:
            log.exception("unexpected error while handling a request", exc_info=exc)
            error = InternalError(INTERNAL_MESSAGE)
        failed(span, error.code.name)
        annotate(span, request, None)
        self.audit(rpc, request, error.code.name, None)
        self.finished(rpc, error.code.name, transport, started)
        return error

    def finished(self, rpc: str, code: str, transport: str, started: float) -> None:
        """Counts a call or stream that ended with `code` (a status code's name) in the
        metrics, with its duration since `started` (its `perf_counter()` on arrival)."""
        if self.metrics is not None:
            self.metrics.observe(rpc, code, transport, perf_counter() - started)

    def audit(self, rpc: str, request: Any, outcome: str, result: Any) -> None:
        audit = self.handler.audit
        if audit is None:
            return
        message = request.message if isinstance(request, a2a_pb2.SendMessageRequest) else None
        audit.request(
            method=rpc,
            principal=_principal_or_none(),
            tenant=getattr(request, "tenant", ""),
            outcome=outcome,
            task_id=task_id_of(request, result),
            message=message,
        )


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
    service = service or a2a_pb2.DESCRIPTOR.services_by_name["A2AService"]
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


def _principal_or_none() -> str:
    try:
        return current_principal()
    except AuthenticationError:
        return ""  # refused: audited as anonymous


class ServiceParams(NamedTuple):
    """The metadata entries the server acts on, read in one pass (no validation yet); a call's
    extensions come from the metadata keys in `extension_keys` (A2A 0.3 has a second one)."""

    version: str | None
    extension_values: Sequence[str]
    trace_headers: Sequence[tuple[str, str]]

    @classmethod
    def read(
        cls, context: Context, extension_keys: tuple[str, ...] = (EXTENSIONS_KEY,)
    ) -> ServiceParams:
        version = None
        extension_values: list[str] | tuple[()] = ()
        trace_headers: list[tuple[str, str]] | tuple[()] = ()
        # Only keys ending in -bin carry bytes (gRPC); these three never do.
        entries = cast("Sequence[tuple[str, str]]", context.invocation_metadata() or ())
        for key, value in entries:
            if key == VERSION_KEY:
                version = value
            elif key in extension_keys:
                extension_values = [*extension_values, value]
            elif key in TRACE_HEADERS:
                trace_headers = [*trace_headers, (key, value)]
        return cls(version, extension_values, trace_headers)


def as_status_error(exc: Exception) -> StatusError | None:
    """The status error an exception stands for; None for an unexpected one."""
    if isinstance(exc, StatusError):
        return exc
    if isinstance(exc, StoreFullError):
        return ResourceExhaustedError(str(exc), retry_delay=STORE_FULL_RETRY_DELAY)
    if isinstance(exc, StoreUnavailableError):
        return ServiceUnavailableError(str(exc), retry_delay=STORE_DOWN_RETRY_DELAY)
    if isinstance(exc, SubscriberOverflowError):
        return ResourceExhaustedError(str(exc), retry_delay=0.0)
    if isinstance(exc, AuthenticationError):
        return UnauthenticatedError(str(exc))
    return None
