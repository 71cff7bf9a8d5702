"""W3C trace context across calls, on the OpenTelemetry API (a no-op until an SDK is configured).

Server and client use these helpers so that a trace started by a caller continues through our
server, the agent, the webhooks it triggers and the calls the agent makes with our client.
"""

from __future__ import annotations

from collections.abc import Iterable

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace

TRACE_HEADERS = frozenset({"traceparent", "tracestate", "baggage"})


def tracing_configured() -> bool:
    """Whether an OpenTelemetry SDK (a real TracerProvider) has been installed in this process."""
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def outgoing_headers() -> list[tuple[str, str]]:
    """The current trace context as `traceparent` / `tracestate` entries (none without a trace)."""
    if not otel_context.get_current():  # an empty context: no span and no baggage to carry
        return []
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return list(carrier.items())


def incoming_context(entries: Iterable[tuple[str, str]]) -> otel_context.Context:
    """The trace context a caller sent in `traceparent` / `tracestate` metadata."""
    return propagate.extract({key: value for key, value in entries if key in TRACE_HEADERS})
