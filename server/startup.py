"""What `a2a-grpc serve` says as it starts: the start-up lines, from plain data."""

from __future__ import annotations

from a2a_grpc.server.config import ServerConfig


def shutdown_plan(config: ServerConfig) -> str:
    """The start-up line that says what SIGTERM / SIGINT will do."""
    drain = f"running work gets {config.shutdown_grace:g} s (--shutdown-grace)"
    if config.drain_delay <= 0:
        return f"on SIGTERM/SIGINT: NOT_SERVING and GOAWAY at once, then {drain}"
    return (
        f"on SIGTERM/SIGINT: NOT_SERVING, still serving for {config.drain_delay:g} s "
        f"(--drain-delay; a second signal skips it), then GOAWAY and {drain}"
    )
