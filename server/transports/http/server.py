"""The HTTP port: the public agent card at /.well-known/agent-card.json, with cache validators,
the probes (/healthz, /readyz), and, given them, the HTTP bindings and /metrics.

Card responses carry `Cache-Control: public, max-age=N`, a strong `ETag` over the body and
`Last-Modified` (when the card was loaded); a matching `If-None-Match` gets 304 Not Modified.
"""

from __future__ import annotations

import hashlib
import logging
import socket
import ssl
import time
from email.utils import formatdate
from typing import Protocol

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong

from a2a_grpc.core.jose import PrivateKey
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.card import to_json
from a2a_grpc.server.ops.metrics import CONTENT_TYPE, METRICS_PATH, ServerMetrics
from a2a_grpc.server.transports.http.bindings import (
    HEADER_READ_LIMIT,
    HttpBindings,
    header_limit,
)

log = logging.getLogger(__name__)

CARD_PATH = "/.well-known/agent-card.json"
LIVE_PATH = "/healthz"
"""200 while the process serves HTTP at all (a liveness probe): also while it drains."""
READY_PATH = "/readyz"
"""200 while the server takes new work; 503 while it drains, or while a component it needs
fails (the task store, a fail-closed audit trail), naming why (a readiness probe)."""


class _RequestLog(logging.LoggerAdapter[logging.Logger]):
    """aiohttp's logger for the HTTP port (its RequestHandler's `logger`). A request aiohttp
    cannot read (a header over `HEADER_READ_LIMIT` bytes, a request line over 8190, a malformed
    request line) is the caller's doing, from a caller not yet authenticated: aiohttp answers it
    400 and closes the connection, and the server logs one line, with no traceback. Anything
    else is logged as aiohttp logs it."""

    def exception(self, msg: object, *args: object, exc_info: object = True, **kw: object) -> None:
        if isinstance(exc_info, HttpProcessingError):
            if isinstance(exc_info, LineTooLong):
                why = f"a header or request line over {exc_info.args[1]} bytes"
            else:
                why = f"{type(exc_info).__name__}, {str(exc_info.message)[:80]!r}"
            caller = args[0] if args else "an unknown address"  # aiohttp's: request.remote
            self.logger.warning(
                "refused an HTTP request from %s that cannot be read: %s (answered 400)",
                caller,
                why,
            )
            return
        self.logger.exception(msg, *args, exc_info=exc_info, **kw)  # type: ignore[arg-type]


class Readiness(Protocol):
    """What the probes and the drain read (`app.HealthBoard`)."""

    @property
    def draining(self) -> bool:
        """True once the server is stopping: its responses then close their connections."""
        ...

    def unready_reason(self) -> str | None:
        """Why the server takes no new work now (None: it does)."""
        ...


