"""Byte compatibility of JWS signatures across implementations of `core`.

`data/jws_v1_tokens.json` holds tokens, signed messages and a signed card written by the
hand-made JWS code that came before PyJWT (its commit is named in the file), with fixed test keys.
They must keep verifying, and signing the same input again must write the same protected header
bytes (RFC 8785 canonical JSON), and for Ed25519, whose signatures are deterministic, the same
token.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from google.protobuf import json_format

from a2a_grpc.core.jose import KeySet, PrivateKey, load_jwks, sign_detached, verify_detached
from a2a_grpc.core.signing import sign_card, sign_message, verify_card, verify_message
from a2a_grpc.generated import a2a_pb2

FIXTURE: dict[str, Any] = json.loads(
    (Path(__file__).parent / "data" / "jws_v1_tokens.json").read_text(encoding="utf-8")
)
NOW = float(FIXTURE["now"])
PAYLOAD = base64.b64decode(FIXTURE["payload_b64"])
KEYS: dict[str, PrivateKey] = {
    "ed-1": Ed25519PrivateKey.from_private_bytes(
        bytes.fromhex(FIXTURE["keys"]["ed-1"]["ed25519_seed_hex"])
    ),
    "p256-1": ec.derive_private_key(
        int(FIXTURE["keys"]["p256-1"]["p256_d_hex"], 16), ec.SECP256R1()
    ),
}
JWKS = load_jwks(FIXTURE["jwks"])
DETACHED = pytest.mark.parametrize(
    "case", FIXTURE["detached"], ids=lambda case: f"{case['kid']}-{bool(case['extra_header'])}"
)
MESSAGES = pytest.mark.parametrize(
    "case", FIXTURE["signed_messages"], ids=lambda case: str(case["kid"])
)


def test_the_fixture_keys_are_the_published_ones() -> None:
    assert KeySet.of_private_keys(KEYS).to_jwks() == FIXTURE["jwks"]


@DETACHED
def test_earlier_tokens_verify(case: dict[str, Any]) -> None:
    header = verify_detached(case["token"], PAYLOAD, JWKS, now=NOW)
    assert header == {
        **(case["extra_header"] or {}),
        "alg": "EdDSA" if case["kid"] == "ed-1" else "ES256",
        "kid": case["kid"],
        "typ": "JOSE",
    }


@DETACHED
def test_signing_again_writes_the_same_header_bytes(case: dict[str, Any]) -> None:
    token = sign_detached(PAYLOAD, KEYS[case["kid"]], case["kid"], case["extra_header"])
    assert token.split(".")[:2] == case["token"].split(".")[:2]
    if case["kid"] == "ed-1":  # Ed25519 signatures are deterministic (RFC 8032)
        assert token == case["token"]


@MESSAGES
def test_earlier_signed_messages_verify(case: dict[str, Any]) -> None:
    message = json_format.ParseDict(case["message"], a2a_pb2.Message())
    verified = verify_message(message, JWKS, tenant="acme", now=NOW)
    assert verified.kid == case["kid"]
    assert (verified.issued_at, verified.expires_at) == (1_700_000_000.0, 1_700_000_300.0)


@MESSAGES
def test_signing_a_message_again_writes_the_same_bytes(case: dict[str, Any]) -> None:
    received = json_format.ParseDict(case["message"], a2a_pb2.Message())
    again = sign_message(
        received,
        KEYS[case["kid"]],
        case["kid"],
        tenant="acme",
        ttl=300,
        now=1_700_000_000,
        card_url="https://agent.example/.well-known/agent-card.json",
    )
    token = json_format.MessageToDict(again)["metadata"]["urn:a2a-grpc:signed-message:v1"]["jws"]
    expected = case["message"]["metadata"]["urn:a2a-grpc:signed-message:v1"]["jws"]
    assert token.split(".")[:2] == expected.split(".")[:2]
    if case["kid"] == "ed-1":
        assert token == expected


def test_the_earlier_signed_card_verifies_with_each_key() -> None:
    card = json_format.ParseDict(FIXTURE["signed_card"], a2a_pb2.AgentCard())
    for kid in KEYS:
        keyset = KeySet({kid: JWKS[kid]})
        assert verify_card(card, keyset, now=NOW) == kid
        assert verify_card(card, keyset, document=FIXTURE["signed_card"], now=NOW) == kid


def test_signing_the_card_again_writes_the_same_signatures() -> None:
    card = json_format.ParseDict(FIXTURE["signed_card"], a2a_pb2.AgentCard())
    earlier = list(card.signatures)
    del card.signatures[:]
    for kid, key in KEYS.items():
        card = sign_card(card, key, kid)
    assert [s.protected for s in card.signatures] == [s.protected for s in earlier]
    assert card.signatures[0].signature == earlier[0].signature  # Ed25519: deterministic
