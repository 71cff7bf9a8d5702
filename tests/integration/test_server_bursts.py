"""Bursts and floods: a caller is served or refused with RESOURCE_EXHAUSTED + RetryInfo, never
cancelled by the server, and one connection's rapid resets do not shed other connections' calls."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
from collections import Counter

import grpc
import pytest

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from a2a_grpc.server.demo_agent import DemoAgent
from tests.integration.conftest import VERSION, Factory, send_request
from tests.integration.test_server_retry_classes import details
from tests.load import rapid_reset

BURST_CALLS = 4000
"""All on one connection, at once: below its stream limit, so every call reaches the server."""


class _OnRecord(logging.Handler):
    """Sets `event` when a log record containing `text` is emitted."""

    def __init__(self, text: str, event: asyncio.Event) -> None:
        super().__init__()
        self.text = text
        self.event = event

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.event.set()


class GatedAgent:
    """The demo agent, except that `wait` runs hold (WORKING) until `release` is set;
    `holding` is set while `hold` of them are waiting."""

    def __init__(self, hold: int = 1) -> None:
        self.release = asyncio.Event()
        self.waiting = 0
        self.hold = hold
        self.holding = asyncio.Event()
        self._demo = DemoAgent()

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        if context.text() != "wait":
            await self._demo.execute(context, events)
            return
        await events.working("held by the test")
        self.waiting += 1
        if self.waiting >= self.hold:
            self.holding.set()
        try:
            await self.release.wait()
        finally:
            self.waiting -= 1
        await events.complete("released")


def assert_refused_with_retry_info(error: grpc.aio.AioRpcError) -> None:
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
    info, delay = details(error)
    assert (info.domain, info.reason, info.metadata["retryable"]) == (
        "a2a-grpc",
        "RESOURCE_EXHAUSTED",
        "true",
    )
    assert delay is not None and delay > 0


@pytest.mark.timeout(120)
async def test_a_burst_is_served_or_refused_with_retry_info_never_cancelled(
    make_server: Factory,
) -> None:
    harness = await make_server()
    outcomes: Counter[str] = Counter()
    refusals: list[grpc.aio.AioRpcError] = []

    async def call() -> None:
        try:
            await harness.stub.SendMessage(send_request("hello"), metadata=VERSION, timeout=60)
            outcomes["OK"] += 1
        except grpc.aio.AioRpcError as error:
            outcomes[error.code().name] += 1
            refusals.append(error)

    await asyncio.gather(*(call() for _ in range(BURST_CALLS)))
    assert set(outcomes) <= {"OK", "RESOURCE_EXHAUSTED"}, outcomes
    assert outcomes["OK"] > 0
    for error in refusals:
        assert_refused_with_retry_info(error)


async def test_calls_over_the_limit_are_refused_and_streams_are_counted_apart(
    make_server: Factory,
) -> None:
    agent = GatedAgent(hold=3)
    harness = await make_server(agent, max_concurrent_calls=3)
    held = [harness.stub.SendMessage(send_request("wait"), metadata=VERSION) for _ in range(3)]
    await asyncio.wait_for(agent.holding.wait(), 10)
    refused = (
        harness.stub.SendMessage(send_request("hello"), metadata=VERSION),
        harness.stub.GetTask(a2a_pb2.GetTaskRequest(id="any"), metadata=VERSION),
    )
    for call in refused:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert_refused_with_retry_info(caught.value)
    # Streams have their own budget: one opens while every call slot is taken.
    stream = harness.stub.SendStreamingMessage(send_request("hello"), metadata=VERSION)
    events = [event async for event in stream]
    assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
    agent.release.set()
    for response in await asyncio.gather(*held):
        assert response.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    # The slots came back.
    response = await harness.stub.SendMessage(send_request("hello"), metadata=VERSION)
    assert response.task.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_open_streams_have_their_own_limit_and_leave_calls_alone(
    make_server: Factory,
) -> None:
    agent = GatedAgent()
    harness = await make_server(agent, max_open_streams=2)
    streams = [
        harness.stub.SendStreamingMessage(send_request("wait"), metadata=VERSION) for _ in range(2)
    ]
    for stream in streams:
        await stream.read()  # the Task: the stream is open and held
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        async for _ in harness.stub.SendStreamingMessage(send_request("hello"), metadata=VERSION):
            pass
    assert_refused_with_retry_info(caught.value)
    response = await harness.stub.SendMessage(send_request("hello"), metadata=VERSION)
    assert response.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    # A stream its caller cancels gives its slot back. The servicer logs (at DEBUG) when it has
    # freed a cancelled stream's slot: the one moment a client cannot observe.
    freed = asyncio.Event()
    servicer_log = logging.getLogger("a2a_grpc.server.transports.grpc.servicer")
    on_freed = _OnRecord("slot freed", freed)
    level = servicer_log.level
    servicer_log.addHandler(on_freed)
    servicer_log.setLevel(logging.DEBUG)
    try:
        streams[0].cancel()
        await asyncio.wait_for(freed.wait(), 10)
    finally:
        servicer_log.removeHandler(on_freed)
        servicer_log.setLevel(level)
    events = [
        event
        async for event in harness.stub.SendStreamingMessage(
            send_request("hello"), metadata=VERSION
        )
    ]
    assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
    agent.release.set()


@pytest.mark.timeout(120)
async def test_a_rapid_reset_flood_does_not_shed_other_connections_calls(
    make_server: Factory,
) -> None:
    # A small per-connection limit, and 1,000 streams per write (gRPC parses a write's streams
    # far faster than the server can release them), so that the flooder is throttled however
    # busy this machine is.
    harness = await make_server(max_streams_per_connection=100)
    port = harness.running.port
    running = asyncio.Event()
    running.set()
    answered = asyncio.Event()
    calls = asyncio.create_task(rapid_reset.call_while(port, running, 4, answered))
    await asyncio.wait_for(answered.wait(), 30)  # the well-behaved calls are going
    try:
        flood = await rapid_reset.flood_in_child(port, streams=20_000, seconds=5, batch=1000)
    finally:
        running.clear()
    outcomes = await calls
    assert set(outcomes) == {"OK"}, outcomes
    assert flood.streams > 0
    assert flood.refused > 0 or flood.goaway is not None, flood


@pytest.mark.timeout(120)
async def test_a_rapid_reset_flood_is_sent_goaway_and_its_connection_closed(
    make_server: Factory,
) -> None:
    """gRPC core has no RST_STREAM budget: the connection's age ends the flood. Its connection
    gets GOAWAY once `max_connection_age` old and is then closed; the well-behaved callers on
    another connection (which gets GOAWAY at that age too) are all served meanwhile."""
    harness = await make_server(max_streams_per_connection=100, max_connection_age=1.0)
    port = harness.running.port
    running = asyncio.Event()
    running.set()
    answered = asyncio.Event()
    calls = asyncio.create_task(rapid_reset.call_while(port, running, 4, answered))
    await asyncio.wait_for(answered.wait(), 30)
    try:
        # 60 s at most; the GOAWAY comes after 0.9-1.1 s (gRPC's jitter) of flooding, and the
        # connection closes once the GOAWAY's PING is answered (or after gRPC's PING timeout,
        # 20 s here) and the streams gRPC accepted are released: 30 s at most.
        flood = await rapid_reset.flood_in_child(
            port, streams=10_000_000, seconds=60, batch=1000, drain=30
        )
    finally:
        running.clear()
    outcomes = await calls
    assert flood.goaway is not None, flood
    assert flood.closed_by_server, flood
    assert flood.seconds < 30, flood
    assert set(outcomes) == {"OK"}, outcomes


def test_serve_command_takes_the_limits() -> None:
    limits = ["--max-concurrent-calls", "7", "--max-open-streams", "9"]
    limits += ["--max-streams-per-connection", "11"]
    with subprocess.Popen(
        [
            sys.executable,
            "-m",
            "a2a_grpc.cli.main",
            "serve",
            "--port",
            "0",
            "--drain-delay",
            "0",
            *limits,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    ) as process:
        assert process.stdout is not None
        settings = next(line for line in process.stdout if "settings " in line)
        expected = ("max_concurrent_calls=7", "max_open_streams=9", "max_streams_per_connection=11")
        assert all(setting in settings for setting in expected), settings
        process.send_signal(signal.SIGTERM)
        try:
            assert process.wait(timeout=20) == 0
        finally:
            if process.poll() is None:
                process.kill()
    refused = subprocess.run(
        [sys.executable, "-m", "a2a_grpc.cli.main", "serve", "--max-concurrent-calls", "0"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert refused.returncode == 2
    assert "max_concurrent_calls must be at least 1" in refused.stderr
