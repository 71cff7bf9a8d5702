"""The HTTP+JSON transport to an A2A 0.3 agent: 0.3's `/v1/...` routes and ProtoJSON.

The routes are the `google.api.http` annotations of A2A 0.3's proto (`proto/a2a_v03.proto`:
`POST /v1/message:send`, `GET /v1/{name=tasks/*}`, ...), read by the same code as 1.0's; the
bodies are ProtoJSON of the 0.3 messages. A request goes 1.0 → 0.3 by `a2a_grpc.core.v03`, a
result back the same way. ListTasks, which 0.3 does not have, is UnsupportedOperationError.
"""

# ruff: noqa: ASYNC109

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import Message

from a2a_grpc.client.events import message_from_json, payload_from_json
from a2a_grpc.client.transports.base import Metadata
from a2a_grpc.client.transports.rest import RestTransport
from a2a_grpc.client.transports.v03_rpcs import V03_RPCS
from a2a_grpc.core import v03
from a2a_grpc.core.errors import UnsupportedOperationError
from a2a_grpc.core.service import V03_SERVICE
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.generated import a2a_v03_pb2 as old


class RestV03Transport(RestTransport):
    """A2A 0.3 over HTTP+JSON under `interface.url` (see the module docstring)."""

    async def call(
        self, rpc: str, request: Message, *, timeout: float | None, metadata: Metadata
    ) -> Message:
        """`Transport.call` on 0.3's routes; ListTasks raises UnsupportedOperationError, unsent."""
        if rpc not in V03_RPCS:
            raise UnsupportedOperationError(
                f"{rpc} is not part of A2A 0.3 (this agent's interface)"
            )
        return await super().call(rpc, request, timeout=timeout, metadata=metadata)

    def _wire(self, rpc: str, request: Message) -> tuple[str, Message, ServiceDescriptor]:
        method, to_v03, _, _ = V03_RPCS[rpc]
        return method, to_v03(request), V03_SERVICE

    def _decode_result(self, rpc: str, value: Any) -> Message:
        _, _, response_class, from_v03 = V03_RPCS[rpc]
        if value is None:
            return from_v03(response_class())
        if response_class is old.SendMessageResponse:
            return from_v03(payload_from_json(old.SendMessageResponse, value))
        return from_v03(message_from_json(response_class, value))

    def _decode_event(self, value: Any) -> a2a_pb2.StreamResponse:
        return v03.stream_response_from_v03(payload_from_json(old.StreamResponse, value))
