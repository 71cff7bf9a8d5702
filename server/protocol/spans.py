"""The server span of each A2A call, and the task a call concerns.

A server span per A2A call continues the caller's trace (W3C `traceparent` / `tracestate` in
the request metadata) and carries `a2a.task_id` / `a2a.context_id`. The agent runs inside it, so
its own spans, the webhooks it triggers and the calls it makes with our client share the trace.
With no SDK configured and no trace context sent, nothing is done at all. Where spans are
exported is ops/telemetry.py's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, StatusCode

from a2a_grpc.core.service import SERVICE_NAME
from a2a_grpc.core.tracing import incoming_context, tracing_configured
from a2a_grpc.generated import a2a_pb2

tracer = trace.get_tracer("a2a_grpc.server")


class RpcTracing:
    """Opens the server span of one call. Decides once, at construction, whether spans record."""

    def __init__(self) -> None:
        self.recording = tracing_configured()

    def start(
        self, rpc: str, trace_headers: Sequence[tuple[str, str]], system: str = "grpc"
    ) -> tuple[Span, object] | None:
        """Starts the call's server span and makes it the current span; returns it with the
        token that `end` takes, or None when nothing records. `system` is the binding's
        `rpc.system`: grpc, jsonrpc or http."""
        if not trace_headers and not self.recording:
            return None  # the common case costs one test
        span = tracer.start_span(
            f"{SERVICE_NAME}/{rpc}",
            context=incoming_context(trace_headers),
            kind=SpanKind.SERVER,
            attributes={"rpc.system": system, "rpc.service": SERVICE_NAME, "rpc.method": rpc},
            record_exception=False,
            set_status_on_exception=False,
        )
        return span, otel_context.attach(trace.set_span_in_context(span))


def annotate(span: Span | None, request: Any, result: Any) -> None:
    """Puts the task and context ids the call concerned on its span."""
    if span is None or not span.is_recording():
        return
    task_id, context_id = _ids(result) or _ids(request) or ("", "")
    if task_id:
        span.set_attribute("a2a.task_id", task_id)
    if context_id:
        span.set_attribute("a2a.context_id", context_id)


def task_id_of(request: Any, result: Any) -> str:
    """The task a call concerned, from its result or else its request ("" when none)."""
    ids = _ids(result) or _ids(request)
    return ids[0] if ids else ""


def ids_of(message: Any) -> tuple[str, str]:
    """The (task id, context id) a request or result names ("" for what it does not name)."""
    return _ids(message) or ("", "")


def failed(span: Span | None, code_name: str) -> None:
    if span is not None and span.is_recording():
        span.set_attribute("rpc.grpc.status_code", code_name)
        span.set_status(StatusCode.ERROR, code_name)


def _ids(message: Any) -> tuple[str, str] | None:
    if isinstance(message, a2a_pb2.Task):
        return message.id, message.context_id
    if isinstance(message, a2a_pb2.SendMessageResponse | a2a_pb2.StreamResponse):
        kind = message.WhichOneof("payload")
        if kind is None:
            return None
        inner = getattr(message, kind)
        if kind == "task":
            return inner.id, inner.context_id
        return inner.task_id, inner.context_id
    if isinstance(message, a2a_pb2.SendMessageRequest):
        return message.message.task_id, message.message.context_id
    task_id = getattr(message, "task_id", "") or getattr(message, "id", "")
    return (task_id, "") if isinstance(task_id, str) and task_id else None
