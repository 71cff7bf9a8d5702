"""Health, reflection, exclusive ports, graceful shutdown and the serve command."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

import aiohttp
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from a2a_grpc.core import exit_codes
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.server.app import (
    STORE_HEALTH_SERVICE,
    PortInUseError,
    ServerPlan,
    StartupError,
    start_server,
)
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.demo_agent import DemoAgent
from a2a_grpc.server.tasks.base import Scope
from tests.integration.conftest import Factory, Harness, Held, send_request


async def test_health_serving(demo: Harness) -> None:
    stub = health_pb2_grpc.HealthStub(demo.channel)
    for service in ("", "lf.a2a.v1.A2AService"):
        reply = await stub.Check(health_pb2.HealthCheckRequest(service=service))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_reflection_lists_and_describes_the_service(demo: Harness) -> None:
    stub = reflection_pb2_grpc.ServerReflectionStub(demo.channel)

    async def ask() -> list[reflection_pb2.ServerReflectionResponse]:
        requests = [
            reflection_pb2.ServerReflectionRequest(list_services=""),
            reflection_pb2.ServerReflectionRequest(file_containing_symbol="lf.a2a.v1.A2AService"),
            # ghz asks for the method's own symbol
            reflection_pb2.ServerReflectionRequest(
                file_containing_symbol="lf.a2a.v1.A2AService.SendMessage"
            ),
        ]
        return [r async for r in stub.ServerReflectionInfo(iter(requests))]

    listed, described, method = await ask()
    assert method.file_descriptor_response.file_descriptor_proto
    names = {s.name for s in listed.list_services_response.service}
    assert {"lf.a2a.v1.A2AService", "grpc.health.v1.Health"} <= names
    assert described.file_descriptor_response.file_descriptor_proto


async def test_port_is_not_shared(demo: Harness) -> None:
    config = ServerConfig(host="127.0.0.1", port=demo.running.port)
    with pytest.raises(PortInUseError, match="in use"):
        await start_server(ServerPlan(config, DemoAgent()))


async def probe(url: str) -> tuple[int, dict[str, str], str]:
    """GET `url` on a connection of its own: status, headers and body."""
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        return response.status, dict(response.headers), await response.text()


async def test_a_stop_says_not_serving_at_once_and_serves_through_the_delay(
    make_server: Factory,
) -> None:
    harness = await make_server(http_port=0)
    base = harness.running.http_server.base_url  # type: ignore[union-attr]
    assert (await probe(base + "/readyz"))[0] == 200
    health = health_pb2_grpc.HealthStub(harness.channel)
    watch = health.Watch(health_pb2.HealthCheckRequest(service=""))
    assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
    stream = harness.stub.SendStreamingMessage(send_request("slow 30"))
    task_id = (await stream.read()).task.id
    stopping = asyncio.ensure_future(harness.running.stop(grace=0.5, drain_delay=3600))
    assert (await watch.read()).status == health_pb2.HealthCheckResponse.NOT_SERVING
    watch.cancel()
    for service in ("", "lf.a2a.v1.A2AService", "a2a.v1.A2AService"):
        reply = await health.Check(health_pb2.HealthCheckRequest(service=service))
        assert reply.status == health_pb2.HealthCheckResponse.NOT_SERVING
    status, headers, body = await probe(base + "/readyz")
    assert status == 503 and "shutting down" in body
    status, headers, body = await probe(base + "/healthz")
    assert status == 200 and headers["Connection"] == "close"  # keep-alive clients move on
    # Through the delay, A2A calls are served as usual, new connections too.
    read = await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id))
    assert read.status.state == a2a_pb2.TASK_STATE_WORKING
    async with grpc.aio.insecure_channel(harness.running.address) as fresh:
        sent = await a2a_pb2_grpc.A2AServiceStub(fresh).SendMessage(send_request("hi"))
    assert sent.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert not stopping.done()
    harness.running.skip_drain_delay()  # a second SIGTERM: the drain starts now
    await asyncio.wait_for(stopping, 10)
    # The slow task outlived the grace: cancelled. The store is read directly (the server is
    # gone); anonymous callers share one scope.
    stored = harness.store.get(task_id, Scope(tenant="", owner=""))
    assert stored.status.state == a2a_pb2.TASK_STATE_CANCELED


async def test_the_drain_sends_goaway_closes_the_ports_and_lets_work_finish(
    make_server: Factory,
) -> None:
    agent = Held()
    harness = await make_server(agent=agent, http_port=0)
    base = harness.running.http_server.base_url  # type: ignore[union-attr]
    stream = harness.stub.SendStreamingMessage(send_request("hold"))
    await stream.read()
    assert (await stream.read()).status_update.status.state == a2a_pb2.TASK_STATE_WORKING
    assert harness.channel.get_state() == grpc.ChannelConnectivity.READY
    stopping = asyncio.ensure_future(harness.running.stop(grace=30, drain_delay=0))
    # GOAWAY: the client's connection takes no new calls (its channel leaves READY), while
    # the open stream goes on.
    await harness.channel.wait_for_state_change(grpc.ChannelConnectivity.READY)
    async with grpc.aio.insecure_channel(harness.running.address) as fresh:
        with pytest.raises(grpc.aio.AioRpcError) as caught:  # the port is closed
            await a2a_pb2_grpc.A2AServiceStub(fresh).GetTask(a2a_pb2.GetTaskRequest(id="t"))
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    with pytest.raises(aiohttp.ClientConnectionError):
        await probe(base + "/healthz")
    agent.go.set()  # the running task finishes normally, and its stream gets the end
    last = await stream.read()
    assert last.status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert await stream.read() == grpc.aio.EOF
    await asyncio.wait_for(stopping, 10)  # returns once the work drained, long before 30 s
    assert agent.runs == 1


async def test_an_open_health_watch_ends_with_the_stop_instead_of_holding_it(
    make_server: Factory,
) -> None:
    # Clients with gRPC's client-side health checking hold one Watch per backend: a stop must
    # not wait its whole grace on them (it did: 11 s for a 1 s delay and a 10 s grace).
    harness = await make_server()
    watch = health_pb2_grpc.HealthStub(harness.channel).Watch(health_pb2.HealthCheckRequest())
    assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
    stopping = asyncio.ensure_future(harness.running.stop(grace=30, drain_delay=0))
    assert (await watch.read()).status == health_pb2.HealthCheckResponse.NOT_SERVING
    assert await watch.read() == grpc.aio.EOF
    assert await watch.code() == grpc.StatusCode.OK  # ended by the server, not cancelled
    await asyncio.wait_for(stopping, 10)  # nothing else was open: long before the 30 s grace


async def test_readiness_follows_the_task_store(make_server: Factory) -> None:
    harness = await make_server(http_port=0)
    base = harness.running.http_server.base_url  # type: ignore[union-attr]
    board = harness.running.board
    assert board is not None
    tell = board.reporter(STORE_HEALTH_SERVICE, needed=True)
    tell(False)
    status, _, body = await probe(base + "/readyz")
    assert status == 503 and "task store" in body
    assert (await probe(base + "/healthz"))[0] == 200  # alive all the same
    tell(True)
    assert (await probe(base + "/readyz"))[0] == 200


def test_serve_command_prints_its_address_and_stops_on_sigterm() -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "a2a_grpc.cli.main", "serve", "--port", "0", "--drain-delay", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    ) as process:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert "serving A2A 1.0 over gRPC (plaintext) on 127.0.0.1:" in first
        port = int(first.rsplit(":", 1)[1])
        assert port > 0
        rest = "".join(process.stdout.readline() for _ in range(4))
        assert "agent card at http://127.0.0.1:" in rest
        assert "max_tasks=100000" in rest
        assert "store=memory" in rest and "workers=1" in rest and "reuse_port=False" in rest
        assert "no authentication configured" in rest
        process.send_signal(signal.SIGTERM)
        try:
            assert process.wait(timeout=20) == 0
        finally:
            if process.poll() is None:
                process.kill()


def test_serve_command_refuses_a_taken_port() -> None:
    import socket

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    try:
        port = holder.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "a2a_grpc.cli.main", "serve", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        holder.close()
    assert result.returncode == exit_codes.CANNOT_LISTEN
    assert result.stderr.splitlines() == [
        f"a2a-grpc serve: cannot listen on 127.0.0.1:{port}: the port is in use (another "
        "process listens on it)"
    ]


def test_serve_command_rejects_a_bad_agent() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "a2a_grpc.cli.main", "serve", "--agent", "no.such:thing"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "--agent" in result.stderr
    assert "Traceback" not in result.stderr


async def test_an_agent_with_a_plain_execute_is_refused_at_start() -> None:
    class Plain:
        def execute(self, context: object, events: object) -> None: ...

    config = ServerConfig(host="127.0.0.1", port=0, http_port=None, drain_delay=0)
    with pytest.raises(StartupError, match=r"Plain\.execute is a plain function: declare it"):
        await start_server(ServerPlan(config, Plain()))  # type: ignore[arg-type]
