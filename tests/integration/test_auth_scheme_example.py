"""CONTRIBUTING.md's "Adding an authentication scheme", run as written: its module (an API key
in a header) is loaded as `api_keys`, its registration makes the plan, and a real server shows
the scheme on its card and applies the check to calls over gRPC and JSON-RPC."""

from __future__ import annotations

import dataclasses
import re
import sys
import types
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import httpx
import pytest

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.server import RunningServer, ServerPlan, StartupError, start_server
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.trust.tls import TlsFiles
from tests.integration.bindings import CallError, GrpcBinding, JsonRpcBinding
from tests.integration.certs import Authority
from tests.integration.conftest import send_request
from tests.integration.test_server_discovery_auth import CallerRecorder

CONTRIBUTING = Path(__file__).resolve().parents[2] / "CONTRIBUTING.md"
SECTION = "## Adding an authentication scheme"


def _python_blocks() -> list[str]:
    text = CONTRIBUTING.read_text()
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    return re.findall(r"```python\n(.*?)```", text[start:end], re.S)


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The page's module, importable as `api_keys`, and the plan its registration makes (for
    a server on 127.0.0.1:0 with an HTTP port, serving a CallerRecorder)."""
    module_code, registration = _python_blocks()
    module = types.ModuleType("api_keys")
    exec(compile(module_code, "CONTRIBUTING.md (api_keys)", "exec"), module.__dict__)
    monkeypatch.setitem(sys.modules, "api_keys", module)
    config = ServerConfig(host="127.0.0.1", port=0, http_port=0, shutdown_grace=0.1, drain_delay=0)
    names: dict[str, Any] = {"config": config, "agent": CallerRecorder()}
    exec(compile(registration, "CONTRIBUTING.md (registration)", "exec"), names)
    plan = names["plan"]
    assert isinstance(plan, ServerPlan) and plan.authenticators
    return plan


@pytest.fixture
async def serve() -> AsyncIterator[Any]:
    started: list[RunningServer] = []

    async def start(plan: ServerPlan) -> RunningServer:
        running = await start_server(plan)
        started.append(running)
        return running

    yield start
    for running in started:
        await running.stop(0)


async def _card(running: RunningServer) -> dict[str, Any]:
    assert running.card_url is not None
    async with httpx.AsyncClient() as http:
        response = await http.get(running.card_url)
    response.raise_for_status()
    card: dict[str, Any] = response.json()
    return card


async def test_the_scheme_is_on_the_card_and_its_check_on_every_call(
    registered: ServerPlan, serve: Any
) -> None:
    running = await serve(registered)
    card = await _card(running)
    assert card["securitySchemes"] == {
        "apiKey": {"apiKeySecurityScheme": {"location": "header", "name": "x-api-key"}}
    }
    assert card["securityRequirements"] == [{"schemes": {"apiKey": {}}}]
    agent = registered.agent
    assert isinstance(agent, CallerRecorder)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    assert running.http_server is not None
    async with aiohttp.ClientSession() as session:
        try:
            for binding in (
                GrpcBinding(a2a_pb2_grpc.A2AServiceStub(channel), channel),
                JsonRpcBinding(session, running.http_server.base_url + "/"),
            ):
                await _check_calls(binding)
        finally:
            await channel.close()
    assert agent.callers == ["key:billing", "key:billing"]


async def _check_calls(binding: GrpcBinding | JsonRpcBinding) -> None:
    """No key, a wrong key: UNAUTHENTICATED saying what to send; the right key: served."""
    with pytest.raises(CallError) as caught:
        await binding.call("SendMessage", send_request())
    assert caught.value.grpc_code == "UNAUTHENTICATED" or caught.value.http_status == 401
    assert "send 'x-api-key: <key>'" in caught.value.message
    _set_header(binding, "x-api-key", "not-a-key")
    with pytest.raises(CallError) as caught:
        await binding.call("SendMessage", send_request())
    assert "the x-api-key is not valid" in caught.value.message
    _set_header(binding, "x-api-key", "k-7f3a9c")
    result = await binding.call("SendMessage", send_request())
    assert isinstance(result, a2a_pb2.SendMessageResponse)
    assert result.task.status.state == a2a_pb2.TASK_STATE_COMPLETED


def _set_header(binding: GrpcBinding | JsonRpcBinding, name: str, value: str) -> None:
    if isinstance(binding, GrpcBinding):
        binding.metadata = (*(m for m in binding.metadata if m[0] != name), (name, value))
    else:
        binding.headers[name] = value


async def test_beside_bearer_tokens_either_will_do(registered: ServerPlan, serve: Any) -> None:
    running = await serve(dataclasses.replace(registered, tokens={"s3cret": "alice"}))
    card = await _card(running)
    assert sorted(card["securitySchemes"]) == ["apiKey", "bearer"]
    assert card["securityRequirements"] == [
        {"schemes": {"bearer": {}}},
        {"schemes": {"apiKey": {}}},
    ]
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    try:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        version = ("a2a-version", "1.0")
        for credential in (("authorization", "Bearer s3cret"), ("x-api-key", "k-7f3a9c")):
            await stub.SendMessage(send_request(), metadata=(version, credential))
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.SendMessage(send_request(), metadata=(version,))
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "'authorization: Bearer <token>' or 'x-api-key: <key>'" in (
            caught.value.details() or ""
        )
    finally:
        await channel.close()
    agent = registered.agent
    assert isinstance(agent, CallerRecorder) and agent.callers == ["alice", "key:billing"]


async def test_with_a_client_ca_the_certificate_goes_with_either(
    registered: ServerPlan, serve: Any
) -> None:
    ca = Authority()
    server = ca.issue("localhost", server=True)
    tls = TlsFiles(server.certificate, server.key, client_ca=ca.certificate)
    plan = dataclasses.replace(registered, tokens={"s3cret": "alice"}, tls=tls)
    running = await serve(plan)
    assert [
        sorted(requirement.schemes) for requirement in running.handler.card.security_requirements
    ] == [["bearer", "mtls"], ["apiKey", "mtls"]]
    client = ca.issue("svc")
    credentials = grpc.ssl_channel_credentials(
        root_certificates=ca.certificate,
        private_key=client.key,
        certificate_chain=client.certificate,
    )
    channel = grpc.aio.secure_channel(f"127.0.0.1:{running.port}", credentials)
    try:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        version = ("a2a-version", "1.0")
        await stub.SendMessage(send_request(), metadata=(version, ("x-api-key", "k-7f3a9c")))
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.SendMessage(send_request(), metadata=(version,))  # the certificate alone
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    finally:
        await channel.close()
    agent = registered.agent
    assert isinstance(agent, CallerRecorder) and agent.callers == ["key:billing"]


async def test_a_scheme_name_taken_by_another_scheme_stops_the_start(
    registered: ServerPlan, serve: Any
) -> None:
    api_keys = sys.modules["api_keys"]

    class Impostor(api_keys.ApiKeys):  # type: ignore[misc]
        def card_security(self) -> Any:
            scheme = a2a_pb2.SecurityScheme()
            scheme.http_auth_security_scheme.scheme = "Basic"
            return api_keys.CardSecurity.of("bearer", scheme)

    plan = dataclasses.replace(
        registered, tokens={"s3cret": "alice"}, authenticators=[Impostor({"k": "x"})]
    )
    with pytest.raises(StartupError, match="different security schemes 'bearer'"):
        await serve(plan)
