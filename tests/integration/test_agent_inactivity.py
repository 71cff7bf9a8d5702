"""`serve --agent-inactivity-timeout`: a run whose agent reports nothing for that long has its task
FAILED, saying why, and its agent cancelled; an agent that keeps reporting is left alone. Real
servers, on both stores; the tests wait for the task's terminal event, never on the clock."""

from __future__ import annotations

import asyncio
import logging

import pytest

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.protocol.run import INACTIVE_TEXT
from tests.integration.conftest import VERSION, Factory, collect, send_request

TIMEOUT = 0.2


@pytest.fixture(params=["memory", "redis"])
def store_url(request: pytest.FixtureRequest) -> str:
    """The task store: this process's memory (""), or a fresh redis-server's URL."""
    if request.param == "memory":
        return ""
    url: str = request.getfixturevalue("redis_server").url
    return url


class Hangs:
    """Reports WORKING (unless `silent`), then awaits forever. `cancelled` is set when its
    `execute` gets CancelledError; with `stubborn` it swallows that and hangs on until
    `release`, as a badly written agent might."""

    def __init__(self, *, silent: bool = False, stubborn: bool = False) -> None:
        self.silent = silent
        self.stubborn = stubborn
        self.cancelled = asyncio.Event()
        self.release = asyncio.Event()

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        if not self.silent:
            await events.working("on it")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            if not self.stubborn:
                raise
        await self.release.wait()


def _failed_for_silence(status: a2a_pb2.TaskStatus) -> None:
    assert status.state == a2a_pb2.TASK_STATE_FAILED
    assert [part.text for part in status.message.parts] == [INACTIVE_TEXT.format(seconds=TIMEOUT)]


async def test_a_silent_agent_fails_its_task_and_is_cancelled(
    make_server: Factory, store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    agent = Hangs()
    harness = await make_server(agent, agent_inactivity_timeout=TIMEOUT, store=store_url)
    with caplog.at_level(logging.WARNING, logger="a2a_grpc.server.protocol.run"):
        stream = harness.stub.SendStreamingMessage(send_request("hang"), metadata=VERSION)
        events = await asyncio.wait_for(collect(stream), 10)
        await asyncio.wait_for(agent.cancelled.wait(), 10)
    states = [e.status_update.status.state for e in events if e.HasField("status_update")]
    assert states == [a2a_pb2.TASK_STATE_WORKING, a2a_pb2.TASK_STATE_FAILED]
    _failed_for_silence(events[-1].status_update.status)
    task_id = events[0].task.id
    stored = await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=VERSION)
    _failed_for_silence(stored.status)
    assert [r.getMessage() for r in caplog.records] == [
        f"task {task_id}: the agent reported nothing for {TIMEOUT:g} s "
        "(--agent-inactivity-timeout): the task is FAILED and the agent cancelled"
    ]


async def test_an_agent_silent_from_its_start_answers_a_blocking_send_with_failed(
    make_server: Factory,
) -> None:
    """No event at all: the task is made by the server's own FAILED status."""
    agent = Hangs(silent=True)
    harness = await make_server(agent, agent_inactivity_timeout=TIMEOUT)
    response = await asyncio.wait_for(
        harness.stub.SendMessage(send_request("hang"), metadata=VERSION), 10
    )
    _failed_for_silence(response.task.status)
    await asyncio.wait_for(agent.cancelled.wait(), 10)


async def test_the_task_ends_even_when_the_agent_ignores_its_cancellation(
    make_server: Factory,
) -> None:
    agent = Hangs(stubborn=True)
    harness = await make_server(agent, agent_inactivity_timeout=TIMEOUT)
    stream = harness.stub.SendStreamingMessage(send_request("hang"), metadata=VERSION)
    events = await asyncio.wait_for(collect(stream), 10)
    _failed_for_silence(events[-1].status_update.status)
    await asyncio.wait_for(agent.cancelled.wait(), 10)
    agent.release.set()


async def test_an_agent_that_keeps_reporting_outlives_the_timeout(
    make_server: Factory, store_url: str
) -> None:
    """Thirty reports 50 ms apart: 1.5 s in all, never silent for the 1 s timeout (a margin of
    20 for a busy machine)."""

    class Steady:
        async def execute(self, context: RequestContext, events: TaskEvents) -> None:
            artifact_id = None
            for index in range(30):
                await asyncio.sleep(0.05)
                if index % 2:
                    await events.working(f"step {index}")
                else:
                    artifact_id = await events.add_artifact(
                        [a2a_pb2.Part(text=str(index))],
                        artifact_id=artifact_id,
                        append=artifact_id is not None,
                        last_chunk=index == 28,
                    )
            await events.complete()

    harness = await make_server(Steady(), agent_inactivity_timeout=1.0, store=store_url)
    response = await asyncio.wait_for(
        harness.stub.SendMessage(send_request("go"), metadata=VERSION), 20
    )
    assert response.task.status.state == a2a_pb2.TASK_STATE_COMPLETED


def test_a_negative_timeout_is_refused() -> None:
    with pytest.raises(ValueError, match="agent_inactivity_timeout must not be negative"):
        ServerConfig(agent_inactivity_timeout=-1)
