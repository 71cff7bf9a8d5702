"""Who is calling, and with which service parameters: what the call gate hands the handler
with each request (`CallContext`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from a2a_grpc.server.push.configs import V10


class CallContext(NamedTuple):
    """Who is calling and with which service parameters (already validated by the servicer).
    A NamedTuple like `Scope`: made on every call, and cheaper to make than a dataclass."""

    principal: str = ""
    extensions: tuple[str, ...] = ()
    protocol: str = V10
    """The protocol version of the service called ("0.3" through the 0.3 service): the version
    a webhook this call registers speaks."""
    last_event_id: str | None = None
    """The event id a SubscribeToTask resumes after (gRPC `a2a-last-event-id`, SSE
    `Last-Event-ID`; core/event_ids.py); None: from a snapshot."""
    replay_done: Callable[[], None] | None = None
    """With `last_event_id`: called once the stream caught up with the task's kept events,
    which frees the call's replay slot (protocol/fairness.py)."""
