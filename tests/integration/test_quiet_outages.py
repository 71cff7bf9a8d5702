"""A task store that goes away is one WARNING, at most a line a minute while it is gone, and
one INFO line when it is back, without tracebacks; the metrics count every failure. Against a
real redis-server, stopped and started again under a real server."""

from __future__ import annotations

import logging

import aiohttp
import grpc
import pytest

from a2a_grpc.generated import a2a_pb2
from tests.integration.conftest import Factory, send_request
from tests.redis_servers import RedisServerFactory

FAILED_CALLS = 20


def failures_metric(text: str, component: str) -> float:
    prefix = f'a2a_component_failures_total{{component="{component}"}} '
    (line,) = [line for line in text.splitlines() if line.startswith(prefix)]
    return float(line.removeprefix(prefix))


async def test_a_redis_outage_is_logged_once_and_counted(
    make_redis_server: RedisServerFactory, make_server: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    redis_server = make_redis_server(appendonly=True)  # the task outlives the restart
    harness = await make_server(store=redis_server.url, http_port=0)
    assert harness.running.http_server is not None
    metrics_url = harness.running.http_server.base_url + "/metrics"
    task = (await harness.stub.SendMessage(send_request("hello"))).task
    caplog.set_level(logging.INFO, "a2a_grpc")
    redis_server.stop()
    for _ in range(FAILED_CALLS):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id))
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    # The timer's sweep meets the outage too.
    await harness.running.handler.housekeeping.sweep_once()
    async with aiohttp.ClientSession() as http, http.get(metrics_url) as response:
        assert failures_metric(await response.text(), "task_store") >= FAILED_CALLS
    redis_server.start()
    read = await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id))
    assert read.status.state == a2a_pb2.TASK_STATE_COMPLETED
    said = [(r.levelname, r.name, r.getMessage()) for r in caplog.records]
    assert all(record.exc_info is None for record in caplog.records), said
    store = "a2a_grpc.server.tasks.redis.store"
    (went,) = [line for line in said if line[:2] == ("WARNING", store)]
    # The first failure seen names it: a call, or the event connection (whichever broke first).
    assert went[2].startswith("the task store (Redis): ")
    assert went[2].endswith("; calls fail with UNAVAILABLE")
    (back,) = [line for line in said if line[:2] == ("INFO", store)]
    assert back[2].startswith("the task store (Redis) answers again after ")
    assert [line for line in said if line[0] in ("WARNING", "ERROR")] == [went], said
