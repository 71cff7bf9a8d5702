"""Mesh identity on the client side, against real servers: bearer tokens from a file that
rotates and from an OAuth 2.0 token endpoint (a real aiohttp one here), and SPIFFE-style client
certificates rewritten in place, on each transport (gRPC, JSON-RPC, HTTP+JSON) and from the CLI.

Nothing waits on the clock: files are rewritten between calls, token expiry runs on a clock the
test moves, and concurrent fetches are held on an event.
"""

from __future__ import annotations

import asyncio
import base64
import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from aiohttp import web

from a2a_grpc.client import (
    A2AClient,
    CardResolver,
    ClientCredentialsToken,
    CredentialsError,
    ReloadingChannel,
    TlsConfig,
    TokenFile,
    cli,
    create_channel,
)
from a2a_grpc.client.messages import user_message
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from a2a_grpc.server.app import RunningServer, ServerPlan, start_server
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.demo_agent import DemoAgent
from a2a_grpc.server.trust.tls import TlsFiles
from tests.integration.certs import Authority
from tests.integration.conftest import Factory, Harness
from tests.integration.test_client_cli import run

TRANSPORTS = ("grpc", "jsonrpc", "http+json")
COMPLETED = a2a_pb2.TASK_STATE_COMPLETED
TOKENS = {"t-one": "alice", "t-two": "bob", "t-three": "carol"}


class Callers(DemoAgent):
    """The demo agent, noting each caller; a message starting `hold` works until `go` is set
    (`entered` is set once it works), so a call can be in flight while the test acts."""

    def __init__(self) -> None:
        super().__init__()
        self.callers: list[str] = []
        self.entered = asyncio.Event()
        self.go = asyncio.Event()

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        self.callers.append(context.caller)
        if context.text().startswith("hold"):
            await events.working()
            self.entered.set()
            await self.go.wait()
            await events.complete()
            return
        await super().execute(context, events)


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
async def agent() -> Callers:
    return Callers()


@pytest.fixture
async def token_server(make_server: Factory, agent: Callers) -> Harness:
    """Our server on both ports, taking the bearer tokens of TOKENS and of the endpoint."""
    tokens = {**TOKENS, **{f"tok-{n}": f"svc-{n}" for n in range(1, 6)}}
    return await make_server(agent, http_port=0, tokens=tokens)


async def client_for(harness: Harness, transport: str, **kwargs: Any) -> A2AClient:
    assert harness.running.card_url is not None
    async with CardResolver() as resolver:
        card = await resolver.get(harness.running.card_url)
    return A2AClient.for_card(card, transports=(transport,), **kwargs)


async def send(client: A2AClient, text: str = "hello") -> None:
    task = await client.send_message(user_message(text))
    assert isinstance(task, a2a_pb2.Task) and task.status.state == COMPLETED


# --- the token endpoint ---------------------------------------------------------------------


class TokenEndpoint:
    """A real OAuth 2.0 token endpoint: counts hits, notes each request's Authorization header
    and form, answers `tok-<hit>` valid for `expires_in` seconds, or `refuse` (status, body);
    with `gate` set, each request waits for it first."""

    def __init__(self) -> None:
        self.hits = 0
        self.requests: list[tuple[str | None, dict[str, str]]] = []
        self.expires_in: object = 3600
        self.refuse: tuple[int, Any] | None = None
        self.gate: asyncio.Event | None = None
        self.arrived = asyncio.Event()
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.hits += 1
        form = {key: str(value) for key, value in (await request.post()).items()}
        self.requests.append((request.headers.get("Authorization"), form))
        self.arrived.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.refuse is not None:
            status, body = self.refuse
            if isinstance(body, str):
                return web.Response(status=status, text=body)
            return web.json_response(body, status=status)
        answer: dict[str, object] = {"access_token": f"tok-{self.hits}", "token_type": "Bearer"}
        if self.expires_in is not None:
            answer["expires_in"] = self.expires_in
        return web.json_response(answer)


