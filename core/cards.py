"""Fetching agent cards over HTTP(S): the card URL, ProtoJSON parsing, and a cache that honours
`Cache-Control: max-age` and `ETag` (If-None-Match → 304).

Shared by the client's `CardResolver` and by the server, which verifies signed messages against
the keys their sender's card publishes. Contract of `CardCache.fetch`:
- one fetch takes at most `timeout_s` seconds in all (connect, headers and body), and a body over
  `MAX_CARD_BYTES` is refused; redirects are not followed (a card is fetched from the URL named);
- concurrent fetches of one URL share one HTTP request;
- a fresh entry (within its max-age) is served from memory; a stale one is revalidated with its
  ETag; `revalidate=True` revalidates a fresh one too; `no-store` keeps nothing;
- the request sends `A2A-Version: 1.0`, as every A2A request does;
- with a `keyset`, every card fetched must carry a signature that verifies with it (A2A 1.0
  §8.4), checked before caching, so an unverified card is never served.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import httpx
from google.protobuf import json_format

from a2a_grpc.core import v03_agents
from a2a_grpc.core.errors import InvalidAgentResponseError
from a2a_grpc.core.jose import KeySet, SignatureError
from a2a_grpc.core.metadata import PROTOCOL_VERSION
from a2a_grpc.core.signing import verify_card
from a2a_grpc.generated import a2a_pb2

__all__ = [
    "DEFAULT_CARD_TIMEOUT_S",
    "MAX_CARD_BYTES",
    "WELL_KNOWN_PATH",
    "CardCache",
    "CardFetchError",
    "CardRejectedError",
    "CardTimeoutError",
    "CardUnreachableError",
    "FetchedCard",
    "bounded_get",
    "card_url",
    "max_age",
    "parse_card",
]

WELL_KNOWN_PATH = "/.well-known/agent-card.json"
DEFAULT_CARD_TIMEOUT_S = 10.0
"""Seconds one agent-card fetch may take unless the caller gives a timeout."""
MAX_CARD_BYTES = 1024 * 1024
"""Largest card body accepted."""

_MAX_AGE = re.compile(r"(?:^|,)\s*max-age\s*=\s*\"?(\d+)\"?\s*(?:,|$)", re.IGNORECASE)
_DEFAULT_PORTS = {"http": 80, "https": 443}


class CardFetchError(Exception):
    """A card could not be fetched or used; `url` is the card's URL."""

    def __init__(self, message: str, *, url: str) -> None:
        self.url = url
        super().__init__(message)


class CardTimeoutError(CardFetchError):
    """The fetch took longer than its timeout."""


class CardUnreachableError(CardFetchError):
    """The HTTP request could not be made (refused, reset, DNS, TLS...)."""


class CardRejectedError(CardFetchError):
    """The server answered with an error status (`status`), a body over `MAX_CARD_BYTES`, or a
    card whose signature does not verify (`status` None; the SignatureError is the cause)."""

    def __init__(self, message: str, *, url: str, status: int | None = None) -> None:
        self.status = status
        super().__init__(message, url=url)


def card_url(target: str) -> str:
    """The card URL for an http(s) `target`, normalized: a bare origin gets the well-known path
    appended; scheme and host are lower-cased and a default port (80, 443) is dropped.

    Raises ValueError for anything but an absolute http or https URL without user info.
    """
    parts = urlsplit(target.strip())
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {target!r}")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"a card URL carries no user info: {target!r}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"bad port in {target!r}") from None
    host = parts.hostname  # lower-cased by urlsplit
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        netloc += f":{port}"
    path = parts.path if parts.path not in ("", "/") else WELL_KNOWN_PATH
    return urlunsplit((scheme, netloc, path, parts.query, ""))


def parse_card(text: str | bytes) -> a2a_pb2.AgentCard:
    """An AgentCard from its JSON: A2A 1.0's ProtoJSON, or an A2A 0.3 card (`url`,
    `preferredTransport`, `additionalInterfaces`, `protocolVersion` and no
    `supportedInterfaces`: `v03_agents.is_v03_card_json`), whose interfaces become 0.3
    `supported_interfaces` (`v03_agents.agent_card_from_v03_json`). Unknown fields are ignored;
    anything else malformed is an InvalidAgentResponseError."""
    try:
        document = json.loads(text)
        if not isinstance(document, dict):
            raise ValueError(f"a card is a JSON object, not {type(document).__name__}")
        if v03_agents.is_v03_card_json(document):
            return v03_agents.agent_card_from_v03_json(document)
        card = a2a_pb2.AgentCard()
        json_format.ParseDict(document, card, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, RecursionError) as error:
        raise InvalidAgentResponseError(f"malformed agent card: {error}") from error
    return card


