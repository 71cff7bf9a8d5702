"""The transport seam: what `A2AClient` needs from one binding (gRPC, JSON-RPC, HTTP+JSON)."""

# A call's `timeout` is the deadline the binding enforces (gRPC sends it to the server).
# ruff: noqa: ASYNC109

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol

from google.protobuf import message_factory
from google.protobuf.message import Message

from a2a_grpc.client.events import UnknownEvent
from a2a_grpc.core.service import SERVICE
from a2a_grpc.generated import a2a_pb2

Metadata = Sequence[tuple[str, str | bytes]]
"""A call's service parameters and credentials: lowercase keys (`a2a-version`,
`a2a-extensions`, `authorization`, `traceparent`, ...), each key once. gRPC sends them as
metadata, the HTTP bindings as headers."""

RESPONSES: dict[str, type[Message]] = {
    method.name: message_factory.GetMessageClass(method.output_type) for method in SERVICE.methods
}
"""Each RPC's response class, from the descriptor."""


class EventStream(Protocol):
    """One open stream (SendStreamingMessage or SubscribeToTask): its events, then its end.

    Iterating yields each StreamResponse, already checked to carry exactly one payload member
    (InvalidAgentResponseError otherwise), or an `UnknownEvent` for an event of a kind this
    client does not know (a newer A2A version's), which `follow` skips and counts. A stream
    that fails raises what `Transport` says; one the server ends cleanly just stops. `aclose`
    ends it early (idempotent).
    """

    def __aiter__(self) -> AsyncIterator[a2a_pb2.StreamResponse | UnknownEvent]: ...

    async def aclose(self) -> None:
        """Ends the stream now (the call cancelled, the response closed); events not read yet
        are dropped. Idempotent."""
        ...


class Transport(Protocol):
    """One A2A binding to one agent interface.

    `call` runs a unary RPC (named as in the proto) and returns its response message (for
    SendMessage a SendMessageResponse with exactly one payload member); `stream` opens a
    streaming RPC. `timeout` is seconds (None: unbounded); `metadata` is sent as given.

    Errors, the same on every binding: the `a2a_grpc.core.errors` class the agent's error names
    (decoded from its ErrorInfo with `a2a_grpc.core.status`); `A2ATransportError` subclasses
    when we could not talk (connect errors, resets, timeouts, a gateway's 502/503/504);
    `RpcFailedError` for any other failure without an A2A error; InvalidAgentResponseError
    for an answer that is not A2A. The binding's own exception is the `__cause__`.

    A transport never retries a call and never resends a message; it keeps no per-call state,
    so one transport serves concurrent calls.
    """

    interface: a2a_pb2.AgentInterface
    """The interface this transport speaks to (its url, binding, version and tenant)."""

    async def call(
        self, rpc: str, request: Message, *, timeout: float | None, metadata: Metadata
    ) -> Message:
        """Runs the unary RPC `rpc` (its proto name: `GetTask`, `SendMessage`...) with
        `request`, its request message, and returns its response message; raises as the class
        says. `A2AClient` calls it once per attempt (a retried SendMessage is sent again as
        it was)."""
        ...

    def stream(
        self, rpc: str, request: Message, *, timeout: float | None, metadata: Metadata
    ) -> EventStream:
        """The stream of the streaming RPC `rpc` (SendStreamingMessage or SubscribeToTask),
        returned without waiting for the server: its errors are raised by iterating it.
        `timeout` bounds the whole stream. `A2AClient` opens one per stream, and one per
        resumption."""
        ...

    async def close(self) -> None:
        """Releases what the transport opened (a channel or connection pool it owns)."""
        ...
