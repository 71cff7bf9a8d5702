"""Server settings with their defaults, in one place (the CLI prints them at start)."""

from __future__ import annotations

from dataclasses import dataclass

MiB = 1024 * 1024


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 50051
    max_tasks: int = 100_000
    """Tasks kept in memory; when full, the oldest terminal tasks are evicted first."""
    task_ttl: float = 3600.0
    """Seconds a terminal task stays readable before it is evicted."""
    max_inline_bytes: int = 1 * MiB
    """Largest `raw` part accepted inline; bigger content must come as a url part."""
    strict_version: bool = False
    """Refuse requests without `a2a-version` (the spec reads that as 0.3)."""
    subscriber_queue_size: int = 1024
    """Events a stream may fall behind before it is cut off (it can resubscribe)."""
    dedup_window: float = 3600.0
    """Seconds a message id is remembered for idempotent repeats (also bounded by max_tasks)."""
    shutdown_grace: float = 10.0
    """Seconds running tasks and open streams get on SIGTERM/SIGINT before they are cancelled."""

    @property
    def max_receive_bytes(self) -> int:
        """gRPC's inbound message limit: room for the largest inline part plus the envelope."""
        return max(4 * MiB, self.max_inline_bytes + MiB)