@pytest.fixture
async def endpoint() -> AsyncIterator[TokenEndpoint]:
    served = TokenEndpoint()
    app = web.Application()
    app.router.add_post("/oauth/token", served.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    served.url = f"http://127.0.0.1:{port}/oauth/token"
    yield served
    await runner.cleanup()


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# --- tokens from a file ---------------------------------------------------------------------


async def test_a_token_file_rewritten_in_place_or_swapped_sends_the_new_token(
    token_server: Harness, agent: Callers, transport: str, tmp_path: Path
) -> None:
    path = tmp_path / "token"
    path.write_text("t-one\n")
    client = await client_for(token_server, transport, credentials=TokenFile(path))
    async with client:
        await send(client)
        await send(client)
        path.write_text("t-two\n")  # in place: same inode, same size
        await send(client)
        fresh = tmp_path / "token.new"
        fresh.write_text("t-three")
        os.replace(fresh, path)  # how a Kubernetes volume swaps it: a new inode
        await send(client)
    assert agent.callers == ["alice", "alice", "bob", "carol"]


async def test_a_missing_or_empty_token_file_is_an_error_naming_it(
    token_server: Harness, transport: str, tmp_path: Path
) -> None:
    path = tmp_path / "token"
    client = await client_for(token_server, transport, credentials=TokenFile(path))
    async with client:
        with pytest.raises(CredentialsError, match=f"cannot read the token file {path}"):
            await send(client)
        path.write_text("  \n")
        with pytest.raises(CredentialsError, match=f"the token file {path} is empty"):
            await send(client)
        path.write_text("t-one")
        await send(client)


def test_a_token_file_is_read_again_only_when_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "token"
    path.write_text("t-one")
    old = os.stat(path).st_mtime_ns - 10_000_000_000  # long enough ago to trust the signature
    os.utime(path, ns=(old, old))
    source = TokenFile(path)
    assert source.token() == "t-one"
    reads: list[Path] = []
    original = Path.read_text

    def counting(self: Path, *args: Any, **kwargs: Any) -> str:
        reads.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", counting)
    assert source.token() == "t-one" and reads == []  # unchanged: one stat, no read
    path.write_text("t-two")
    os.utime(path, ns=(old + 1, old + 1))  # the same size and inode, another mtime
    assert source.token() == "t-two" and reads == [path]


# --- tokens from an OAuth 2.0 token endpoint ------------------------------------------------


async def test_client_credentials_reach_the_server_and_are_cached_until_near_expiry(
    token_server: Harness, agent: Callers, endpoint: TokenEndpoint, transport: str
) -> None:
    clock = Clock()
    endpoint.expires_in = 600
    source = ClientCredentialsToken(
        endpoint.url, "svc", "s3cret", scope="a2a.send", audience="agents", clock=clock
    )
    client = await client_for(token_server, transport, credentials=source)
    async with client:
        await send(client)
        clock.now += 539  # 600 s minus the 60 s margin, not yet
        await send(client)
        assert endpoint.hits == 1
        clock.now += 1
        await send(client)
        assert endpoint.hits == 2
    assert agent.callers == ["svc-1", "svc-1", "svc-2"]
    authorization, form = endpoint.requests[0]
    assert authorization == "Basic " + base64.b64encode(b"svc:s3cret").decode()
    assert form == {"grant_type": "client_credentials", "scope": "a2a.send", "audience": "agents"}


async def test_a_short_lived_token_is_refreshed_at_half_its_lifetime(
    endpoint: TokenEndpoint,
) -> None:
    clock = Clock()
    endpoint.expires_in = 10
    source = ClientCredentialsToken(endpoint.url, "svc", "s", clock=clock)
    assert await source.token() == "tok-1"
    clock.now += 4.9
    assert await source.token() == "tok-1"
    clock.now += 0.1
    assert await source.token() == "tok-2"


async def test_concurrent_calls_share_one_fetch(endpoint: TokenEndpoint) -> None:
    endpoint.gate = asyncio.Event()
    source = ClientCredentialsToken(endpoint.url, "svc", "s")
    waiting = [asyncio.create_task(source.token()) for _ in range(20)]
    await endpoint.arrived.wait()  # the first request reached the endpoint; the rest wait
    endpoint.gate.set()
    assert set(await asyncio.gather(*waiting)) == {"tok-1"}
    assert endpoint.hits == 1


async def test_credentials_in_the_body_and_a_secret_file_read_at_each_fetch(
    endpoint: TokenEndpoint, tmp_path: Path
) -> None:
    clock = Clock()
    secret = tmp_path / "secret"
    secret.write_text("first\n")
    source = ClientCredentialsToken(
        endpoint.url, "svc id", client_secret_file=secret, auth_in_body=True, clock=clock
    )
    await source.token()
    secret.write_text("second")
    clock.now += 3600
    await source.token()
    assert [request[0] for request in endpoint.requests] == [None, None]
    assert [request[1]["client_secret"] for request in endpoint.requests] == ["first", "second"]
    assert endpoint.requests[0][1]["client_id"] == "svc id"


async def test_basic_authentication_form_encodes_the_id_and_secret(
    endpoint: TokenEndpoint,
) -> None:
    # RFC 6749 §2.3.1: each is application/x-www-form-urlencoded before the Basic encoding.
    await ClientCredentialsToken(endpoint.url, "svc:1", "a b+c").token()
    expected = base64.b64encode(b"svc%3A1:a+b%2Bc").decode()
    assert endpoint.requests[0][0] == f"Basic {expected}"


async def test_a_refusal_names_the_endpoint_and_the_oauth_error_never_the_secret(
    endpoint: TokenEndpoint,
) -> None:
    endpoint.refuse = (401, {"error": "invalid_client", "error_description": "unknown client"})
    source = ClientCredentialsToken(endpoint.url, "svc", "hunter2-secret")
    with pytest.raises(CredentialsError) as raised:
        await source.token()
    text = str(raised.value)
    assert endpoint.url in text and "invalid_client (unknown client)" in text
    assert "hunter2" not in text and not raised.value.retryable
    endpoint.refuse = (503, "<html>down</html>")
    with pytest.raises(CredentialsError, match="answered HTTP 503") as raised:
        await source.token()
    assert raised.value.retryable
    endpoint.refuse = (200, {"token_type": "Bearer"})
    with pytest.raises(CredentialsError, match="no access_token"):
        await source.token()
    endpoint.refuse = (200, {"access_token": "x", "token_type": "mac"})
    with pytest.raises(CredentialsError, match="not a bearer token"):
        await source.token()


async def test_an_unreachable_endpoint_is_a_retryable_error_naming_it() -> None:
    with socket_port() as port:
        url = f"http://127.0.0.1:{port}/token"
    source = ClientCredentialsToken(url, "svc", "hunter2")
    with pytest.raises(CredentialsError, match=f"cannot reach the token endpoint {url}") as raised:
        await source.token()
    assert raised.value.retryable and "hunter2" not in str(raised.value)


async def test_a_failed_refresh_keeps_a_token_that_has_not_expired(
    endpoint: TokenEndpoint,
) -> None:
    clock = Clock()
    endpoint.expires_in = 600
    source = ClientCredentialsToken(endpoint.url, "svc", "s", clock=clock)
    assert await source.token() == "tok-1"
    endpoint.refuse = (500, {"error": "temporarily_unavailable"})
    clock.now += 550  # inside the margin: a refresh is tried, fails, the token still holds
    assert await source.token() == "tok-1"
    clock.now += 50  # expired now
    with pytest.raises(CredentialsError, match="temporarily_unavailable"):
        await source.token()
    endpoint.refuse = None
    assert await source.token() == "tok-4"


async def test_without_expires_in_the_token_is_kept_for_the_default_lifetime(
    endpoint: TokenEndpoint,
) -> None:
    clock = Clock()
    endpoint.expires_in = None
    source = ClientCredentialsToken(endpoint.url, "svc", "s", clock=clock)
    assert await source.token() == "tok-1"
    clock.now += 239  # 300 s minus the 60 s margin
    assert await source.token() == "tok-1"
    clock.now += 1
    assert await source.token() == "tok-2"


# --- client certificates that rotate ----------------------------------------------------------


class Pki:
    """A CA, and client certificate files that can be rewritten in place."""

    def __init__(self, directory: Path) -> None:
        self.ca = Authority()
        self.ca_file = directory / "ca.pem"
        self.cert_file = directory / "svid.pem"
        self.key_file = directory / "svid.key"
        self.ca_file.write_bytes(self.ca.certificate)

    def issue(self, name: str) -> None:
        pem = self.ca.issue(name)
        self.cert_file.write_bytes(pem.certificate)
        self.key_file.write_bytes(pem.key)

    def tls(self) -> TlsConfig:
        return TlsConfig.from_files(self.ca_file, self.cert_file, self.key_file)


@pytest.fixture
async def mtls(tmp_path: Path, agent: Callers) -> AsyncIterator[tuple[RunningServer, Pki]]:
    """Our server with TLS on both ports, asking for client certificates."""
    pki = Pki(tmp_path)
    pki.issue("alice")
    server_pem = pki.ca.issue("localhost", server=True)
    running = await start_server(
        ServerPlan(
            ServerConfig(host="127.0.0.1", port=0, http_port=0, shutdown_grace=0.1, drain_delay=0),
            agent,
            tls=TlsFiles(server_pem.certificate, server_pem.key, client_ca=pki.ca.certificate),
        )
    )
    yield running, pki
    await running.stop(0)


async def test_a_rotated_client_certificate_is_presented_on_the_next_connection(
    mtls: tuple[RunningServer, Pki], agent: Callers, transport: str
) -> None:
    running, pki = mtls
    assert running.card_url is not None
    client = await A2AClient.from_card_url(running.card_url, tls=pki.tls(), transports=[transport])
    async with client:
        await send(client)
        # A stream is in flight on the old connection while the files rotate.
        stream = client.send_streaming_message(user_message("hold"))
        held = asyncio.create_task(anext(aiter(stream)))
        await agent.entered.wait()
        pki.issue("bob")
        await send(client)
        agent.go.set()
        await held
        views = [view async for _, view in stream]
        assert views[-1].state == COMPLETED  # the stream finished on its connection
        await send(client)
    assert agent.callers == ["cert:alice", "cert:alice", "cert:bob", "cert:bob"]


async def test_a_half_written_rotation_keeps_the_old_certificate_until_the_key_follows(
    mtls: tuple[RunningServer, Pki], agent: Callers
) -> None:
    running, pki = mtls
    channel = create_channel(f"127.0.0.1:{running.port}", tls=pki.tls())
    assert isinstance(channel, ReloadingChannel)
    async with A2AClient(channel, owns_channel=True) as client:
        await send(client)
        bob = pki.ca.issue("bob")
        pki.cert_file.write_bytes(bob.certificate)  # the key is still alice's
        await send(client)
        assert channel.generation == 0
        pki.key_file.write_bytes(bob.key)
        await send(client)
        assert channel.generation == 1
        await send(client)
        assert channel.generation == 1  # the same bytes again: no new channel
    assert agent.callers == ["cert:alice", "cert:alice", "cert:bob", "cert:bob"]


async def test_the_old_channel_is_closed_once_its_calls_ended(
    mtls: tuple[RunningServer, Pki], agent: Callers
) -> None:
    running, pki = mtls
    channel = create_channel(f"127.0.0.1:{running.port}", tls=pki.tls())
    assert isinstance(channel, ReloadingChannel)
    async with A2AClient(channel) as client:
        first = channel.current()
        stream = client.send_streaming_message(user_message("hold"))
        held = asyncio.create_task(anext(aiter(stream)))
        await agent.entered.wait()
        pki.issue("bob")
        await send(client)
        assert channel.current() is not first
        agent.go.set()
        await held
        async for _ in stream:
            pass
        await channel.drained()
        with pytest.raises(grpc.aio.UsageError):  # closed: no new call can start on it
            await first.unary_unary("/x")(b"")
    await channel.close()


# --- the command line -----------------------------------------------------------------------


async def test_cli_token_file(token_server: Harness, agent: Callers, tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("t-two")
    target = f"127.0.0.1:{token_server.running.port}"
    assert await run("send", target, "hi", "--token-file", str(path)) == cli.EXIT_OK
    assert agent.callers == ["bob"]


async def test_cli_oauth_client_credentials(
    token_server: Harness, agent: Callers, endpoint: TokenEndpoint, tmp_path: Path
) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s3cret")
    assert token_server.running.card_url is not None
    oauth = ("--oauth-token-url", endpoint.url, "--oauth-client-id", "svc")
    oauth += ("--oauth-client-secret-file", str(secret), "--oauth-scope", "a2a")
    for transport in TRANSPORTS:
        argv = ("send", token_server.running.card_url, "hi", "--transport", transport)
        assert await run(*argv, *oauth) == cli.EXIT_OK
    assert agent.callers == ["svc-1", "svc-2", "svc-3"]  # one command, one token
    assert endpoint.requests[0][1] == {"grant_type": "client_credentials", "scope": "a2a"}
    body = ("--oauth-client-auth", "client_secret_post")
    assert await run("get", token_server.running.card_url, "no-such-task", *oauth, *body) == 5
    assert endpoint.requests[-1][0] is None and endpoint.requests[-1][1]["client_id"] == "svc"


async def test_cli_credential_errors_are_one_line(
    token_server: Harness,
    endpoint: TokenEndpoint,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    target = f"127.0.0.1:{token_server.running.port}"
    missing = tmp_path / "nope"
    assert await run("send", target, "hi", "--token-file", str(missing)) == cli.EXIT_USAGE
    assert f"cannot read the token file {missing}" in capsys.readouterr().err
    both = ("--token", "x", "--token-file", str(missing))
    assert await run("send", target, "hi", *both) == cli.EXIT_USAGE
    assert "--token and --token-file each give the token" in capsys.readouterr().err
    assert await run("send", target, "hi", "--oauth-token-url", endpoint.url) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "needs --oauth-client-id and --oauth-client-secret-file" in err
    assert await run("send", target, "hi", "--oauth-scope", "a") == cli.EXIT_USAGE
    assert "go with --oauth-token-url" in capsys.readouterr().err
    secret = tmp_path / "secret"
    secret.write_text("hunter2")
    endpoint.refuse = (400, {"error": "invalid_client"})
    oauth = ("--oauth-token-url", endpoint.url, "--oauth-client-id", "svc")
    oauth += ("--oauth-client-secret-file", str(secret))
    assert await run("send", target, "hi", *oauth) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert endpoint.url in err and "invalid_client" in err and "hunter2" not in err
    assert err.count("\n") == 1


async def test_cli_token_file_from_the_environment(
    token_server: Harness, agent: Callers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "token"
    path.write_text("t-three")
    monkeypatch.setenv("A2A_TOKEN_FILE", str(path))
    monkeypatch.setenv("A2A_TOKEN", "t-one")  # the file wins over the fixed token
    target = f"127.0.0.1:{token_server.running.port}"
    assert await run("send", target, "hi") == cli.EXIT_OK
    assert await run("send", target, "hi", "--token", "t-two") == cli.EXIT_OK
    assert agent.callers == ["carol", "bob"]


class socket_port:
    """A local port nothing listens on (bound, then released)."""

    def __enter__(self) -> int:
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        port: int = self._socket.getsockname()[1]
        return port

    def __exit__(self, *exc_info: object) -> None:
        self._socket.close()
