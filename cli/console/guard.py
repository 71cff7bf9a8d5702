"""The console's safety: every request must carry the session token, come to a Host the console
listens as, and (when a browser says where it comes from) from the console's own origin.

- The token (`secrets.token_urlsafe`, 256 bits) is in the URL the command prints, as Jupyter's
  is. The first page load with `?token=` sets it as an HttpOnly, SameSite=Strict cookie and
  redirects to the same path without it, so it leaves the address bar and the history.
- Every other request needs the cookie or the `X-Console-Token` header; a request that changes
  anything (any method but GET and HEAD) needs the header, which a cross-site form or image
  cannot send, so a page elsewhere cannot act through a logged-in browser.
- Host must be one the console listens as (`127.0.0.1:PORT`, `localhost:PORT`, `[::1]:PORT`,
  or `--host`'s): a DNS-rebinding page, whose requests carry its own host name, is refused.
- An Origin, when sent, must be the console's own.
Refusals are 403 with a one-line reason. Every answer forbids framing and caching and carries a
Content-Security-Policy that allows only the console's own scripts and styles.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Iterable

from aiohttp import web

COOKIE = "a2a_console_token"
HEADER = "X-Console-Token"
QUERY = "token"

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
        "connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Guard:
    """The token and the hosts the console answers as; `middleware` enforces them."""

    def __init__(self, token: str | None = None) -> None:
        self.token = token or secrets.token_urlsafe(32)
        self._hosts: frozenset[str] = frozenset()

    def listen_as(self, hosts: Iterable[str], port: int) -> None:
        """The host names the console is reached by, once its port is known."""
        names = set()
        for host in hosts:
            bracketed = f"[{host}]" if ":" in host and not host.startswith("[") else host
            names.add(f"{bracketed}:{port}".lower())
        self._hosts = frozenset(names)

    def _valid(self, given: str | None) -> bool:
        return given is not None and secrets.compare_digest(given.encode(), self.token.encode())

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        response = await self._check(request, handler)
        response.headers.update(SECURITY_HEADERS)
        return response

    async def _check(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        host = request.headers.get("Host", "").lower()
        if host not in self._hosts:
            return _refuse(f"the console does not answer as host {host!r}")
        origin = request.headers.get("Origin")
        if origin is not None and origin.lower() not in {f"http://{h}" for h in self._hosts}:
            return _refuse(f"requests from {origin} are not allowed")
        if request.method in ("GET", "HEAD") and self._valid(request.query.get(QUERY)):
            # The token leaves the address bar: it goes on as a cookie only.
            query = {k: v for k, v in request.query.items() if k != QUERY}
            location = request.rel_url.with_query(query)
            response = web.Response(status=302, headers={"Location": str(location)})
            response.set_cookie(COOKIE, self.token, httponly=True, samesite="Strict", path="/")
            return response
        if request.method not in ("GET", "HEAD"):
            if not self._valid(request.headers.get(HEADER)):
                return _refuse(f"a request that changes anything needs the {HEADER} header")
        elif not any(
            self._valid(given)
            for given in (request.cookies.get(COOKIE), request.headers.get(HEADER))
        ):
            return _refuse(
                "no valid session token: open the URL the console printed (it carries ?token=)"
            )
        return await handler(request)


def _refuse(reason: str) -> web.Response:
    return web.json_response(
        {"error": {"category": "console", "error": "Forbidden", "message": reason}}, status=403
    )