async def bounded_get(
    http: httpx.AsyncClient,
    url: str,
    headers: dict[str, str],
    *,
    timeout_s: float,
    what: str,
    max_bytes: int = MAX_CARD_BYTES,
) -> tuple[int, httpx.Headers, bytes]:
    """GET `url`: its status, headers and body (empty unless 200), within `timeout_s` seconds in
    all (connect, headers and body) and `max_bytes`; `what` names the document in the errors
    (CardTimeoutError, CardUnreachableError, CardRejectedError for a body over `max_bytes`).
    Redirects are followed only if `http` follows them."""
    try:
        async with asyncio.timeout(timeout_s):
            async with http.stream("GET", url, headers=headers) as response:
                if response.status_code != 200:
                    return response.status_code, response.headers, b""
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > max_bytes:
                        raise CardRejectedError(
                            f"GET {url}: {what} is larger than {max_bytes} bytes", url=url
                        )
                return 200, response.headers, bytes(body)
    except (TimeoutError, httpx.TimeoutException) as error:
        raise CardTimeoutError(
            f"timed out after {timeout_s:g} s fetching {what} {url}", url=url
        ) from error
    except httpx.RemoteProtocolError as error:
        if "disconnected" in str(error):  # not a protocol mismatch: the peer hung up
            raise CardUnreachableError(f"could not fetch {what} {url}: {error}", url=url) from error
        # A response that is no HTTP/1.1 at all: HTTP/2 frames from a gRPC port, say.
        raise CardUnreachableError(
            f"could not fetch {what} {url}: {error or type(error).__name__} (the server there "
            "does not answer HTTP/1.1: if it is a gRPC port, give it as host:port, without "
            f"the scheme: {urlsplit(url).netloc})",
            url=url,
        ) from error
    except httpx.HTTPError as error:
        raise CardUnreachableError(
            f"could not fetch {what} {url}: {error or type(error).__name__}", url=url
        ) from error


def _hint(url: str, status: int) -> str:
    """What to give instead of a card URL the server refused with `status`."""
    if status != 405:
        return ""
    parts = urlsplit(url)
    origin = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    return (
        f" (this URL takes no GET: it looks like an A2A endpoint, not an agent card; give the "
        f"agent's origin, {origin}, whose {WELL_KNOWN_PATH} is its card, or the card's own URL)"
    )


def max_age(cache_control: str | None) -> float:
    """Seconds a response may be reused without revalidation; 0 for no-cache or no directive,
    -1 for no-store (not kept at all)."""
    if not cache_control:
        return 0.0
    directives = cache_control.lower()
    if "no-store" in directives:
        return -1.0
    if "no-cache" in directives:
        return 0.0
    match = _MAX_AGE.search(directives)
    return float(match.group(1)) if match else 0.0


@dataclass(frozen=True)
class FetchedCard:
    """A card as fetched. `card` is shared with the cache: read it, never modify it."""

    url: str
    card: a2a_pb2.AgentCard
    etag: str | None
    fresh_until: float
    """On the cache's clock."""
    fetched_at: float
    """When the server last confirmed this card (a 200 or a 304), on the cache's clock."""


class CardCache:
    """Fetches agent cards and keeps them as the module docstring says. Per instance, keyed by
    URL. Raises the CardFetchError subclasses, and InvalidAgentResponseError for a malformed card.
    """

    def __init__(
        self,
        http: httpx.AsyncClient | None = None,
        *,
        timeout_s: float = DEFAULT_CARD_TIMEOUT_S,
        clock: Callable[[], float] | None = None,
        keyset: KeySet | None = None,
    ) -> None:
        self._keyset = keyset
        self._timeout_s = timeout_s
        self._owns_http = http is None
        self._http = http if http is not None else httpx.AsyncClient(timeout=timeout_s)
        self._clock = clock or time.monotonic
        self._entries: dict[str, FetchedCard] = {}
        self._inflight: dict[str, asyncio.Task[FetchedCard]] = {}

    async def fetch(self, target: str, *, revalidate: bool = False) -> FetchedCard:
        """The card at `target` (an origin or the card's full http(s) URL); ValueError for a
        target that is not one."""
        url = card_url(target)
        cached = self._entries.get(url)
        if cached is not None and not revalidate and self._clock() < cached.fresh_until:
            return cached
        task = self._inflight.get(url)
        if task is None:
            task = asyncio.ensure_future(self._fetch(url))
            self._inflight[url] = task
            task.add_done_callback(lambda done: self._done(url, done))
        # Shielded: a caller that goes away does not cancel the fetch the others wait on.
        return await asyncio.shield(task)

    def _done(self, url: str, task: asyncio.Task[FetchedCard]) -> None:
        if self._inflight.get(url) is task:
            del self._inflight[url]
        if not task.cancelled():
            task.exception()  # retrieved: every waiter may have gone away

    async def _fetch(self, url: str) -> FetchedCard:
        cached = self._entries.get(url)
        # A2A-Version as on every A2A request (the official SDK and ADK send it for the card):
        # a server that serves a card per version picks this client's.
        headers = {"accept": "application/json", "A2A-Version": PROTOCOL_VERSION}
        if cached is not None and cached.etag:
            headers["if-none-match"] = cached.etag
        status, response_headers, body = await bounded_get(
            self._http, url, headers, timeout_s=self._timeout_s, what="the agent card"
        )
        now = self._clock()
        if status == 304 and cached is not None:
            card = cached.card
        elif status == 200:
            card = parse_card(body)
            if self._keyset is not None:
                try:
                    verify_card(card, self._keyset, document=json.loads(body))
                except SignatureError as error:
                    raise CardRejectedError(f"GET {url}: {error}", url=url) from error
        else:
            raise CardRejectedError(
                f"GET {url}: HTTP {status}{_hint(url, status)}", url=url, status=status
            )
        age = max_age(response_headers.get("cache-control"))
        etag = response_headers.get("etag") or (cached.etag if cached else None)
        entry = FetchedCard(url, card, etag, now + max(age, 0.0), now)
        if age < 0:
            self._entries.pop(url, None)
        else:
            self._entries[url] = entry
        return entry

    async def aclose(self) -> None:
        """Stops fetches in flight and closes the HTTP client if this cache created it."""
        for task in list(self._inflight.values()):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        if self._owns_http:
            await self._http.aclose()
