"""The HTTP+JSON transport: A2A 1.0's HTTP+JSON binding (spec §11) over httpx.

Routes are the proto's `google.api.http` annotations (`a2a_grpc.core.http_routes`, the same
rules the server serves), under the interface's url: a request with a tenant takes the
`/{tenant}` binding. A body rule (`body: "*"`) sends the request as ProtoJSON; the others carry
the path's fields in the path and the rest as query parameters (camelCase, repeated fields
repeated). Responses are the response message in ProtoJSON; streams are Server-Sent Events of
bare StreamResponse objects. Errors are AIP-193 (`{"error": {"code", "status", "message",
"details"}}`), decoded from the ErrorInfo in `details` with the shared codec.
"""

# ruff: noqa: ASYNC109

from __future__ import annotations

import contextlib
from typing import Any

import httpx
import httpx_sse
from google.protobuf import json_format
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import Message

from a2a_grpc.client.channel import TlsConfig
from a2a_grpc.client.errors import ErrorResponse, RpcFailedError
from a2a_grpc.client.events import (
    UnknownEvent,
    message_from_json,
    payload_from_json,
    stream_event_from_json,
)
from a2a_grpc.client.transports.base import RESPONSES, Metadata
from a2a_grpc.client.transports.http import (
    EVENT_STREAM,
    SseStream,
    create_http_client,
    grpc_code_named,
    headers_of,
    http_failure,
    json_body,
    request_extensions,
    within,
)
from a2a_grpc.core import status
from a2a_grpc.core.errors import InvalidAgentResponseError
from a2a_grpc.core.http_routes import request_path, request_rule
from a2a_grpc.core.service import SERVICE
from a2a_grpc.generated import a2a_pb2

HTTP_JSON_BINDING = "HTTP+JSON"
_A2A_JSON = "application/a2a+json"


