"""A real HTTP webhook receiver on loopback that records what it is sent."""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass, field

from aiohttp import web


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """Answers `failures` requests with HTTP 500 first, and can be held shut with `gate`.

    `host` and `port` say where to listen (any free port by default), `tls` makes it https;
    `in_flight` and `peak_in_flight` count the requests being answered at once.
    """

    failures: int = 0
    always_fail: bool = False
    received: list[Received] = field(default_factory=list)
    attempts: int = 0
    gate: asyncio.Event | None = None
    host: str = "127.0.0.1"
    port: int = 0
    tls: ssl.SSLContext | None = None
    in_flight: int = 0
    peak_in_flight: int = 0
    _runner: web.AppRunner | None = None
    arrived: asyncio.Condition = field(default_factory=asyncio.Condition)

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}/hook"

    async def _handle(self, request: web.Request) -> web.Response:
        self.attempts += 1
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            async with self.arrived:
                self.arrived.notify_all()
            if self.gate is not None:
                await self.gate.wait()
            if self.always_fail or self.failures > 0:
                self.failures -= 1
                return web.Response(status=500)
            self.received.append(Received(dict(request.headers), await request.read()))
            async with self.arrived:
                self.arrived.notify_all()
            return web.Response(status=204)
        finally:
            self.in_flight -= 1

    async def start(self) -> Receiver:
        app = web.Application()
        app.router.add_post("/hook", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self.tls)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        return self

    async def wait_for(self, count: int) -> list[Received]:
        """The first `count` deliveries, waiting up to 10 s for them."""
        async with asyncio.timeout(10), self.arrived:
            await self.arrived.wait_for(lambda: len(self.received) >= count)
        return self.received

    async def wait_for_attempts(self, count: int) -> None:
        """Returns once `count` requests have arrived (answered or not), waiting up to 10 s."""
        async with asyncio.timeout(10), self.arrived:
            await self.arrived.wait_for(lambda: self.attempts >= count)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
