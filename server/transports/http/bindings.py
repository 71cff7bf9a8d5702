"""A2A over HTTP: the JSON-RPC 2.0 binding and the HTTP+JSON binding (spec §9, §11).

Both are thin adapters over the RequestHandler that gRPC uses: a request is decoded from
ProtoJSON, goes through the call gate (protocol/gate.py: the same admission limits,
authentication, version and extension rules, tracing, audit and metrics as a gRPC call) and
the same handler method; only the encoding of requests, results, streams and errors differs.

- JSON-RPC: `POST /` (the official SDK's default endpoint, so its clients find us where they
  find its servers; the card lists it). `method` is the RPC name, `params` the request message,
  `result` the response message. The two streaming methods answer with Server-Sent Events, one
  JSON-RPC response object per `data:` line.
- HTTP+JSON: the routes are the `google.api.http` annotations of `proto/a2a.proto`, read from
  the generated descriptor (each with its `/{tenant}` additional binding): path parameters and,
  for GET and DELETE, query parameters fill the request; `body: "*"` takes the JSON body.
  Streams are Server-Sent Events, one StreamResponse per event. A streaming GET route also
  answers POST, because the spec's prose says POST for `:subscribe` where the proto says GET.

Service parameters come from headers: `A2A-Version`, `A2A-Extensions` (comma-separated; the
activated ones are echoed in the response header), the headers the authenticator reads
(`Authorization`, `X-Forwarded-Client-Cert`, a registered scheme's: `Authenticator.headers`),
`traceparent` / `tracestate`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import struct
from collections.abc import (
    AsyncGenerator,
    Awaitable,
    Callable,
    Collection,
    Mapping,
    Sequence,
)
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware
from google.protobuf import json_format
from google.protobuf.message import Message

from a2a_grpc.core import status
from a2a_grpc.core.errors import (
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
    StatusError,
    UnauthenticatedError,
)
from a2a_grpc.core.event_ids import LAST_EVENT_ID_HEADER, event_id
from a2a_grpc.core.media_types import accept_ranges, matches
from a2a_grpc.core.metadata import EXTENSIONS_KEY, VERSION_KEY
from a2a_grpc.core.tracing import TRACE_HEADERS
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.ops.metrics import INVALID_REQUEST_RPC
from a2a_grpc.server.protocol.gate import NO_PARAMS, CallGate, ServiceParams
from a2a_grpc.server.protocol.handler import RequestHandler
from a2a_grpc.server.transports.http.routes import (
    HttpRoute,
    Rpc,
    http_routes,
    request_from_json,
    rest_request,
    rpcs_of,
)
from a2a_grpc.server.trust.auth import Authenticator, Presented, caller_of, set_caller

log = logging.getLogger(__name__)

JSONRPC_PATH = "/"
"""The JSON-RPC endpoint, where the official a2a-sdk serves it (its DEFAULT_RPC_URL)."""
JSON_MEDIA_TYPES = frozenset({"application/json", "application/a2a+json"})
A2A_JSON = "application/a2a+json"
PLAIN_JSON = "application/json"
EVENT_STREAM = "text/event-stream"
JSONRPC = "JSONRPC"
HTTP_JSON = "HTTP+JSON"
"""The bindings' names, as the card's `protocolBinding` states them."""
JSONRPC_TRANSPORT = "jsonrpc"
REST_TRANSPORT = "http"
"""The bindings' `transport` label in the metrics (and their spans' `rpc.system`)."""


class SlowReaderError(Exception):
    """A stream's client took in nothing for the stream write timeout."""


