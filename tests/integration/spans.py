"""Recording the server's spans in a test process: the OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def record_spans(exporter: InMemorySpanExporter) -> None:
    """Makes `exporter` receive every span finished from now on. The global tracer provider can
    be set once per process (another test module may have set it): the exporter joins whichever
    SDK provider is in place. Servers decide whether spans record when they start, so call this
    before making them."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
