"""One scenario suite, run over each transport (gRPC, JSON-RPC, HTTP+JSON) against our server.

Each client is made the way a caller makes one: the card is fetched from the server's HTTP port
and `A2AClient.for_card(card, transports=(T,))` picks the interface of binding T. The same
typed calls must behave the same on every binding: results, events, errors, retry, resumption,
and the service parameters that reach the agent. Drops are real: a TCP proxy between client
and server resets the connections (tests/integration/tcp_proxy.py).
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import ed25519
from opentelemetry import trace

from a2a_grpc.client import (
    A2AClient,
    BearerToken,
    CardResolver,
    DeadlineExceededError,
    RetryPolicy,
    RpcFailedError,
    UnavailableError,
)
from a2a_grpc.client.card import select_interface
from a2a_grpc.client.messages import user_message
from a2a_grpc.client.signing import MessageSigner
from a2a_grpc.core.errors import (
    InvalidAgentResponseError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a_grpc.core.event_ids import event_id
from a2a_grpc.core.jose import KeySet
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from a2a_grpc.server.demo_agent import DemoAgent
from tests.integration.conftest import Factory, Harness
from tests.integration.tcp_proxy import TcpProxy

TRANSPORTS = ("grpc", "jsonrpc", "http+json")
BINDINGS = {"grpc": "GRPC", "jsonrpc": "JSONRPC", "http+json": "HTTP+JSON"}
COMPLETED = a2a_pb2.TASK_STATE_COMPLETED
WORKING = a2a_pb2.TASK_STATE_WORKING
BUDGET = "urn:a2a-grpc:budget:v1"


class Recorder(DemoAgent):
    """The demo agent, noting what each request brought; `hold` waits for `go` after WORKING
    (`entered` is set then), so a test can act while the task runs."""

    def __init__(self) -> None:
        super().__init__()
        self.contexts: list[RequestContext] = []
        self.entered = asyncio.Event()
        self.go = asyncio.Event()
        self.held_runs = 0
        self.trace_ids: list[int] = []
        self.callers: list[str] = []

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        self.contexts.append(context)
        self.callers.append(context.caller)
        self.trace_ids.append(trace.get_current_span().get_span_context().trace_id)
        if context.text().startswith("hold"):
            self.held_runs += 1
            await events.working()
            self.entered.set()
            await self.go.wait()
            await events.complete()
            return
        await super().execute(context, events)


Open = Callable[..., Awaitable[A2AClient]]


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
async def agent() -> Recorder:
    return Recorder()


@pytest.fixture
async def harness(make_server: Factory, agent: Recorder) -> Harness:
    return await make_server(agent, http_port=0)


@pytest.fixture
async def card(harness: Harness) -> a2a_pb2.AgentCard:
    assert harness.running.card_url is not None
    async with CardResolver() as resolver:
        return await resolver.get(harness.running.card_url)


@pytest.fixture
async def proxies() -> AsyncIterator[list[TcpProxy]]:
    made: list[TcpProxy] = []
    yield made
    for proxy in made:
        await proxy.close()


@pytest.fixture
async def open_client(
    card: a2a_pb2.AgentCard, transport: str, proxies: list[TcpProxy]
) -> AsyncIterator[Open]:
    """Opens a client for the card's interface of `transport`; `via_proxy` puts a TCP proxy
    between it and the server (the card's url for that interface rewritten to the proxy)."""
    clients: list[A2AClient] = []

    async def open_(*, via_proxy: bool = False, **kwargs: Any) -> A2AClient:
        used = a2a_pb2.AgentCard()
        used.CopyFrom(card)
        if via_proxy:
            interface = select_interface(used, (transport,))
            host_port = interface.url.split("://")[-1].split("/")[0]
            proxy = await TcpProxy(int(host_port.rpartition(":")[2])).start()
            proxies.append(proxy)
            interface.url = interface.url.replace(host_port, proxy.address)
        client = A2AClient.for_card(used, transports=(transport,), **kwargs)
        clients.append(client)
        return client

    yield open_
    for client in clients:
        await client.close()


async def test_the_interface_of_the_asked_binding_is_used(
    open_client: Open, transport: str
) -> None:
    client = await open_client()
    assert client.interface.protocol_binding == BINDINGS[transport]
    assert client.interface.protocol_version == "1.0"


async def test_blocking_send(open_client: Open) -> None:
    client = await open_client()
    task = await client.send_message(user_message("hello"))
    assert isinstance(task, a2a_pb2.Task)
    assert task.status.state == COMPLETED
    assert [part.text for part in task.artifacts[0].parts] == ["hello"]


async def test_direct_reply(open_client: Open) -> None:
    client = await open_client()
    reply = await client.send_message(user_message("reply hi"))
    assert isinstance(reply, a2a_pb2.Message) and reply.role == a2a_pb2.ROLE_AGENT


async def test_streaming_send_yields_the_events(open_client: Open) -> None:
    client = await open_client()
    items = [item async for item in client.send_streaming_message(user_message("chunks 3"))]
    kinds = [event.WhichOneof("payload") for event, _ in items]
    assert kinds[0] == "task"
    assert kinds.count("artifact_update") == 3
    assert kinds[-1] == "status_update"
    view = items[-1][1]
    assert view.done and view.state == COMPLETED
    assert len(view.task.artifacts[0].parts) == 3


async def test_get_list_and_cancel(open_client: Open) -> None:
    client = await open_client()
    request = a2a_pb2.SendMessageRequest(message=user_message("slow 30"))
    request.configuration.return_immediately = True
    sent = await client.send_message(request)
    assert isinstance(sent, a2a_pb2.Task)
    got = await client.get_task(sent.id)
    assert got.id == sent.id
    listed = await client.list_tasks()
    assert sent.id in [task.id for task in listed.tasks]
    canceled = await client.cancel_task(sent.id)
    assert canceled.status.state == a2a_pb2.TASK_STATE_CANCELED
    with pytest.raises(TaskNotCancelableError):
        await client.cancel_task(sent.id)


async def test_an_a2a_error_is_its_class(open_client: Open) -> None:
    client = await open_client()
    with pytest.raises(TaskNotFoundError) as raised:
        await client.get_task("no-such-task")
    assert raised.value.reason == "TASK_NOT_FOUND"


async def test_extensions_and_tenant_reach_the_agent(open_client: Open, agent: Recorder) -> None:
    client = await open_client(tenant="acme", extensions=[BUDGET])
    task = await client.send_message(user_message("hello"))
    assert isinstance(task, a2a_pb2.Task)
    (context,) = agent.contexts
    assert context.tenant == "acme"
    assert BUDGET in context.requested_extensions
    # The tenant scopes the task: it is found under it.
    assert (await client.get_task(task.id)).id == task.id


async def test_credentials_version_and_trace_context_reach_the_server(
    make_server: Factory, agent: Recorder, transport: str
) -> None:
    # strict_version: a call without the A2A-Version header would be VersionNotSupported.
    harness = await make_server(agent, http_port=0, tokens={"s3cret": "alice"}, strict_version=True)
    assert harness.running.card_url is not None
    trace_id = 0x4BF92F3577B34DA6A3CE929D0E0E4736
    parent = trace.NonRecordingSpan(
        trace.SpanContext(
            trace_id, 0x00F067AA0BA902B7, is_remote=True, trace_flags=trace.TraceFlags(1)
        )
    )
    async with await A2AClient.from_card_url(
        harness.running.card_url, transports=[transport], credentials=BearerToken("s3cret")
    ) as client:
        with trace.use_span(parent):
            task = await client.send_message(user_message("hello"))
    assert isinstance(task, a2a_pb2.Task) and task.status.state == COMPLETED
    assert agent.callers == ["alice"]
    assert agent.trace_ids == [trace_id]


async def test_the_audit_trail_records_calls_on_every_transport(
    open_client: Open, tmp_path: Path, transport: str
) -> None:
    path = tmp_path / "client-audit.jsonl"
    client = await open_client(audit=path)
    task = await client.send_message(user_message("hello"))
    assert isinstance(task, a2a_pb2.Task)
    with pytest.raises(TaskNotFoundError):
        await client.get_task("no-such-task")
    await client.close()
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["method"], r["outcome"]) for r in records] == [
        ("SendMessage", "OK"),
        ("GetTask", "NOT_FOUND"),
    ]
    assert records[0]["task_id"] == task.id and records[0]["state"] == "TASK_STATE_COMPLETED"


