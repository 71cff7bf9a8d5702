"""Signatures made by our code verify with the official a2a-sdk's, and the reverse.

The SDK side runs in a child process (sdk_signer.py: it imports the SDK, this module imports only
a2a_grpc). Cards use the SDK's own `a2a.utils.signing`; signed messages are our extension, which
the SDK does not implement, so the child verifies and signs them from the SDK's parts (its proto
classes, its JCS) and PyJWT's compact JWS, with PyJWT's plain `json.dumps` header, which our
verifier must accept as any JSON header.

Where the SDK disagrees with us (A2A 1.0 §8.4, "Card signing", in ../shared/spec/a2a-1.0.md: the
JCS of the card without `signatures`, "Unset `optional` fields are omitted, R fields always kept,
other default-valued fields dropped"): the SDK 1.3.0 canonical card form (`_clean_empty` in
`a2a.utils.signing`) drops every empty string, list and object at any depth, so a card whose
REQUIRED `skills` is empty is signed without `"skills":[]`, and empty values inside a
`google.protobuf.Struct` (extension `params`, which are data, not default-valued fields) vanish
from what is signed. The spec keeps REQUIRED fields, so ours (`canonical_card_bytes`) follows it,
and the SDK itself logs that such cards "may not verify or interoperate across SDKs"
(`warn_on_missing_required_fields`). `test_where_the_sdk_departs_from_the_spec` pins that
behaviour down, so a fixed SDK shows up as a failing test; our verifier still accepts the SDK's
signature over such a card when given the card's JSON as served, which has no empty members.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from google.protobuf import json_format

from a2a_grpc.core.jose import KeySet, PrivateKey, algorithm_for, read_header
from a2a_grpc.core.signing import (
    SIGNED_MESSAGE_EXTENSION,
    sign_card,
    sign_message,
    verify_card,
    verify_message,
)
from a2a_grpc.generated import a2a_pb2

SDK_SIGNER = Path(__file__).with_name("sdk_signer.py")
FROZEN = Path(__file__).parents[2] / "unit" / "data" / "jws_v1_tokens.json"
NOW = 1_700_000_000
TENANT = "acme"

KEYS = pytest.mark.parametrize(
    "make_key",
    [Ed25519PrivateKey.generate, lambda: ec.generate_private_key(ec.SECP256R1())],
    ids=["EdDSA", "ES256"],
)

CARD: dict[str, Any] = {
    "name": "echo",
    "description": "echoes \u2014 with an \u00fcmlaut \U0001f600",
    "version": "1",
    "supportedInterfaces": [
        {"url": "h:50051", "protocolBinding": "GRPC", "protocolVersion": "1.0", "tenant": "t"}
    ],
    "capabilities": {
        "streaming": False,
        "extensions": [
            {"uri": SIGNED_MESSAGE_EXTENSION, "required": True, "params": {"n": 2.5, "k": [1, "x"]}}
        ],
    },
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain"],
    "skills": [{"id": "echo", "name": "Echo", "description": "says it back", "tags": ["x"]}],
}


def sdk(op: str, **request: Any) -> dict[str, Any]:
    """One request to the SDK's side, in a process of its own."""
    done = subprocess.run(
        [sys.executable, str(SDK_SIGNER)],
        input=json.dumps({"op": op, **request}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"the SDK side failed:\n{done.stderr[-3000:]}")
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def pem(key: PrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def card(document: dict[str, Any] = CARD) -> a2a_pb2.AgentCard:
    return json_format.ParseDict(document, a2a_pb2.AgentCard())


def message() -> a2a_pb2.Message:
    built = a2a_pb2.Message(
        message_id="m-1",
        context_id="c-1",
        role=a2a_pb2.ROLE_USER,
        parts=[a2a_pb2.Part(text="pay 10 EUR to b\u00f6b \U0001f600")],
        extensions=["urn:other"],
    )
    built.metadata.update({"urn:other": {"amount": 10, "ratio": 0.1, "big": 1e21, "s": "\u20ac"}})
    return built


@KEYS
def test_our_signed_card_verifies_with_the_sdk(make_key: Callable[[], PrivateKey]) -> None:
    key = make_key()
    signed = sign_card(card(), key, "ours")
    jwks = KeySet.of_private_keys({"ours": key}).to_jwks()
    assert sdk("verify_card", card=json_format.MessageToDict(signed), jwks=jwks) == {"ok": True}
    signed.description += "!"  # the SDK's verifier is not vacuous
    answer = sdk("verify_card", card=json_format.MessageToDict(signed), jwks=jwks)
    assert answer["ok"] is False and "InvalidSignaturesError" in answer["error"]


@KEYS
def test_the_sdk_signed_card_verifies_with_ours(make_key: Callable[[], PrivateKey]) -> None:
    key = make_key()
    answer = sdk("sign_card", card=CARD, pem=pem(key), kid="sdk", alg=algorithm_for(key))
    signed = card(answer["card"])
    keyset = KeySet.of_private_keys({"sdk": key})
    assert verify_card(signed, keyset) == "sdk"
    assert verify_card(signed, keyset, document=answer["card"]) == "sdk"


@pytest.mark.parametrize("kid", ["ed-1", "p256-1"])
def test_the_sdk_verifies_the_frozen_card_signatures(kid: str) -> None:
    """The card signed by the JWS code that came before PyJWT (tests/unit/data)."""
    frozen = json.loads(FROZEN.read_text(encoding="utf-8"))
    document = frozen["signed_card"]
    index = [read_header(f"{s['protected']}..")["kid"] for s in document["signatures"]].index(kid)
    one = {**document, "signatures": [document["signatures"][index]]}
    assert sdk("verify_card", card=one, jwks=frozen["jwks"]) == {"ok": True}


@KEYS
def test_our_signed_message_verifies_with_the_sdk_parts(make_key: Callable[[], PrivateKey]) -> None:
    key = make_key()
    signed = sign_message(message(), key, "ours", tenant=TENANT, ttl=300, now=NOW)
    jwks = KeySet.of_private_keys({"ours": key}).to_jwks()
    document = json_format.MessageToDict(signed)
    answer = sdk("verify_message", message=document, jwks=jwks, tenant=TENANT, now=NOW + 1)
    assert answer["ok"] is True and answer["kid"] == "ours"
    assert answer["header"]["exp"] == NOW + 300
    document["parts"][0]["text"] = "pay 1000 EUR to eve"
    answer = sdk("verify_message", message=document, jwks=jwks, tenant=TENANT, now=NOW + 1)
    assert answer["ok"] is False and "InvalidSignatureError" in answer["error"]


@KEYS
def test_a_message_signed_from_the_sdk_parts_verifies_with_ours(
    make_key: Callable[[], PrivateKey],
) -> None:
    key = make_key()
    answer = sdk(
        "sign_message",
        message=json_format.MessageToDict(message()),
        pem=pem(key),
        kid="sdk",
        alg=algorithm_for(key),
        tenant=TENANT,
        now=NOW,
        ttl=300,
    )
    signed = json_format.ParseDict(answer["message"], a2a_pb2.Message())
    verified = verify_message(signed, KeySet.of_private_keys({"sdk": key}), tenant=TENANT, now=NOW)
    assert (verified.kid, verified.expires_at) == ("sdk", NOW + 300)


def test_where_the_sdk_departs_from_the_spec() -> None:
    """See the module docstring: empty REQUIRED fields and empty Struct values."""
    key = Ed25519PrivateKey.generate()
    jwks = KeySet.of_private_keys({"k": key}).to_jwks()
    keyset = KeySet.of_private_keys({"k": key})
    no_skills = {**CARD, "skills": []}
    empty_param = {**CARD, "capabilities": {"extensions": [{"uri": "urn:x", "params": {"e": ""}}]}}
    for document in (no_skills, empty_param):
        ours = json_format.MessageToDict(sign_card(card(document), key, "k"))
        answer = sdk("verify_card", card=ours, jwks=jwks)
        assert answer["ok"] is False, "the SDK now follows §8.4: drop this test"
        theirs = sdk("sign_card", card=document, pem=pem(key), kid="k", alg="EdDSA")["card"]
        with pytest.raises(ValueError, match="bad signature"):
            verify_card(card(theirs), keyset)
    # Served as ProtoJSON, a card with no skills has no "skills" member either, so the JCS of
    # the received document is what the SDK signed; an empty Struct value is still served.
    theirs = sdk("sign_card", card=no_skills, pem=pem(key), kid="k", alg="EdDSA")["card"]
    assert verify_card(card(theirs), keyset, document=theirs) == "k"
