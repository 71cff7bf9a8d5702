"""What the client and its commands say when a call cannot go as asked: each message names what
happened and what to type instead (a wrong target, a card that is not there, a stale id, a
stream cut short, a missing client certificate, a reader gone from the pipe)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from google.protobuf import json_format

from a2a_grpc.client import A2AClient, CardResolver, ChannelOptions, cli
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from a2a_grpc.server.app import RunningServer, ServerPlan, start_server
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.demo_agent import DemoAgent
from tests.integration.conftest import Factory, Harness, user_message
from tests.integration.scripted_agent import Peer, peer, task
from tests.integration.test_client_cli import one_clear_line, run_process, tls_agent
from tests.integration.test_server_discovery_auth import CallerRecorder

__all__ = ["peer", "tls_agent"]

MiB = 1024 * 1024


def http_port(harness: Harness) -> int:
    server = harness.running.http_server
    assert server is not None
    return server.port


def two_free_ports() -> int:
    """A port P with P + 1 free too (a few tries: another process may take one meanwhile)."""
    for _ in range(50):
        with socket.socket() as first, socket.socket() as second:
            first.bind(("127.0.0.1", 0))
            port: int = first.getsockname()[1]
            try:
                second.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port
    raise AssertionError("no two consecutive free ports")


@pytest.fixture
async def served_as_by_default() -> AsyncIterator[RunningServer]:
    """A server whose HTTP port is its gRPC port + 1, as `serve --port P` lays them out."""
    port = two_free_ports()
    config = ServerConfig(
        host="127.0.0.1", port=port, http_port=port + 1, shutdown_grace=0.5, drain_delay=0
    )
    running = await start_server(ServerPlan(config, DemoAgent()))
    yield running
    await running.stop(0)


async def test_card_of_a_grpc_target_without_an_extended_card_shows_the_public_card(
    served_as_by_default: RunningServer,
) -> None:
    target = served_as_by_default.address
    port = served_as_by_default.port
    code, out, err = await run_process("card", target)
    assert code == 0, err
    assert out.startswith("a2a-grpc demo agent")
    assert f"GRPC 1.0 {target}" in out
    assert out.splitlines()[-1] == (
        f"  from: http://127.0.0.1:{port + 1}/.well-known/agent-card.json, the public card "
        "(GetExtendedAgentCard: UnsupportedOperationError: this agent does not offer an "
        "extended agent card (capabilities.extended_agent_card is off))"
    )
    code, out, err = await run_process("card", target, "--json")
    assert code == 0 and out.startswith('{"name": "a2a-grpc demo agent"') and err == ""


async def test_card_of_a_grpc_target_says_how_to_fetch_the_public_card(
    make_server: Factory,
) -> None:
    harness = await make_server(http_port=0)  # not on the gRPC port + 1
    target = harness.running.address
    code, out, err = await run_process("card", target)
    assert code == cli.EXIT_AGENT_ERROR and out == ""
    line = one_clear_line(err)
    assert "GetExtendedAgentCard: UnsupportedOperationError" in line
    assert "card http://127.0.0.1:HTTP_PORT` with the agent's HTTP port" in line


async def test_an_http_port_given_as_a_grpc_target_says_to_give_its_url(
    make_server: Factory,
) -> None:
    harness = await make_server(http_port=0)
    http_target = f"127.0.0.1:{http_port(harness)}"
    code, _, err = await run_process("send", http_target, "hi", "--timeout", "10")
    assert code == cli.EXIT_COULD_NOT_TALK
    line = one_clear_line(err)
    assert f"({http_target} answers HTTP/1.x, not gRPC" in line
    assert f"a2a-grpc send http://{http_target} ...`" in line


async def test_an_rpc_endpoint_given_as_the_card_url_says_to_give_the_origin(
    make_server: Factory,
) -> None:
    harness = await make_server(http_port=0)
    origin = f"http://127.0.0.1:{http_port(harness)}"
    code, _, err = await run_process("send", f"{origin}/message:send", "hi")
    assert code == cli.EXIT_COULD_NOT_TALK
    line = one_clear_line(err)
    assert f"GET {origin}/message:send: HTTP 405 (this URL takes no GET" in line
    assert f"give the agent's origin, {origin}, whose /.well-known/agent-card.json" in line


async def test_http_to_the_grpc_port_says_to_drop_the_scheme(make_server: Factory) -> None:
    harness = await make_server(http_port=0)
    target = harness.running.address
    code, _, err = await run_process("get", f"http://{target}", "t1", "--timeout", "10")
    assert code == cli.EXIT_COULD_NOT_TALK
    line = one_clear_line(err)
    assert "does not answer HTTP/1.1" in line
    assert f"give it as host:port, without the scheme: {target})" in line


@pytest.mark.parametrize("over", ["grpc", "https"])
async def test_mutual_tls_without_a_client_certificate_says_one_is_probably_required(
    tls_agent: tuple[str, Path, CallerRecorder], over: str
) -> None:
    url, files, _ = tls_agent
    with_cert = ("--ca", str(files / "ca.pem"), "--cert", str(files / "alice.pem"))
    with_cert += ("--key", str(files / "alice.key"))
    code, out, err = await run_process("card", url, *with_cert, "--transport", "grpc")
    assert code == 0, err
    grpc_target = out.splitlines()[-1].split()[-1]  # "  uses: GRPC 1.0 127.0.0.1:PORT"
    target = grpc_target if over == "grpc" else url
    code, _, err = await run_process("get", target, "t1", "--ca", str(files / "ca.pem"))
    assert code == cli.EXIT_COULD_NOT_TALK
    line = one_clear_line(err)
    assert ("Socket closed" if over == "grpc" else "Server disconnected") in line
    assert line.endswith(
        "(the server probably requires a client certificate, mutual TLS: add --cert PEM --key PEM)"
    )


async def test_a_task_id_alone_continues_the_task(
    make_server: Factory, capsys: pytest.CaptureFixture[str]
) -> None:
    # A2A 1.0 §3.4: agents MUST infer the context id from the task when only the task id is
    # given, so the command need not ask for both.
    harness = await make_server()
    target = harness.running.address
    assert await asyncio.to_thread(cli.main, ["send", target, "ask", "--json"]) == 4
    asked = json.loads(capsys.readouterr().out)["task"]
    argv = ["send", target, "Ada", "--task-id", asked["id"], "--json"]
    assert await asyncio.to_thread(cli.main, argv) == 0
    done = json.loads(capsys.readouterr().out)["task"]
    assert done["id"] == asked["id"] and done["contextId"] == asked["contextId"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_stream_cut_on_a_grpc_server_without_subscribe_says_it_was_cut(
    peer: Peer,
) -> None:
    async def cut(request: Any, context: Any) -> AsyncIterator[Any]:
        yield a2a_pb2.StreamResponse(task=task())  # WORKING, then the stream ends

    peer.agent.handlers["SendStreamingMessage"] = cut  # and no SubscribeToTask
    code, out, err = await run_process("send", peer.target, "hi", "--stream")
    assert code == cli.EXIT_COULD_NOT_TALK and "task t1" in out
    assert one_clear_line(err) == (
        "a2a-grpc: the stream of task t1 ended while it was working and could not be resumed: "
        "this server does not offer SubscribeToTask (RpcFailedError: UNIMPLEMENTED: "
        "SubscribeToTask is not scripted), so a stream cut short cannot be resumed on it; "
        f"GetTask reads the task as it stands; `a2a-grpc get {peer.target} t1` shows where it "
        "stands"
    )


@pytest.fixture
async def jsonrpc_without_subscribe() -> AsyncIterator[str]:
    """A JSON-RPC agent (aiohttp on 127.0.0.1) whose SendStreamingMessage stream ends while its
    task works and which has no SubscribeToTask: JSON-RPC's MethodNotFound. Its card's URL."""
    app = web.Application()

    async def card(request: web.Request) -> web.Response:
        url = f"http://{request.host}/"
        interface = {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        return web.json_response({"name": "cut", "supportedInterfaces": [interface]})

    async def rpc(request: web.Request) -> web.StreamResponse:
        call = await request.json()
        if call["method"] != "SendStreamingMessage":
            error = {"code": -32601, "message": f"Method not found: {call['method']}"}
            return web.json_response({"jsonrpc": "2.0", "id": call["id"], "error": error})
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)
        snapshot = json_format.MessageToDict(a2a_pb2.StreamResponse(task=task()))
        event = {"jsonrpc": "2.0", "id": call["id"], "result": snapshot}
        await stream.write(f"data: {json.dumps(event)}\n\n".encode())
        await stream.write_eof()
        return stream

    app.router.add_get("/.well-known/agent-card.json", card)
    app.router.add_post("/", rpc)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_a_stream_cut_on_a_jsonrpc_server_without_subscribe_says_it_was_cut(
    jsonrpc_without_subscribe: str,
) -> None:
    origin = jsonrpc_without_subscribe
    code, _, err = await run_process("send", origin, "hi", "--stream")
    assert code == cli.EXIT_COULD_NOT_TALK
    line = one_clear_line(err)
    assert (
        "the stream of task t1 ended while it was working and could not be resumed: this server "
        "does not offer SubscribeToTask (MethodNotFoundError: Method not found: SubscribeToTask)"
    ) in line
    assert line.endswith(f"`a2a-grpc get {origin} t1` shows where it stands")


class Gated:
    """WORKING, then COMPLETED once the test opens the gate."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        await events.working()
        await self.gate.wait()
        await events.complete()