async def test_a_blocking_send_cut_off_is_retried_with_the_same_message_id(
    open_client: Open, agent: Recorder, proxies: list[TcpProxy]
) -> None:
    client = await open_client(via_proxy=True)
    sending = asyncio.ensure_future(client.send_message(user_message("hold")))
    await asyncio.wait_for(agent.entered.wait(), 10)
    (proxy,) = proxies
    proxy.cut()  # the first attempt loses its connection while the task runs
    agent.go.set()
    task = await asyncio.wait_for(sending, 30)
    assert isinstance(task, a2a_pb2.Task) and task.status.state == COMPLETED
    # The retry named the same message: the server answered with the same task, not a new run.
    assert agent.held_runs == 1
    assert proxy.connections >= 2


async def test_a_dropped_stream_resumes_with_subscribe(
    open_client: Open, agent: Recorder, proxies: list[TcpProxy]
) -> None:
    client = await open_client(via_proxy=True)
    (proxy,) = proxies
    snapshots = 0
    cut = False
    states: list[int] = []
    ids: list[str | None] = []
    async for event, view in client.send_streaming_message(user_message("hold")):
        states.append(view.state)
        ids.append(event_id(event))
        if event.HasField("task"):
            snapshots += 1
        if not cut:
            await asyncio.wait_for(agent.entered.wait(), 10)
            proxy.cut()  # the send stream is reset while the task is WORKING
            cut = True
            agent.go.set()  # it finishes while the client is away, or after it is back
    # SubscribeToTask resumed after the last event id: the events after it, no snapshot.
    assert snapshots == 1 and not view.resumed_from_snapshot
    assert ids == [str(n) for n in range(1, len(ids) + 1)]
    assert states[-1] == COMPLETED
    assert agent.held_runs == 1


