"""The agent card over HTTP, the extended card, and caller identity (bearer tokens and mTLS)."""

from __future__ import annotations

import contextlib
import json
import ssl
import time
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519
from google.protobuf import json_format
from grpc_health.v1 import health_pb2, health_pb2_grpc

from a2a_grpc.core import exit_codes
from a2a_grpc.core.canonical import canonicalize
from a2a_grpc.core.jose import KeySet, SignatureError, verify_detached
from a2a_grpc.core.signing import card_signing_keys, verify_card
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.server.agent import RequestContext, TaskEvents
from a2a_grpc.server.app import ServerPlan, start_server
from a2a_grpc.server.card import demo_card, load_card
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.demo_agent import DemoAgent
from a2a_grpc.server.trust.tls import TlsFiles
from tests.integration.certs import Authority
from tests.integration.conftest import Factory, error_reason, send_request
from tests.integration.serve_process import run_serve, serving

TOKENS = {"alice-token": "alice", "bob-token": "bob"}
ALICE = (("a2a-version", "1.0"), ("authorization", "Bearer alice-token"))
BOB = (("a2a-version", "1.0"), ("authorization", "Bearer bob-token"))
CARD_KEY = ed25519.Ed25519PrivateKey.generate()
CARD_KEYS = KeySet.of_private_keys({"card-1": CARD_KEY})


async def test_card_is_served_with_cache_validators(make_server: Factory) -> None:
    harness = await make_server(http_port=0, card_max_age=120)
    url = harness.running.card_url
    assert url is not None and url.endswith("/.well-known/agent-card.json")
    async with httpx.AsyncClient() as http:
        first = await http.get(url)
        assert first.status_code == 200
        assert first.headers["content-type"].startswith("application/json")
        assert first.headers["cache-control"] == "public, max-age=120"
        etag = first.headers["etag"]
        assert first.headers["last-modified"].endswith("GMT")
        card = first.json()
        http_base = url.removesuffix("/.well-known/agent-card.json")
        assert card["supportedInterfaces"] == [
            {
                "url": f"127.0.0.1:{harness.running.port}",
                "protocolBinding": "GRPC",
                "protocolVersion": "1.0",
            },
            {"url": f"{http_base}/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": http_base, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
            {
                "url": f"127.0.0.1:{harness.running.port}",
                "protocolBinding": "GRPC",
                "protocolVersion": "0.3",
            },
        ]
        assert card["capabilities"] == {
            "streaming": True,
            "pushNotifications": True,
            "extendedAgentCard": False,
            "extensions": [
                {
                    "uri": "urn:a2a-grpc:budget:v1",
                    "description": "Requests may state a budget; tasks report their cost.",
                }
            ],
        }
        assert "defaultInputModes" in card
        again = await http.get(url, headers={"If-None-Match": etag})
        assert again.status_code == 304
        assert again.content == b""
        assert again.headers["etag"] == etag
        other = await http.get(url, headers={"If-None-Match": '"something-else"'})
        assert other.status_code == 200


def test_card_file_loading(tmp_path: Path) -> None:
    good = tmp_path / "card.json"
    good.write_text(
        json.dumps(
            {
                "name": "Billing agent",
                "description": "answers billing questions",
                "version": "2.1.0",
                "capabilities": {"streaming": True},
                "defaultInputModes": ["text/plain"],
                "defaultOutputModes": ["text/plain"],
                "skills": [{"id": "b", "name": "billing", "description": "d", "tags": ["x"]}],
            }
        )
    )
    card = load_card(str(good))
    assert card.name == "Billing agent" and card.skills[0].id == "b"
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x", "nonsense": 1}')
    with pytest.raises(ValueError, match="not a valid AgentCard"):
        load_card(str(bad))
    thin = tmp_path / "thin.json"
    thin.write_text('{"name": "x"}')
    with pytest.raises(ValueError, match="needs description, version, skills"):
        load_card(str(thin))
    with pytest.raises(ValueError, match="cannot read"):
        load_card(str(tmp_path / "missing.json"))


async def test_calls_without_valid_credentials_are_refused_before_any_lookup(
    make_server: Factory,
) -> None:
    harness = await make_server(tokens=TOKENS)
    task = (await harness.stub.SendMessage(send_request(), metadata=ALICE)).task
    for metadata in (
        (("a2a-version", "1.0"),),
        (("authorization", "Bearer wrong"),),
        (("authorization", "Basic YWxpY2U6eA=="),),
    ):
        for task_id in (task.id, "no-such-task"):  # existing or not, the answer is the same
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=metadata)
            assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async for _ in harness.stub.SubscribeToTask(
                a2a_pb2.SubscribeToTaskRequest(id=task.id), metadata=metadata
            ):
                pass
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    # Probes stay open.
    health = health_pb2_grpc.HealthStub(harness.channel)
    reply = await health.Check(health_pb2.HealthCheckRequest())
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_one_principal_cannot_see_anothers_tasks(make_server: Factory) -> None:
    harness = await make_server(tokens=TOKENS)
    stub = harness.stub
    mine = (await stub.SendMessage(send_request("ask"), metadata=ALICE)).task
    for call in (
        stub.GetTask(a2a_pb2.GetTaskRequest(id=mine.id), metadata=BOB),
        stub.CancelTask(a2a_pb2.CancelTaskRequest(id=mine.id), metadata=BOB),
        stub.SendMessage(send_request("x", task_id=mine.id), metadata=BOB),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert error_reason(caught.value) == "TASK_NOT_FOUND"
    assert (await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=BOB)).total_size == 0
    assert (await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=ALICE)).total_size == 1
    # The same message id from two principals is two messages.
    request = send_request("hello")
    a = (await stub.SendMessage(request, metadata=ALICE)).task
    b = (await stub.SendMessage(request, metadata=BOB)).task
    assert a.id != b.id


