"""Operations: what an operator reads and runs. Prometheus metrics, where OpenTelemetry spans
are exported, log formatting, and the `--workers N` supervisor. It reads the protocol; the
protocol never imports it."""
