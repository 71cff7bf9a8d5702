"""What the two HTTP transports (JSON-RPC, HTTP+JSON) share: the httpx client, TLS from
`TlsConfig`, headers, deadlines, Server-Sent Events (httpx-sse), and could-not-talk mapping.

One `httpx.AsyncClient` pools connections for all calls of a transport (and may be shared by
several: pass it in, and its owner closes it). HTTP/2 is offered (ALPN, over TLS) when the `h2`
package is installed (`pip install httpx[http2]`); HTTP/1.1 otherwise.
"""

# A call's `timeout` is enforced here with asyncio.timeout around the HTTP exchange.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import base64
import contextlib
import importlib.util
import json
import os
import ssl
import tempfile
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import httpx
import httpx_sse

from a2a_grpc.client.channel import TlsConfig
from a2a_grpc.client.errors import (
    A2AClientError,
    A2ATransportError,
    DeadlineExceededError,
    RpcFailedError,
    UnavailableError,
)
from a2a_grpc.client.events import UnknownEvent
from a2a_grpc.client.transports.base import Metadata
from a2a_grpc.core.errors import InvalidAgentResponseError
from a2a_grpc.core.event_ids import LAST_EVENT_ID_HEADER, LAST_EVENT_ID_KEY
from a2a_grpc.generated import a2a_pb2

EVENT_STREAM = "text/event-stream"
CONNECT_TIMEOUT_S = 20.0
"""Seconds a new connection may take when the call itself is unbounded."""
HTTP2 = importlib.util.find_spec("h2") is not None
"""Whether HTTP/2 is offered (the `h2` package is installed)."""

_GRPC_CODE_OF_HTTP: dict[int, grpc.StatusCode] = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    401: grpc.StatusCode.UNAUTHENTICATED,
    403: grpc.StatusCode.PERMISSION_DENIED,
    404: grpc.StatusCode.NOT_FOUND,
    405: grpc.StatusCode.UNIMPLEMENTED,
    409: grpc.StatusCode.ABORTED,
    413: grpc.StatusCode.RESOURCE_EXHAUSTED,
    415: grpc.StatusCode.INVALID_ARGUMENT,
    429: grpc.StatusCode.RESOURCE_EXHAUSTED,
    499: grpc.StatusCode.CANCELLED,
    500: grpc.StatusCode.INTERNAL,
    501: grpc.StatusCode.UNIMPLEMENTED,
}
"""The usual HTTP → gRPC code mapping (google.rpc), for an HTTP error without an A2A body."""
_GATEWAY_ERRORS: dict[int, type[A2ATransportError]] = {
    502: UnavailableError,
    503: UnavailableError,
    504: DeadlineExceededError,
}
"""A proxy's or load balancer's answers when the agent could not be reached."""


def ssl_context(tls: TlsConfig) -> ssl.SSLContext:
    """An SSL context verifying the server with `tls.root_certificates` (the system trust store
    when None), presenting the client certificate when one is set; ValueError for a certificate
    without its key."""
    if (tls.client_certificate is None) != (tls.client_key is None):
        raise ValueError("a client certificate needs its key, and a key its certificate")
    roots = tls.root_certificates
    context = ssl.create_default_context(cadata=roots.decode() if roots is not None else None)
    if tls.client_certificate is not None and tls.client_key is not None:
        # The ssl module loads a certificate chain from files only: a private directory, gone
        # once loaded.
        with tempfile.TemporaryDirectory() as directory:
            cert = os.path.join(directory, "cert.pem")
            key = os.path.join(directory, "key.pem")
            for path, data in ((cert, tls.client_certificate), (key, tls.client_key)):
                with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as file:
                    file.write(data)
            context.load_cert_chain(cert, key)
    return context


def create_http_client(tls: TlsConfig | None = None) -> httpx.AsyncClient:
    """A pooled `httpx.AsyncClient` for A2A calls and card fetches: TLS per `tls` (https URLs
    without it are verified against the system trust store), no redirects followed, and no read
    timeout of its own (each call's timeout is its deadline; streams may be quiet for long).
    A `tls` read by `TlsConfig.from_files` is followed: see `ReloadingTlsTransport`."""
    if tls is not None and tls.paths is not None:
        return httpx.AsyncClient(
            transport=ReloadingTlsTransport(tls),
            timeout=httpx.Timeout(None, connect=CONNECT_TIMEOUT_S),
            follow_redirects=False,
        )
    verify: ssl.SSLContext | bool = ssl_context(tls) if tls is not None else True
    return httpx.AsyncClient(
        verify=verify,
        http2=HTTP2,
        timeout=httpx.Timeout(None, connect=CONNECT_TIMEOUT_S),
        follow_redirects=False,
    )


