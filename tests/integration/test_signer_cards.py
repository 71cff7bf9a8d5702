"""Signed messages verified against the sender's agent card, over real servers and real HTTP.

Server A publishes its message-signing keys on its card; server B trusts A's card
(`trusted_signer_cards`); a client signs as A, naming A's card, and sends to B.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import ed25519
from google.protobuf import json_format

from a2a_grpc.client import A2AClient
from a2a_grpc.client.messages import user_message
from a2a_grpc.client.signing import MessageSigner
from a2a_grpc.core.jose import KeySet
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
    options.setdefault("http_port", 0)
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
    http_port = a.running.http_server.port  # type: ignore[union-attr]
    agent = Recorder()
    b = await make_server(agent, trusted_signer_cards=(a_card,))
    await b.stub.SendMessage(signed(A1, "a-1", a_card), metadata=EXT)  # B caches A's card

    # A rotates: it restarts with a new key on its card, at the same card URL. B keeps running.
    await a.running.stop(0)
    rotated = await publisher(make_server, {"a-2": A2}, http_port=http_port)
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


async def test_a_key_added_to_the_card_is_used_from_its_first_message(
    make_server: Factory, endpoint: CardEndpoint
) -> None:
    """Rotation as the card endpoint sees it: the card changes (a new ETag) while B runs."""
    agent = Recorder()
    b = await make_server(agent, trusted_signer_cards=(endpoint.url,))
    await b.stub.SendMessage(signed(A1, "a-1", endpoint.url), metadata=EXT)
    endpoint.set_keys(KeySet.of_private_keys({"a-1": A1, "a-2": A2}))  # overlap: old and new
    await b.stub.SendMessage(signed(A2, "a-2", endpoint.url), metadata=EXT)
    await b.stub.SendMessage(signed(A1, "a-1", endpoint.url), metadata=EXT)
    assert [s.kid for s in agent.signers if s is not None] == ["a-1", "a-2", "a-1"]
    assert endpoint.gets == 2  # the first fetch, and one for the unknown a-2


async def test_json_rpc_verifies_against_the_card_too(
    make_server: Factory, endpoint: CardEndpoint
) -> None:
    agent = Recorder()
    b = await make_server(agent, http_port=0, trusted_signer_cards=(endpoint.url,))
    base = card_of(b).removesuffix("/.well-known/agent-card.json")
    headers = {"A2A-Version": "1.0", "A2A-Extensions": SIGNED_MESSAGE_EXTENSION}
    async with httpx.AsyncClient() as http:
        for key, expected in ((A1, "result"), (A2, "error")):  # A2: not A's key a-1
            params = json_format.MessageToDict(signed(key, "a-1", endpoint.url))
            body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
            answer = (await http.post(base + "/", json=body, headers=headers)).json()
            assert expected in answer, answer
    assert answer["error"]["code"] == -32602 and "bad signature" in answer["error"]["message"]
    assert agent.signers == [Signer("a-1", endpoint.url, "a2a-grpc demo agent")]


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


# --- docs/trust.md's walk-through, as a user runs it ---------------------------------------------


def cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "a2a_grpc.cli.main", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


class Serve:
    """`a2a-grpc serve ARGS` as a process; `address` and `card` read from what it prints."""

    def __init__(self, *argv: str, cwd: Path) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "a2a_grpc.cli.main",
                "serve",
                "--port",
                "0",
                "--drain-delay",
                "0",
                *argv,
            ],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self.process.stdout is not None
        try:
            first = self.process.stdout.readline()
            assert "serving A2A 1.0" in first, f"serve {argv} did not start: {first!r}"
            self.address = first.rsplit(" on ", 1)[1].strip()
            second = self.process.stdout.readline()
            self.card = second.split("agent card at ", 1)[1].split(";", 1)[0].strip()
        except BaseException:
            self.process.kill()
            self.process.communicate()
            raise

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.communicate(timeout=20)
            return self.process.returncode
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.communicate()


def test_the_readme_walk_through_with_the_cli(tmp_path: Path) -> None:
    made = cli("keys", "new", "--kid", "a-1", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "a-1.pem").stat().st_mode & 0o777 == 0o600
    a = Serve("--publish-signing-keys", "a-1.jwks.json", cwd=tmp_path)
    try:
        b = Serve(
            "--trusted-signer-cards",
            a.card.removesuffix("/.well-known/agent-card.json"),  # the origin is enough
            "--require-signed-messages",
            "--audit-log",
            "b-audit.jsonl",
            cwd=tmp_path,
        )
        try:
            sent = cli(
                "send",
                b.address,
                "hello from A",
                "--sign-key",
                "a-1.pem",
                "--sign-kid",
                "a-1",
                "--sign-card",
                a.card,
                cwd=tmp_path,
            )
            assert sent.returncode == 0, sent.stderr
            assert "completed" in sent.stdout
            unsigned = cli("send", b.address, "hello", cwd=tmp_path)
            assert unsigned.returncode == 5
            assert f"requires the extension(s) {SIGNED_MESSAGE_EXTENSION}" in unsigned.stderr
            bad = cli("send", b.address, "x", "--sign-kid", "a-1", cwd=tmp_path)
            assert bad.returncode == 2 and "--sign-key and --sign-kid" in bad.stderr
            sign = ("--sign-key", "a-1.pem", "--sign-kid", "a-1")
            bad = cli("send", b.address, "x", *sign, "--sign-card", "a.example", cwd=tmp_path)
            assert bad.returncode == 2 and "--sign-card 'a.example'" in bad.stderr
        finally:
            assert b.stop() == 0
    finally:
        assert a.stop() == 0
    rows = [json.loads(line) for line in (tmp_path / "b-audit.jsonl").read_text().splitlines()]
    (outcome,) = [r for r in rows if r["kind"] == "outcome"]
    assert outcome["signer"]["kid"] == "a-1" and outcome["signer"]["card_url"] == a.card


async def test_reloaded_signing_keys_reach_both_cards(make_server: Factory) -> None:
    card = demo_card("127.0.0.1:0")
    card.capabilities.extended_agent_card = True
    extended = demo_card("127.0.0.1:0")
    harness = await make_server(
        card=card,
        extended_card=extended,
        tokens={"t": "alice"},
        signing_keys=KeySet.of_private_keys({"a-1": A1}),
    )
    harness.running.reload_signing_keys(KeySet.of_private_keys({"a-1": A1, "a-2": A2}))
    got = await harness.stub.GetExtendedAgentCard(
        a2a_pb2.GetExtendedAgentCardRequest(),
        metadata=(("authorization", "Bearer t"), ("a2a-version", "1.0")),
    )
    assert set(card_signing_keys(got)) == {"a-1", "a-2"}
    assert set(card_signing_keys(harness.running.handler.card)) == {"a-1", "a-2"}
    before = harness.running.handler.card
    harness.running.reload_signing_keys(KeySet.of_private_keys({"a-1": A1, "a-2": A2}))
    assert harness.running.handler.card is before  # the same keys: nothing is re-signed
    plain = await make_server()
    with pytest.raises(ValueError, match="without --publish-signing-keys"):
        plain.running.reload_signing_keys(KeySet.of_private_keys({"a-1": A1}))