async def test_connect_to_a_card_url_reads_the_card_on_entry(
    harness: Harness, transport: str
) -> None:
    assert harness.running.card_url is not None
    client = A2AClient.connect(harness.running.card_url, transports=[transport])
    with pytest.raises(RuntimeError, match="resolve"):
        client.interface  # noqa: B018  (not read yet)
    async with client:
        assert client.interface.protocol_binding == BINDINGS[transport]
        task = await client.send_message(user_message("hello"))
        assert isinstance(task, a2a_pb2.Task) and task.status.state == COMPLETED


async def test_from_card_url(harness: Harness, transport: str) -> None:
    assert harness.running.card_url is not None
    origin = harness.running.card_url.removesuffix("/.well-known/agent-card.json")
    async with await A2AClient.from_card_url(origin, transports=[transport]) as client:
        assert client.interface.protocol_binding == BINDINGS[transport]
        assert client.target == origin
        reply = await client.send_message(user_message("reply hi"))
        assert isinstance(reply, a2a_pb2.Message)


async def test_a_stream_ends_at_its_deadline(open_client: Open, agent: Recorder) -> None:
    client = await open_client()
    with pytest.raises(DeadlineExceededError):
        async for _ in client.send_streaming_message(user_message("hold"), timeout=0.5):
            pass
    assert agent.entered.is_set()
    agent.go.set()


