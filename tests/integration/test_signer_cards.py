"""Signed messages verified against the sender's agent card, over real servers and real HTTP.

Server A publishes its message-signing keys on its card; server B trusts A's card
(`trusted_signer_cards`); a client signs as A, naming A's card, and sends to B.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import ed25519

from a2a_grpc.client import A2AClient
from a2a_grpc.client.messages import user_message
from a2a_grpc.client.signing import MessageSigner
from a2a_grpc.core.jws import KeySet
from a2a_grpc.core.signing import (
    SIGNED_MESSAGE_EXTENSION,
    Signer,
    card_signing_keys,
    publish_signing_keys,
    sign_message,
)
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from a2a_grpc.server.card import demo_card, to_json
from tests.integration.conftest import Factory, Harness, error_reason, send_request

A1 = ed25519.Ed25519PrivateKey.generate()
A2 = ed25519.Ed25519PrivateKey.generate()
EXT = (("a2a-version", "1.0"), ("a2a-extensions", SIGNED_MESSAGE_EXTENSION))


class Recorder:
    """Completes every task; keeps who signed each message."""

    def __init__(self) -> None:
        self.signers: list[Signer | None] = []

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        self.signers.append(context.signer)
        await events.complete()


def signed(key: Any, kid: str, card: str, text: str = "hello") -> a2a_pb2.SendMessageRequest:
    request = send_request(text)
    request.message.CopyFrom(sign_message(request.message, key, kid, tenant="", card_url=card))
    return request


async def refused(harness: Harness, request: a2a_pb2.SendMessageRequest) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await harness.stub.SendMessage(request, metadata=EXT)
    return caught.value


async def publisher(make_server: Factory, keys: dict[str, Any], **options: Any) -> Harness:
    """Server A: serves its card over HTTP with these keys' public halves on it."""
    options.setdefault("card_port", 0)
    return await make_server(signing_keys=KeySet.of_private_keys(keys), **options)


def card_of(harness: Harness) -> str:
    url = harness.running.card_url
    assert url is not None
    return url


async def test_two_servers_that_know_each_other_only_by_their_cards(
    make_server: Factory, tmp_path: Path
) -> None:
    a = await publisher(make_server, {"a-1": A1})
    a_card = card_of(a)
    async with httpx.AsyncClient() as http:
        published = (await http.get(a_card)).json()
    (entry,) = [
        e for e in published["capabilities"]["extensions"] if e["uri"] == SIGNED_MESSAGE_EXTENSION
    ]
    assert [key["kid"] for key in entry["params"]["jwks"]["keys"]] == ["a-1"]
    assert "d" not in entry["params"]["jwks"]["keys"][0]  # public halves only

    agent = Recorder()
    log = tmp_path / "b-audit.jsonl"
    b = await make_server(
        agent,
        trusted_signer_cards=(a_card,),
        require_signed_messages=True,
        audit_log=str(log),
    )
    signer = MessageSigner(A1, "a-1", card_url=a_card)
    async with A2AClient.connect(b.running.address, signer=signer) as client:
        task = await client.send_message(user_message("hello from A"))
    assert isinstance(task, a2a_pb2.Task)
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED

    a_name = a.running.handler.card.name
    (seen,) = agent.signers
    assert seen == Signer("a-1", a_card, a_name)
    assert seen.origin == a_card.removesuffix("/.well-known/agent-card.json")

    await b.running.stop(0)  # flushes the trail
    outcomes = [json.loads(line) for line in log.read_text().splitlines()]
    (outcome,) = [r for r in outcomes if r["kind"] == "outcome"]
    assert outcome["task_id"] == task.id
    assert outcome["signer"] == {
        "kid": "a-1",
        "card_url": a_card,
        "card_name": a_name,
        "origin": seen.origin,
    }


async def test_b_offers_the_extension_and_refuses_unsigned_and_forged_messages(
    make_server: Factory,
) -> None:
    a = await publisher(make_server, {"a-1": A1})
    agent = Recorder()
    b = await make_server(agent, trusted_signer_cards=(card_of(a),), require_signed_messages=True)
    (ext,) = [
        e
        for e in b.running.handler.card.capabilities.extensions
        if e.uri == SIGNED_MESSAGE_EXTENSION
    ]
    assert ext.required
    mallory = ed25519.Ed25519PrivateKey.generate()
    cases = {
        "only accepts signed": send_request("unsigned"),
        "bad signature": signed(mallory, "a-1", card_of(a)),  # A's kid, someone else's key
        "names no signer card": signed(A1, "a-1", ""),  # no card, and B has no key file
    }
    for words, request in cases.items():
        error = await refused(b, request)
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, words
        assert error_reason(error) == "INVALID_PARAMS", words
        assert words in (error.details() or ""), words
    assert agent.signers == []


