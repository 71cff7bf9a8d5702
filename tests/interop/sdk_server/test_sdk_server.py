"""Our client against the official a2a-sdk 1.3.0 gRPC server (a child process: see peer_server.py).

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

from a2a_grpc.client import A2AClient, TaskView
from a2a_grpc.client.messages import continue_task, send_request, user_message
from a2a_grpc.core.errors import (
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a_grpc.generated import a2a_pb2

PEER = Path(__file__).with_name("peer_server.py")


@pytest.fixture(scope="module")
def sdk_target() -> Iterator[str]:
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            [sys.executable, str(PEER)], stdout=subprocess.PIPE, stderr=log, text=True
        )
        try:
            assert process.stdout is not None
            port = process.stdout.readline().strip()
            if not port.isdigit():
                log.seek(0)
                pytest.fail(f"the SDK server did not start:\n{log.read().decode()[-3000:]}")
            yield f"127.0.0.1:{port}"
        finally:
            process.kill()
            process.wait(timeout=30)
            if process.stdout is not None:
                process.stdout.close()


@pytest.fixture
async def client(sdk_target: str) -> AsyncIterator[A2AClient]:
    async with A2AClient.connect(sdk_target, timeout=30) as client:
        yield client


async def collect(
    stream: AsyncIterator[tuple[a2a_pb2.StreamResponse, TaskView]],
) -> list[tuple[a2a_pb2.StreamResponse, TaskView]]:
    return [item async for item in stream]


async def test_blocking_send(client: A2AClient) -> None:
    task = await client.send_message(user_message("hello sdk"))
    assert isinstance(task, a2a_pb2.Task)
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert [p.text for p in task.artifacts[0].parts] == ["hello sdk"]
    assert task.context_id


async def test_direct_answer(client: A2AClient) -> None:
    message = await client.send_message(user_message("reply hi there"))
    assert isinstance(message, a2a_pb2.Message)
    assert message.parts[0].text == "hi there"
    items = await collect(client.send_streaming_message(user_message("reply streamed")))
    assert len(items) == 1 and items[0][1].done and items[0][1].message is not None


async def test_streaming_send_with_appended_chunks(client: A2AClient) -> None:
    items = await collect(client.send_streaming_message(user_message("chunks")))
    kinds = [event.WhichOneof("payload") for event, _ in items]
    assert kinds[0] == "task"
    assert kinds.count("artifact_update") == 3
    updates = [event.artifact_update for event, _ in items if event.HasField("artifact_update")]
    assert [(u.append, u.last_chunk) for u in updates] == [
        (False, False),
        (True, False),
        (True, True),
    ]
    growing = [
        [p.text for p in view.task.artifacts[0].parts]
        for event, view in items
        if event.HasField("artifact_update") and view.task is not None
    ]
    assert growing == [["chunk 1"], ["chunk 1", "chunk 2"], ["chunk 1", "chunk 2", "chunk 3"]]
    final = items[-1][1]
    assert final.done and final.state == a2a_pb2.TASK_STATE_COMPLETED
    assert final.completed_artifacts == {"chunked"}


async def test_input_required_continuation(client: A2AClient) -> None:
    asked = await client.send_message(user_message("ask"))
    assert isinstance(asked, a2a_pb2.Task)
    assert asked.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    assert asked.status.message.parts[0].text == "What is your name?"

    # The SDK opens a continuation stream with a status update, not the Task the spec wants;
    # our client tolerates exactly that.
    items = await collect(
        client.send_streaming_message(continue_task(asked.id, asked.context_id, "Ada"))
    )
    assert items[0][0].WhichOneof("payload") == "status_update"  # a2a-sdk 1.3.0's opening
    final = items[-1][1]
    assert final.task is not None and final.task.id == asked.id
    assert final.state == a2a_pb2.TASK_STATE_COMPLETED
    assert [p.text for p in final.task.artifacts[0].parts] == ["hello, Ada"]

    again = await client.send_message(user_message("ask"))
    assert isinstance(again, a2a_pb2.Task)
    done = await client.send_message(continue_task(again.id, again.context_id, "Grace"))
    assert isinstance(done, a2a_pb2.Task) and done.id == again.id
    assert done.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_cancel(client: A2AClient) -> None:
    started = await client.send_message(
        send_request(user_message("slow 30"), return_immediately=True)
    )
    assert isinstance(started, a2a_pb2.Task)
    assert started.status.state in (a2a_pb2.TASK_STATE_SUBMITTED, a2a_pb2.TASK_STATE_WORKING)
    canceled = await client.cancel_task(started.id)
    assert canceled.id == started.id
    assert canceled.status.state == a2a_pb2.TASK_STATE_CANCELED
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


async def test_list(client: A2AClient) -> None:
    first = await client.send_message(user_message("listed one"))
    second = await client.send_message(user_message("listed two"))
    assert isinstance(first, a2a_pb2.Task) and isinstance(second, a2a_pb2.Task)
    page = await client.list_tasks(a2a_pb2.ListTasksRequest(page_size=100))
    ids = [task.id for task in page.tasks]
    assert first.id in ids and second.id in ids
    in_context = await client.list_tasks(a2a_pb2.ListTasksRequest(context_id=first.context_id))
    assert [task.id for task in in_context.tasks] == [first.id]


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
        await collect(client.subscribe_to_task(done.id))
    with pytest.raises(UnsupportedOperationError):
        await client.send_message(continue_task(done.id, done.context_id, "more"))
    with pytest.raises(InvalidParamsError):
        await client.send_message(continue_task(done.id, "another-context", "more"))
    with pytest.raises(PushNotificationNotSupportedError):
        await client.create_task_push_notification_config(
            a2a_pb2.TaskPushNotificationConfig(task_id=done.id, url="https://example.com/hook")
        )
    with pytest.raises(UnsupportedOperationError):
        await client.get_extended_agent_card()
    with pytest.raises(InvalidParamsError):
        await client.get_task(a2a_pb2.GetTaskRequest(id=done.id, history_length=-1))
