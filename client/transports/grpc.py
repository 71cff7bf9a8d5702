"""The gRPC transport: A2A 1.0's `lf.a2a.v1.A2AService` over one `grpc.aio` channel."""

# A call's `timeout` becomes the gRPC deadline the server sees; asyncio.timeout cannot do that.
# ruff: noqa: ASYNC109

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
from google.protobuf.message import Message

from a2a_grpc.client.card import GRPC_BINDING
from a2a_grpc.client.errors import from_rpc_error
from a2a_grpc.client.events import UnknownEvent, decode_send_message_response, stream_event
from a2a_grpc.client.transports.base import Metadata
from a2a_grpc.core.metadata import PROTOCOL_VERSION
from a2a_grpc.core.service import method_path
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc

_EOF = grpc.aio.EOF
"""What `call.read()` returns once the stream has ended."""

Decode = Callable[[bytes], a2a_pb2.StreamResponse | UnknownEvent]
"""Turns one raw stream message into the event the client reads."""


class GrpcTransport:
    """A2A over a `grpc.aio` channel; closes the channel on `close` only if `owns_channel`.

    SendMessage and the streams are read as raw bytes: only there can a response with two
    payload members still be seen (see events.py). The other RPCs go through the typed stub.
    """

    def __init__(
        self,
        channel: Any,
        *,
        owns_channel: bool = False,
        interface: a2a_pb2.AgentInterface | None = None,
    ) -> None:
        self._channel = channel
        self._owns_channel = owns_channel
        self.interface = interface or a2a_pb2.AgentInterface(
            protocol_binding=GRPC_BINDING, protocol_version=PROTOCOL_VERSION
        )
        """`Transport.interface`: the one given, else a GRPC 1.0 interface without url."""
        self._stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        self._send_raw = channel.unary_unary(
            method_path("SendMessage"),
            request_serializer=a2a_pb2.SendMessageRequest.SerializeToString,
            response_deserializer=None,
        )
        self._streams = {
            rpc: channel.unary_stream(
                method_path(rpc),
                request_serializer=request_class.SerializeToString,
                response_deserializer=None,
            )
            for rpc, request_class in (
                ("SendStreamingMessage", a2a_pb2.SendMessageRequest),
                ("SubscribeToTask", a2a_pb2.SubscribeToTaskRequest),
            )
        }

    async def call(
        self, rpc: str, request: Message, *, timeout: float | None, metadata: Metadata
    ) -> Message:
        """`Transport.call`; `timeout` is the gRPC deadline the server sees."""
        try:
            if rpc == "SendMessage":
                raw: bytes = await self._send_raw(request, timeout=timeout, metadata=metadata)
                return decode_send_message_response(raw)
            result: Message = await getattr(self._stub, rpc)(
                request, timeout=timeout, metadata=metadata
            )
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from error
        return result

    def stream(
        self, rpc: str, request: Message, *, timeout: float | None, metadata: Metadata
    ) -> GrpcEventStream:
        """`Transport.stream`; the call starts at once."""
        return GrpcEventStream(self._streams[rpc](request, timeout=timeout, metadata=metadata))

    async def close(self) -> None:
        """`Transport.close`: closes the channel if `owns_channel`; else nothing."""
        if self._owns_channel:
            await self._channel.close()


class GrpcEventStream:
    """A raw-bytes unary-stream call, each message decoded by `decode` (a 1.0 StreamResponse,
    or an UnknownEvent), its failure mapped; the 0.3 transport shares it with its own `decode`.

    An iterator over `call.read()`, not an async generator over the call's own: a send stream
    is left as soon as its task settles, before the server's trailers, and a generator left
    suspended is closed later by the event loop's finalizer hook, with a thread-safe callback
    and a task for ours and as many for grpc's, on every call.
    """

    def __init__(self, call: Any, decode: Decode = stream_event) -> None:
        self._call = call
        self._decode = decode

    def __aiter__(self) -> GrpcEventStream:
        return self

    async def __anext__(self) -> a2a_pb2.StreamResponse | UnknownEvent:
        try:
            raw = await self._call.read()
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from error
        if raw is _EOF:
            raise StopAsyncIteration
        return self._decode(raw)

    async def aclose(self) -> None:
        """Cancels the call, if it has not ended (idempotent)."""
        self._call.cancel()
