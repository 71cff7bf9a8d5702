"""The benchmark's own servers, each run in a child process: ours, and the bare gRPC limit.

    .venv/bin/python -m tests.load.servers ours  [--agent demo|burst|hold] [--preload N]
                                                 [--audit-log F] [--store redis://...]
                                                 [--config FIELD=INT ...] [--http | --both]
    .venv/bin/python -m tests.load.servers limit

Each binds 127.0.0.1:0, prints `PORT <n>` once serving, and stops on SIGTERM / SIGINT.
- `ours`: a2a_grpc.server.app.start_server with the DemoAgent (`--agent burst` adds the
  fan-out agent below; `--preload N` stores N small finished tasks before serving, for ListTasks;
  `--config max_streams_per_connection=100` sets a ServerConfig field; `--http` serves the
  HTTP port too, JSON-RPC and HTTP+JSON, and prints that port instead of gRPC's; `--both`
  serves it too and prints `PORT <grpc> <http>`, for the client-side rows of the bench).
  `--store URL` keeps the tasks in that Redis or PostgreSQL, as `a2a-grpc serve --store` does
  (a replica); `--agent hold` (a shared store only) adds tests.load.hold_agent, which emits an
  event when the bench client says so.
- `limit`: a bare grpc.aio servicer on our generated stubs returning canned responses (a
  completed Task; a four-event stream), with server reflection and no A2A logic at all.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

import grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2_grpc

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.server.agent import RequestContext, TaskEvents
from a2a_grpc.server.app import (
    A2A_SERVICE,
    MethodAwareReflection,
    ServerPlan,
    freeze_startup_objects,
    start_server,
)
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.demo_agent import DemoAgent
from a2a_grpc.server.tasks.base import Scope
from tests.load.hold_agent import HoldAgent

BURST_KEYWORD = "burst"
BURST_HOLD_SECONDS = 1.0


class BurstAgent:
    """The demo agent, plus `burst N`: WORKING, a pause for subscribers, N chunks back to back."""

    def __init__(self) -> None:
        self._demo = DemoAgent()

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        words = context.text().split()
        if not words or words[0] != BURST_KEYWORD:
            await self._demo.execute(context, events)
            return
        count = int(words[1]) if len(words) > 1 else 1000
        hold = float(words[2]) if len(words) > 2 else BURST_HOLD_SECONDS
        await events.working(f"bursting {count} chunks in {hold:g} s")
        await asyncio.sleep(hold)  # SubscribeToTask callers attach meanwhile
        artifact_id = None
        for index in range(count):
            artifact_id = await events.add_artifact(
                [a2a_pb2.Part(text=f"chunk {index}")],
                artifact_id=artifact_id,
                name="burst",
                append=index > 0,
                last_chunk=index == count - 1,
            )
        await events.complete()


def canned_task() -> a2a_pb2.Task:
    """A finished small task shaped like our echo's answer (one message in, its echo out)."""
    from tests.load.store_memory import small_task  # see `preload`

    task = small_task()
    task.status.timestamp.GetCurrentTime()
    return task


class LimitServicer(a2a_pb2_grpc.A2AServiceServicer):  # type: ignore[misc]
    """Canned answers: what grpc.aio and protobuf cost with no protocol logic."""

    def __init__(self) -> None:
        task = canned_task()
        self._response = a2a_pb2.SendMessageResponse(task=task)
        submitted = a2a_pb2.Task()
        submitted.CopyFrom(task)
        submitted.status.state = a2a_pb2.TASK_STATE_SUBMITTED
        del submitted.artifacts[:]
        working = a2a_pb2.StreamResponse()
        working.status_update.task_id = task.id
        working.status_update.context_id = task.context_id
        working.status_update.status.state = a2a_pb2.TASK_STATE_WORKING
        artifact = a2a_pb2.StreamResponse()
        artifact.artifact_update.task_id = task.id
        artifact.artifact_update.context_id = task.context_id
        artifact.artifact_update.artifact.CopyFrom(task.artifacts[0])
        completed = a2a_pb2.StreamResponse()
        completed.status_update.CopyFrom(working.status_update)
        completed.status_update.status.state = a2a_pb2.TASK_STATE_COMPLETED
        self._stream = (a2a_pb2.StreamResponse(task=submitted), working, artifact, completed)

    async def SendMessage(self, request: a2a_pb2.SendMessageRequest, context: Any) -> Any:
        return self._response

    async def SendStreamingMessage(
        self, request: a2a_pb2.SendMessageRequest, context: Any
    ) -> AsyncIterator[a2a_pb2.StreamResponse]:
        for event in self._stream:
            yield event