async def test_an_agent_not_listening_is_unavailable(
    card: a2a_pb2.AgentCard, transport: str
) -> None:
    with socket.socket() as probe:  # a port nothing listens on (bound, never listening)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        dead = a2a_pb2.AgentCard()
        dead.CopyFrom(card)
        for interface in dead.supported_interfaces:
            host_port = interface.url.split("://")[-1].split("/")[0]
            interface.url = interface.url.replace(host_port, f"127.0.0.1:{port}")
        async with A2AClient.for_card(
            dead, transports=[transport], retry=RetryPolicy(max_attempts=1)
        ) as client:
            with pytest.raises(UnavailableError):
                await client.send_message(user_message("hello"))
            with pytest.raises(UnavailableError):
                await client.get_task("t1")


# -- what an HTTP peer other than our server may answer -----------------------------------


@pytest.fixture
async def http_peer() -> AsyncIterator[tuple[str, list[web.Response]]]:
    """An HTTP server answering each request with the next of `answers` (a real socket)."""
    answers: list[web.Response] = []

    async def handle(request: web.Request) -> web.Response:
        await request.read()
        return answers.pop(0)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}", answers
    await runner.cleanup()


def http_client(binding: str, url: str) -> A2AClient:
    interface = a2a_pb2.AgentInterface(url=url, protocol_binding=binding, protocol_version="1.0")
    return A2AClient.for_card(
        a2a_pb2.AgentCard(name="peer", supported_interfaces=[interface]),
        retry=RetryPolicy(max_attempts=1),
    )


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
@pytest.mark.parametrize(
    ("status", "error"),
    [(502, UnavailableError), (503, UnavailableError), (504, DeadlineExceededError)],
)
async def test_a_gateways_error_is_could_not_talk(
    http_peer: tuple[str, list[web.Response]], binding: str, status: int, error: type[Exception]
) -> None:
    url, answers = http_peer
    answers.append(web.Response(status=status, text="<html>bad gateway</html>"))
    async with http_client(binding, url) as client:
        with pytest.raises(error):
            await client.get_task("t1")


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_an_http_error_without_an_a2a_body_is_rpc_failed(
    http_peer: tuple[str, list[web.Response]], binding: str
) -> None:
    url, answers = http_peer
    answers.append(web.Response(status=404, text="not here"))
    async with http_client(binding, url) as client:
        with pytest.raises(RpcFailedError) as raised:
            await client.get_task("t1")
    assert raised.value.code == grpc.StatusCode.NOT_FOUND


async def test_a_jsonrpc_error_without_error_info_is_decoded_from_its_code(
    http_peer: tuple[str, list[web.Response]],
) -> None:
    url, answers = http_peer
    body = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "no task t1"}}
    answers.append(web.json_response(body))
    async with http_client("JSONRPC", url) as client:
        with pytest.raises(TaskNotFoundError, match="no task t1"):
            await client.get_task("t1")


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_a_response_with_two_payloads_is_refused(
    http_peer: tuple[str, list[web.Response]], binding: str
) -> None:
    url, answers = http_peer
    two = {"task": {"id": "t1", "contextId": "c1"}, "message": {"messageId": "m"}}
    answers.append(
        web.json_response(
            {"jsonrpc": "2.0", "id": 1, "result": two} if binding == "JSONRPC" else two
        )
    )
    async with http_client(binding, url) as client:
        with pytest.raises(InvalidAgentResponseError, match="2 payloads: task, message"):
            await client.send_message(user_message("hi"))


# -- an A2A 0.3 agent: the same API over a2a.v1.A2AService ---------------------------------


@pytest.fixture
async def v03_client(card: a2a_pb2.AgentCard) -> AsyncIterator[A2AClient]:
    """A client for our server's A2A 0.3 gRPC interface, the only one left on its card."""
    async with A2AClient.for_card(v03_only(card)) as client:
        yield client


