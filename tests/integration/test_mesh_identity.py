"""Mesh identity over every binding: SPIFFE IDs from client certificates, and from the
x-forwarded-client-cert header a trusted sidecar adds (directly, and through a real nginx that
sets it as Envoy would). The principal scopes tasks: service A never sees service B's."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.server.app import RunningServer, ServerPlan, StartupError, start_server
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.trust.tls import TlsFiles
from tests.integration.bindings import (
    Binding,
    CallError,
    GrpcBinding,
    JsonRpcBinding,
    RestBinding,
)
from tests.integration.certs import Authority, Pem
from tests.integration.conftest import send_request
from tests.integration.test_server_discovery_auth import CallerRecorder
from tests.nginx_proxy import NginxGrpcProxy, require_nginx

SVC_A = "spiffe://prod.example/ns/shop/sa/a"
SVC_B = "spiffe://prod.example/ns/shop/sa/b"
SIDECAR = "spiffe://prod.example/ns/shop/sa/server"
XFCC = "x-forwarded-client-cert"
BINDINGS = ("grpc", "jsonrpc", "http+json")


def envoy_xfcc(caller: str) -> str:
    """An Envoy-shaped header as a sidecar with APPEND_FORWARD sends it: an edge gateway's
    element first, the sidecar's own last (quoted Subject with `,` and an escaped quote)."""
    edge = "By=spiffe://prod.example/ns/edge/sa/gateway;URI=spiffe://prod.example/ns/x/sa/user"
    local = f'By={SIDECAR};Hash=5f2b;Subject="O=\\"Shop, Inc\\",CN=caller";URI={caller}'
    return f"{edge},{local}"


class Clients:
    """Makes a client of one binding per identity (a certificate, extra headers), for one
    server, and closes them all."""

    def __init__(self, running: RunningServer, binding: str, stack: AsyncExitStack) -> None:
        self.running, self.binding, self.stack = running, binding, stack

    async def make(
        self,
        pem: Pem | None = None,
        ca: Authority | None = None,
        headers: dict[str, str] | None = None,
        *,
        grpc_target: str | None = None,
        http_base: str | None = None,
    ) -> Binding:
        headers = headers or {}
        if self.binding == "grpc":
            target = grpc_target or f"127.0.0.1:{self.running.port}"
            if ca is None:
                channel = grpc.aio.insecure_channel(target)
            else:
                credentials = grpc.ssl_channel_credentials(
                    root_certificates=ca.certificate,
                    private_key=pem.key if pem else None,
                    certificate_chain=pem.certificate if pem else None,
                )
                channel = grpc.aio.secure_channel(target, credentials)
            self.stack.push_async_callback(channel.close)
            binding = GrpcBinding(a2a_pb2_grpc.A2AServiceStub(channel), channel)
            binding.metadata += tuple(headers.items())
            return binding
        context: ssl.SSLContext | bool = False
        if ca is not None:
            context = ssl.create_default_context(cadata=ca.certificate.decode())
            if pem is not None:
                load_pem(context, pem)
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context))
        self.stack.push_async_callback(session.close)
        assert self.running.http_server is not None
        base = http_base or self.running.http_server.base_url
        http: JsonRpcBinding | RestBinding = (
            JsonRpcBinding(session, base + "/")
            if self.binding == "jsonrpc"
            else RestBinding(session, base)
        )
        http.headers.update(headers)
        return http


def load_pem(context: ssl.SSLContext, pem: Pem) -> None:
    """ssl loads a certificate only from files: a private directory, gone at once."""
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        chain, key = Path(directory, "c.pem"), Path(directory, "k.pem")
        chain.write_bytes(pem.certificate)
        key.write_bytes(pem.key)
        context.load_cert_chain(chain, key)


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Any]]:
    """Starts a server (ServerConfig fields as keywords, `tls`, `agent`) with an HTTP port."""
    started: list[RunningServer] = []

    async def start(*, tls: TlsFiles | None = None, agent: Any = None, **fields: Any) -> Any:
        config = ServerConfig(
            host="127.0.0.1", port=0, http_port=0, shutdown_grace=0.1, drain_delay=0, **fields
        )
        running = await start_server(ServerPlan(config, agent or CallerRecorder(), tls=tls))
        started.append(running)
        return running

    yield start
    for running in started:
        await running.stop(0)


