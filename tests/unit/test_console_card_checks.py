"""The console's card checks, each verdict from a real card: the strict parse and the
signature verified against the keys the card publishes."""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from google.protobuf import json_format

from a2a_grpc.cli.console.card_checks import chosen_interface, signature_check, strict_parse
from a2a_grpc.core.jose import KeySet
from a2a_grpc.core.signing import publish_signing_keys, sign_card
from a2a_grpc.generated import a2a_pb2


def card() -> a2a_pb2.AgentCard:
    made = a2a_pb2.AgentCard(name="agent", version="1", description="d")
    made.supported_interfaces.add(
        url="127.0.0.1:1", protocol_binding="GRPC", protocol_version="1.0"
    )
    return made


def test_strict_parse_names_the_member_a_lenient_client_would_drop() -> None:
    document = json_format.MessageToDict(card())
    assert strict_parse(document).verdict == "ok"
    unknown = strict_parse({**document, "colour": "blue"})
    assert unknown.verdict == "fail" and "colour" in unknown.detail
    old = strict_parse(
        {
            "name": "a",
            "url": "http://x",
            "preferredTransport": "JSONRPC",
            "protocolVersion": "0.3.0",
        }
    )
    assert old.verdict == "warn" and "0.3" in old.detail


def test_signature_is_verified_against_the_cards_own_keys() -> None:
    key = Ed25519PrivateKey.generate()
    unsigned = card()
    assert signature_check(unsigned, None).verdict == "info"
    publish_signing_keys(unsigned, KeySet.of_private_keys({"k1": key}), verifies=False)
    signed = sign_card(unsigned, key, "k1")
    document = json_format.MessageToDict(signed)
    verified = signature_check(signed, document)
    assert verified.verdict == "ok" and "k1" in verified.detail
    tampered = a2a_pb2.AgentCard()
    tampered.CopyFrom(signed)
    tampered.description = "changed after signing"
    assert signature_check(tampered, json_format.MessageToDict(tampered)).verdict == "fail"
    no_keys = sign_card(card(), key, "k1")
    assert signature_check(no_keys, None).verdict == "warn"


def test_the_interface_the_client_uses_or_why_none() -> None:
    assert chosen_interface(card(), ("grpc",)).detail.startswith("GRPC 1.0 127.0.0.1:1")
    refused = chosen_interface(card(), ("jsonrpc",))
    assert refused.verdict == "fail" and "offers no interface" in refused.detail
