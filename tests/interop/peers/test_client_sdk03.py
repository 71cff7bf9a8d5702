"""Our client against a stock A2A 0.3 agent: the official a2a-sdk 0.3.26's JSON-RPC and HTTP+JSON
servers (a child process in the SDK 0.3's own environment: tests/interop/sdk03/agent_server.py).

Its card has 0.3's shape (`url`, `preferredTransport`, `additionalInterfaces`,
`protocolVersion` 0.3.0, no `supportedInterfaces`): it is fetched over HTTP and the interface
picked by `A2AClient.for_card` or the CLI, never given by hand. Each call test runs once per
binding. This module imports only a2a_grpc, never the SDK.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator

import httpx
import pytest

from a2a_grpc.client import A2AClient, TaskView
from a2a_grpc.client.card import CardResolver
from a2a_grpc.client.messages import continue_task, send_request, user_message
from a2a_grpc.core.errors import TaskNotCancelableError, TaskNotFoundError
from a2a_grpc.generated import a2a_pb2
from tests.interop.peers.conftest import PeerProcess

# The first test may build the SDK 0.3's environment (tests/interop/peer_env.py): pip's time.
pytestmark = pytest.mark.timeout(900)

BINDINGS = ("jsonrpc", "http+json")


@pytest.fixture(scope="module")
def sdk03_card(sdk03_peer: PeerProcess) -> a2a_pb2.AgentCard:
    """The peer's card, resolved by URL (once: the module's tests share the peer)."""
    return asyncio.run(resolve(sdk03_peer.card_url))


@pytest.fixture(params=BINDINGS)
async def client(
    request: pytest.FixtureRequest, sdk03_card: a2a_pb2.AgentCard
) -> AsyncIterator[A2AClient]:
    async with A2AClient.for_card(sdk03_card, transports=(request.param,), timeout=30) as client:
        assert client.interface.protocol_version == "0.3.0"
        yield client


async def resolve(url: str) -> a2a_pb2.AgentCard:
    async with CardResolver() as resolver:
        return await resolver.get(url)


async def collect(
    stream: AsyncIterator[tuple[a2a_pb2.StreamResponse, TaskView]],
) -> list[tuple[a2a_pb2.StreamResponse, TaskView]]:
    return [item async for item in stream]


def test_the_peer_serves_a_0_3_card(sdk03_peer: PeerProcess) -> None:
    document = httpx.get(sdk03_peer.card_url).json()
    assert "supportedInterfaces" not in document
    assert document["url"] == f"{sdk03_peer.url}/"
    assert document["preferredTransport"] == "JSONRPC"
    assert document["protocolVersion"] == "0.3.0"


async def test_for_card_picks_the_preferred_0_3_interface(
    sdk03_card: a2a_pb2.AgentCard, sdk03_peer: PeerProcess
) -> None:
    async with A2AClient.for_card(sdk03_card, timeout=30) as client:
        assert client.interface.protocol_binding == "JSONRPC"
        assert client.interface.url == f"{sdk03_peer.url}/"
    async with A2AClient.connect(sdk03_peer.url, timeout=30) as client:  # the card by URL
        assert client.interface.protocol_binding == "JSONRPC"
        task = await client.send_message(user_message("by url"))
        assert isinstance(task, a2a_pb2.Task)
        assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_send_and_get(client: A2AClient) -> None:
    task = await client.send_message(user_message("hello sdk 0.3"))
    assert isinstance(task, a2a_pb2.Task)
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert [p.text for p in task.artifacts[0].parts] == ["hello sdk 0.3"]
    fetched = await client.get_task(task.id)
    assert fetched.id == task.id and fetched.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert [p.text for p in fetched.artifacts[0].parts] == ["hello sdk 0.3"]


async def test_stream(client: A2AClient) -> None:
    items = await collect(client.send_streaming_message(user_message("streamed")))
    kinds = [event.WhichOneof("payload") for event, _ in items]
    assert kinds[0] == "task" and "artifact_update" in kinds
    final = items[-1][1]
    assert final.done and final.state == a2a_pb2.TASK_STATE_COMPLETED
    assert final.task is not None
    assert [p.text for p in final.task.artifacts[0].parts] == ["streamed"]


async def test_ask_then_answer_on_the_same_task(client: A2AClient) -> None:
    asked = await client.send_message(user_message("ask"))
    assert isinstance(asked, a2a_pb2.Task)
    assert asked.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    assert asked.status.message.parts[0].text == "What is your name?"
    done = await client.send_message(continue_task(asked.id, asked.context_id, "Ada"))
    assert isinstance(done, a2a_pb2.Task) and done.id == asked.id
    assert done.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert [p.text for p in done.artifacts[0].parts] == ["hello, Ada"]

    streamed = await collect(client.send_streaming_message(user_message("ask")))
    waiting = streamed[-1][1]
    assert waiting.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED and waiting.done
    assert waiting.task is not None
    answered = await collect(
        client.send_streaming_message(continue_task(waiting.task_id, waiting.task.context_id, "Bo"))
    )
    final = answered[-1][1]
    assert final.task_id == waiting.task_id and final.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_cancel(client: A2AClient) -> None:
    started = await client.send_message(
        send_request(user_message("slow 30"), return_immediately=True)
    )
    assert isinstance(started, a2a_pb2.Task)
    canceled = await client.cancel_task(started.id)
    assert canceled.id == started.id and canceled.status.state == a2a_pb2.TASK_STATE_CANCELED
    assert (await client.get_task(started.id)).status.state == a2a_pb2.TASK_STATE_CANCELED
    with pytest.raises(TaskNotCancelableError):
        await client.cancel_task(started.id)


async def test_unknown_task(client: A2AClient) -> None:
    with pytest.raises(TaskNotFoundError):
        await client.get_task("no-such-task")


@pytest.mark.parametrize("transport", [None, *BINDINGS])
def test_cli_send_reaches_the_0_3_agent_by_its_card(
    sdk03_peer: PeerProcess, transport: str | None
) -> None:
    chosen = [] if transport is None else ["--transport", transport]
    result = subprocess.run(
        [sys.executable, "-m", "a2a_grpc.cli.main", "send", sdk03_peer.card_url, "hi", *chosen],
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert result.returncode == 0, result.stderr
    assert "completed" in result.stdout and "artifact echo: hi" in result.stdout


def test_cli_card_names_the_0_3_interface_it_uses(sdk03_peer: PeerProcess) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "a2a_grpc.cli.main", "card", sdk03_peer.url],
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert result.returncode == 0, result.stderr
    assert f"uses: JSONRPC 0.3.0 {sdk03_peer.url}/" in result.stdout
