"""The agent-card resolver: HTTP(S) fetch of `/.well-known/agent-card.json`, caching, GRPC pick."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from google.protobuf import json_format

from a2a_grpc.client.errors import AgentCardError, DeadlineExceededError, UnavailableError
from a2a_grpc.core.errors import InvalidAgentResponseError
from a2a_grpc.core.jws import KeySet, SignatureError
from a2a_grpc.core.metadata import PROTOCOL_VERSION, major_minor
from a2a_grpc.core.signing import verify_card
from a2a_grpc.generated import a2a_pb2

WELL_KNOWN_PATH = "/.well-known/agent-card.json"
GRPC_BINDING = "GRPC"
DEFAULT_CARD_TIMEOUT_S = 10.0
"""Seconds one agent-card fetch may take unless the caller gives a timeout."""

_MAX_AGE = re.compile(r"(?:^|,)\s*max-age\s*=\s*\"?(\d+)\"?\s*(?:,|$)", re.IGNORECASE)


def card_url(target: str) -> str:
    """The card URL for an http(s) `target`: a bare origin gets the well-known path appended.

    Raises ValueError for anything but an absolute http or https URL.
    """
    parts = urlsplit(target)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"not an http(s) URL: {target!r}")
    path = parts.path if parts.path not in ("", "/") else WELL_KNOWN_PATH
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def parse_card(text: str | bytes) -> a2a_pb2.AgentCard:
    """A ProtoJSON AgentCard; unknown fields are ignored, anything else malformed is an
    InvalidAgentResponseError."""
    card = a2a_pb2.AgentCard()
    try:
        json_format.Parse(text, card, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError) as error:
        raise InvalidAgentResponseError(f"malformed agent card: {error}") from error
    return card


def grpc_interface(card: a2a_pb2.AgentCard) -> a2a_pb2.AgentInterface:
    """The first GRPC interface speaking A2A 1.0 (earlier entries are preferred, spec §8.3.2).

    Raises AgentCardError when the card offers none.
    """
    grpc_versions = []
    for interface in card.supported_interfaces:
        if interface.protocol_binding.upper() != GRPC_BINDING:
            continue
        if major_minor(interface.protocol_version) == PROTOCOL_VERSION:
            return interface
        grpc_versions.append(interface.protocol_version or "unspecified")
    if grpc_versions:
        raise AgentCardError(
            f"agent {card.name!r} offers GRPC only for protocol version(s) "
            f"{', '.join(grpc_versions)}, not {PROTOCOL_VERSION}"
        )
    raise AgentCardError(f"agent {card.name!r} offers no GRPC interface")


def verify_card_signature(
    card: a2a_pb2.AgentCard,
    keyset: KeySet,
    *,
    document: Mapping[str, Any] | None = None,
    now: float | None = None,
) -> str:
    """The kid of a signature on `card` that verifies with `keyset` (A2A 1.0 §8.4); `document`
    is the card's JSON as received, if at hand (see `a2a_grpc.core.signing.verify_card`).

    Raises AgentCardError, saying why, for an unsigned card or one no signature verifies;
    the core SignatureError is its `__cause__`.
    """
    try:
        return verify_card(card, keyset, document=document, now=now)
    except SignatureError as error:
        raise AgentCardError(f"agent card signature check failed: {error}") from error


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
class _Cached:
    card: a2a_pb2.AgentCard
    etag: str | None
    fresh_until: float


class CardResolver:
    """Fetches agent cards, honouring ETag (If-None-Match → 304) and Cache-Control max-age.

    The in-memory cache is per resolver and keyed by URL. Returned cards are copies. Failures:
    UnavailableError / DeadlineExceededError when the HTTP request could not be made,
    AgentCardError for an HTTP error status, InvalidAgentResponseError for a malformed card.
    With a `keyset`, every fetched card must carry a signature that verifies with it (checked
    before caching, so an unverified card is never served): AgentCardError otherwise.
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
        self._owns_http = http is None
        self._http = http if http is not None else httpx.AsyncClient(timeout=timeout_s)
        self._clock = clock or time.monotonic
        self._cache: dict[str, _Cached] = {}

    async def get(self, target: str) -> a2a_pb2.AgentCard:
        """The card at `target` (an origin or the card's full http(s) URL)."""
        url = card_url(target)
        cached = self._cache.get(url)
        now = self._clock()
        if cached is not None and now < cached.fresh_until:
            return _copy(cached.card)
        headers = {"accept": "application/json"}
        if cached is not None and cached.etag:
            headers["if-none-match"] = cached.etag
        try:
            response = await self._http.get(url, headers=headers)
        except httpx.TimeoutException as error:
            raise DeadlineExceededError(f"timed out fetching the agent card {url}") from error
        except httpx.HTTPError as error:
            raise UnavailableError(f"could not fetch the agent card {url}: {error}") from error
        if response.status_code == 304 and cached is not None:
            card = cached.card
        elif response.status_code == 200:
            card = parse_card(response.content)
            if self._keyset is not None:
                try:
                    verify_card(card, self._keyset, document=json.loads(response.content))
                except SignatureError as error:
                    raise AgentCardError(f"GET {url}: {error}") from error
        else:
            raise AgentCardError(f"GET {url}: HTTP {response.status_code}")
        age = max_age(response.headers.get("cache-control"))
        if age < 0:
            self._cache.pop(url, None)
        else:
            etag = response.headers.get("etag") or (cached.etag if cached else None)
            self._cache[url] = _Cached(card, etag, now + age)
        return _copy(card)

    async def aclose(self) -> None:
        """Closes the HTTP client if this resolver created it."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> CardResolver:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


def _copy(card: a2a_pb2.AgentCard) -> a2a_pb2.AgentCard:
    copy = a2a_pb2.AgentCard()
    copy.CopyFrom(card)
    return copy
