"""The gRPC transport to an A2A 0.3 agent: `a2a.v1.A2AService`, translated to and from 1.0.

Requests are translated 1.0 → 0.3 and results 0.3 → 1.0 by `a2a_grpc.core.v03` (the code the
server's 0.3 service uses the other way round), so the client's typed methods, objects and errors
are the same as over 1.0. What 0.3 does not have is refused before anything is sent: ListTasks
is UnsupportedOperationError. GetExtendedAgentCard is 0.3's GetAgentCard. SendMessage and the
streams are read as raw bytes, as over 1.0, so a response with two payload members is seen.
"""

# ruff: noqa: ASYNC109

from __future__ import annotations

from typing import Any, cast

import grpc
from google.protobuf.message import Message

from a2a_grpc.client.card import GRPC_BINDING
from a2a_grpc.client.errors import from_rpc_error
from a2a_grpc.client.events import decode_payload
from a2a_grpc.client.transports.base import Metadata
from a2a_grpc.client.transports.grpc import GrpcEventStream
from a2a_grpc.client.transports.v03_rpcs import V03_RPCS
from a2a_grpc.core import v03, v03_agents
from a2a_grpc.core.errors import InvalidAgentResponseError, UnsupportedOperationError
from a2a_grpc.core.service import V03_SERVICE_NAME
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.generated import a2a_v03_pb2 as old


class GrpcV03Transport:
    """A2A 0.3 over a `grpc.aio` channel; closes the channel on `close` only if `owns_channel`."""

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
            protocol_binding=GRPC_BINDING, protocol_version=v03.PROTOCOL_VERSION
        )
        """`Transport.interface`: the one given, else a GRPC 0.3 interface without url."""

    def _method(self, name: str, streaming: bool) -> Any:
        path = f"/{V03_SERVICE_NAME}/{name}"
        make = self._channel.unary_stream if streaming else self._channel.unary_unary
        return make(
            path,
            request_serializer=lambda message: message.SerializeToString(),
            response_deserializer=None,
        )

    async def call(
        self, rpc: str, request: Message, *, timeout: float | None, metadata: Metadata
    ) -> Message:
        """`Transport.call`, translated to 0.3 and back; `timeout` is the gRPC deadline. ListTasks
        raises UnsupportedOperationError, unsent."""
        if rpc == "SendMessage":
            send = v03_agents.send_request_v03(cast(a2a_pb2.SendMessageRequest, request))
            raw = await self._unary("SendMessage", send, timeout, metadata)
            return v03_agents.send_response_from_v03(decode_payload(old.SendMessageResponse, raw))
        if rpc not in V03_RPCS:
            raise UnsupportedOperationError(
                f"{rpc} is not part of A2A 0.3 (this agent's interface)"
            )
        method, to_v03, response_class, from_v03 = V03_RPCS[rpc]
        raw = await self._unary(method, to_v03(request), timeout, metadata)
        try:
            response = response_class.FromString(raw)
        except Exception as error:  # DecodeError: the peer's bug
            name = response_class.DESCRIPTOR.name
            raise InvalidAgentResponseError(f"malformed {name}: {error}") from error
        return from_v03(response)

    async def _unary(
        self, method: str, request: Message, timeout: float | None, metadata: Metadata
    ) -> bytes:
        try:
            raw: bytes = await self._method(method, False)(
                request, timeout=timeout, metadata=metadata
            )
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from error
        return raw

    def stream(
        self, rpc: str, request: Message, *, timeout: float | None, metadata: Metadata
    ) -> GrpcEventStream:
        """`Transport.stream`, each event translated from 0.3; the call starts at once."""
        method, to_v03, _, _ = V03_RPCS[rpc]
        call = self._method(method, True)(to_v03(request), timeout=timeout, metadata=metadata)
        return GrpcEventStream(call, _decode_event)

    async def close(self) -> None:
        """`Transport.close`: closes the channel if `owns_channel`; else nothing."""
        if self._owns_channel:
            await self._channel.close()


def _decode_event(raw: bytes) -> a2a_pb2.StreamResponse:
    """A 0.3 stream message, checked and translated to a 1.0 StreamResponse."""
    return v03_agents.stream_response_from_v03(decode_payload(old.StreamResponse, raw))