def v03_only(card: a2a_pb2.AgentCard) -> a2a_pb2.AgentCard:
    """`card` as an A2A 0.3 agent's: its 0.3 interfaces only."""
    old_only = a2a_pb2.AgentCard()
    old_only.CopyFrom(card)
    kept = [i for i in old_only.supported_interfaces if i.protocol_version == "0.3"]
    del old_only.supported_interfaces[:]
    old_only.supported_interfaces.extend(kept)
    return old_only


async def test_a_card_offering_1_0_and_0_3_gets_1_0(card: a2a_pb2.AgentCard) -> None:
    assert {i.protocol_version for i in card.supported_interfaces} == {"1.0", "0.3"}
    async with A2AClient.for_card(card) as client:
        assert client.interface.protocol_version == "1.0"


async def test_a_0_3_agent_blocking_and_streaming(v03_client: A2AClient) -> None:
    assert (v03_client.interface.protocol_binding, v03_client.interface.protocol_version) == (
        "GRPC",
        "0.3",
    )
    task = await v03_client.send_message(user_message("hello"))
    assert isinstance(task, a2a_pb2.Task) and task.status.state == COMPLETED
    assert [part.text for part in task.artifacts[0].parts] == ["hello"]
    items = [item async for item in v03_client.send_streaming_message(user_message("chunks 3"))]
    kinds = [event.WhichOneof("payload") for event, _ in items]
    assert kinds[0] == "task" and kinds.count("artifact_update") == 3
    assert items[-1][1].state == COMPLETED and len(items[-1][1].task.artifacts[0].parts) == 3
    reply = await v03_client.send_message(user_message("reply hi"))
    assert isinstance(reply, a2a_pb2.Message)


async def test_a_0_3_agent_get_cancel_subscribe_and_errors(
    v03_client: A2AClient, agent: Recorder
) -> None:
    request = a2a_pb2.SendMessageRequest(message=user_message("hold"))
    request.configuration.return_immediately = True
    sent = await v03_client.send_message(request)
    assert isinstance(sent, a2a_pb2.Task)
    assert (await v03_client.get_task(sent.id)).id == sent.id
    await asyncio.wait_for(agent.entered.wait(), 10)
    stream = v03_client.subscribe_to_task(sent.id)
    first, view = await anext(stream)
    assert first.HasField("task") and view.state == WORKING
    agent.go.set()
    states = [view.state async for _, view in stream]
    assert states[-1] == COMPLETED
    with pytest.raises(TaskNotCancelableError):
        await v03_client.cancel_task(sent.id)
    with pytest.raises(TaskNotFoundError):
        await v03_client.get_task("no-such-task")
    with pytest.raises(UnsupportedOperationError, match=r"not part of A2A 0\.3"):
        await v03_client.list_tasks()


async def test_a_0_3_agent_extensions_reach_it(card: a2a_pb2.AgentCard, agent: Recorder) -> None:
    async with A2AClient.for_card(v03_only(card), extensions=[BUDGET]) as client:
        await client.send_message(user_message("hello"))
    (context,) = agent.contexts
    assert BUDGET in context.requested_extensions


async def test_signed_messages_on_every_transport(
    make_server: Factory, agent: Recorder, transport: str
) -> None:
    key = ed25519.Ed25519PrivateKey.generate()
    keys = KeySet.of_private_keys({"alice-1": key})
    harness = await make_server(
        agent, http_port=0, signature_keys=keys, require_signed_messages=True
    )
    assert harness.running.card_url is not None
    signer = MessageSigner(key, "alice-1")
    async with await A2AClient.from_card_url(
        harness.running.card_url, transports=[transport], signer=signer
    ) as client:
        task = await client.send_message(user_message("hello"))
        assert isinstance(task, a2a_pb2.Task) and task.status.state == COMPLETED
        items = [item async for item in client.send_streaming_message(user_message("chunks 2"))]
        assert items[-1][1].state == COMPLETED
    assert [context.signed_by for context in agent.contexts] == ["alice-1", "alice-1"]
