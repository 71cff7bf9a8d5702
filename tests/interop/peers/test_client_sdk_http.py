"""Our client against the official a2a-sdk 1.3.0's JSON-RPC and HTTP+JSON servers (a child
process: tests/interop/sdk_http/peer_http_server.py), each test once per binding, the card
resolved by URL and the interface picked by `A2AClient.for_card`.

This module imports only a2a_grpc, never the SDK. The behaviours are those of the gRPC peer's
tests (tests/interop/sdk_server/test_sdk_server.py), which the SDK shares across bindings
(spec §5.1: all bindings MUST match in operations, behaviour and errors).

Needs the client's HTTP transports (`for_card(card, transports=...)`, `client.interface`): until
they exist, `for_card` raises on a card without a GRPC interface.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest

from a2a_grpc.client import A2AClient, TaskView
from a2a_grpc.client.card import CardResolver
from a2a_grpc.client.messages import continue_task, send_request, user_message
from a2a_grpc.core.errors import (
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a_grpc.generated import a2a_pb2
from tests.interop.peers.conftest import PeerProcess

BINDINGS = ("JSONRPC", "HTTP+JSON")


@pytest.fixture(scope="module")
def sdk_card(sdk_http_peer: PeerProcess) -> a2a_pb2.AgentCard:
    """The peer's card, resolved by URL (once: the module's tests share the peer)."""
    return asyncio.run(resolve(sdk_http_peer.card_url))


@pytest.fixture(params=BINDINGS)
async def client(
    request: pytest.FixtureRequest, sdk_card: a2a_pb2.AgentCard
) -> AsyncIterator[A2AClient]:
    binding: str = request.param
    async with A2AClient.for_card(sdk_card, transports=(binding,), timeout=30) as client:
        assert client.interface.protocol_binding == binding
        yield client


async def resolve(url: str) -> a2a_pb2.AgentCard:
    async with CardResolver() as resolver:
        return await resolver.get(url)


async def collect(
    stream: AsyncIterator[tuple[a2a_pb2.StreamResponse, TaskView]],
) -> list[tuple[a2a_pb2.StreamResponse, TaskView]]:
    return [item async for item in stream]


async def test_for_card_prefers_jsonrpc_when_there_is_no_grpc(
    sdk_card: a2a_pb2.AgentCard, sdk_http_peer: PeerProcess
) -> None:
    async with A2AClient.for_card(sdk_card, timeout=30) as client:
        assert client.interface.protocol_binding == "JSONRPC"
        assert client.interface.url == f"{sdk_http_peer.url}/"
        assert client.interface.protocol_version == "1.0"


async def test_blocking_send(client: A2AClient) -> None:
    task = await client.send_message(user_message("hello sdk"))
    assert isinstance(task, a2a_pb2.Task)
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert [p.text for p in task.artifacts[0].parts] == ["hello sdk"]
    fetched = await client.get_task(task.id)
    assert fetched.id == task.id and fetched.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_direct_answer(client: A2AClient) -> None:
    message = await client.send_message(user_message("reply hi there"))
    assert isinstance(message, a2a_pb2.Message)
    assert message.parts[0].text == "hi there"


async def test_streaming_send_with_appended_chunks(client: A2AClient) -> None:
    items = await collect(client.send_streaming_message(user_message("chunks")))
    kinds = [event.WhichOneof("payload") for event, _ in items]
    assert kinds[0] == "task"
    assert kinds.count("artifact_update") == 3
    final = items[-1][1]
    assert final.done and final.state == a2a_pb2.TASK_STATE_COMPLETED
    assert final.task is not None
    assert [p.text for p in final.task.artifacts[0].parts] == ["chunk 1", "chunk 2", "chunk 3"]
    assert final.completed_artifacts == {"chunked"}


async def test_input_required_continuation(client: A2AClient) -> None:
    asked = await client.send_message(user_message("ask"))
    assert isinstance(asked, a2a_pb2.Task)
    assert asked.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    assert asked.status.message.parts[0].text == "What is your name?"
    done = await client.send_message(continue_task(asked.id, asked.context_id, "Ada"))
    assert isinstance(done, a2a_pb2.Task) and done.id == asked.id
    assert done.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert [p.text for p in done.artifacts[0].parts] == ["hello, Ada"]

    # Streamed: a2a-sdk 1.3.0 opens a continuation stream with a status update, not the Task
    # the spec wants (§3.1.2; the gRPC peer's test says the same); the client tolerates it.
    again = await client.send_message(user_message("ask"))
    assert isinstance(again, a2a_pb2.Task)
    items = await collect(
        client.send_streaming_message(continue_task(again.id, again.context_id, "Grace"))
    )
    final = items[-1][1]
    assert final.task is not None and final.task.id == again.id
    assert final.state == a2a_pb2.TASK_STATE_COMPLETED


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


async def test_subscribe_follows_a_running_task(client: A2AClient) -> None:
    started = await client.send_message(
        send_request(user_message("slow 30"), return_immediately=True)
    )
    assert isinstance(started, a2a_pb2.Task)
    seen: list[tuple[a2a_pb2.StreamResponse, TaskView]] = []
    snapshot_seen = asyncio.Event()

    async def follow() -> None:
        async for item in client.subscribe_to_task(started.id):
            seen.append(item)
            snapshot_seen.set()

    follower = asyncio.create_task(follow())
    await asyncio.wait_for(snapshot_seen.wait(), 30)  # then cancel to make the task move
    await client.cancel_task(started.id)
    await asyncio.wait_for(follower, 30)
    assert seen[0][0].HasField("task") and seen[0][0].task.id == started.id
    assert seen[-1][1].state == a2a_pb2.TASK_STATE_CANCELED and seen[-1][1].done


async def test_a2a_errors_decode_into_our_classes(client: A2AClient) -> None:
    with pytest.raises(TaskNotFoundError):
        await client.get_task("no-such-task")
    with pytest.raises(TaskNotFoundError):
        await client.cancel_task("no-such-task")
    with pytest.raises(TaskNotFoundError):
        await collect(client.subscribe_to_task("no-such-task"))
    done = await client.send_message(user_message("finished"))
    assert isinstance(done, a2a_pb2.Task)
    with pytest.raises(UnsupportedOperationError):
        await client.send_message(continue_task(done.id, done.context_id, "more"))
    with pytest.raises(InvalidParamsError):
        await client.send_message(continue_task(done.id, "another-context", "more"))


def test_cli_send_picks_the_transport_from_the_card(sdk_http_peer: PeerProcess) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "a2a_grpc.cli.main", "send", sdk_http_peer.card_url, "hello"],
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert result.returncode == 0, result.stderr
    assert "hello" in result.stdout