def preload(store: Any, count: int) -> None:
    """Stores `count` small finished tasks in the anonymous scope (what ListTasks then pages)."""
    # Imported here: tests.load.store_memory imports parts of the package that an older
    # checkout (the bench's "previous", which runs this file) may not have.
    from tests.load.store_memory import small_task

    scope = Scope("", "")
    template = small_task()
    for _ in range(count):
        template.id = str(uuid.uuid4())
        template.context_id = str(uuid.uuid4())
        store.create(template, scope)


async def serve_ours(
    agent_name: str,
    preload_count: int,
    audit_log: str | None = None,
    overrides: dict[str, int] | None = None,
    store: str = "",
    http: bool = False,
    both: bool = False,
) -> None:
    agents = {"burst": BurstAgent, "demo": DemoAgent, "hold": lambda: HoldAgent(store)}
    config = ServerConfig(
        port=0,
        shutdown_grace=0.5,
        drain_delay=0,
        max_tasks=max(100_000, preload_count + 1),
        audit_log=audit_log,
        store=store,
        http_port=0 if http or both else None,
    )
    config = dataclasses.replace(config, **(overrides or {}))
    running = await start_server(ServerPlan(config, agents[agent_name]()))
    freeze_startup_objects()  # as `a2a-grpc serve` does once started
    if preload_count:
        preload(running.handler.store.table, preload_count)
    if both:
        assert running.http_server is not None
        await _until_signalled(running.port, running.http_server.port)
    elif http:
        assert running.http_server is not None
        await _until_signalled(running.http_server.port)
    else:
        await _until_signalled(running.port)
    await running.stop()


async def serve_limit() -> None:
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    port = server.add_insecure_port("127.0.0.1:0")
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(LimitServicer(), server)
    # The same reflection as ours (grpcio-reflection's own cannot resolve a method for ghz).
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(
        MethodAwareReflection((A2A_SERVICE, reflection.SERVICE_NAME)), server
    )
    await server.start()
    await _until_signalled(port)
    await server.stop(0.5)


async def _until_signalled(*ports: int) -> None:
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    print("PORT", *ports, flush=True)
    await stop.wait()


@contextlib.asynccontextmanager
async def ours_in_child(*args: str) -> AsyncIterator[int]:
    """Runs `tests.load.servers ours ARGS...` as a child process; yields its port, then stops it."""
    async with ours_child_process(*args) as (port, _):
        yield port


@contextlib.asynccontextmanager
async def ours_child_process(*args: str) -> AsyncIterator[tuple[int, int]]:
    """`ours_in_child`, yielding the child's port and process id (to read its memory)."""
    child = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "tests.load.servers", "ours", *args),
        stdout=asyncio.subprocess.PIPE,
    )
    assert child.stdout is not None
    try:
        line = (await asyncio.wait_for(child.stdout.readline(), 30)).decode()
        yield int(line.split()[1]), child.pid
    finally:
        child.terminate()
        await child.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("ours", "limit"))
    parser.add_argument("--agent", choices=("demo", "burst", "hold"), default="demo")
    parser.add_argument("--preload", type=int, default=0, help="ours, in memory only")
    parser.add_argument("--store", default="", help="ours: a Redis or PostgreSQL URL (a replica)")
    parser.add_argument("--audit-log", help="ours: write the audit trail to this file")
    parser.add_argument(
        "--http", action="store_true", help="ours: serve HTTP too and print its port, not gRPC's"
    )
    parser.add_argument(
        "--both", action="store_true", help="ours: serve HTTP too, print both ports"
    )
    parser.add_argument(
        "--config", action="append", default=[], metavar="FIELD=INT", help="ours: a setting"
    )
    args = parser.parse_args()
    overrides = {name: int(value) for name, _, value in (c.partition("=") for c in args.config)}
    if (args.store and args.preload) or (args.agent == "hold" and not args.store):
        parser.error("--preload needs the in-memory store, --agent hold needs --store")
    if args.kind == "ours":
        asyncio.run(
            serve_ours(
                args.agent,
                args.preload,
                args.audit_log,
                overrides,
                args.store,
                args.http,
                args.both,
            )
        )
    else:
        asyncio.run(serve_limit())


if __name__ == "__main__":
    main()