async def send(client: Binding) -> str:
    """Sends a message; the id of the task it made."""
    result = await client.call("SendMessage", send_request())
    assert isinstance(result, a2a_pb2.SendMessageResponse)
    return result.task.id


async def refusal(client: Binding, task_id: str = "nope") -> CallError:
    with pytest.raises(CallError) as caught:
        await client.call("GetTask", a2a_pb2.GetTaskRequest(id=task_id))
    return caught.value


def unauthenticated(error: CallError) -> bool:
    return error.grpc_code == "UNAUTHENTICATED" or error.http_status == 401


async def assert_scoped(a: Binding, b: Binding) -> str:
    """A's task is A's: A reads it, B is told it does not exist."""
    task_id = await send(a)
    got = await a.call("GetTask", a2a_pb2.GetTaskRequest(id=task_id))
    assert isinstance(got, a2a_pb2.Task) and got.id == task_id
    assert (await refusal(b, task_id)).reason == "TASK_NOT_FOUND"
    return task_id


def mtls(ca: Authority) -> TlsFiles:
    server = ca.issue("localhost", server=True)
    return TlsFiles(server.certificate, server.key, client_ca=ca.certificate)


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_certificates_spiffe_id_is_the_principal(serve: Any, binding: str) -> None:
    ca = Authority()
    agent = CallerRecorder()
    running = await serve(tls=mtls(ca), agent=agent)
    async with AsyncExitStack() as stack:
        clients = Clients(running, binding, stack)
        a = await clients.make(ca.issue("svc-a", uris=[SVC_A]), ca)  # SPIFFE ID and a CN
        b = await clients.make(ca.issue(None, uris=[SVC_B]), ca)  # SPIFFE ID, no CN
        legacy = await clients.make(ca.issue("legacy", uris=["https://legacy.example"]), ca)
        await assert_scoped(a, b)
        await assert_scoped(b, legacy)
        await send(legacy)
        assert agent.callers == [SVC_A, SVC_B, "cert:legacy"]
        two = await clients.make(ca.issue("two", uris=[SVC_A, SVC_B]), ca)
        error = await refusal(two)
        assert unauthenticated(error) and "2 SPIFFE IDs" in error.message
        beside = await clients.make(ca.issue("beside", uris=[SVC_A, "https://a.example"]), ca)
        error = await refusal(beside)
        assert unauthenticated(error) and "exactly one URI SAN" in error.message


@pytest.mark.parametrize("binding", BINDINGS)
async def test_trust_domains_refuse_the_others(serve: Any, binding: str) -> None:
    ca = Authority()
    running = await serve(tls=mtls(ca), trust_domain=("prod.example",))
    async with AsyncExitStack() as stack:
        clients = Clients(running, binding, stack)
        await send(await clients.make(ca.issue("a", uris=[SVC_A]), ca))
        staging = await clients.make(ca.issue("s", uris=["spiffe://staging.example/sa/s"]), ca)
        error = await refusal(staging)
        assert unauthenticated(error) and "'staging.example' is not accepted" in error.message
        cn_only = await clients.make(ca.issue("cn-only"), ca)
        error = await refusal(cn_only)
        assert unauthenticated(error) and "no SPIFFE ID" in error.message


async def test_trust_domain_needs_something_to_check(serve: Any) -> None:
    with pytest.raises(StartupError, match="--trust-domain needs"):
        await serve(trust_domain=("prod.example",))


@pytest.mark.parametrize("binding", BINDINGS)
async def test_xfcc_from_a_trusted_peer_names_the_caller(serve: Any, binding: str) -> None:
    agent = CallerRecorder()
    running = await serve(trust_xfcc=True, agent=agent)  # loopback is trusted by default
    async with AsyncExitStack() as stack:
        clients = Clients(running, binding, stack)
        a = await clients.make(headers={XFCC: envoy_xfcc(SVC_A)})
        b = await clients.make(headers={XFCC: envoy_xfcc(SVC_B)})
        await assert_scoped(a, b)
        assert agent.callers == [SVC_A]
        error = await refusal(await clients.make())
        assert unauthenticated(error) and XFCC in error.message  # no header: nothing to go by
        malformed = await clients.make(headers={XFCC: f'By={SIDECAR};Subject="CN=a;URI={SVC_A}'})
        error = await refusal(malformed)
        assert unauthenticated(error)
        assert (
            "malformed x-forwarded-client-cert" in error.message and "not closed" in error.message
        )
        no_spiffe = await clients.make(headers={XFCC: f"By={SIDECAR};DNS=a.example"})
        error = await refusal(no_spiffe)
        assert unauthenticated(error) and "names no SPIFFE ID" in error.message