async def test_card_declares_the_security_in_force(make_server: Factory) -> None:
    harness = await make_server(tokens=TOKENS)
    card = harness.running.handler.card
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
    assert "bearer" in card.security_requirements[0].schemes


async def test_extended_card(make_server: Factory) -> None:
    public = demo_card("127.0.0.1:0")
    public.capabilities.extended_agent_card = True
    extended = demo_card("127.0.0.1:0")
    extended.skills.add(id="secret", name="Secret", description="for members", tags=["x"])
    request = a2a_pb2.GetExtendedAgentCardRequest()

    configured = await make_server(card=public, extended_card=extended, tokens=TOKENS)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await configured.stub.GetExtendedAgentCard(request)
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    card = await configured.stub.GetExtendedAgentCard(request, metadata=ALICE)
    assert [s.id for s in card.skills] == [s.id for s in public.skills] + ["secret"]

    unconfigured = await make_server(card=public, tokens=TOKENS)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await unconfigured.stub.GetExtendedAgentCard(request, metadata=ALICE)
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_reason(caught.value) == "EXTENDED_AGENT_CARD_NOT_CONFIGURED"

    open_server = await make_server(card=public, extended_card=extended)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await open_server.stub.GetExtendedAgentCard(request)
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED  # anonymous is not enough


async def test_extended_card_is_complete(make_server: Factory) -> None:
    # Decision §9.9: clients swap their cached card for the extended one, so it must still say
    # where and how to call: interfaces, capabilities in force, security schemes, requirements.
    public = demo_card("127.0.0.1:0")
    del public.supported_interfaces[:]
    public.capabilities.extended_agent_card = True
    extended = a2a_pb2.AgentCard(
        name="members card",
        description="more skills",
        version="2",
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[a2a_pb2.AgentSkill(id="secret", name="Secret", description="x", tags=["x"])],
    )
    extended.capabilities.extensions.add(uri="urn:example:members-only")
    extended.security_schemes["apikey"].api_key_security_scheme.name = "x-key"
    harness = await make_server(card=public, extended_card=extended, tokens=TOKENS)
    served = harness.running.handler.card
    card = await harness.stub.GetExtendedAgentCard(
        a2a_pb2.GetExtendedAgentCardRequest(), metadata=ALICE
    )
    assert card.name == "members card" and [s.id for s in card.skills] == ["secret"]
    assert list(card.supported_interfaces) == list(served.supported_interfaces)
    assert card.supported_interfaces[0].url == f"127.0.0.1:{harness.running.port}"
    assert card.capabilities.streaming and card.capabilities.push_notifications
    assert card.capabilities.extended_agent_card
    uris = [ext.uri for ext in card.capabilities.extensions]
    assert uris == [ext.uri for ext in served.capabilities.extensions] + [
        "urn:example:members-only"
    ]
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
    assert card.security_schemes["apikey"].api_key_security_scheme.name == "x-key"
    assert list(card.security_requirements) == list(served.security_requirements)


