"""Signing outgoing messages with the signed-messages extension (see `a2a_grpc.core.signing`)."""

from __future__ import annotations

from dataclasses import dataclass

from a2a_grpc.core.cards import card_url as normalized_card_url
from a2a_grpc.core.jose import PrivateKey, load_private_key
from a2a_grpc.core.signing import (
    DEFAULT_SIGNATURE_TTL_S,
    SIGNED_MESSAGE_EXTENSION,
    sign_message,
)
from a2a_grpc.generated import a2a_pb2

__all__ = ["SIGNED_MESSAGE_EXTENSION", "MessageSigner"]


@dataclass(frozen=True)
class MessageSigner:
    """Signs each message a client sends, as its last step (after ids and tenant are set).

    A client given a signer also activates the extension (`a2a-extensions`) on every call.
    With `card_url`, the signature names the signer's agent card (header `a2a-card`, normalized:
    an origin becomes its well-known card URL), which must publish `kid`: a recipient that
    trusts that card verifies with the keys on it. ValueError for a card_url that is no http(s)
    URL.
    """

    private_key: PrivateKey
    kid: str
    ttl: float = DEFAULT_SIGNATURE_TTL_S
    """Seconds the signature stays valid (its `exp`)."""
    card_url: str = ""

    def __post_init__(self) -> None:
        if self.card_url:
            object.__setattr__(self, "card_url", normalized_card_url(self.card_url))

    @classmethod
    def from_pem(
        cls, pem: bytes, kid: str, *, ttl: float = DEFAULT_SIGNATURE_TTL_S, card_url: str = ""
    ) -> MessageSigner:
        return cls(load_private_key(pem), kid, ttl, card_url)

    def sign(self, message: a2a_pb2.Message, *, tenant: str) -> a2a_pb2.Message:
        return sign_message(
            message,
            self.private_key,
            self.kid,
            tenant=tenant,
            ttl=self.ttl,
            card_url=self.card_url,
        )
