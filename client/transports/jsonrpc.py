"""The JSON-RPC 2.0 transport: A2A 1.0's JSON-RPC binding (spec §9) over httpx.

Every call is a POST to the interface's url of `{"jsonrpc": "2.0", "id": N, "method": <RPC
name>, "params": <request as ProtoJSON>}`; `result` is the response message in ProtoJSON. The two
streaming methods answer with Server-Sent Events, one JSON-RPC response object per event.
An `error` object is decoded from the ErrorInfo in its `data` (the shared codec,
`a2a_grpc.core.status.decode_json`); one without ErrorInfo from its code, when the code is an
A2A error's (`a2a_grpc.core.errors.ERROR_BY_JSONRPC_CODE`).
"""

# ruff: noqa: ASYNC109

from __future__ import annotations

import contextlib
import itertools
from typing import Any

import grpc
import httpx
import httpx_sse
from google.protobuf import json_format
from google.protobuf.message import Message

from a2a_grpc.client.channel import TlsConfig
from a2a_grpc.client.errors import A2AClientError, ErrorResponse, RpcFailedError
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
    headers_of,
    http_failure,
    json_body,
    request_extensions,
    within,
)
from a2a_grpc.core import status
from a2a_grpc.core.errors import ERROR_BY_JSONRPC_CODE, InvalidAgentResponseError, StatusError
from a2a_grpc.generated import a2a_pb2

JSONRPC_BINDING = "JSONRPC"
_JSON = ("content-type", "application/json")


class JsonRpcTransport:
    """A2A over JSON-RPC 2.0 to `interface.url`, on `http` (a pooled httpx client; one is made
    from `tls` and closed with the transport when none is passed in)."""

    def __init__(
        self,
        interface: a2a_pb2.AgentInterface,
        *,
        http: httpx.AsyncClient | None = None,
        tls: TlsConfig | None = None,
    ) -> None:
        self.interface = interface
        """`Transport.interface`: the one given; its url is where every request is POSTed."""
        self._url = interface.url
        self._owns_http = http is None
        self._http = http if http is not None else create_http_client(tls)
        self._extensions = request_extensions(tls)
        self._ids = itertools.count(1)

    def _envelope(self, rpc: str, request: Message) -> tuple[int, dict[str, Any]]:
        request_id = next(self._ids)
        method, params = self._params(rpc, request)
        return request_id, {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}

    # What a version of the binding names and encodes differently (A2A 0.3 overrides these).

    def _params(self, rpc: str, request: Message) -> tuple[str, Any]:
        """The JSON-RPC method and params of `rpc`'s `request`."""
        return rpc, json_format.MessageToDict(request)

    def _decode_result(self, rpc: str, result: Any) -> Message:
        """`rpc`'s response message from a JSON-RPC `result`."""
        if rpc == "SendMessage":
            return payload_from_json(a2a_pb2.SendMessageResponse, result)
        if rpc == "DeleteTaskPushNotificationConfig" and result is None:
            return RESPONSES[rpc]()
        return message_from_json(RESPONSES[rpc], result)

    def _decode_event(self, result: Any) -> a2a_pb2.StreamResponse | UnknownEvent:
        """A stream's event from the `result` of one of its JSON-RPC responses."""
        return stream_event_from_json(result)

    async def call(
        self, rpc: str, request: Message, *, timeout: float | None, metadata: Metadata
    ) -> Message:
        """`Transport.call`: one POST; `timeout` bounds it here (the server is not told)."""
        request_id, envelope = self._envelope(rpc, request)
        response: httpx.Response = await within(
            timeout,
            self._http.post(
                self._url,
                json=envelope,
                headers=headers_of(metadata, _JSON, ("accept", "application/json")),
                extensions=self._extensions,
            ),
        )
        return self._decode_result(rpc, _result(request_id, response.status_code, response.content))

    def stream(
        self, rpc: str, request: Message, *, timeout: float | None, metadata: Metadata
    ) -> SseStream:
        """`Transport.stream`: a POST answered with Server-Sent Events, sent when the stream is
        first iterated."""
        request_id, envelope = self._envelope(rpc, request)

        def open_response() -> contextlib.AbstractAsyncContextManager[httpx.Response]:
            return self._http.stream(
                "POST",
                self._url,
                json=envelope,
                headers=headers_of(metadata, _JSON, ("accept", EVENT_STREAM)),
                extensions=self._extensions,
            )

        def decode(event: httpx_sse.ServerSentEvent) -> a2a_pb2.StreamResponse | UnknownEvent:
            value = json_body(event.data.encode())
            return self._decode_event(_unwrap(request_id, value))

        def refused(http_status: int, body: bytes) -> Exception:
            try:
                _result(request_id, http_status, body)
            except (StatusError, A2AClientError) as error:
                return error
            return InvalidAgentResponseError(f"{rpc} answered without an event stream")

        return SseStream(open_response, timeout=timeout, decode=decode, refused=refused)

    async def close(self) -> None:
        """`Transport.close`: closes the httpx client if it made it; else nothing."""
        if self._owns_http:
            await self._http.aclose()


def _result(request_id: int, http_status: int, body: bytes) -> Any:
    """The `result` of a JSON-RPC response; raises the error it (or its HTTP status) carries."""
    try:
        value = json_body(body)
    except InvalidAgentResponseError:
        if http_status != 200:
            raise http_failure(http_status, body.decode(errors="replace")) from None
        raise
    if http_status != 200 and not (isinstance(value, dict) and "error" in value):
        raise http_failure(http_status, body.decode(errors="replace"))
    return _unwrap(request_id, value)


def _unwrap(request_id: int, value: Any) -> Any:
    if not isinstance(value, dict) or value.get("jsonrpc") != "2.0":
        raise InvalidAgentResponseError("the response is not a JSON-RPC 2.0 response object")
    error = value.get("error")
    if error is not None:
        raise _error(error)
    if value.get("id") != request_id:
        raise InvalidAgentResponseError(
            f"the JSON-RPC response's id {value.get('id')!r} is not the request's {request_id}"
        )
    if "result" not in value:
        raise InvalidAgentResponseError("the JSON-RPC response has neither result nor error")
    return value["result"]


def _error(error: Any) -> Exception:
    """The exception a JSON-RPC error object stands for."""
    if not isinstance(error, dict):
        return InvalidAgentResponseError("the JSON-RPC error is not an object")
    message = str(error.get("message") or "")
    code = error.get("code")
    data = error.get("data")
    details = data if isinstance(data, list) else [data] if isinstance(data, dict) else []
    decoded: Exception | None = status.decode_json(message, details)
    if decoded is None:
        known = ERROR_BY_JSONRPC_CODE.get(code) if isinstance(code, int) else None
        if known is not None:
            decoded = known(message or None)
        else:
            decoded = RpcFailedError(grpc.StatusCode.UNKNOWN, f"JSON-RPC error {code}: {message}")
    decoded.__cause__ = ErrorResponse(JSONRPC_BINDING, error)
    return decoded