class HttpServer:
    """An aiohttp server for the card and, given `bindings`, the JSON-RPC and HTTP+JSON
    bindings of A2A, and given `metrics`, /metrics. `port` is the bound port once bound.

    With `reuse_port` the port is bound with SO_REUSEPORT, shared with the other workers of one
    `serve --workers N`; without, it is this server's alone. `bind` takes the port first (so
    the card can name it, port 0 included); `start` serves on it.
    """

    def __init__(
        self,
        card: a2a_pb2.AgentCard | None,
        *,
        host: str,
        port: int,
        max_age: int = 300,
        reuse_port: bool = False,
        max_body: int = 1024**2,
        shutdown_timeout: float = 10.0,
        ssl_context: ssl.SSLContext | None = None,
        readiness: Readiness | None = None,
    ) -> None:
        """With `ssl_context` the port serves HTTPS only (the server's TLS certificate). Without
        `readiness`, /readyz always says ready and nothing drains."""
        self.ssl_context = ssl_context
        self.readiness = readiness
        self.host = host
        self.port = port
        self.max_age = max_age
        self.reuse_port = reuse_port
        self.max_body = max_body
        self.shutdown_timeout = shutdown_timeout
        """How long `stop` lets open requests (streams included) finish before cancelling them."""
        self._body = b""
        self._etag = ""
        self._last_modified = ""
        if card is not None:
            self.set_card(card)
        self._socket: socket.socket | None = None
        self._runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        """`http(s)://host:port`, the base of the HTTP+JSON routes."""
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 literal
        scheme = "http" if self.ssl_context is None else "https"
        return f"{scheme}://{host}:{self.port}"

    def set_card(
        self,
        card: a2a_pb2.AgentCard,
        *,
        v03: bool = False,
        signer: tuple[PrivateKey, str] | None = None,
    ) -> None:
        """Serves `card` from now on; with `v03`, with A2A 0.3's fields too, and then with
        `signer` (the key and kid `card` is signed with) signed as served too (see `to_json`)."""
        self._body = to_json(card, v03=v03, signer=signer).encode()
        self._etag = '"' + hashlib.sha256(self._body).hexdigest()[:32] + '"'
        self._last_modified = formatdate(time.time(), usegmt=True)

    def _headers(self) -> dict[str, str]:
        return {
            "Cache-Control": f"public, max-age={self.max_age}",
            "ETag": self._etag,
            "Last-Modified": self._last_modified,
        }

    async def _card(self, request: web.Request) -> web.Response:
        if_none_match = request.headers.get("If-None-Match", "")
        candidates = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
        if self._etag in candidates or "*" in candidates:
            return web.Response(status=304, headers=self._headers())
        return web.Response(
            body=self._body, content_type="application/json", headers=self._headers()
        )

    async def _live(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "live"})

    async def _ready(self, request: web.Request) -> web.Response:
        reason = None if self.readiness is None else self.readiness.unready_reason()
        if reason is None:
            return web.json_response({"status": "ready"})
        return web.json_response({"status": "unready", "reason": reason}, status=503)

    async def _close_while_draining(
        self, request: web.Request, response: web.StreamResponse
    ) -> None:
        # While the server drains, each response closes its connection (`Connection: close`),
        # so keep-alive clients reconnect through their balancer rather than stay here.
        if self.readiness is not None and self.readiness.draining:
            response.force_close()  # the hook runs after the headers are made: say it too
            response.headers["Connection"] = "close"

    def bind(self) -> None:
        """Takes the port (OSError when it cannot); `port` is then the bound one."""
        if self._socket is not None:
            return
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if self.reuse_port:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((self.host, self.port))
            sock.listen(128)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self._socket = sock
        self.port = int(sock.getsockname()[1])

    async def start(
        self, bindings: HttpBindings | None = None, metrics: ServerMetrics | None = None
    ) -> None:
        """Serves the card, and `bindings` and `metrics` (at /metrics) when given."""
        self.bind()
        assert self._socket is not None
        app = web.Application(client_max_size=self.max_body, middlewares=[header_limit()])
        app.router.add_get(CARD_PATH, self._card)
        app.router.add_get(LIVE_PATH, self._live)
        app.router.add_get(READY_PATH, self._ready)
        app.on_response_prepare.append(self._close_while_draining)
        if metrics is not None:

            async def scrape(request: web.Request) -> web.Response:
                body = await metrics.exposition()
                return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})

            app.router.add_get(METRICS_PATH, scrape)
        if bindings is not None:
            bindings.add_routes(app)
        # handler_cancellation: a client that goes away cancels its call, as over gRPC.
        self._runner = web.AppRunner(
            app,
            access_log=None,
            logger=_RequestLog(log, {}),
            handler_cancellation=True,
            # aiohttp reads header fields up to this, so that header_limit answers the longer
            # ones with a readable 431 rather than aiohttp's plain 400.
            max_field_size=HEADER_READ_LIMIT,
            shutdown_timeout=self.shutdown_timeout,
        )
        await self._runner.setup()
        site = web.SockSite(self._runner, self._socket, ssl_context=self.ssl_context)
        await site.start()

    async def close(self) -> None:
        """Stops taking connections: the port closes, idle keep-alive connections are closed,
        and busy ones close once their response is done. Open requests (streams included) go
        on until `stop`."""
        if self._runner is None:
            return
        for site in list(self._runner.sites):
            await site.stop()
        if self._runner.server is not None:
            self._runner.server.pre_shutdown()

    async def stop(self, grace: float | None = None) -> None:
        """`close`, then lets open requests finish within `grace` seconds (default:
        `shutdown_timeout`) before cancelling them."""
        if self._runner is not None:
            await self.close()
            if self._runner.server is not None:
                wait = self.shutdown_timeout if grace is None else grace
                await self._runner.server.shutdown(wait)
            await self._runner.cleanup()
            self._runner = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None
