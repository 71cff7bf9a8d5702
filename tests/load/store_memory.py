"""Measures resident memory per stored small task (run by hand or by `make bench`, never by tests).

Two figures at N tasks (default 100,000):
- store: tasks put straight into the TaskTable (task + ListTasks indexes);
- server: the same through RequestHandler.send_message with the demo agent, so it includes what
  the server keeps per accepted message (the idempotency record and the run that settled).
A small task: one text message in, its echo artifact out, COMPLETED.
And one for large payloads: memory per stored payload byte, and per byte the store counts
against its byte budget (`--max-store-bytes`), for 2,000 tasks of 2 x 64 KiB text.

    .venv/bin/python -m tests.load.store_memory [N] [--json]

With `--json` it prints one JSON line (what tests.load.bench reads) instead of the two lines.
Each figure is measured in a process of its own.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
import uuid

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.card import demo_card
from a2a_grpc.server.compose import build_handler
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.demo_agent import DemoAgent
from a2a_grpc.server.protocol.call_context import CallContext
from a2a_grpc.server.tasks.base import Scope
from a2a_grpc.server.tasks.table import TaskTable

PAYLOAD_TASKS = 2000
PAYLOAD_BYTES = 64 * 1024


def rss_bytes() -> int:
    gc.collect()
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def small_task() -> a2a_pb2.Task:
    task_id, context_id = str(uuid.uuid4()), str(uuid.uuid4())
    message = a2a_pb2.Message(
        message_id=str(uuid.uuid4()),
        role=a2a_pb2.ROLE_USER,
        task_id=task_id,
        context_id=context_id,
        parts=[a2a_pb2.Part(text="hello")],
    )
    return a2a_pb2.Task(
        id=task_id,
        context_id=context_id,
        status=a2a_pb2.TaskStatus(state=a2a_pb2.TASK_STATE_COMPLETED),
        history=[message],
        artifacts=[
            a2a_pb2.Artifact(
                artifact_id=str(uuid.uuid4()), name="echo", parts=[a2a_pb2.Part(text="hello")]
            )
        ],
    )


def measure_store(count: int) -> float:
    store = TaskTable(max_tasks=count + 1)
    scope = Scope("", "")
    tasks = [small_task() for _ in range(1000)]
    before = rss_bytes()
    for index in range(count):
        template = tasks[index % len(tasks)]
        template.id = str(uuid.uuid4())
        store.create(template, scope)
    return (rss_bytes() - before) / count


def measure_payload(count: int, payload: int) -> tuple[float, float]:
    """(memory per payload byte, memory per byte the store counts) for `count` finished tasks
    whose message and echo artifact each carry `payload` bytes of text."""
    store = TaskTable(max_tasks=count + 1)
    scope = Scope("", "")
    text = "x" * payload
    before = rss_bytes()
    for _ in range(count):
        task = small_task()
        task.history[0].parts[0].text = text
        task.artifacts[0].parts[0].text = text
        store.create(task, scope)
    grown = rss_bytes() - before
    return grown / (count * 2 * payload), grown / store.bytes


async def measure_server(count: int) -> float:
    config = ServerConfig(max_tasks=count + 1)
    handler = build_handler(DemoAgent(), demo_card("127.0.0.1:0"), config)
    call = CallContext()
    before = rss_bytes()
    for _ in range(count):
        request = a2a_pb2.SendMessageRequest(
            message=a2a_pb2.Message(
                message_id=str(uuid.uuid4()),
                role=a2a_pb2.ROLE_USER,
                parts=[a2a_pb2.Part(text="hello")],
            )
        )
        await handler.send_message(request, call)
    await asyncio.sleep(0)
    return (rss_bytes() - before) / count


def _in_child(measure: str, count: int) -> list[float]:
    """One measurement in a fresh interpreter: memory a measurement freed would otherwise be
    reused by the next one, which then reads low (through the server: 1.45 against 1.55 KiB,
    and 4.06 against 4.22 before finished tasks were kept serialized)."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.load.store_memory", str(count), f"--measure={measure}"],
        capture_output=True,
        text=True,
        check=True,
    )
    figures: list[float] = json.loads(done.stdout)
    return figures


def main() -> None:
    numbers = [arg for arg in sys.argv[1:] if not arg.startswith("--")]
    count = int(numbers[0]) if numbers else 100_000
    measure = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--measure=")), None)
    if measure is not None:  # the child of `_in_child`
        if measure == "store":
            print(json.dumps([measure_store(count)]))
        elif measure == "server":
            print(json.dumps([asyncio.run(measure_server(count))]))
        else:
            print(json.dumps(list(measure_payload(PAYLOAD_TASKS, PAYLOAD_BYTES))))
        return
    (store_figure,) = _in_child("store", count)
    (server_figure,) = _in_child("server", count)
    per_payload, per_counted = _in_child("payload", count)
    if "--json" in sys.argv:
        figures = {"tasks": count, "store_kib": store_figure / 1024}
        figures.update(per_payload_byte=per_payload, per_counted_byte=per_counted)
        print(json.dumps({**figures, "server_kib": server_figure / 1024}))
        return
    print(f"tasks: {count}")
    print(f"store only:          {store_figure / 1024:.2f} KiB per small task")
    print(f"through the server:  {server_figure / 1024:.2f} KiB per small task")
    print(
        f"{PAYLOAD_TASKS} tasks of 2 x {PAYLOAD_BYTES // 1024} KiB text: {per_payload:.2f} bytes "
        f"of memory per payload byte, {per_counted:.2f} per byte counted against "
        "--max-store-bytes"
    )


if __name__ == "__main__":
    main()
