"""Exporting the server's spans as the standard OTEL_* environment variables say (each
call's span is protocol/spans.py's)."""

from __future__ import annotations

import os

from opentelemetry import trace


def configure_from_environment() -> str | None:
    """Installs an SDK exporter when OTEL_TRACES_EXPORTER asks for one; says what it did.

    `console` prints spans; `otlp` sends them to OTEL_EXPORTER_OTLP_ENDPOINT (needs the
    `telemetry` extra). Unset or `none`: nothing is installed and tracing stays a no-op.
    """
    wanted = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if wanted in ("", "none"):
        return None
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SpanExporter,
        )
    except ImportError:
        return f"OTEL_TRACES_EXPORTER={wanted} ignored: install a2a-grpc[telemetry]"
    exporter: SpanExporter
    if wanted == "console":
        exporter = ConsoleSpanExporter()
    elif wanted == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        except ImportError:
            return "OTEL_TRACES_EXPORTER=otlp ignored: install a2a-grpc[telemetry]"
        exporter = OTLPSpanExporter()
    else:
        return f"OTEL_TRACES_EXPORTER={wanted} is not supported (console, otlp, none)"
    service = os.environ.get("OTEL_SERVICE_NAME", "a2a-grpc")
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return f"exporting traces ({wanted}) as service {service}"