class CallerRecorder(DemoAgent):
    """The demo agent, noting the principal of every message it is given."""

    def __init__(self) -> None:
        self.callers: list[str] = []

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        self.callers.append(context.caller)
        await super().execute(context, events)


async def test_mutual_tls_principal_comes_from_the_client_certificate() -> None:
    ca = Authority()
    server_pem = ca.issue("localhost", server=True)
    tls = TlsFiles(server_pem.certificate, server_pem.key, client_ca=ca.certificate)
    agent = CallerRecorder()
    running = await start_server(
        ServerPlan(
            ServerConfig(host="127.0.0.1", port=0, shutdown_grace=0.1, drain_delay=0),
            agent,
            tls=tls,
        )
    )
    channels: list[grpc.aio.Channel] = []

    def stub_for(common_name: str | None) -> a2a_pb2_grpc.A2AServiceStub:
        client = ca.issue(common_name) if common_name else None
        credentials = grpc.ssl_channel_credentials(
            root_certificates=ca.certificate,
            private_key=client.key if client else None,
            certificate_chain=client.certificate if client else None,
        )
        channel = grpc.aio.secure_channel(f"127.0.0.1:{running.port}", credentials)
        channels.append(channel)
        return a2a_pb2_grpc.A2AServiceStub(channel)

    try:
        alice, bob = stub_for("alice"), stub_for("bob")
        task = (await alice.SendMessage(send_request())).task
        assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
        assert (await alice.GetTask(a2a_pb2.GetTaskRequest(id=task.id))).id == task.id
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await bob.GetTask(a2a_pb2.GetTaskRequest(id=task.id))
        assert error_reason(caught.value) == "TASK_NOT_FOUND"
        assert agent.callers == ["cert:alice"]
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub_for(None).GetTask(a2a_pb2.GetTaskRequest(id=task.id), timeout=5)
        assert caught.value.code() in (
            grpc.StatusCode.UNAVAILABLE,  # the handshake fails without a client certificate
            grpc.StatusCode.UNAUTHENTICATED,
        )
        assert "mtls" in running.handler.card.security_schemes
    finally:
        for channel in channels:
            await channel.close()
        await running.stop(0)


async def test_tokens_and_client_certificates_together_require_both() -> None:
    # grpc's Python server cannot make a client certificate optional, so with both configured
    # both are required, and the card and the start-up line say so.
    ca = Authority()
    server_pem = ca.issue("localhost", server=True)
    tls = TlsFiles(server_pem.certificate, server_pem.key, client_ca=ca.certificate)
    running = await start_server(
        ServerPlan(
            ServerConfig(host="127.0.0.1", port=0, shutdown_grace=0.1, drain_delay=0),
            DemoAgent(),
            tls=tls,
            tokens=TOKENS,
        )
    )
    client = ca.issue("svc")
    credentials = grpc.ssl_channel_credentials(
        root_certificates=ca.certificate,
        private_key=client.key,
        certificate_chain=client.certificate,
    )
    channel = grpc.aio.secure_channel(f"127.0.0.1:{running.port}", credentials)
    stub = a2a_pb2_grpc.A2AServiceStub(channel)
    try:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.SendMessage(send_request())
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "both" in (caught.value.details() or "")
        task = (await stub.SendMessage(send_request(), metadata=ALICE)).task
        get = a2a_pb2.GetTaskRequest(id=task.id)
        assert (await stub.GetTask(get, metadata=ALICE)).id == task.id
        with pytest.raises(grpc.aio.AioRpcError) as caught:  # same certificate, other token
            await stub.GetTask(get, metadata=BOB)
        assert error_reason(caught.value) == "TASK_NOT_FOUND"
        (requirement,) = running.handler.card.security_requirements
        assert set(requirement.schemes) == {"bearer", "mtls"}
    finally:
        await channel.close()
        await running.stop(0)


