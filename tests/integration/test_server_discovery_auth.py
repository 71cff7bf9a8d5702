"""The agent card over HTTP, the extended card, and caller identity (bearer tokens and mTLS)."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.server.agent import RequestContext, TaskEvents
from a2a_grpc.server.app import start_server
from a2a_grpc.server.card import demo_card, load_card
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.demo_agent import DemoAgent
from a2a_grpc.server.tls import TlsFiles
from tests.integration.certs import Authority
from tests.integration.conftest import Factory, error_reason, send_request

TOKENS = {"alice-token": "alice", "bob-token": "bob"}
ALICE = (("a2a-version", "1.0"), ("authorization", "Bearer alice-token"))
BOB = (("a2a-version", "1.0"), ("authorization", "Bearer bob-token"))


async def test_card_is_served_with_cache_validators(make_server: Factory) -> None:
    harness = await make_server(card_port=0, card_max_age=120)
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
        ServerConfig(host="127.0.0.1", port=0, shutdown_grace=0.1, drain_delay=0), agent, tls=tls
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
        ServerConfig(host="127.0.0.1", port=0, shutdown_grace=0.1, drain_delay=0),
        DemoAgent(),
        tls=tls,
        tokens=TOKENS,
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
