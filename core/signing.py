"""Signed messages (our A2A extension `urn:a2a-grpc:signed-message:v1`) and agent-card signatures.

Signed message, the contract:
- The signer adds `SIGNED_MESSAGE_EXTENSION` to `Message.extensions` (once), then signs.
- Payload: `canonical_message_bytes(message, without_extension=SIGNED_MESSAGE_EXTENSION)`, see
  `a2a_grpc.core.canonical`: the JCS of the message's ProtoJSON with every field, the extension
  list included, except the signature's own metadata entry.
- Signature: a compact JWS with detached payload (`a2a_grpc.core.jose`), EdDSA or ES256. Protected
  header: `alg`, `kid`, `typ: "JOSE"`, `iat` and `exp` (integer seconds since the epoch, `exp` =
  `iat` + ttl) and `a2a-tenant`, the tenant the message is sent to ("" for none). Binding the
  tenant stops a signed message from being replayed into another tenant; `exp` bounds replay in
  time (receivers that need more de-duplicate on `messageId`). Optionally `a2a-card`: the URL of
  the signer's agent card, which publishes the key (`kid`) that verifies the signature. Not
  `jku`: that names a JWK Set document, and an agent card is not one.
- Carrier: `metadata["urn:a2a-grpc:signed-message:v1"] = {"jws": "<header>..<signature>"}`.
- Verification: recompute the payload from the received message, verify the JWS against a
  configured key set, require `exp`, then require `a2a-tenant` to equal the receiving tenant.
- Keys on a card: an agent publishes the public keys its messages are signed with on its own
  card, as the JWKS `params.jwks` of its `capabilities.extensions` entry for the extension
  (`publish_signing_keys`, read back by `card_signing_keys`). In the card, so that one fetch and
  one cache (max-age, ETag) cover card and keys, and the card's own signature covers the keys.

Agent card signature (A2A 1.0 §8.4): a JWS over `canonical_card_bytes(card)` (the card without
`signatures`), header `alg`, `kid`, `typ: "JOSE"`, carried as an `AgentCardSignature` whose
`protected` and `signature` are the token's first and third parts. A card verifies when at least
one of its signatures does, over that form or (given the card's JSON as received) over the JCS of
the received document without `signatures`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format

from a2a_grpc.core.canonical import (
    CanonicalizationError,
    canonical_card_bytes,
    canonical_message_bytes,
    canonicalize,
)
from a2a_grpc.core.jose import (
    KeyFormatError,
    KeySet,
    PrivateKey,
    SignatureError,
    load_jwks,
    read_header,
    sign_detached,
    verify_detached,
)
from a2a_grpc.generated import a2a_pb2

__all__ = [
    "CARD_HEADER",
    "JWKS_PARAM",
    "SIGNED_MESSAGE_EXTENSION",
    "TENANT_HEADER",
    "MissingSignatureError",
    "SignatureError",
    "Signer",
    "VerifiedSignature",
    "card_signing_keys",
    "claimed_signer",
    "message_signature",
    "publish_signing_keys",
    "sign_card",
    "sign_message",
    "verify_card",
    "verify_message",
]

SIGNED_MESSAGE_EXTENSION = "urn:a2a-grpc:signed-message:v1"
TENANT_HEADER = "a2a-tenant"
CARD_HEADER = "a2a-card"
"""Protected header naming the signer's agent card URL."""
JWKS_PARAM = "jwks"
"""The member of the extension's `params` on a card holding the agent's public signing keys."""
DEFAULT_SIGNATURE_TTL_S = 300.0
"""Seconds a message signature stays valid (`exp` - `iat`) unless the signer says otherwise."""
_TOKEN_FIELD = "jws"


class MissingSignatureError(SignatureError):
    """The message or card carries no signature at all (as opposed to a bad one)."""


@dataclass(frozen=True)
class VerifiedSignature:
    """Who signed a message (`kid`, and `card_url` when the header names the signer's card) and
    the validity window the signer gave it (epoch seconds)."""

    kid: str
    issued_at: float
    expires_at: float
    card_url: str = ""


@dataclass(frozen=True, slots=True)
class Signer:
    """The verified sender of a message: the key id, and when the key came from the sender's
    agent card, that card's URL and name ("" when it came from a local key file)."""

    kid: str
    card_url: str = ""
    card_name: str = ""

    @property
    def origin(self) -> str:
        """`scheme://host[:port]` of the card URL ("" without one)."""
        scheme, _, rest = self.card_url.partition("://")
        return f"{scheme}://{rest.split('/', 1)[0]}" if rest else ""

    def to_json(self) -> dict[str, str]:
        return {
            "kid": self.kid,
            "card_url": self.card_url,
            "card_name": self.card_name,
            "origin": self.origin,
        }