V03_FIELDS = {"url", "preferredTransport", "protocolVersion", "additionalInterfaces"}


def strict_card(body: str) -> a2a_pb2.AgentCard:
    """The card as a strict A2A 1.0 reader parses it: any member 1.0 does not define fails."""
    return json_format.Parse(body, a2a_pb2.AgentCard())


@pytest.mark.parametrize("variant", ["default", "tokens", "signed", "tls"])
async def test_the_served_card_is_a_strict_1_0_card(make_server: Factory, variant: str) -> None:
    # Issue #31: 0.3's fields next to 1.0's failed the TCK's CARD-STRUCT-001 and strict parsers.
    options: dict[str, Any] = {"http_port": 0}
    verify: Any = None
    if variant == "tokens":
        options["tokens"] = TOKENS
    elif variant == "signed":
        options["card_signer"] = (CARD_KEY, "card-1")
    elif variant == "tls":
        ca = Authority()
        pem = ca.issue("server", server=True)
        options["tls"] = TlsFiles(pem.certificate, pem.key)
        verify = ssl.create_default_context(cadata=ca.certificate.decode())
    harness = await make_server(**options)
    assert harness.running.card_url is not None
    async with httpx.AsyncClient(verify=verify or True) as http:
        response = await http.get(harness.running.card_url)
    response.raise_for_status()
    card = strict_card(response.text)
    assert not V03_FIELDS & set(response.json())
    # A2A 0.3 is still served, and listed the 1.0 way.
    assert {i.protocol_version for i in card.supported_interfaces} == {"1.0", "0.3"}
    if variant == "signed":
        assert verify_card(card, CARD_KEYS) == "card-1"


async def test_the_extended_card_over_http_is_a_strict_1_0_card(make_server: Factory) -> None:
    public = demo_card("127.0.0.1:0")
    public.capabilities.extended_agent_card = True
    extended = demo_card("127.0.0.1:0")
    extended.skills.add(id="secret", name="Secret", description="for members", tags=["x"])
    harness = await make_server(
        card=public,
        extended_card=extended,
        tokens=TOKENS,
        card_signer=(CARD_KEY, "card-1"),
        http_port=0,
        card_v03_fields=True,  # the extended card is never the HTTP card's document
    )
    assert harness.running.card_url is not None
    base = harness.running.card_url.removesuffix("/.well-known/agent-card.json")
    headers = {"a2a-version": "1.0", "authorization": "Bearer alice-token"}
    async with httpx.AsyncClient() as http:
        response = await http.get(base + "/extendedAgentCard", headers=headers)
    response.raise_for_status()
    card = strict_card(response.text)
    assert "secret" in {skill.id for skill in card.skills}
    assert verify_card(card, CARD_KEYS) == "card-1"


async def test_card_v03_fields_adds_what_0_3_clients_read(make_server: Factory) -> None:
    plain = await make_server(http_port=0, tokens=TOKENS)
    both = await make_server(http_port=0, tokens=TOKENS, card_v03_fields=True)
    async with httpx.AsyncClient() as http:
        bodies = [(await http.get(str(h.running.card_url))).text for h in (plain, both)]
    document = json.loads(bodies[1])
    assert set(document) >= V03_FIELDS
    assert document["preferredTransport"] == "GRPC" and document["protocolVersion"] == "0.3"
    with pytest.raises(json_format.ParseError, match="has no field named"):
        strict_card(bodies[1])
    # Read the lenient 1.0 way, it is the same card (ports aside).
    cards = [strict_card(bodies[0])]
    cards.append(json_format.Parse(bodies[1], a2a_pb2.AgentCard(), ignore_unknown_fields=True))
    for card in cards:
        del card.supported_interfaces[:]
    assert cards[0] == cards[1]