@pytest.mark.parametrize("transport", ["jsonrpc", "http+json", "grpc"])
async def test_a_reader_gone_mid_stream_ends_the_command_quietly_with_141(
    make_server: Factory, transport: str
) -> None:
    agent = Gated()
    harness = await make_server(agent, http_port=0)
    request = a2a_pb2.SendMessageRequest(message=user_message("go"))
    request.configuration.return_immediately = True
    started = (await harness.stub.SendMessage(request)).task
    read, write = socket.socketpair()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "a2a_grpc.cli.main",
        "subscribe",
        f"http://127.0.0.1:{http_port(harness)}",
        started.id,
        "--transport",
        transport,
        stdout=write.fileno(),
        stderr=asyncio.subprocess.PIPE,
    )
    write.close()
    with read, read.makefile("rb") as reader:
        first = await asyncio.wait_for(asyncio.to_thread(reader.readline), 50)
    assert started.id.encode() in first  # the stream is open; its reader is now gone
    agent.gate.set()  # the next event meets the closed pipe while the stream is still open
    _, err = await asyncio.wait_for(process.communicate(), 50)
    assert (process.returncode, err.decode()) == (141, "")


async def test_answers_over_the_default_grpc_limit_need_and_take_a_larger_one(
    make_server: Factory, tmp_path: Path
) -> None:
    # The demo agent echoes a 9 MB file as an artifact: with the message in the task's history
    # too, the answer is over the client's default 16 MiB limit for a gRPC message.
    harness = await make_server(max_message_bytes=32 * MiB, max_inline_bytes=32 * MiB)
    target = harness.running.address
    payload = tmp_path / "nine.bin"
    payload.write_bytes(os.urandom(9_000_000))
    code, _, err = await run_process("send", target, "hi", "--file", str(payload))
    assert code == cli.EXIT_AGENT_ERROR
    line = one_clear_line(err)
    assert "RESOURCE_EXHAUSTED" in line and "Received message larger than max" in line
    assert line.endswith(
        "(this client's limit is 16777216 bytes for a gRPC message, each way: raise it with "
        "--max-message-size BYTES)"
    )
    argv = ("send", target, "hi", "--file", str(payload), "--max-message-size", "32MiB")
    code, out, err = await run_process(*argv)
    assert code == 0, err
    assert "nine.bin (application/octet-stream, 9000000 bytes)" in out
    # The library: the same two limits are ChannelOptions fields.
    options = ChannelOptions(max_receive_message_bytes=32 * MiB)
    async with A2AClient.connect(target, channel_options=options) as client:
        message = user_message("hi")
        message.parts.add(raw=payload.read_bytes(), filename="nine.bin")
        answered = await client.send_message(message)
    assert isinstance(answered, a2a_pb2.Task)
    assert answered.artifacts[0].parts[1].raw == payload.read_bytes()


@pytest.mark.parametrize(
    ("given", "refusal"),
    [("64X", "not a size: '64X'"), ("0", "must be from 1 byte"), ("2GiB", "under 2 GiB")],
)
async def test_max_message_size_takes_bytes_or_a_binary_unit(
    given: str, refusal: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        await asyncio.to_thread(cli.main, ["get", "127.0.0.1:1", "t", "--max-message-size", given])
        == 2
    )
    assert refusal in capsys.readouterr().err


async def test_the_card_request_sends_a2a_version() -> None:
    seen: list[str | None] = []
    app = web.Application()

    async def card(request: web.Request) -> web.Response:
        seen.append(request.headers.get("A2A-Version"))
        interface = {"url": "127.0.0.1:1", "protocolBinding": "GRPC", "protocolVersion": "1.0"}
        return web.json_response({"name": "versioned", "supportedInterfaces": [interface]})

    app.router.add_get("/.well-known/agent-card.json", card)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    origin = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        async with CardResolver() as resolver:
            assert (await resolver.get(origin)).name == "versioned"
        code, out, err = await run_process("card", origin)
        assert code == 0 and out.startswith("versioned"), err
    finally:
        await runner.cleanup()
    assert seen == ["1.0", "1.0"]
