"""The agent-card resolver: HTTP(S) fetch of `/.well-known/agent-card.json`, caching, GRPC pick.

The fetching and caching are `a2a_grpc.core.cards` (shared with the server); this module turns
their errors into the client's and picks the GRPC interface.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

import httpx

from a2a_grpc.client.errors import AgentCardError, DeadlineExceededError, UnavailableError
from a2a_grpc.core.cards import (
    DEFAULT_CARD_TIMEOUT_S,
    WELL_KNOWN_PATH,
    CardCache,
    CardRejectedError,
    CardTimeoutError,
    CardUnreachableError,
    card_url,
    max_age,
    parse_card,
)
from a2a_grpc.core.jws import KeySet, SignatureError
from a2a_grpc.core.metadata import PROTOCOL_VERSION, major_minor
from a2a_grpc.core.signing import verify_card
from a2a_grpc.generated import a2a_pb2

__all__ = [
    "DEFAULT_CARD_TIMEOUT_S",
    "GRPC_BINDING",
    "WELL_KNOWN_PATH",
    "CardResolver",
    "card_url",
    "grpc_interface",
    "max_age",
    "parse_card",
    "verify_card_signature",
]

GRPC_BINDING = "GRPC"


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
        self._cache = CardCache(http, timeout_s=timeout_s, clock=clock, keyset=keyset)

    async def get(self, target: str) -> a2a_pb2.AgentCard:
        """The card at `target` (an origin or the card's full http(s) URL)."""
        try:
            fetched = await self._cache.fetch(target)
        except CardTimeoutError as error:
            raise DeadlineExceededError(str(error)) from error
        except CardUnreachableError as error:
            raise UnavailableError(str(error)) from error
        except CardRejectedError as error:
            raise AgentCardError(str(error)) from (error.__cause__ or error)
        return _copy(fetched.card)

    async def aclose(self) -> None:
        """Closes the HTTP client if this resolver created it."""
        await self._cache.aclose()

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
