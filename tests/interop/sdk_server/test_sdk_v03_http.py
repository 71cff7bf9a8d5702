"""Our client against an A2A 0.3 agent over HTTP: the official a2a-sdk 1.3.0 servers' 0.3
compatibility (a child process: see v03_http_server.py), over JSON-RPC and over HTTP+JSON. The
card lists one 0.3 interface, as a 0.3 agent's card does; the client's 1.0 API reaches it through
0.3's methods and routes.

This module imports only a2a_grpc, never the SDK.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from a2a_grpc.client import A2AClient
from a2a_grpc.client.messages import continue_task, user_message
from a2a_grpc.core.errors import TaskNotFoundError, UnsupportedOperationError
from a2a_grpc.generated import a2a_pb2

ROOT = Path(__file__).resolve().parents[3]
COMPLETED = a2a_pb2.TASK_STATE_COMPLETED

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def sdk_url() -> Iterator[str]:
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.interop.sdk_server.v03_http_server"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        try:
            assert process.stdout is not None
            line = process.stdout.readline().split()
            if len(line) != 2 or not line[1].isdigit():
                log.seek(0)
                pytest.fail(f"the SDK server did not start:\n{log.read().decode()[-3000:]}")
            yield f"http://127.0.0.1:{line[1]}"
        finally:
            process.kill()
            process.wait(timeout=30)
            if process.stdout is not None:
                process.stdout.close()


@pytest.fixture(params=["JSONRPC", "HTTP+JSON"])
async def client(sdk_url: str, request: pytest.FixtureRequest) -> AsyncIterator[A2AClient]:
    binding: str = request.param
    url = sdk_url + ("/" if binding == "JSONRPC" else "/rest")
    card = a2a_pb2.AgentCard(name="sdk-echo-0.3")
    card.supported_interfaces.add(url=url, protocol_binding=binding, protocol_version="0.3")
    async with A2AClient.for_card(card, timeout=30) as client:
        assert (client.interface.protocol_binding, client.interface.protocol_version) == (
            binding,
            "0.3",
        )
        yield client


async def test_blocking_send_and_get(client: A2AClient) -> None:
    task = await client.send_message(user_message("hello"))
    assert isinstance(task, a2a_pb2.Task) and task.status.state == COMPLETED
    assert task.artifacts[0].parts[0].text == "hello"
    got = await client.get_task(task.id)
    assert got.id == task.id and got.status.state == COMPLETED


async def test_direct_reply(client: A2AClient) -> None:
    reply = await client.send_message(user_message("reply hi there"))
    assert isinstance(reply, a2a_pb2.Message) and reply.parts[0].text == "hi there"


async def test_streaming_send(client: A2AClient) -> None:
    items = [item async for item in client.send_streaming_message(user_message("chunks"))]
    kinds = [event.WhichOneof("payload") for event, _ in items]
    assert kinds[0] in ("task", "status_update") and kinds.count("artifact_update") == 3
    view = items[-1][1]
    assert view.state == COMPLETED
    assert [p.text for p in view.task.artifacts[0].parts] == ["chunk 1", "chunk 2", "chunk 3"]


async def test_input_required_then_continued(client: A2AClient) -> None:
    asked = await client.send_message(user_message("ask"))
    assert isinstance(asked, a2a_pb2.Task)
    assert asked.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    assert asked.status.message.parts[0].text == "What is your name?"
    done = await client.send_message(continue_task(asked.id, asked.context_id, "Ada"))
    assert isinstance(done, a2a_pb2.Task) and done.status.state == COMPLETED
    assert done.artifacts[-1].parts[0].text == "hello, Ada"


async def test_cancel_and_errors(client: A2AClient) -> None:
    request = a2a_pb2.SendMessageRequest(message=user_message("slow 30"))
    request.configuration.return_immediately = True
    sent = await client.send_message(request)
    assert isinstance(sent, a2a_pb2.Task)
    canceled = await asyncio.wait_for(client.cancel_task(sent.id), 30)
    assert canceled.status.state == a2a_pb2.TASK_STATE_CANCELED
    with pytest.raises(TaskNotFoundError):
        await client.get_task("no-such-task")
    with pytest.raises(UnsupportedOperationError):
        await client.list_tasks()


async def test_subscribe_follows_the_task_to_its_end(client: A2AClient) -> None:
    request = a2a_pb2.SendMessageRequest(message=user_message("slow 1"))
    request.configuration.return_immediately = True
    sent = await client.send_message(request)
    assert isinstance(sent, a2a_pb2.Task)
    items = [item async for item in client.subscribe_to_task(sent.id)]
    assert items[0][0].HasField("task")
    assert items[-1][1].state == COMPLETED
    assert items[-1][1].task.artifacts[0].parts[0].text == "slow result"
