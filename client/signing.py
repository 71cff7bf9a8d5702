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
    """The Ed25519 or EC P-256 private key the messages are signed with."""
    kid: str
    """The key id the signature names (its JWS `kid`): what the recipient finds the public
    key by, among its keys or on the signer's card."""
    ttl: float = DEFAULT_SIGNATURE_TTL_S
    """Seconds the signature stays valid (its `exp`)."""
    card_url: str = ""
    """The signer's agent card, named in the signature (normalized: an origin becomes its
    well-known card URL); empty: the signature names no card."""

    def __post_init__(self) -> None:
        if self.card_url:
            object.__setattr__(self, "card_url", normalized_card_url(self.card_url))

    @classmethod
    def from_pem(
        cls, pem: bytes, kid: str, *, ttl: float = DEFAULT_SIGNATURE_TTL_S, card_url: str = ""
    ) -> MessageSigner:
        """A signer with the Ed25519 or P-256 key in `pem` (unencrypted PKCS#8, or SEC1 for
        EC); KeyFormatError (a ValueError) for another key or format."""
        return cls(load_private_key(pem), kid, ttl, card_url)

    def sign(self, message: a2a_pb2.Message, *, tenant: str) -> a2a_pb2.Message:
        """A signed copy of `message` (the argument is unchanged): a detached JWS over it, its
        header naming `tenant`, `kid`, `card_url` and an expiry `ttl` seconds away, in the
        extension's metadata entry; an earlier signature is replaced."""
        return sign_message(
            message,
            self.private_key,
            self.kid,
            tenant=tenant,
            ttl=self.ttl,
            card_url=self.card_url,
        )