def sign_message(
    message: a2a_pb2.Message,
    private_key: PrivateKey,
    kid: str,
    *,
    tenant: str,
    ttl: float = DEFAULT_SIGNATURE_TTL_S,
    now: float | None = None,
    card_url: str = "",
) -> a2a_pb2.Message:
    """A signed copy of `message` (the argument is not modified); an earlier signature entry is
    replaced. `card_url`, when given, names the signer's card (`a2a-card`). ValueError for a ttl
    that is not positive."""
    if not ttl > 0:
        raise ValueError(f"ttl must be positive, not {ttl!r}")
    issued_at = math.floor(time.time() if now is None else now)
    signed = a2a_pb2.Message()
    signed.CopyFrom(message)
    if SIGNED_MESSAGE_EXTENSION not in signed.extensions:
        signed.extensions.append(SIGNED_MESSAGE_EXTENSION)
    header = {"iat": issued_at, "exp": math.floor(issued_at + ttl), TENANT_HEADER: tenant}
    if card_url:
        header[CARD_HEADER] = card_url
    payload = canonical_message_bytes(signed, without_extension=SIGNED_MESSAGE_EXTENSION)
    token = sign_detached(payload, private_key, kid, header)
    signed.metadata[SIGNED_MESSAGE_EXTENSION] = {_TOKEN_FIELD: token}
    return signed


def message_signature(message: a2a_pb2.Message) -> str | None:
    """The JWS a message carries under the extension, None when it carries none.

    SignatureError when the entry exists but is not `{"jws": "<string>"}`.
    """
    if not message.HasField("metadata") or SIGNED_MESSAGE_EXTENSION not in message.metadata:
        return None
    entry = message.metadata.fields[SIGNED_MESSAGE_EXTENSION]
    if entry.WhichOneof("kind") == "struct_value":
        token = entry.struct_value.fields.get(_TOKEN_FIELD)
        if token is not None and token.WhichOneof("kind") == "string_value":
            return token.string_value
    raise SignatureError(
        f'malformed signature: metadata["{SIGNED_MESSAGE_EXTENSION}"] must be {{"jws": "<token>"}}'
    )


def verify_message(
    message: a2a_pb2.Message,
    keyset: KeySet,
    *,
    tenant: str,
    now: float | None = None,
) -> VerifiedSignature:
    """Checks the message's signature as the module docstring says.

    MissingSignatureError when there is none; SignatureError for a malformed token, an unknown
    kid, tampered content, an expired or not-yet-valid signature, no `exp`, or another tenant.
    """
    token = message_signature(message)
    if token is None:
        raise MissingSignatureError(
            f"message {message.message_id!r} is not signed "
            f'(no metadata["{SIGNED_MESSAGE_EXTENSION}"])'
        )
    payload = canonical_message_bytes(message, without_extension=SIGNED_MESSAGE_EXTENSION)
    header = verify_detached(token, payload, keyset, now=time.time() if now is None else now)
    expires_at = header.get("exp")
    if expires_at is None:
        raise SignatureError('malformed signature: the header has no "exp"')
    signed_tenant = header.get(TENANT_HEADER)
    if signed_tenant != tenant:
        raise SignatureError(f"wrong tenant: signed for {signed_tenant!r}, received by {tenant!r}")
    issued_at = header.get("iat", expires_at)
    card_url = header.get(CARD_HEADER, "")
    return VerifiedSignature(
        str(header["kid"]),
        float(issued_at),
        float(expires_at),
        card_url if isinstance(card_url, str) else "",
    )


def claimed_signer(token: str) -> tuple[str, str]:
    """(kid, card URL or "") as the token's header claims them, NOT verified: to find the key.
    SignatureError for a malformed token or a non-string `a2a-card`."""
    header = read_header(token)
    card_url = header.get(CARD_HEADER, "")
    if not isinstance(card_url, str):
        raise SignatureError(f'malformed signature: "{CARD_HEADER}" is not a URL string')
    return header["kid"], card_url


def _extension_entry(card: a2a_pb2.AgentCard) -> a2a_pb2.AgentExtension | None:
    for extension in card.capabilities.extensions:
        if extension.uri == SIGNED_MESSAGE_EXTENSION:
            return extension
    return None