async def test_a_rotated_key_is_verified_without_restarting_the_verifier(
    make_server: Factory,
) -> None:
    a = await publisher(make_server, {"a-1": A1})
    a_card = card_of(a)
    http_port = a.running.card_server.port  # type: ignore[union-attr]
    agent = Recorder()
    b = await make_server(agent, trusted_signer_cards=(a_card,))
    await b.stub.SendMessage(signed(A1, "a-1", a_card), metadata=EXT)  # B caches A's card

    # A rotates: it restarts with a new key on its card, at the same card URL. B keeps running.
    await a.running.stop(0)
    rotated = await publisher(make_server, {"a-2": A2}, card_port=http_port)
    assert card_of(rotated) == a_card

    response = await b.stub.SendMessage(signed(A2, "a-2", a_card), metadata=EXT)
    assert response.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert [s.kid for s in agent.signers if s is not None] == ["a-1", "a-2"]
    error = await refused(b, signed(A1, "a-1", a_card))  # the retired key is gone from the card
    assert "unknown key id 'a-1'" in (error.details() or "")
    assert "publishes a-2" in (error.details() or "")


class CardEndpoint:
    """A real HTTP endpoint serving one agent card whose keys the test changes; counts GETs and
    answers a matching If-None-Match with 304."""

    def __init__(self, keys: KeySet) -> None:
        self.gets = 0
        self.body = b""
        self.etag = ""
        self.url = ""
        self.set_keys(keys)
        self._runner: web.AppRunner | None = None

    def set_keys(self, keys: KeySet) -> None:
        card = demo_card("127.0.0.1:1")
        publish_signing_keys(card, keys, verifies=False)
        self.body = to_json(card).encode()
        self.etag = '"' + hashlib.sha256(self.body).hexdigest()[:16] + '"'

    async def _card(self, request: web.Request) -> web.Response:
        self.gets += 1
        headers = {"ETag": self.etag, "Cache-Control": "max-age=300"}
        if request.headers.get("If-None-Match") == self.etag:
            return web.Response(status=304, headers=headers)
        return web.Response(body=self.body, content_type="application/json", headers=headers)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/.well-known/agent-card.json", self._card)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(self._runner, sock).start()
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/.well-known/agent-card.json"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture
async def endpoint() -> AsyncIterator[CardEndpoint]:
    served = CardEndpoint(KeySet.of_private_keys({"a-1": A1}))
    await served.start()
    yield served
    await served.stop()


async def test_unknown_key_ids_refetch_the_card_at_most_once_per_interval(
    make_server: Factory, endpoint: CardEndpoint
) -> None:
    b = await make_server(Recorder(), trusted_signer_cards=(endpoint.url,))
    await b.stub.SendMessage(signed(A1, "a-1", endpoint.url), metadata=EXT)
    await b.stub.SendMessage(signed(A1, "a-1", endpoint.url), metadata=EXT)
    assert endpoint.gets == 1  # fresh (max-age=300): served from B's cache

    stranger = ed25519.Ed25519PrivateKey.generate()
    error = await refused(b, signed(stranger, "made-up-1", endpoint.url))
    assert "unknown key id 'made-up-1'" in (error.details() or "")
    assert endpoint.gets == 2  # one revalidation (a 304) in case the key was new
    for kid in ("made-up-2", "made-up-3", "made-up-4"):
        error = await refused(b, signed(stranger, kid, endpoint.url))
        assert "at most every 10 s" in (error.details() or "")
    assert endpoint.gets == 2  # rate-limited: invented key ids cannot make B hammer the card


async def test_concurrent_messages_share_one_fetch_of_the_card(
    make_server: Factory, endpoint: CardEndpoint
) -> None:
    agent = Recorder()
    b = await make_server(agent, trusted_signer_cards=(endpoint.url,))
    requests = [signed(A1, "a-1", endpoint.url, f"m{i}") for i in range(8)]
    await asyncio.gather(*(b.stub.SendMessage(r, metadata=EXT) for r in requests))
    assert endpoint.gets == 1 and len(agent.signers) == 8


