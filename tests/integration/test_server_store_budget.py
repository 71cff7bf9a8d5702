"""`--max-store-bytes` against answers to parked tasks (issue #31), on a real `a2a-grpc serve`.

The attack: park tasks in INPUT_REQUIRED (`ask`, demo agent), then answer each with a message
near `--max-message-bytes`. Every answer, and what the agent adds to its task, must be counted
when it lands: finished tasks are evicted to make room, and when live tasks fill the budget the
answer is refused with RESOURCE_EXHAUSTED and RetryInfo while the parked task stays as it was.
"""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from tests.integration.conftest import send_request
from tests.integration.serve_process import Served, serving
from tests.integration.test_server_quotas import refused_for_now

MiB = 1024 * 1024
BUDGET = 16 * MiB
MESSAGE_CAP = 1 * MiB
ANSWER = "x" * (MESSAGE_CAP - 4096)  # just under the cap, as the attacker sent
PARKED = 40  # answered, 40 x (answer + its echo) is 5 x the budget: an unbounded store shows
RSS_BOUND = 3 * BUDGET
"""Resident memory the attack may add: the budget itself (the store holds at most that; glibc's
and Python's allocators keep freed pages for reuse, so what evicted tasks held is not returned
but used again), plus what a call in flight holds outside the store (the request as gRPC
received it and as parsed, the dedup fingerprint's serialization, the answered task's
serialization when it finishes, the blocking reply's parsed task and its wire bytes: a few times
the message cap, 1/16 of the budget here), plus allocator fragmentation. Measured: 24-33 MiB,
1.5-2.1 x the budget; 3 x leaves room for the allocator's moods. Before the fix the same attack
took the store to 159 MiB and resident memory up 182 MiB (11 x the budget)."""


def _rss(pid: int) -> int:
    """Resident memory of a process in bytes (VmRSS in /proc/PID/status)."""
    text = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"^VmRSS:\s+(\d+) kB$", text, re.MULTILINE)
    assert match is not None, text
    return int(match.group(1)) * 1024


def _store_bytes(served: Served) -> int:
    assert served.http_base is not None
    with urllib.request.urlopen(f"{served.http_base}/metrics", timeout=10) as response:
        text = response.read().decode()
    match = re.search(r"^a2a_store_bytes ([0-9.e+]+)$", text, re.MULTILINE)
    assert match is not None, text
    return int(float(match.group(1)))


def _answer(task: a2a_pb2.Task, text: str) -> a2a_pb2.SendMessageRequest:
    request = send_request(text)
    request.message.task_id = task.id
    request.message.context_id = task.context_id
    return request


@pytest.fixture
def served() -> Iterator[Served]:
    with serving(
        "--port",
        "0",
        "--http-port",
        "0",
        "--max-store-bytes",
        str(BUDGET),
        "--max-message-bytes",
        str(MESSAGE_CAP),
        "--log-level",
        "warning",
    ) as running:
        yield running


def _channel(served: Served) -> grpc.aio.Channel:
    limit = 8 * MESSAGE_CAP  # a finished task holds the answer, its echo and status messages
    return grpc.aio.insecure_channel(
        f"{served.host}:{served.port}",
        options=[
            ("grpc.max_receive_message_length", limit),
            ("grpc.max_send_message_length", limit),
        ],
    )


async def test_answers_to_parked_tasks_stay_within_the_byte_budget(served: Served) -> None:
    """The issue's attack: resident memory grows at most RSS_BOUND (3 x --max-store-bytes),
    and the store's count stays within the budget after every answer."""
    async with _channel(served) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        parked = []
        for _ in range(PARKED):
            asked = await stub.SendMessage(send_request("ask"))
            assert asked.task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
            parked.append(asked.task)
        await stub.SendMessage(_answer(parked.pop(), ANSWER))  # warm the allocator's paths
        before = _rss(served.process.pid)
        answered = 0
        for task in parked:
            try:
                done = await stub.SendMessage(_answer(task, ANSWER))
            except grpc.aio.AioRpcError as refused:
                refused_for_now(refused)
                continue
            assert done.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
            answered += 1
            assert _store_bytes(served) <= BUDGET
        after = _rss(served.process.pid)
    # Finished tasks make room: with the demo agent every answer finishes its task, so every
    # answer finds finished tasks to evict and none is refused.
    assert answered == len(parked)
    print(f"RSS {before / MiB:.1f} MiB -> {after / MiB:.1f} MiB after {answered} answers")
    assert after - before <= RSS_BOUND, f"resident memory grew {(after - before) / MiB:.1f} MiB"


async def test_answers_are_refused_while_live_tasks_fill_the_budget(served: Served) -> None:
    big_ask = "ask " + "y" * (MESSAGE_CAP - 4096)
    async with _channel(served) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        parked: list[a2a_pb2.Task] = []
        while True:  # parked tasks are live: they fill the budget and cannot be evicted
            try:
                asked = await stub.SendMessage(send_request(big_ask))
            except grpc.aio.AioRpcError as refused:
                refused_for_now(refused)
                break
            parked.append(asked.task)
        assert 8 <= len(parked) <= BUDGET // MESSAGE_CAP
        for task in parked[:3]:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.SendMessage(_answer(task, ANSWER))
            refused_for_now(caught.value)
            assert "task memory" in (caught.value.details() or "")
            # Nothing accepted is lost: the task still waits for its answer, as it was.
            kept = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id))
            assert kept.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
            assert len(kept.history) == len(task.history)
        assert _store_bytes(served) <= BUDGET
        # Room that frees up is used again: a canceled task is finished, so it can go.
        for task in parked[3:6]:
            await stub.CancelTask(a2a_pb2.CancelTaskRequest(id=task.id))
        done = await stub.SendMessage(_answer(parked[0], "a short answer"))
        assert done.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
        assert _store_bytes(served) <= BUDGET
