"""Operations: what an operator reads and runs. Prometheus metrics, OpenTelemetry tracing,
log formatting, and the `--workers N` supervisor."""