@pytest.mark.parametrize("binding", BINDINGS)
async def test_xfcc_from_an_untrusted_peer_is_refused(serve: Any, binding: str) -> None:
    # 127.0.0.1 outside --trusted-proxy plays a caller from another host.
    running = await serve(trust_xfcc=True, trusted_proxy=("10.0.0.0/8",))
    async with AsyncExitStack() as stack:
        clients = Clients(running, binding, stack)
        error = await refusal(await clients.make(headers={XFCC: envoy_xfcc(SVC_A)}))
        assert unauthenticated(error) and "trusted proxy" in error.message


@pytest.mark.parametrize("binding", BINDINGS)
async def test_without_the_flag_xfcc_is_ignored(serve: Any, binding: str) -> None:
    agent = CallerRecorder()
    running = await serve(agent=agent)
    async with AsyncExitStack() as stack:
        clients = Clients(running, binding, stack)
        a = await clients.make(headers={XFCC: envoy_xfcc(SVC_A)})
        anyone = await clients.make(headers={XFCC: "not even parsed"})
        task_id = await send(a)
        got = await anyone.call("GetTask", a2a_pb2.GetTaskRequest(id=task_id))
        assert isinstance(got, a2a_pb2.Task) and got.id == task_id  # both are anonymous
        assert agent.callers == [""]


@pytest.mark.parametrize("binding", BINDINGS)
async def test_xfcc_set_by_a_real_proxy_scopes_tasks(serve: Any, binding: str) -> None:
    require_nginx()
    agent = CallerRecorder()
    running = await serve(trust_xfcc=True, trust_domain=("prod.example",), agent=agent)
    assert running.http_server is not None
    http_port = running.http_server.port
    with (
        NginxGrpcProxy(
            [running.port], headers={XFCC: envoy_xfcc(SVC_A)}, http_upstream=http_port
        ) as sidecar_a,
        NginxGrpcProxy(
            [running.port], headers={XFCC: envoy_xfcc(SVC_B)}, http_upstream=http_port
        ) as sidecar_b,
    ):
        async with AsyncExitStack() as stack:
            clients = Clients(running, binding, stack)

            async def through(sidecar: NginxGrpcProxy, **headers: str) -> Binding:
                return await clients.make(
                    headers=headers, grpc_target=sidecar.target, http_base=sidecar.http_target
                )

            a, b = await through(sidecar_a), await through(sidecar_b)
            await assert_scoped(a, b)
            # A caller's own header does not get past the sidecar: nginx sets it anew.
            forged = await through(sidecar_b, **{XFCC: f"URI={SVC_A}"})
            task_id = await send(a)
            assert (await refusal(forged, task_id)).reason == "TASK_NOT_FOUND"
            assert agent.callers == [SVC_A, SVC_A]


@pytest.mark.parametrize("binding", BINDINGS)
async def test_xfcc_over_the_sidecars_own_mtls(serve: Any, binding: str) -> None:
    # The sidecar connects with its own certificate: it admits the connection, and the SPIFFE
    # ID the sidecar forwards names the caller; a direct caller's certificate still counts.
    ca = Authority()
    agent = CallerRecorder()
    running = await serve(tls=mtls(ca), trust_xfcc=True, agent=agent)
    async with AsyncExitStack() as stack:
        clients = Clients(running, binding, stack)
        sidecar = ca.issue("sidecar", uris=[SIDECAR])
        a = await clients.make(sidecar, ca, headers={XFCC: envoy_xfcc(SVC_A)})
        direct_b = await clients.make(ca.issue(None, uris=[SVC_B]), ca)
        await assert_scoped(a, direct_b)
        await send(direct_b)
        assert agent.callers == [SVC_A, SVC_B]
