"""Signer cards without sockets: card URL normalization, the signed `a2a-card` header, the
key cache's refresh and failure intervals on an injected clock."""

from __future__ import annotations

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from a2a_grpc.client.signing import MessageSigner
from a2a_grpc.core.cards import card_url
from a2a_grpc.core.jose import KeySet, SignatureError
from a2a_grpc.core.signing import (
    card_signing_keys,
    claimed_signer,
    message_signature,
    publish_signing_keys,
    verify_message,
)
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.card import demo_card, to_json
from a2a_grpc.server.trust.signers import SignerCards, SignerCardUnavailableError

KEY = Ed25519PrivateKey.generate()
URL = "https://a.example/.well-known/agent-card.json"


def test_card_urls_are_normalized() -> None:
    assert card_url("HTTPS://A.Example:443") == URL
    assert card_url("http://a.example:80/") == "http://a.example/.well-known/agent-card.json"
    assert card_url("http://[::1]:8080") == "http://[::1]:8080/.well-known/agent-card.json"
    for bad in ("https://user@a.example", "https://a.example:99999", "a.example"):
        with pytest.raises(ValueError):
            card_url(bad)


def test_the_signer_names_its_card_in_the_protected_header() -> None:
    signer = MessageSigner(KEY, "a-1", card_url="https://A.example")
    message = a2a_pb2.Message(message_id="m", role=a2a_pb2.ROLE_USER)
    message.parts.add(text="hi")
    signed = signer.sign(message, tenant="")
    token = message_signature(signed)
    assert token is not None
    assert claimed_signer(token) == ("a-1", URL)
    verified = verify_message(signed, KeySet.of_private_keys({"a-1": KEY}), tenant="")
    assert verified.card_url == URL
    with pytest.raises(ValueError):
        MessageSigner(KEY, "a-1", card_url="not a url")


def test_a_card_without_published_keys_says_so() -> None:
    card = demo_card("h:1")
    with pytest.raises(SignatureError, match="publishes no message-signing keys"):
        card_signing_keys(card)
    publish_signing_keys(card, KeySet.of_private_keys({"a-1": KEY}), verifies=False)
    card.capabilities.extensions[-1].params.update({"jwks": {"keys": [{"kid": "x"}]}})
    with pytest.raises(SignatureError, match="malformed signing keys"):
        card_signing_keys(card)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class HttpServer:
    """httpx MockTransport handler: serves a card with these keys, or fails."""

    def __init__(self, keys: KeySet) -> None:
        self.card = demo_card("h:1")
        publish_signing_keys(self.card, keys, verifies=False)
        self.requests = 0
        self.down = False

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        if self.down:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(
            200, text=to_json(self.card), headers={"cache-control": "max-age=300"}
        )


async def test_unknown_kid_refresh_is_allowed_again_after_the_interval() -> None:
    server, clock = HttpServer(KeySet.of_private_keys({"a-1": KEY})), Clock()
    async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as http:
        cards = SignerCards([URL], http=http, clock=clock, refresh_interval=10)
        await cards.keys(URL, "a-1")
        for kid in ("x", "y"):
            with pytest.raises(SignatureError, match="unknown key id"):
                await cards.keys(URL, kid)
        assert server.requests == 2  # one forced refresh within the interval
        clock.now = 10
        with pytest.raises(SignatureError, match="unknown key id"):
            await cards.keys(URL, "z")
        assert server.requests == 3


async def test_a_failed_fetch_is_remembered_for_the_interval() -> None:
    server, clock = HttpServer(KeySet.of_private_keys({"a-1": KEY})), Clock()
    server.down = True
    async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as http:
        cards = SignerCards([URL], http=http, clock=clock, refresh_interval=10)
        for _ in range(3):
            with pytest.raises(SignerCardUnavailableError, match="could not fetch"):
                await cards.keys(URL, "a-1")
        assert server.requests == 1
        server.down = False
        clock.now = 10
        card, keys = await cards.keys(URL, "a-1")
        assert "a-1" in keys and card.name == server.card.name
        assert server.requests == 2


async def test_an_unknown_kid_while_the_card_host_is_down_locks_out_no_one() -> None:
    """A made-up key id forces a fetch of the card; when that fetch fails, only that message
    is refused: the cached card keeps verifying its own keys."""
    server, clock = HttpServer(KeySet.of_private_keys({"a-1": KEY})), Clock()
    async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as http:
        cards = SignerCards([URL], http=http, clock=clock, refresh_interval=10)
        await cards.keys(URL, "a-1")
        server.down = True
        with pytest.raises(SignerCardUnavailableError, match="key id it did not publish"):
            await cards.keys(URL, "made-up")
        _, keys = await cards.keys(URL, "a-1")  # still verified from the cached card
        assert "a-1" in keys
        assert server.requests == 2


async def test_only_trusted_cards_are_fetched() -> None:
    server = HttpServer(KeySet.of_private_keys({"a-1": KEY}))
    async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as http:
        cards = SignerCards(["https://a.example"], http=http)
        assert cards.trusted == (URL,)
        for claimed in ("https://b.example", "https://a.example/other.json", "ftp://a.example"):
            with pytest.raises(SignatureError, match=r"untrusted signer card|not usable"):
                await cards.keys(claimed, "a-1")
    assert server.requests == 0
