"""Our client against a Google ADK 2.13.0 agent served by ADK's own A2A server (a child process
in ADK's own environment: tests/interop/adk/agent_server.py), the card resolved by URL and the
interface picked by `A2AClient.for_card`.

ADK 2.13 (with the a2a-sdk 1.3.0 its environment pins) serves A2A 1.0 over JSON-RPC only: its
card lists one JSONRPC interface, protocol version 1.0 (it also answers 0.3's JSON-RPC methods on
the same endpoint, unadvertised, which spec §5.2 forbids: see test_peer_fixtures.py). So this
needs the client's JSON-RPC transport, not the 0.3 translation. (ADK accepts any a2a-sdk from
0.3.4 to 1.x; with a 0.3 SDK it would serve 0.3 only, hence the pin.) This module imports only
a2a_grpc, never ADK or the SDK.

What ADK does that a client must take as it comes (none of it against the spec, but the
continuation stream opening with a status update, as in the SDK: see test_peer_fixtures.py):
- a text reply is a WORKING status update carrying the text, then one artifact holding the last
  such text (lastChunk set), then COMPLETED;
- INPUT_REQUIRED's status message holds the question and a data part, the long-running
  function call (metadata `adk_type: function_call`); a plain text answer on the task is
  passed to the agent;
- an agent's error is a FAILED task (not a protocol error) whose status message is the error's
  text, an exception's included (our server says less: project decision §9.6).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest
from google.protobuf import struct_pb2

from a2a_grpc.client import A2AClient, TaskView
from a2a_grpc.client.card import CardResolver
from a2a_grpc.client.messages import continue_task, send_request, user_message
from a2a_grpc.core.errors import TaskNotCancelableError, TaskNotFoundError
from a2a_grpc.generated import a2a_pb2
from tests.interop.peers.conftest import PeerProcess

# The first test may build ADK's environment (tests/interop/adk/adk_env.py): pip's time.
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def adk_card(adk_peer: PeerProcess) -> a2a_pb2.AgentCard:
    """The peer's card, resolved by URL (once: the module's tests share the peer)."""
    return asyncio.run(resolve(adk_peer.card_url))


@pytest.fixture
async def client(adk_card: a2a_pb2.AgentCard) -> AsyncIterator[A2AClient]:
    async with A2AClient.for_card(adk_card, timeout=30) as client:
        yield client


async def resolve(url: str) -> a2a_pb2.AgentCard:
    async with CardResolver() as resolver:
        return await resolver.get(url)


async def collect(
    stream: AsyncIterator[tuple[a2a_pb2.StreamResponse, TaskView]],
) -> list[tuple[a2a_pb2.StreamResponse, TaskView]]:
    return [item async for item in stream]


async def test_for_card_picks_adks_jsonrpc_interface(
    client: A2AClient, adk_peer: PeerProcess
) -> None:
    assert client.interface.protocol_binding == "JSONRPC"
    assert client.interface.url == adk_peer.url
    assert client.interface.protocol_version == "1.0"


async def test_blocking_send(client: A2AClient) -> None:
    task = await client.send_message(user_message("hello adk"))
    assert isinstance(task, a2a_pb2.Task)
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert [p.text for p in task.artifacts[0].parts] == ["hello adk"]
    assert (await client.get_task(task.id)).status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_streaming_send(client: A2AClient) -> None:
    items = await collect(client.send_streaming_message(user_message("streamed adk")))
    assert items[0][0].WhichOneof("payload") == "task"
    final = items[-1][1]
    assert final.done and final.state == a2a_pb2.TASK_STATE_COMPLETED
    assert final.task is not None
    assert [p.text for p in final.task.artifacts[0].parts] == ["streamed adk"]


async def test_input_required_answered_in_text(client: A2AClient) -> None:
    asked = await client.send_message(user_message("ask"))
    assert isinstance(asked, a2a_pb2.Task)
    assert asked.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    question, call = asked.status.message.parts
    assert question.text == "What is your name?"
    assert call.data.struct_value["name"] == "ask_user"
    assert call.metadata["adk_type"] == "function_call"
    done = await client.send_message(continue_task(asked.id, asked.context_id, "Ada"))
    assert isinstance(done, a2a_pb2.Task) and done.id == asked.id
    assert done.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert [p.text for p in done.artifacts[0].parts] == ["hello, Ada"]


async def test_input_required_answered_with_a_function_response(client: A2AClient) -> None:
    asked = await client.send_message(user_message("ask"))
    assert isinstance(asked, a2a_pb2.Task)
    call = asked.status.message.parts[1].data.struct_value
    response = struct_pb2.Value()
    response.struct_value.update(
        {"id": call["id"], "name": "ask_user", "response": {"answer": "Grace"}}
    )
    answer = a2a_pb2.Part(data=response)
    answer.metadata.update({"adk_type": "function_response"})  # ADK's own answer to its call
    items = await collect(
        client.send_streaming_message(continue_task(asked.id, asked.context_id, answer))
    )
    final = items[-1][1]
    assert final.task is not None and final.task.id == asked.id
    assert final.state == a2a_pb2.TASK_STATE_COMPLETED
    assert [p.text for p in final.task.artifacts[0].parts] == ["hello, Grace"]


async def test_cancel(client: A2AClient) -> None:
    started = await client.send_message(
        send_request(user_message("slow 30"), return_immediately=True)
    )
    assert isinstance(started, a2a_pb2.Task)
    canceled = await client.cancel_task(started.id)
    assert canceled.id == started.id and canceled.status.state == a2a_pb2.TASK_STATE_CANCELED
    with pytest.raises(TaskNotCancelableError):
        await client.cancel_task(started.id)


async def test_agent_failures_are_failed_tasks(client: A2AClient) -> None:
    for keyword, text in (
        ("fail", "the agent failed on purpose"),
        ("crash", "the agent crashed on purpose"),
    ):
        failed = await client.send_message(user_message(keyword))
        assert isinstance(failed, a2a_pb2.Task)
        assert failed.status.state == a2a_pb2.TASK_STATE_FAILED
        assert [p.text for p in failed.status.message.parts] == [text]


async def test_unknown_task_is_task_not_found(client: A2AClient) -> None:
    with pytest.raises(TaskNotFoundError):
        await client.get_task("no-such-task")
    with pytest.raises(TaskNotFoundError):
        await client.cancel_task("no-such-task")


def test_cli_send_picks_the_transport_from_the_card(adk_peer: PeerProcess) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "a2a_grpc.cli.main", "send", adk_peer.card_url, "hello"],
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert result.returncode == 0, result.stderr
    assert "hello" in result.stdout