class ReloadingTlsTransport(httpx.AsyncBaseTransport):
    """httpx's connection pool, made again when the TLS files change (`TlsConfig.current`).

    An `ssl.SSLContext` presents the client certificate in a connection's handshake, and a pool
    keeps its connections alive; so before each request the files are checked (one `os.stat`
    each), and once they changed and hold a usable certificate and key, a new pool with a new
    context takes every later request: its connections present the new certificate. The old
    pool is drained: responses still being read (streams included) finish on it, and it is
    closed when the last one is.
    """

    def __init__(self, tls: TlsConfig) -> None:
        self._tls = tls
        self._pool = self._open(tls)
        self._in_flight: dict[httpx.AsyncHTTPTransport, int] = {self._pool: 0}
        self._closed = False
        self.generation = 0
        """How many times the pool was replaced after its files changed."""

    @staticmethod
    def _open(tls: TlsConfig) -> httpx.AsyncHTTPTransport:
        return httpx.AsyncHTTPTransport(verify=ssl_context(tls), http2=HTTP2)

    async def _current(self) -> httpx.AsyncHTTPTransport:
        if self._closed:
            return self._pool
        tls = self._tls.current()
        if tls == self._tls:
            self._tls = tls  # perhaps with a newer signature
        else:
            try:
                pool = self._open(tls)
            except (OSError, ValueError):  # ssl refused what the checks let through: keep ours
                return self._pool
            old, self._pool, self._tls = self._pool, pool, tls
            self._in_flight[pool] = 0
            self.generation += 1
            if self._in_flight[old] == 0:
                await self._retire(old)
        return self._pool

    async def _retire(self, pool: httpx.AsyncHTTPTransport) -> None:
        del self._in_flight[pool]
        await pool.aclose()

    async def _finished(self, pool: httpx.AsyncHTTPTransport) -> None:
        if self._closed:
            return
        self._in_flight[pool] -= 1
        if self._in_flight[pool] == 0 and pool is not self._pool:
            await self._retire(pool)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        pool = await self._current()
        self._in_flight[pool] = self._in_flight.get(pool, 0) + 1
        try:
            response = await pool.handle_async_request(request)
        except BaseException:
            await self._finished(pool)
            raise
        response.stream = _TrackedStream(response.stream, lambda: self._finished(pool))
        return response

    async def aclose(self) -> None:
        self._closed = True
        for pool in list(self._in_flight):
            await pool.aclose()


class _TrackedStream(httpx.AsyncByteStream):
    """A response body that tells its pool when it is closed (once)."""

    def __init__(self, stream: Any, done: Callable[[], Awaitable[None]]) -> None:
        self._stream = stream
        self._done: Callable[[], Awaitable[None]] | None = done

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            done, self._done = self._done, None
            if done is not None:
                await done()


def headers_of(metadata: Metadata, *extra: tuple[str, str]) -> list[tuple[str, str]]:
    """A call's metadata as HTTP headers (the same names; HTTP header names are
    case-insensitive), with `extra` (Content-Type, Accept). A binary value is sent base64
    encoded, as gRPC sends a `-bin` entry; the event id a stream resumes after
    (`a2a-last-event-id`) as SSE's own `Last-Event-ID`."""
    return [
        *extra,
        *(
            (
                LAST_EVENT_ID_HEADER if key == LAST_EVENT_ID_KEY else key,
                value if isinstance(value, str) else base64.b64encode(value).decode(),
            )
            for key, value in metadata
        ),
    ]


def request_extensions(tls: TlsConfig | None) -> dict[str, Any]:
    """httpx request extensions: the TLS name to check the certificate against, if overridden."""
    if tls is not None and tls.server_name_override:
        return {"sni_hostname": tls.server_name_override}
    return {}


