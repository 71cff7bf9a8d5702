"""Serves the public agent card over HTTP at /.well-known/agent-card.json, with cache validators.

Responses carry `Cache-Control: public, max-age=N`, a strong `ETag` over the body and
`Last-Modified` (when the card was loaded); a matching `If-None-Match` gets 304 Not Modified.
"""

from __future__ import annotations

import hashlib
import time
from email.utils import formatdate

from aiohttp import web

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.card import to_json

CARD_PATH = "/.well-known/agent-card.json"


class CardServer:
    """An aiohttp server with the one route. `port` is the bound port once started.

    With `reuse_port` the port is bound with SO_REUSEPORT, shared with the other workers of one
    `serve --workers N`; without, it is this server's alone.
    """

    def __init__(
        self,
        card: a2a_pb2.AgentCard,
        *,
        host: str,
        port: int,
        max_age: int = 300,
        reuse_port: bool = False,
    ) -> None:
        self.host = host
        self.port = port
        self.max_age = max_age
        self.reuse_port = reuse_port
        self._body = to_json(card).encode()
        self._etag = '"' + hashlib.sha256(self._body).hexdigest()[:32] + '"'
        self._last_modified = formatdate(time.time(), usegmt=True)
        self._runner: web.AppRunner | None = None

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

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get(CARD_PATH, self._card)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_port=self.reuse_port)
        await site.start()
        if self.port == 0:
            self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