async def test_card_v03_fields_needs_0_3_served(make_server: Factory) -> None:
    harness = await make_server(http_port=0, compat_03=False, card_v03_fields=True)
    async with httpx.AsyncClient() as http:
        response = await http.get(str(harness.running.card_url))
    card = strict_card(response.text)  # no 0.3 interface: nothing for a 0.3 client to call
    assert {i.protocol_version for i in card.supported_interfaces} == {"1.0"}


def test_serve_serves_a_strict_1_0_card_unless_asked_for_0_3_fields() -> None:
    for options, strict in (((), True), (("--card-v03-fields",), False)):
        with serving("--port", "0", "--http-port", "0", *options) as served:
            assert served.http_base is not None and served.process.stdout is not None
            response = httpx.get(served.http_base + "/.well-known/agent-card.json", timeout=10)
            # The start-up says so, right after the line on 0.3 callers (one more line follows).
            while "A2A 0.3 callers are served" not in served.process.stdout.readline():
                pass
            said = "A2A 0.3's fields" in served.process.stdout.readline()
        response.raise_for_status()
        assert bool(V03_FIELDS & set(response.json())) is not strict
        assert said is not strict
        if strict:
            strict_card(response.text)
    refused = run_serve("--card-v03-fields", "--no-compat-03")
    assert refused.returncode == exit_codes.USAGE, refused.stderr
    assert "--card-v03-fields" in refused.stderr


def served_signatures_verify(body: str) -> str:
    """The kid of a signature on the card as served that verifies over the JCS of the document
    received without `signatures` (and, through `document`, over the 1.0 card parsed from it)."""
    document = json.loads(body)
    served = canonicalize({k: v for k, v in document.items() if k != "signatures"})
    kids = []
    for entry in document["signatures"]:
        token = f"{entry['protected']}..{entry['signature']}"
        with contextlib.suppress(SignatureError):
            kids.append(verify_detached(token, served, CARD_KEYS, now=time.time())["kid"])
    assert kids, "no signature covers the card as served"
    parsed = json_format.Parse(body, a2a_pb2.AgentCard(), ignore_unknown_fields=True)
    assert verify_card(parsed, CARD_KEYS) == "card-1"  # the 1.0 reading verifies too
    return str(kids[0])


@pytest.mark.parametrize("v03_fields", [False, True], ids=["1.0", "with 0.3 fields"])
async def test_a_signed_card_verifies_against_what_is_served(
    make_server: Factory, v03_fields: bool
) -> None:
    own = ed25519.Ed25519PrivateKey.generate()
    harness = await make_server(
        http_port=0,
        tokens=TOKENS,
        card_signer=(CARD_KEY, "card-1"),
        signing_keys=KeySet.of_private_keys({"own-1": own}),
        card_v03_fields=v03_fields,
    )
    url = str(harness.running.card_url)
    async with httpx.AsyncClient() as http:
        body = (await http.get(url)).text
    assert served_signatures_verify(body) == "card-1"
    assert bool(V03_FIELDS & set(json.loads(body))) is v03_fields
    # SIGHUP's re-publishing of the keys serves the card the same way, signed again.
    newer = ed25519.Ed25519PrivateKey.generate()
    harness.running.reload_signing_keys(KeySet.of_private_keys({"own-1": own, "own-2": newer}))
    async with httpx.AsyncClient() as http:
        body = (await http.get(url)).text
    assert served_signatures_verify(body) == "card-1"
    assert bool(V03_FIELDS & set(json.loads(body))) is v03_fields
    if not v03_fields:
        strict_card(body)
    parsed = json_format.Parse(body, a2a_pb2.AgentCard(), ignore_unknown_fields=True)
    assert set(card_signing_keys(parsed)) == {"own-1", "own-2"}