def publish_signing_keys(
    card: a2a_pb2.AgentCard, keys: KeySet, *, verifies: bool, required: bool = False
) -> None:
    """Puts `keys` (public) on `card`, in place, as `params.jwks` of the extension's entry; adds
    the entry when the card has none. `verifies`: this agent also verifies incoming
    signatures (said in the new entry's description), `required` is its `required`."""
    entry = _extension_entry(card)
    if entry is None:
        entry = card.capabilities.extensions.add(
            uri=SIGNED_MESSAGE_EXTENSION,
            description=(
                "Messages carry a JWS (EdDSA or ES256) over their canonical form"
                + ("; this agent verifies them" if verifies else "")
                + ". params.jwks: the keys this agent signs its own messages with."
            ),
            required=required,
        )
    entry.params.update({JWKS_PARAM: keys.to_jwks()})


def card_publishes_signing_keys(card: a2a_pb2.AgentCard) -> bool:
    """Whether `card` publishes message-signing keys (see `publish_signing_keys`)."""
    entry = _extension_entry(card)
    return entry is not None and JWKS_PARAM in entry.params.fields


def card_signing_keys(card: a2a_pb2.AgentCard) -> KeySet:
    """The message-signing keys `card` publishes (see `publish_signing_keys`).

    SignatureError saying what is missing or malformed.
    """
    entry = _extension_entry(card)
    if entry is None or JWKS_PARAM not in entry.params.fields:
        raise SignatureError(
            f"the agent card {card.name!r} publishes no message-signing keys (its "
            f"capabilities.extensions entry {SIGNED_MESSAGE_EXTENSION} has no params.{JWKS_PARAM})"
        )
    jwks = json_format.MessageToDict(entry.params)[JWKS_PARAM]
    try:
        return load_jwks(jwks if isinstance(jwks, dict) else {})
    except KeyFormatError as error:
        raise SignatureError(
            f"the agent card {card.name!r} publishes malformed signing keys: {error}"
        ) from error


def _first_verifying(
    token: str, payloads: list[bytes], keyset: KeySet, now: float
) -> dict[str, Any]:
    """The header of `token` verified over the first payload that works; the first one's error."""
    try:
        return verify_detached(token, payloads[0], keyset, now=now)
    except SignatureError as first_error:
        for payload in payloads[1:]:
            try:
                return verify_detached(token, payload, keyset, now=now)
            except SignatureError:
                continue
        raise first_error from None


def sign_card(card: a2a_pb2.AgentCard, private_key: PrivateKey, kid: str) -> a2a_pb2.AgentCard:
    """A copy of `card` with one more AgentCardSignature (the argument is not modified)."""
    signed = a2a_pb2.AgentCard()
    signed.CopyFrom(card)
    protected, _, signature = sign_detached(canonical_card_bytes(card), private_key, kid).partition(
        ".."
    )
    signed.signatures.append(a2a_pb2.AgentCardSignature(protected=protected, signature=signature))
    return signed


def verify_card(
    card: a2a_pb2.AgentCard,
    keyset: KeySet,
    *,
    document: Mapping[str, Any] | None = None,
    now: float | None = None,
) -> str:
    """The kid of the first signature on `card` that verifies with `keyset`.

    `document`, optional, is the card's JSON object as received. A signature then also counts
    when it verifies over the JCS of that document without `signatures`: it covers members our
    proto does not know (a newer card schema) that parsing into `card` dropped.
    MissingSignatureError for an unsigned card; SignatureError listing why each signature failed.
    """
    if not card.signatures:
        raise MissingSignatureError(f"agent card {card.name!r} is not signed")
    payloads = [canonical_card_bytes(card)]
    if document is not None:
        try:
            received = canonicalize({k: v for k, v in document.items() if k != "signatures"})
        except CanonicalizationError:
            pass
        else:
            if received != payloads[0]:
                payloads.append(received)
    at = time.time() if now is None else now
    reasons = []
    for index, entry in enumerate(card.signatures):
        token = f"{entry.protected}..{entry.signature}"
        try:
            header = _first_verifying(token, payloads, keyset, at)
        except SignatureError as error:
            reasons.append(f"#{index}: {error}")
            continue
        return str(header["kid"])
    raise SignatureError(f"no signature on agent card {card.name!r} verifies: {'; '.join(reasons)}")