def could_not_talk(error: httpx.HTTPError) -> A2ATransportError:
    """The transport error an httpx failure stands for (`error` as its cause)."""
    mapped: A2ATransportError
    try:
        where = f" ({error.request.method} {error.request.url})"
    except RuntimeError:  # an error raised before any request was made
        where = ""
    if isinstance(error, httpx.TimeoutException):
        mapped = DeadlineExceededError(f"timed out: {error or type(error).__name__}{where}")
    else:
        mapped = UnavailableError(f"{type(error).__name__}: {error or 'no details'}{where}")
    mapped.__cause__ = error
    return mapped


def http_failure(status: int, text: str) -> A2AClientError:
    """The error for an HTTP error status whose body carries no A2A error: a gateway's 502,
    503, 504 is could-not-talk; anything else an RpcFailedError with the gRPC code it maps to."""
    transport = _GATEWAY_ERRORS.get(status)
    details = f"HTTP {status}" + (f": {text[:200]}" if text else "")
    if transport is not None:
        return transport(details)
    return RpcFailedError(_GRPC_CODE_OF_HTTP.get(status, grpc.StatusCode.UNKNOWN), details)


def grpc_code_named(name: object, status: int) -> grpc.StatusCode:
    """The gRPC code an AIP-193 `status` names, else the one the HTTP status maps to."""
    if isinstance(name, str) and name in grpc.StatusCode.__members__:
        return grpc.StatusCode[name]
    return _GRPC_CODE_OF_HTTP.get(status, grpc.StatusCode.UNKNOWN)


def json_body(data: bytes) -> Any:
    """The JSON value of a response body; InvalidAgentResponseError when it is not JSON."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as error:
        raise InvalidAgentResponseError(f"the response is not JSON: {error}") from error


async def within(timeout: float | None, call: Awaitable[Any]) -> Any:
    """`await call`, bounded by `timeout`; DeadlineExceededError when it runs out, httpx
    failures as could-not-talk."""
    try:
        async with asyncio.timeout(timeout):
            return await call
    except TimeoutError as error:
        raise DeadlineExceededError(f"the deadline ({timeout:g} s) expired") from error
    except httpx.HTTPError as error:
        raise could_not_talk(error) from error


Decode = Callable[[httpx_sse.ServerSentEvent], a2a_pb2.StreamResponse | UnknownEvent]
"""One SSE event → its StreamResponse (or an event of a kind this client does not know), or
raises the error the event carries."""
Refused = Callable[[int, bytes], Exception]
"""A response that is not an event stream (status, body) → the error it stands for."""


class SseStream:
    """One streaming call over Server-Sent Events, opened when first iterated.

    The whole stream (connect, headers, every event) is bounded by the call's timeout, fixed
    when the call is made. A response that is not `text/event-stream` is an error answer
    (`refused` reads it); `decode` turns each event into a StreamResponse.
    """

    def __init__(
        self,
        open_response: Callable[[], contextlib.AbstractAsyncContextManager[httpx.Response]],
        *,
        timeout: float | None,
        decode: Decode,
        refused: Refused,
    ) -> None:
        self._open = open_response
        self._deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
        self._timeout = timeout
        self._decode = decode
        self._refused = refused
        self._events = self._read()

    def __aiter__(self) -> AsyncGenerator[a2a_pb2.StreamResponse | UnknownEvent, None]:
        return self._events

    async def aclose(self) -> None:
        await self._events.aclose()

    async def _step(self, call: Awaitable[Any]) -> Any:
        try:
            async with asyncio.timeout_at(self._deadline):
                return await call
        except TimeoutError as error:
            raise DeadlineExceededError(
                f"the stream's deadline ({self._timeout:g} s) expired"
            ) from error
        except httpx.HTTPError as error:
            raise could_not_talk(error) from error

    async def _read(self) -> AsyncGenerator[a2a_pb2.StreamResponse | UnknownEvent, None]:
        async with contextlib.AsyncExitStack() as stack:
            response: httpx.Response = await self._step(stack.enter_async_context(self._open()))
            media_type = response.headers.get("content-type", "").partition(";")[0].strip()
            if media_type != EVENT_STREAM:
                body: bytes = await self._step(response.aread())
                raise self._refused(response.status_code, body)
            events = httpx_sse.EventSource(response).aiter_sse()
            while True:
                try:
                    event = await self._step(anext(events))
                except StopAsyncIteration:
                    return
                except httpx_sse.SSEError as error:
                    raise InvalidAgentResponseError(f"bad event stream: {error}") from error
                if not event.data:
                    continue  # a comment or keep-alive
                yield self._decode(event)