async def test_an_untrusted_card_is_refused_and_never_fetched(
    make_server: Factory, endpoint: CardEndpoint
) -> None:
    trusted = endpoint.url.replace("/.well-known/agent-card.json", "/other-card.json")
    b = await make_server(Recorder(), trusted_signer_cards=(trusted,))
    error = await refused(b, signed(A1, "a-1", endpoint.url))
    assert error_reason(error) == "INVALID_PARAMS"
    assert f"untrusted signer card {endpoint.url}" in (error.details() or "")
    assert trusted in (error.details() or "")
    assert endpoint.gets == 0


async def test_card_signatures_are_checked_with_signer_card_keys(make_server: Factory) -> None:
    card_key = ed25519.Ed25519PrivateKey.generate()
    a = await publisher(make_server, {"a-1": A1}, card_signer=(card_key, "card-1"))
    trusting = await make_server(
        Recorder(),
        trusted_signer_cards=(card_of(a),),
        signer_card_keys=KeySet.of_private_keys({"card-1": card_key}),
    )
    response = await trusting.stub.SendMessage(signed(A1, "a-1", card_of(a)), metadata=EXT)
    assert response.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    other = KeySet.of_private_keys({"card-1": ed25519.Ed25519PrivateKey.generate()})
    wary = await make_server(Recorder(), trusted_signer_cards=(card_of(a),), signer_card_keys=other)
    error = await refused(wary, signed(A1, "a-1", card_of(a)))
    assert "signer card cannot be used" in (error.details() or "")
    assert "bad signature" in (error.details() or "")


async def test_an_unreachable_card_is_a_prompt_clear_error(make_server: Factory) -> None:
    a = await publisher(make_server, {"a-1": A1})
    a_card = card_of(a)
    b = await make_server(Recorder(), trusted_signer_cards=(a_card,))
    await a.running.stop(0)  # A is down: its card port refuses connections
    for _ in range(2):  # the second is answered from the remembered failure
        error = await refused(b, signed(A1, "a-1", a_card))
        assert error.code() == grpc.StatusCode.UNAVAILABLE
        assert f"could not fetch the agent card {a_card}" in (error.details() or "")
        assert "fetched again 10 s after this failure" in (error.details() or "")
    # Our client does not retry it: the caller hears at once.
    async with A2AClient.connect(
        b.running.address, signer=MessageSigner(A1, "a-1", card_url=a_card)
    ) as client:
        with pytest.raises(Exception, match="could not fetch the agent card"):
            await client.send_message(user_message("x"))


@pytest.fixture
def black_hole() -> Iterator[str]:
    """A card URL whose server accepts the connection and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)  # never accepted: the kernel completes handshakes, nobody replies
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


async def test_a_card_that_never_answers_is_bounded_by_the_timeout(
    make_server: Factory, black_hole: str
) -> None:
    b = await make_server(Recorder(), trusted_signer_cards=(black_hole,), signer_card_timeout=0.3)
    error = await refused(b, signed(A1, "a-1", black_hole))
    assert error.code() == grpc.StatusCode.UNAVAILABLE
    assert "timed out after 0.3 s fetching the agent card" in (error.details() or "")


async def test_a_local_key_file_still_works_beside_trusted_cards(
    make_server: Factory, endpoint: CardEndpoint
) -> None:
    """A message naming no card is verified with --signature-keys; one naming a card, with
    the card (the local file's identical kid is not consulted for it)."""
    local = ed25519.Ed25519PrivateKey.generate()
    agent = Recorder()
    b = await make_server(
        agent,
        trusted_signer_cards=(endpoint.url,),
        signature_keys=KeySet.of_private_keys({"a-1": local}),
    )
    await b.stub.SendMessage(signed(local, "a-1", ""), metadata=EXT)
    await b.stub.SendMessage(signed(A1, "a-1", endpoint.url), metadata=EXT)
    assert agent.signers == [Signer("a-1"), Signer("a-1", endpoint.url, "a2a-grpc demo agent")]
    error = await refused(b, signed(local, "a-1", endpoint.url))
    assert "bad signature" in (error.details() or "")


def test_card_signing_keys_reads_back_what_the_card_publishes() -> None:
    card = demo_card("127.0.0.1:1")
    publish_signing_keys(card, KeySet.of_private_keys({"a-1": A1, "a-2": A2}), verifies=True)
    assert sorted(card_signing_keys(card)) == ["a-1", "a-2"]