class HttpProblem(Exception):
    """A request refused before it reaches a method: `error` says why, `http_status` how."""

    def __init__(self, error: StatusError, http_status: int | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.http_status = error.http_status if http_status is None else http_status


def read_params(request: web.Request) -> ServiceParams:
    """The service parameters in a request's headers (no validation yet)."""
    headers = request.headers
    return ServiceParams(
        headers.get(VERSION_KEY),
        headers.getall(EXTENSIONS_KEY, []),
        [(key, headers[key]) for key in TRACE_HEADERS if key in headers],
        headers.get(LAST_EVENT_ID_HEADER),
    )


Encode = Callable[[Message], bytes]
EncodeError = Callable[[StatusError], bytes]
Parse = Callable[[], tuple[Message, list[str]]]
"""Reads a call's request: the message, and the unknown members left out of it."""


def _peer_names(request: web.Request) -> Mapping[str, Sequence[bytes]]:
    """The names of the client certificate TLS verified (mTLS), as gRPC's auth context has
    them (`x509_common_name`: the subject's CN; `peer_uri`: the URI SANs, where a SPIFFE ID
    is), so the same authenticator names the same principal on both ports."""
    transport = request.transport
    certificate = None if transport is None else transport.get_extra_info("peercert")
    if not certificate:
        return {}
    names: dict[str, list[bytes]] = {}
    common_names = [
        value.encode()
        for rdn in certificate.get("subject", ())
        for key, value in rdn
        if key == "commonName"
    ]
    if common_names:
        names["x509_common_name"] = common_names
    uris = [
        value.encode() for kind, value in certificate.get("subjectAltName", ()) if kind == "URI"
    ]
    if uris:
        names["peer_uri"] = uris
    return names


class HttpBindings:
    """Adds both bindings' routes to an aiohttp application."""

    def __init__(
        self,
        handler: RequestHandler,
        gate: CallGate,
        authenticator: Authenticator | None = None,
        *,
        served: Collection[str] = (JSONRPC, HTTP_JSON),
        write_timeout: float = 30.0,
    ) -> None:
        self.gate = gate
        self.served = tuple(binding for binding in (JSONRPC, HTTP_JSON) if binding in served)
        """The bindings whose routes are added (card names); the others answer 404."""
        self.write_timeout = write_timeout
        """Seconds one write of a stream's event may wait on the client before the stream is
        ended (`ServerConfig.stream_write_timeout`)."""
        self.authenticator = authenticator
        self._auth_headers = () if authenticator is None else tuple(authenticator.headers)
        self.rpcs = rpcs_of(handler)
        self.max_body = handler.config.max_receive_bytes
        self.strict_parsing = handler.config.strict_parsing
        """Refuse unknown request members instead of ignoring them (`--strict-parsing`)."""

    def add_routes(self, app: web.Application) -> None:
        if JSONRPC in self.served:
            app.router.add_post(JSONRPC_PATH, self.jsonrpc)
        if HTTP_JSON in self.served:
            for route in http_routes():
                app.router.add_route(route.verb, route.path, self._rest_endpoint(route))
        app.middlewares.append(json_not_found(self.served))

    # -- the shared call path -------------------------------------------------------------

    async def _authenticate(self, http_request: web.Request) -> None:
        """Names the caller of this request (the gate reads it), as gRPC's interceptor does:
        the headers the authenticator reads, the client certificate TLS verified and the
        address the connection comes from."""
        if self.authenticator is None:
            return
        headers = http_request.headers
        metadata = [(key, value) for key in self._auth_headers for value in headers.getall(key, ())]
        presented = Presented(tuple(metadata), _peer_names(http_request), http_request.remote)
        set_caller(await caller_of(self.authenticator, presented))

    async def _unary(
        self, http_request: web.Request, rpc: Rpc, parse: Parse, transport: str
    ) -> tuple[Message | StatusError, Sequence[str]]:
        """Runs one unary call: its result (or the error it answers with) and the extensions
        to echo."""
        call = self.gate.begin(rpc.name, read_params(http_request), transport)
        try:
            await self._authenticate(http_request)
            handler_call, activated = call.admit()
            request, ignored = parse()
            call.parsed(request)
            if ignored:
                call.ignored(ignored)
            result: Message = await rpc.method(request, handler_call)
        except Exception as exc:
            return call.failed(exc), ()
        except BaseException:  # the client went away (cancelled) or the server is stopping
            call.cancelled()
            raise
        call.ok(result)
        return result, activated

    async def _stream(
        self,
        http_request: web.Request,
        rpc: Rpc,
        parse: Parse,
        transport: str,
        encode: Encode,
        encode_error: EncodeError,
        error_response: Callable[[StatusError], web.Response],
    ) -> web.StreamResponse:
        """Runs one stream as Server-Sent Events. An error before the first event is a stream
        of that one error event (`encode_error`) for a caller whose Accept names
        text/event-stream, else a plain error response (`error_response`); one after it is
        the stream's last event. A client that goes away ends only its stream (aiohttp
        cancels the handler): the task goes on."""
        call = self.gate.begin(rpc.name, read_params(http_request), transport, stream=True)
        events: AsyncGenerator[a2a_pb2.StreamResponse, None] | None = None
        slow_reader = False
        try:
            try:
                await self._authenticate(http_request)
                handler_call, activated = call.admit()
                request, ignored = parse()
                call.parsed(request)
                if ignored:
                    call.ignored(ignored)
                events = rpc_events = rpc.method(request, handler_call)
                first: a2a_pb2.StreamResponse | None = await anext(rpc_events)
            except StopAsyncIteration:
                first = None
            except Exception as exc:
                error = call.failed(exc)
                if _as_event(http_request, error):
                    return _sse_error(encode_error(error))
                return error_response(error)
            if first is not None:
                call.first_event(first)
            response = web.StreamResponse(headers=_sse_headers(activated))
            await response.prepare(http_request)

            async def write(data: bytes | None) -> None:
                """Writes `data` (None: the end of the stream), within the write timeout."""
                try:
                    async with asyncio.timeout(self.write_timeout):
                        if data is None:
                            await response.write_eof()
                        else:
                            await response.write(data)
                except TimeoutError:
                    raise SlowReaderError from None

            if first is not None:
                await write(_sse(encode(first), event_id(first)))
                try:
                    async for event in rpc_events:
                        await write(_sse(encode(event), event_id(event)))
                except (ConnectionResetError, OSError, SlowReaderError):
                    raise
                except Exception as exc:
                    await write(encode_error(call.failed(exc)))
                    await write(None)
                    return response
            await write(None)
        except SlowReaderError:
            slow_reader = True
            call.cancelled()
        except BaseException:  # the client went away (cancelled) or the server is stopping
            call.cancelled()
            raise
        finally:
            if events is not None:
                await events.aclose()
        if slow_reader:
            # Closed only now that the stream's slot and subscription are given back: the
            # lost connection cancels this handler (handler_cancellation).
            log.warning(
                "%s stream cut off: the client read nothing for %g s (stream write timeout)",
                rpc.name,
                self.write_timeout,
            )
            _reset(http_request)
            return response
        call.ok()
        return response

    async def _body(self, http_request: web.Request) -> bytes:
        """The request body, refused when too large (413) or not JSON (415)."""
        if http_request.content_length is not None and http_request.content_length > self.max_body:
            raise _too_large(self.max_body)
        try:
            body = await http_request.read()
        except web.HTTPRequestEntityTooLarge:
            raise _too_large(self.max_body) from None
        if body and http_request.content_type not in JSON_MEDIA_TYPES:
            raise HttpProblem(
                InvalidRequestError(
                    f"Content-Type {http_request.content_type!r} is not supported: send "
                    "application/json or application/a2a+json"
                ),
                415,
            )
        return body

    # -- JSON-RPC 2.0 ---------------------------------------------------------------------

    def _refused(
        self,
        request_id: str | int | None,
        error: StatusError,
        *,
        code: int | None = None,
        status: int = 200,
    ) -> web.Response:
        """The answer to a request refused before it names an A2A method (unreadable body,
        not JSON-RPC, unknown method), counted in the metrics as method `INVALID_REQUEST_RPC`
        (one label for all of them, whatever the request says)."""
        self.gate.begin(INVALID_REQUEST_RPC, NO_PARAMS, JSONRPC_TRANSPORT).failed(error)
        return _jsonrpc_response(_jsonrpc_error(request_id, error, code=code), status=status)

    async def jsonrpc(self, http_request: web.Request) -> web.StreamResponse:
        try:
            body = await self._body(http_request)
        except HttpProblem as problem:
            return self._refused(None, problem.error, status=problem.http_status)
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError) as exc:
            error: StatusError = InvalidRequestError(f"parse error: {exc}")
            return self._refused(None, error, code=-32700)
        if isinstance(payload, list):
            error = InvalidRequestError("batch requests are not part of A2A: send one object")
            return self._refused(None, error)
        request_id = payload.get("id") if isinstance(payload, dict) else None
        if not isinstance(request_id, str | int | None) or isinstance(request_id, bool):
            request_id = None
            payload = None  # an invalid id makes the whole request invalid
        if not isinstance(payload, dict) or payload.get("jsonrpc") != "2.0":
            error = InvalidRequestError(
                'invalid JSON-RPC request: expected {"jsonrpc": "2.0", "method": ..., '
                '"params": {...}, "id": ...}'
            )
            return self._refused(request_id, error)
        method = payload.get("method")
        if not isinstance(method, str):
            error = InvalidRequestError("invalid JSON-RPC request: method must be a string")
            return self._refused(request_id, error)
        rpc = self.rpcs.get(method)
        if rpc is None:
            error = MethodNotFoundError(
                f"method {method!r} not found: A2A 1.0 methods are {', '.join(self.rpcs)}"
            )
            return self._refused(request_id, error)
        # No params, or null (a2a-go sends null for GetExtendedAgentCard): the empty request,
        # which the handler then checks as any other (CancelTask without an id is refused).
        params_value = payload.get("params")
        if params_value is None:
            params_value = {}
        notification = "id" not in payload
        strict = self.strict_parsing

        def parse() -> tuple[Message, list[str]]:
            if not isinstance(params_value, dict):
                raise InvalidParamsError("params must be a JSON object (the request message)")
            return request_from_json(params_value, rpc.request_class, strict=strict)

        if rpc.streaming:
            if notification:
                return web.Response(status=204)

            def encode(event: Message) -> bytes:
                return _dumps({"jsonrpc": "2.0", "id": request_id, "result": _to_json(event)})

            def encode_error(error: StatusError) -> bytes:
                return _sse(_dumps(_jsonrpc_error(request_id, error)))

            def error_response(error: StatusError) -> web.Response:
                return _jsonrpc_response(_jsonrpc_error(request_id, error), error=error)

            return await self._stream(
                http_request,
                rpc,
                parse,
                JSONRPC_TRANSPORT,
                encode,
                encode_error,
                error_response,
            )
        result, activated = await self._unary(http_request, rpc, parse, JSONRPC_TRANSPORT)
        if notification:
            return web.Response(status=204)
        if isinstance(result, StatusError):
            return _jsonrpc_response(_jsonrpc_error(request_id, result), error=result)
        return _jsonrpc_response(
            {"jsonrpc": "2.0", "id": request_id, "result": _to_json(result)},
            extensions=activated,
        )

    # -- HTTP+JSON ------------------------------------------------------------------------

    def _rest_endpoint(
        self, route: HttpRoute
    ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        rpc = self.rpcs[route.rpc]

        async def endpoint(http_request: web.Request) -> web.StreamResponse:
            media_type = json_media_type(http_request)
            try:
                body = await self._body(http_request)
            except HttpProblem as problem:
                if rpc.streaming and _as_event(http_request, problem.error):
                    return _sse_error(_rest_error_event(problem.error, problem.http_status))
                return _rest_error(problem.error, problem.http_status, media_type=media_type)
            strict = self.strict_parsing

            def parse() -> tuple[Message, list[str]]:
                return rest_request(route, rpc.request_class, http_request, body, strict=strict)

            def error_response(error: StatusError) -> web.Response:
                return _rest_error(error, media_type=media_type)

            if rpc.streaming:
                return await self._stream(
                    http_request,
                    rpc,
                    parse,
                    REST_TRANSPORT,
                    lambda event: _dumps(_to_json(event)),
                    _rest_error_event,
                    error_response,
                )
            result, activated = await self._unary(http_request, rpc, parse, REST_TRANSPORT)
            if isinstance(result, StatusError):
                return error_response(result)
            return web.Response(
                body=_dumps(_to_json(result)),
                content_type=media_type,
                headers=_extension_headers(activated),
            )

        return endpoint


def json_not_found(served: Collection[str]) -> Middleware:
    """A middleware that answers unknown paths and methods, and the routes of a binding not in
    `served`, with an AIP-193 error instead of aiohttp's text."""
    where = {
        JSONRPC: f"JSON-RPC is served at POST {JSONRPC_PATH}",
        HTTP_JSON: "HTTP+JSON routes are served",
    }
    served_text = "; ".join(where[binding] for binding in served) or "no A2A binding is served"

    @web.middleware
    async def middleware(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPNotFound:
            return _rest_error(
                MethodNotFoundError(
                    f"no A2A route is {request.method} {request.path} on this server "
                    f"({served_text} over HTTP)"
                ),
                media_type=json_media_type(request),
            )
        except web.HTTPMethodNotAllowed as exc:
            return _rest_error(
                MethodNotFoundError(
                    f"{request.method} is not allowed on {request.path}; allowed: "
                    f"{', '.join(sorted(exc.allowed_methods))}"
                ),
                405,
                media_type=json_media_type(request),
            )

    return middleware


HEADER_FIELD_LIMIT = 8190
"""The longest header field (name, `: ` and value) the HTTP port takes, in bytes: aiohttp's
own default line limit, kept as the documented bound (docs/http.md)."""
HEADER_READ_LIMIT = 65536
"""The longest header field aiohttp reads at all. Fields between `HEADER_FIELD_LIMIT` and this
get a readable 431 from `header_limit`; longer ones aiohttp refuses itself (400, one log line)."""


def header_limit(limit: int = HEADER_FIELD_LIMIT) -> Middleware:
    """A middleware that answers a request with a header field over `limit` bytes 431 (Request
    Header Fields Too Large, RFC 6585), in the form of the binding it came to (a JSON-RPC error
    at the JSON-RPC path, AIP-193 elsewhere), before anything else reads it; one log line."""

    @web.middleware
    async def middleware(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        for name, value in request.raw_headers:
            size = len(name) + 2 + len(value)
            if size > limit:
                break
        else:
            return await handler(request)
        header = name.decode("latin-1")[:40]
        log.warning(
            "refused an HTTP request from %s: header %s is %d bytes, over %d (answered 431)",
            request.remote or "an unknown address",
            header,
            size,
            limit,
        )
        error = InvalidRequestError(
            f"header {header} is {size} bytes; this server takes header fields of at most "
            f"{limit} bytes (name, ': ' and value)"
        )
        if request.method == "POST" and request.path == JSONRPC_PATH:
            return _jsonrpc_response(_jsonrpc_error(None, error), status=431)
        return _rest_error(error, 431, media_type=json_media_type(request))

    return middleware


def _reset(http_request: web.Request) -> None:
    """Closes the request's connection at once with a reset (RST). A plain close would queue
    its FIN behind the bytes the client never read, so the connection (and its kernel buffers)
    would outlive the stream for minutes."""
    transport = http_request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


# -- encoding -----------------------------------------------------------------------------


_PAGES = (a2a_pb2.ListTasksResponse, a2a_pb2.ListTaskPushNotificationConfigsResponse)


def _to_json(message: Message) -> dict[str, Any]:
    value = json_format.MessageToDict(message)
    if isinstance(message, _PAGES):
        # A page states all of its own fields, defaults included (spec §3.1.4: nextPageToken is
        # always present, "" on the last page; totalSize 0 and tasks [] are answers too), as the
        # official SDK does; the tasks in it keep ProtoJSON's usual omissions.
        full = json_format.MessageToDict(message, always_print_fields_with_no_presence=True)
        for key, default in full.items():
            value.setdefault(key, default)
    return value


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _sse(data: bytes, event_id: str | None = None) -> bytes:
    """One SSE event; with its `id:` (core/event_ids.py), which a reconnecting EventSource
    sends back as Last-Event-ID."""
    if event_id is None:
        return b"data: " + data + b"\n\n"
    return b"id: " + event_id.encode() + b"\ndata: " + data + b"\n\n"


def _sse_headers(extensions: Sequence[str]) -> dict[str, str]:
    return {
        "Content-Type": EVENT_STREAM,
        "Cache-Control": "no-cache",
        "X-Accel-Buffering": "no",
        **_extension_headers(extensions),
    }


def _extension_headers(extensions: Sequence[str]) -> dict[str, str]:
    return {"A2A-Extensions": ",".join(extensions)} if extensions else {}


def _jsonrpc_error(
    request_id: str | int | None, error: StatusError, *, code: int | None = None
) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {
            "code": error.jsonrpc_code if code is None else code,
            "message": status.message_of(error),
            "data": status.details_json(error),
        },
    }


def _auth_headers(error: StatusError | None) -> dict[str, str]:
    return {"WWW-Authenticate": "Bearer"} if isinstance(error, UnauthenticatedError) else {}


def _jsonrpc_response(
    value: Mapping[str, Any],
    *,
    status: int = 200,
    error: StatusError | None = None,
    extensions: Sequence[str] = (),
) -> web.Response:
    """A JSON-RPC response: HTTP 200 whatever the outcome (the error is in the body), except a
    refused caller (401, with a challenge) and refusals before JSON-RPC (413, 415)."""
    if isinstance(error, UnauthenticatedError):
        status = 401
    return web.Response(
        body=_dumps(value),
        status=status,
        content_type="application/json",
        headers={**_auth_headers(error), **_extension_headers(extensions)},
    )


def _aip193(error: StatusError, http_status: int | None = None) -> dict[str, Any]:
    return {
        "error": {
            "code": error.http_status if http_status is None else http_status,
            "status": error.code.name,
            "message": status.message_of(error),
            "details": status.details_json(error),
        }
    }


def _rest_error(
    error: StatusError, http_status: int | None = None, *, media_type: str = A2A_JSON
) -> web.Response:
    code = error.http_status if http_status is None else http_status
    return web.Response(
        body=_dumps(_aip193(error, code)),
        status=code,
        content_type=media_type,
        headers=_auth_headers(error),
    )


def _rest_error_event(error: StatusError, http_status: int | None = None) -> bytes:
    """An HTTP+JSON stream's error event: `event: error`, its data the AIP-193 body."""
    return b"event: error\n" + _sse(_dumps(_aip193(error, http_status)))


def json_media_type(http_request: web.Request) -> str:
    """The media type of an HTTP+JSON answer (results and errors): `application/a2a+json`, as
    spec §11.1 says, unless the request's Accept admits `application/json` and not that (a2a-go
    v2 reads error bodies only as application/json)."""
    accept = http_request.headers.get("Accept")
    if not accept:
        return A2A_JSON
    ranges = accept_ranges(accept)
    if matches(A2A_JSON, ranges) or not matches(PLAIN_JSON, ranges):
        return A2A_JSON
    return PLAIN_JSON


def _as_event(http_request: web.Request, error: StatusError) -> bool:
    """Whether a stream's error before its first event is answered as a stream of that one
    event: the request's Accept names text/event-stream (a wildcard is not enough: curl's
    `*/*` keeps the plain error), and the error is not a refused caller, whose 401 and its
    `WWW-Authenticate` challenge are HTTP's own answer."""
    return not isinstance(error, UnauthenticatedError) and EVENT_STREAM in accept_ranges(
        http_request.headers.get("Accept")
    )


def _sse_error(event: bytes) -> web.Response:
    """A stream (HTTP 200, text/event-stream) of one error event, then its end."""
    return web.Response(body=event, headers=_sse_headers(()))


def _too_large(limit: int) -> HttpProblem:
    return HttpProblem(
        InvalidRequestError(f"the request body is larger than this server's limit ({limit} bytes)"),
        413,
    )