class RestTransport:
    """A2A over HTTP+JSON under `interface.url`, on `http` (a pooled httpx client; one is made
    from `tls` and closed with the transport when none is passed in)."""

    def __init__(
        self,
        interface: a2a_pb2.AgentInterface,
        *,
        http: httpx.AsyncClient | None = None,
        tls: TlsConfig | None = None,
    ) -> None:
        self.interface = interface
        """`Transport.interface`: the one given; its url is the base of every route."""
        self._base = interface.url.rstrip("/")
        self._owns_http = http is None
        self._http = http if http is not None else create_http_client(tls)
        self._extensions = request_extensions(tls)

    # What a version of the binding names and encodes differently (A2A 0.3 overrides these).

    def _wire(self, rpc: str, request: Message) -> tuple[str, Message, ServiceDescriptor]:
        """The RPC, request and service whose HTTP rule carries `rpc`'s `request`."""
        return rpc, request, SERVICE

    def _decode_result(self, rpc: str, value: Any) -> Message:
        """`rpc`'s response message from a response body's JSON (None: an empty body)."""
        if rpc == "SendMessage":
            return payload_from_json(a2a_pb2.SendMessageResponse, value)
        if value is None:
            return RESPONSES[rpc]()  # DeleteTaskPushNotificationConfig's Empty, say
        return message_from_json(RESPONSES[rpc], value)

    def _decode_event(self, value: Any) -> a2a_pb2.StreamResponse | UnknownEvent:
        """A stream's event from one SSE event's JSON."""
        return stream_event_from_json(value)

    def _failure(self, rpc: str, http_status: int | None, body: bytes) -> Exception:
        """The exception `rpc`'s error answer stands for (`http_status` None: an error event
        inside a stream)."""
        return _failure(http_status, body)

    def _request(
        self, rpc: str, request: Message, metadata: Metadata, accept: str
    ) -> dict[str, Any]:
        """httpx.request's arguments for `rpc`."""
        wire_rpc, wire_request, service = self._wire(rpc, request)
        rule = request_rule(wire_rpc, wire_request, service)
        arguments: dict[str, Any] = {
            "method": rule.verb,
            "url": self._base + request_path(rule, wire_request),
            "extensions": self._extensions,
        }
        value = json_format.MessageToDict(wire_request)
        if rule.body == "*":
            arguments["json"] = value
            arguments["headers"] = headers_of(
                metadata, ("content-type", "application/json"), ("accept", accept)
            )
            return arguments
        fields = wire_request.DESCRIPTOR.fields_by_name
        left_out = {fields[name].json_name for name in rule.fields}
        if rule.body:  # one field is the body, the others not in the path are the query
            body_name = fields[rule.body].json_name
            arguments["json"] = value.get(body_name, {})
            left_out.add(body_name)
        arguments["params"] = [
            (key, _query_value(item))
            for key, field_value in value.items()
            if key not in left_out
            for item in (field_value if isinstance(field_value, list) else [field_value])
        ]
        json_type = (("content-type", "application/json"),) if rule.body else ()
        arguments["headers"] = headers_of(metadata, *json_type, ("accept", accept))
        return arguments

    async def call(
        self, rpc: str, request: Message, *, timeout: float | None, metadata: Metadata
    ) -> Message:
        """`Transport.call`: one request on the RPC's route; `timeout` bounds it here (the server
        is not told)."""
        arguments = self._request(rpc, request, metadata, "application/json, " + _A2A_JSON)
        response: httpx.Response = await within(timeout, self._http.request(**arguments))
        if not response.is_success:
            raise self._failure(rpc, response.status_code, response.content)
        body = json_body(response.content) if response.content.strip() else None
        return self._decode_result(rpc, body)

    def stream(
        self, rpc: str, request: Message, *, timeout: float | None, metadata: Metadata
    ) -> SseStream:
        """`Transport.stream`: a request answered with Server-Sent Events, sent when the stream is
        first iterated."""
        arguments = self._request(rpc, request, metadata, EVENT_STREAM)

        def open_response() -> contextlib.AbstractAsyncContextManager[httpx.Response]:
            return self._http.stream(**arguments)

        def decode(event: httpx_sse.ServerSentEvent) -> a2a_pb2.StreamResponse | UnknownEvent:
            value = json_body(event.data.encode())
            # An error event: ours and the official SDK's name it `event: error`; a2a-go's
            # servers send the AIP-193 body as a plain event (no StreamResponse has `error`).
            if event.event == "error" or (
                isinstance(value, dict) and isinstance(value.get("error"), dict)
            ):
                raise self._failure(rpc, None, event.data.encode())
            return self._decode_event(value)

        def refused(http_status: int, body: bytes) -> Exception:
            if 200 <= http_status < 300:
                return InvalidAgentResponseError(f"{rpc} answered without an event stream")
            return self._failure(rpc, http_status, body)

        return SseStream(open_response, timeout=timeout, decode=decode, refused=refused)

    async def close(self) -> None:
        """`Transport.close`: closes the httpx client if it made it; else nothing."""
        if self._owns_http:
            await self._http.aclose()


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _failure(http_status: int | None, body: bytes) -> Exception:
    """The exception an AIP-193 error body (or, without one, the HTTP status) stands for;
    `http_status` None for an error event inside a stream."""
    text = body.decode(errors="replace")
    try:
        value = json_body(body)
    except InvalidAgentResponseError:
        value = None
    error = value.get("error") if isinstance(value, dict) else None
    if not isinstance(error, dict):
        if http_status is None:
            return InvalidAgentResponseError("the stream's error event is not an AIP-193 error")
        return http_failure(http_status, text)
    message = str(error.get("message") or "")
    details = error.get("details")
    decoded: Exception | None = status.decode_json(
        message, details if isinstance(details, list) else []
    )
    if decoded is None:
        if http_status in (502, 503, 504):  # a gateway's own error, not the agent's
            return http_failure(http_status, message)
        code = error.get("code")
        http_code = code if isinstance(code, int) else (http_status or 500)
        decoded = RpcFailedError(grpc_code_named(error.get("status"), http_code), message)
    decoded.__cause__ = ErrorResponse(HTTP_JSON_BINDING, error)
    return decoded
