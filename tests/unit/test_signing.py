"""Signed messages (our extension) and agent-card signatures, and the card resolver's check."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from google.protobuf import json_format

from a2a_grpc.client.card import CardResolver, verify_card_signature
from a2a_grpc.client.errors import AgentCardError
from a2a_grpc.core.canonical import canonical_card_bytes, canonical_message_bytes, canonicalize
from a2a_grpc.core.jose import (
    DEFAULT_LEEWAY_S,
    KeySet,
    PrivateKey,
    SignatureError,
    b64url_decode,
    sign_detached,
)
from a2a_grpc.core.signing import (
    SIGNED_MESSAGE_EXTENSION,
    MissingSignatureError,
    VerifiedSignature,
    message_signature,
    sign_card,
    sign_message,
    verify_card,
    verify_message,
)
from a2a_grpc.generated import a2a_pb2

NOW = 1_700_000_000.0
TENANT = "acme"


def ed25519() -> PrivateKey:
    return Ed25519PrivateKey.generate()


def p256() -> PrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


KEYS = pytest.mark.parametrize("make_key", [ed25519, p256], ids=["EdDSA", "ES256"])


def _message() -> a2a_pb2.Message:
    message = a2a_pb2.Message(
        message_id="m-1",
        context_id="c-1",
        role=a2a_pb2.ROLE_USER,
        parts=[a2a_pb2.Part(text="pay 10 EUR to bob")],
        extensions=["urn:other"],
    )
    message.metadata.update({"urn:other": {"amount": 10}})
    return message


@pytest.fixture
def key() -> PrivateKey:
    return ed25519()


@pytest.fixture
def keyset(key: PrivateKey) -> KeySet:
    return KeySet.of_private_keys({"k1": key})


@KEYS
def test_sign_and_verify_a_message(make_key: Callable[[], PrivateKey]) -> None:
    key = make_key()
    original = _message()
    signed = sign_message(original, key, "k1", tenant=TENANT, ttl=120, now=NOW + 0.7)
    assert original == _message()  # the argument is not modified
    assert list(signed.extensions) == ["urn:other", SIGNED_MESSAGE_EXTENSION]
    entry = json_format.MessageToDict(signed.metadata)[SIGNED_MESSAGE_EXTENSION]
    assert list(entry) == ["jws"] and entry["jws"].split(".")[1] == ""
    header = json.loads(b64url_decode(entry["jws"].split(".")[0]))
    assert header["a2a-tenant"] == TENANT and header["typ"] == "JOSE"
    assert (header["iat"], header["exp"]) == (int(NOW), int(NOW) + 120)
    verified = verify_message(signed, KeySet.of_private_keys({"k1": key}), tenant=TENANT, now=NOW)
    assert verified == VerifiedSignature("k1", NOW, NOW + 120)


def test_signature_survives_the_wire_and_protojson(key: PrivateKey, keyset: KeySet) -> None:
    signed = sign_message(_message(), key, "k1", tenant=TENANT, now=NOW)
    wire = a2a_pb2.Message.FromString(signed.SerializeToString())
    verify_message(wire, keyset, tenant=TENANT, now=NOW)
    text = json_format.MessageToJson(signed)
    verify_message(json_format.Parse(text, a2a_pb2.Message()), keyset, tenant=TENANT, now=NOW)


def test_re_signing_replaces_the_signature(key: PrivateKey) -> None:
    first = sign_message(_message(), ed25519(), "old", tenant=TENANT, now=NOW)
    again = sign_message(first, key, "new", tenant=TENANT, now=NOW)
    assert list(again.extensions).count(SIGNED_MESSAGE_EXTENSION) == 1
    keyset = KeySet.of_private_keys({"new": key})
    assert verify_message(again, keyset, tenant=TENANT, now=NOW).kid == "new"


def _tamper_text(message: a2a_pb2.Message) -> None:
    message.parts[0].text = "pay 1000 EUR to mallory"


def _tamper_metadata(message: a2a_pb2.Message) -> None:
    message.metadata.update({"urn:other": {"amount": 1000}})


def _tamper_extensions(message: a2a_pb2.Message) -> None:
    message.extensions.remove("urn:other")


def _tamper_task(message: a2a_pb2.Message) -> None:
    message.task_id = "someone-elses-task"


def _tamper_role(message: a2a_pb2.Message) -> None:
    message.role = a2a_pb2.ROLE_AGENT


@pytest.mark.parametrize(
    "tamper", [_tamper_text, _tamper_metadata, _tamper_extensions, _tamper_task, _tamper_role]
)
def test_tampered_message_is_rejected(
    key: PrivateKey, keyset: KeySet, tamper: Callable[[a2a_pb2.Message], None]
) -> None:
    signed = sign_message(_message(), key, "k1", tenant=TENANT, now=NOW)
    tamper(signed)
    with pytest.raises(SignatureError, match="bad signature"):
        verify_message(signed, keyset, tenant=TENANT, now=NOW)


def test_unknown_kid_is_rejected(keyset: KeySet) -> None:
    signed = sign_message(_message(), ed25519(), "stranger", tenant=TENANT, now=NOW)
    with pytest.raises(SignatureError, match="unknown key id 'stranger'"):
        verify_message(signed, keyset, tenant=TENANT, now=NOW)


def test_expired_signature_is_rejected(key: PrivateKey, keyset: KeySet) -> None:
    signed = sign_message(_message(), key, "k1", tenant=TENANT, ttl=60, now=NOW)
    verify_message(signed, keyset, tenant=TENANT, now=NOW + 60)
    with pytest.raises(SignatureError, match="expired"):
        verify_message(signed, keyset, tenant=TENANT, now=NOW + 61 + DEFAULT_LEEWAY_S)


def test_wrong_tenant_is_rejected(key: PrivateKey, keyset: KeySet) -> None:
    signed = sign_message(_message(), key, "k1", tenant=TENANT, now=NOW)
    with pytest.raises(SignatureError, match="wrong tenant: signed for 'acme', received by 'evil'"):
        verify_message(signed, keyset, tenant="evil", now=NOW)
    with pytest.raises(SignatureError, match="wrong tenant"):
        verify_message(signed, keyset, tenant="", now=NOW)


def test_missing_signature_is_told_apart_from_a_bad_one(keyset: KeySet) -> None:
    with pytest.raises(MissingSignatureError, match="'m-1' is not signed"):
        verify_message(_message(), keyset, tenant=TENANT, now=NOW)
    assert message_signature(_message()) is None
    malformed = _message()
    malformed.metadata[SIGNED_MESSAGE_EXTENSION] = "not an object"
    with pytest.raises(SignatureError, match="malformed signature") as caught:
        verify_message(malformed, keyset, tenant=TENANT, now=NOW)
    assert not isinstance(caught.value, MissingSignatureError)
    garbage = _message()
    garbage.metadata[SIGNED_MESSAGE_EXTENSION] = {"jws": "garbage"}
    with pytest.raises(SignatureError, match="malformed JWS"):
        verify_message(garbage, keyset, tenant=TENANT, now=NOW)


def test_a_signature_without_exp_is_rejected(key: PrivateKey, keyset: KeySet) -> None:
    message = _message()
    message.extensions.append(SIGNED_MESSAGE_EXTENSION)
    payload = canonical_message_bytes(message, without_extension=SIGNED_MESSAGE_EXTENSION)
    token = sign_detached(payload, key, "k1", {"a2a-tenant": TENANT})
    message.metadata[SIGNED_MESSAGE_EXTENSION] = {"jws": token}
    with pytest.raises(SignatureError, match='no "exp"'):
        verify_message(message, keyset, tenant=TENANT, now=NOW)


def test_ttl_must_be_positive(key: PrivateKey) -> None:
    with pytest.raises(ValueError, match="ttl"):
        sign_message(_message(), key, "k1", tenant=TENANT, ttl=0)


CARD: dict[str, Any] = {
    "name": "echo",
    "description": "echoes — with an ümlaut",
    "version": "1",
    "supportedInterfaces": [
        {"url": "h:50051", "protocolBinding": "GRPC", "protocolVersion": "1.0", "tenant": "t"}
    ],
    "capabilities": {
        "streaming": True,
        "extensions": [{"uri": SIGNED_MESSAGE_EXTENSION, "required": True}],
    },
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain"],
    "skills": [{"id": "echo", "name": "Echo", "description": "says it back", "tags": ["x"]}],
}


def _card() -> a2a_pb2.AgentCard:
    return json_format.ParseDict(CARD, a2a_pb2.AgentCard())


@KEYS
def test_sign_and_verify_a_card(make_key: Callable[[], PrivateKey]) -> None:
    key = make_key()
    card = _card()
    signed = sign_card(card, key, "card-key")
    assert card == _card() and len(signed.signatures) == 1
    header = json.loads(b64url_decode(signed.signatures[0].protected))
    assert header["kid"] == "card-key" and header["typ"] == "JOSE"
    assert verify_card(signed, KeySet.of_private_keys({"card-key": key})) == "card-key"


def test_tampered_card_is_rejected(key: PrivateKey, keyset: KeySet) -> None:
    signed = sign_card(_card(), key, "k1")
    signed.supported_interfaces[0].url = "attacker:50051"
    with pytest.raises(SignatureError, match="#0: bad signature"):
        verify_card(signed, keyset)


def test_unsigned_card(keyset: KeySet) -> None:
    with pytest.raises(MissingSignatureError, match="'echo' is not signed"):
        verify_card(_card(), keyset)


def test_any_one_good_signature_is_enough(key: PrivateKey, keyset: KeySet) -> None:
    twice = sign_card(sign_card(_card(), ed25519(), "rotated-out"), key, "k1")
    assert verify_card(twice, keyset) == "k1"
    with pytest.raises(SignatureError, match="#0: unknown key id 'rotated-out'; #1: unknown"):
        verify_card(twice, KeySet.of_private_keys({"other": key}))


def test_card_signed_over_fields_our_proto_does_not_know(key: PrivateKey, keyset: KeySet) -> None:
    document = dict(CARD, aFieldFromTheFuture={"x": 1})
    protected, _, signature = sign_detached(canonicalize(document), key, "k1").partition("..")
    document["signatures"] = [{"protected": protected, "signature": signature}]
    card = json_format.ParseDict(document, a2a_pb2.AgentCard(), ignore_unknown_fields=True)
    with pytest.raises(SignatureError, match="bad signature"):
        verify_card(card, keyset)  # our proto dropped a signed member
    assert verify_card(card, keyset, document=document) == "k1"
    with pytest.raises(SignatureError, match="bad signature"):
        verify_card(card, keyset, document=dict(document, aFieldFromTheFuture={"x": 2}))


def test_card_signature_expiry_is_honoured(key: PrivateKey, keyset: KeySet) -> None:
    card = _card()
    token = sign_detached(canonical_card_bytes(card), key, "k1", {"exp": NOW})
    protected, _, signature = token.partition("..")
    card.signatures.add(protected=protected, signature=signature)
    assert verify_card(card, keyset, now=NOW) == "k1"
    with pytest.raises(SignatureError, match="expired"):
        verify_card(card, keyset, now=NOW + 3600)


def test_client_verify_card_signature_raises_agent_card_errors(
    key: PrivateKey, keyset: KeySet
) -> None:
    assert verify_card_signature(sign_card(_card(), key, "k1"), keyset) == "k1"
    with pytest.raises(AgentCardError, match="not signed") as caught:
        verify_card_signature(_card(), keyset)
    assert isinstance(caught.value.__cause__, MissingSignatureError)


def _serve(body: dict[str, Any]) -> httpx.AsyncClient:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=body, headers={"cache-control": "max-age=60"})

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def _signed_document(key: PrivateKey) -> dict[str, Any]:
    document: dict[str, Any] = json_format.MessageToDict(sign_card(_card(), key, "k1"))
    return document


async def test_resolver_with_a_keyset_accepts_a_signed_card(
    key: PrivateKey, keyset: KeySet
) -> None:
    async with _serve(_signed_document(key)) as http:
        card = await CardResolver(http, keyset=keyset).get("https://agent.example")
    assert card.name == "echo" and len(card.signatures) == 1


async def test_resolver_with_a_keyset_rejects_a_tampered_card(
    key: PrivateKey, keyset: KeySet
) -> None:
    document = _signed_document(key)
    document["supportedInterfaces"][0]["url"] = "attacker:50051"
    async with _serve(document) as http:
        with pytest.raises(AgentCardError, match=r"agent-card\.json: .*bad signature") as caught:
            await CardResolver(http, keyset=keyset).get("https://agent.example")
        assert isinstance(caught.value.__cause__, SignatureError)
        # Opt-in: without a key set the same card is served as before.
        card = await CardResolver(http).get("https://agent.example")
    assert card.supported_interfaces[0].url == "attacker:50051"


async def test_resolver_with_a_keyset_rejects_unsigned_and_foreign_cards(
    keyset: KeySet,
) -> None:
    async with _serve(CARD) as http:
        with pytest.raises(AgentCardError, match="not signed"):
            await CardResolver(http, keyset=keyset).get("https://agent.example")
    async with _serve(_signed_document(ed25519())) as http:
        with pytest.raises(AgentCardError, match="bad signature"):
            await CardResolver(http, keyset=keyset).get("https://agent.example")
