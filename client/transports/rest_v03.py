"""The HTTP+JSON transport to an A2A 0.3 agent: 0.3's `/v1/...` routes and ProtoJSON.

The routes are the `google.api.http` annotations of A2A 0.3's proto (`proto/a2a_v03.proto`:
`POST /v1/message:send`, `GET /v1/{name=tasks/*}`, ...), read by the same code as 1.0's; the
bodies are ProtoJSON of the 0.3 messages. A request goes 1.0 → 0.3 by `a2a_grpc.core.v03`, a
result back the same way. ListTasks, which 0.3 does not have, is UnsupportedOperationError.

Errors: an AIP-193 body (what a 1.0-era server's 0.3 layer sends, ours included) is decoded as
over 1.0. The official SDK 0.3 answers `{"message": "..."}` instead, the A2A error told only by
the HTTP status its `A2AErrorToHttpStatus` table gives it; that table is read back here
(`V03_HTTP_ERRORS`): 404 TaskNotFound, 409 TaskNotCancelable, 422 InvalidParams, 400
InvalidRequest, 415 ContentTypeNotSupported, 500 Internal, and 501 UnsupportedOperation, or
PushNotificationNotSupported for the push-config calls. 502, 503 and 504 stay a gateway's
could-not-talk, as on every HTTP binding.
"""

# ruff: noqa: ASYNC109

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import Message

from a2a_grpc.client.errors import ErrorResponse
from a2a_grpc.client.events import message_from_json, payload_from_json
from a2a_grpc.client.transports.base import Metadata
from a2a_grpc.client.transports.http import json_body
from a2a_grpc.client.transports.rest import HTTP_JSON_BINDING, RestTransport
from a2a_grpc.client.transports.v03_rpcs import V03_RPCS
from a2a_grpc.core import v03_agents
from a2a_grpc.core.errors import (
    A2AError,
    ContentTypeNotSupportedError,
    InternalError,
    InvalidAgentResponseError,
    InvalidParamsError,
    InvalidRequestError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a_grpc.core.service import V03_SERVICE
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.generated import a2a_v03_pb2 as old

V03_HTTP_ERRORS: dict[int, type[A2AError]] = {
    400: InvalidRequestError,
    404: TaskNotFoundError,
    409: TaskNotCancelableError,
    415: ContentTypeNotSupportedError,
    422: InvalidParamsError,
    500: InternalError,
    501: UnsupportedOperationError,
}
"""The official SDK 0.3's HTTP status for each A2A error it answers as `{"message": ...}`."""
_PUSH_RPCS = frozenset(rpc for rpc in V03_RPCS if "PushNotificationConfig" in rpc)


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
        return v03_agents.stream_response_from_v03(payload_from_json(old.StreamResponse, value))

    def _failure(self, rpc: str, http_status: int | None, body: bytes) -> Exception:
        cls = V03_HTTP_ERRORS.get(http_status or 0)
        try:
            value = json_body(body)
        except InvalidAgentResponseError:
            value = None
        if (
            cls is None
            or not isinstance(value, dict)
            or set(value) != {"message"}
            or not isinstance(value["message"], str)
        ):
            return super()._failure(rpc, http_status, body)
        if cls is UnsupportedOperationError and rpc in _PUSH_RPCS:
            cls = PushNotificationNotSupportedError
        error = cls(value["message"])
        error.__cause__ = ErrorResponse(HTTP_JSON_BINDING, value)
        return error
