"""The agent-card resolver: HTTP(S) fetch of `/.well-known/agent-card.json`, caching, and the
pick of the interface a client uses (`select_interface`).

The fetching and caching are `a2a_grpc.core.cards` (shared with the server); this module turns
their errors into the client's and picks the interface.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
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
from a2a_grpc.core.jose import KeySet, SignatureError
from a2a_grpc.core.metadata import PROTOCOL_VERSION, major_minor
from a2a_grpc.core.signing import verify_card
from a2a_grpc.core.v03 import PROTOCOL_VERSION as V03_VERSION
from a2a_grpc.generated import a2a_pb2

__all__ = [
    "DEFAULT_CARD_TIMEOUT_S",
    "DEFAULT_TRANSPORTS",
    "GRPC_BINDING",
    "HTTP_JSON_BINDING",
    "JSONRPC_BINDING",
    "WELL_KNOWN_PATH",
    "CardResolver",
    "binding_name",
    "card_url",
    "grpc_interface",
    "max_age",
    "parse_card",
    "pick_grpc_interface",
    "select_interface",
    "verify_card_signature",
]

GRPC_BINDING = "GRPC"
JSONRPC_BINDING = "JSONRPC"
HTTP_JSON_BINDING = "HTTP+JSON"
"""The bindings' names, as a card's `protocolBinding` states them."""

TRANSPORT_NAMES: Mapping[str, str] = {
    "grpc": GRPC_BINDING,
    "jsonrpc": JSONRPC_BINDING,
    "http+json": HTTP_JSON_BINDING,
}
"""The names a caller gives a transport (`transports=`, `--transport`) → the binding's name."""

DEFAULT_TRANSPORTS: tuple[str, ...] = ("grpc", "jsonrpc", "http+json")
"""Every binding this client speaks, in its own order of preference."""

SUPPORTED_VERSIONS: tuple[str, ...] = (PROTOCOL_VERSION, V03_VERSION)
"""The protocol versions this client speaks, preferred first."""
V03_BINDINGS: tuple[str, ...] = (GRPC_BINDING, JSONRPC_BINDING, HTTP_JSON_BINDING)
"""The bindings this client speaks A2A 0.3 over."""


def binding_name(transport: str) -> str:
    """The card's name for a transport given as `grpc`, `jsonrpc` or `http+json` (or as the
    card spells it: `GRPC`, `JSONRPC`, `HTTP+JSON`); ValueError for any other."""
    name = TRANSPORT_NAMES.get(transport.lower())
    if name is None:
        raise ValueError(
            f"unknown transport {transport!r}: expected one of {', '.join(TRANSPORT_NAMES)}"
        )
    return name


def select_interface(
    card: a2a_pb2.AgentCard,
    transports: Sequence[str] = DEFAULT_TRANSPORTS,
    *,
    client_preference: bool = False,
) -> a2a_pb2.AgentInterface:
    """The interface of `card` a client speaking `transports` uses.

    The rule (spec §8.3.2: the client uses the first entry of `supported_interfaces` it
    supports, earlier entries being the agent's preference):

    1. An interface is acceptable when its binding is one of `transports` (compared without
       case) and its protocol version (Major.Minor, patch ignored) is one this client speaks
       over that binding (1.0 and 0.3, over all three); an interface of another
       binding (a custom URI) or version is skipped.
    2. The newest version wins: an acceptable A2A 1.0 interface is taken over any 0.3 one,
       wherever they stand on the card.
    3. Among the acceptable interfaces of that version, the card's order decides (the agent's
       preference, as the spec says). With `client_preference`, the order of `transports`
       decides instead, and the card's order only between interfaces of one binding (the
       official SDK's `use_client_preference`). The default `transports`, gRPC, JSON-RPC,
       HTTP+JSON, is this client's preference.

    Raises AgentCardError, naming every interface the card offers, when none is acceptable;
    ValueError for an unknown name in `transports`.
    """
    accepted = [binding_name(transport) for transport in transports]
    offered = list(card.supported_interfaces)
    for version in SUPPORTED_VERSIONS:
        candidates = [
            interface
            for interface in offered
            if interface.protocol_binding.upper() in accepted
            and major_minor(interface.protocol_version) == version
            and (version == PROTOCOL_VERSION or interface.protocol_binding.upper() in V03_BINDINGS)
        ]
        if not candidates:
            continue
        if client_preference:
            candidates.sort(key=lambda i: accepted.index(i.protocol_binding.upper()))
        return candidates[0]
    listed = "; ".join(
        f"{i.protocol_binding or '?'} {i.protocol_version or '(no version)'} at {i.url}"
        for i in offered
    )
    raise AgentCardError(
        f"agent {card.name!r} offers no interface this client can use "
        f"({', '.join(accepted)} for A2A {', '.join(SUPPORTED_VERSIONS)}); "
        f"the card offers: {listed or 'no interface at all'}"
    )


def pick_grpc_interface(card: a2a_pb2.AgentCard) -> a2a_pb2.AgentInterface:
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


grpc_interface = pick_grpc_interface
"""The name `pick_grpc_interface` had before; kept so code written against it still runs."""


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
