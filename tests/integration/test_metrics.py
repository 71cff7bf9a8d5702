"""/metrics on the HTTP port: scraped over a real HTTP connection after real calls."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from a2a_grpc.generated import a2a_pb2, a2a_v03_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from a2a_grpc.server.card import demo_card
from a2a_grpc.server.ops.metrics import INVALID_REQUEST_RPC, METRICS_PATH
from tests.integration.conftest import Factory, Harness, Held, send_request
from tests.integration.test_compat_v03 import V03, v03_send, v03_stub
from tests.integration.test_server_push import dispatcher
from tests.integration.webhook_receiver import Receiver

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def base_of(harness: Harness) -> str:
    assert harness.running.http_server is not None
    return harness.running.http_server.base_url


async def scrape(http: aiohttp.ClientSession, harness: Harness) -> Samples:
    """Every sample of /metrics, by name and labels."""
    async with http.get(base_of(harness) + METRICS_PATH) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=")
        text = await response.text()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


async def test_grpc_calls_are_counted_by_method_code_and_transport(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    harness = await make_server(http_port=0)
    for _ in range(2):
        task = (await harness.stub.SendMessage(send_request("hello"))).task
        assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    with pytest.raises(grpc.aio.AioRpcError):
        await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id="no-such-task"))

    samples = await scrape(http, harness)
    ok = {"method": "SendMessage", "code": "OK", "transport": "grpc"}
    assert value(samples, "a2a_rpc_requests_total", **ok) == 2
    assert value(samples, "a2a_rpc_duration_seconds_count", **ok) == 2
    assert value(samples, "a2a_rpc_duration_seconds_bucket", **ok, le="+Inf") == 2
    assert (value(samples, "a2a_rpc_duration_seconds_sum", **ok) or 0) > 0
    missing = {"method": "GetTask", "code": "NOT_FOUND", "transport": "grpc"}
    assert value(samples, "a2a_rpc_requests_total", **missing) == 1
    assert value(samples, "a2a_rpc_requests_total", method="GetTask", code="OK") is None
    # State read at scrape time: the two completed tasks, their bytes, nothing open.
    assert value(samples, "a2a_store_tasks") == 2
    assert value(samples, "a2a_tasks", state="completed") == 2
    assert (value(samples, "a2a_store_bytes") or 0) > 0
    assert value(samples, "a2a_open_streams") == 0


async def test_http_binding_calls_are_counted_with_their_transport(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    harness = await make_server(http_port=0)
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "x"}]}},
    }
    headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
    async with http.post(base_of(harness) + "/", data=json.dumps(body), headers=headers) as r:
        assert "result" in await r.json()
    async with http.get(base_of(harness) + "/tasks/unknown", headers=headers) as r:
        assert r.status == 404

    samples = await scrape(http, harness)
    sent = {"method": "SendMessage", "code": "OK", "transport": "jsonrpc"}
    assert value(samples, "a2a_rpc_requests_total", **sent) == 1
    missing = {"method": "GetTask", "code": "NOT_FOUND", "transport": "http"}
    assert value(samples, "a2a_rpc_requests_total", **missing) == 1


async def test_open_streams_and_working_tasks_are_gauged(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    agent = Held()
    harness = await make_server(agent=agent, http_port=0)
    stream = harness.stub.SendStreamingMessage(send_request("hold"))
    await stream.read()  # the task
    await agent.entered.wait()
    samples = await scrape(http, harness)
    assert value(samples, "a2a_open_streams") == 1
    assert value(samples, "a2a_tasks", state="working") == 1
    agent.go.set()
    while await stream.read() is not grpc.aio.EOF:
        pass
    assert await stream.code() == grpc.StatusCode.OK  # the server's handler has returned
    samples = await scrape(http, harness)
    assert value(samples, "a2a_open_streams") == 0
    assert value(samples, "a2a_tasks", state="completed") == 1
    streamed = {"method": "SendStreamingMessage", "code": "OK", "transport": "grpc"}
    assert value(samples, "a2a_rpc_requests_total", **streamed) == 1


async def test_calls_in_flight_are_gauged(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    agent = Held()
    harness = await make_server(agent=agent, http_port=0)
    call = asyncio.ensure_future(harness.stub.SendMessage(send_request("hold")))
    await agent.entered.wait()
    samples = await scrape(http, harness)
    assert value(samples, "a2a_calls_in_flight") == 1
    assert value(samples, "a2a_tasks", state="working") == 1
    agent.go.set()
    assert (await call).task.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_webhook_deliveries_retries_and_give_ups_are_counted(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    flaky, dead = await Receiver(failures=1).start(), await Receiver(always_fail=True).start()
    try:
        webhooks = dispatcher(max_attempts=2)
        harness = await make_server(webhooks=webhooks, http_port=0)
        for receiver in (flaky, dead):
            request = send_request("hello")
            request.configuration.task_push_notification_config.url = receiver.url
            await harness.stub.SendMessage(request)
        await asyncio.wait_for(webhooks.idle(), 10)
        samples = await scrape(http, harness)
    finally:
        await flaky.stop()
        await dead.stop()
    # The flaky receiver fails once, then takes every event; the dead one fails twice on the
    # first event and is given up.
    assert flaky.received and flaky.attempts == len(flaky.received) + 1
    assert dead.attempts == 2
    assert value(samples, "a2a_webhook_deliveries_total") == len(flaky.received)
    assert value(samples, "a2a_webhook_retries_total") == 2
    assert value(samples, "a2a_webhook_give_ups_total") == 1


async def test_audit_records_written_are_counted(
    make_server: Factory, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    path = tmp_path / "audit.jsonl"
    harness = await make_server(http_port=0, audit_log=str(path))
    await harness.stub.SendMessage(send_request("hello"))
    samples = await scrape(http, harness)
    assert value(samples, "a2a_audit_records_lost_total") == 0
    # The writer thread writes a moment later; once the trail is closed every record is out.
    await harness.running.stop(0)
    assert harness.running.metrics is not None
    text = (await harness.running.metrics.exposition()).decode()
    written = next(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "a2a_audit_records_written_total"
    )
    assert written == len(path.read_text().splitlines()) > 0


async def test_metrics_off_serves_no_metrics_route(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    harness = await make_server(http_port=0, metrics=False)
    await harness.stub.SendMessage(send_request("hello"))
    async with http.get(base_of(harness) + METRICS_PATH) as response:
        assert response.status == 404
    assert harness.running.metrics is None


async def test_two_servers_in_one_process_keep_their_own_figures(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    first, second = await make_server(http_port=0), await make_server(http_port=0)
    await first.stub.SendMessage(send_request("hello"))
    ok = {"method": "SendMessage", "code": "OK", "transport": "grpc"}
    assert value(await scrape(http, first), "a2a_rpc_requests_total", **ok) == 1
    assert value(await scrape(http, second), "a2a_rpc_requests_total", **ok) is None


async def test_a2a_0_3_calls_are_counted_under_the_rpc_that_serves_them(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    harness = await make_server(http_port=0)
    reply = await v03_stub(harness).SendMessage(v03_send("hello"), metadata=V03)
    assert reply.task.status.state == a2a_v03_pb2.TASK_STATE_COMPLETED
    with pytest.raises(grpc.aio.AioRpcError):
        await v03_stub(harness).GetTask(a2a_v03_pb2.GetTaskRequest(name="tasks/no-such-task"))

    samples = await scrape(http, harness)
    ok = {"method": "SendMessage", "code": "OK", "transport": "grpc-0.3"}
    assert value(samples, "a2a_rpc_requests_total", **ok) == 1
    assert value(samples, "a2a_rpc_duration_seconds_count", **ok) == 1
    missing = {"method": "GetTask", "code": "NOT_FOUND", "transport": "grpc-0.3"}
    assert value(samples, "a2a_rpc_requests_total", **missing) == 1
    assert (
        value(samples, "a2a_rpc_requests_total", method="SendMessage", code="OK", transport="grpc")
        is None
    )


async def test_json_rpc_requests_refused_before_naming_a_method_are_counted_under_one_label(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    harness = await make_server(http_port=0)
    headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
    bodies = [
        "{not json",
        json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "SendMessage"}]),
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "NoSuchMethod-1"}),
        json.dumps({"jsonrpc": "2.0", "id": 3, "method": "NoSuchMethod-2"}),
    ]
    for body in bodies:
        async with http.post(base_of(harness) + "/", data=body, headers=headers) as r:
            assert "error" in await r.json()

    samples = await scrape(http, harness)
    invalid = {"method": INVALID_REQUEST_RPC, "transport": "jsonrpc"}
    assert value(samples, "a2a_rpc_requests_total", **invalid, code="INVALID_ARGUMENT") == 2
    assert value(samples, "a2a_rpc_requests_total", **invalid, code="NOT_FOUND") == 2
    methods = {dict(labels).get("method") for _, labels in samples}
    assert not {"NoSuchMethod-1", "NoSuchMethod-2"} & methods  # no series per made-up name


async def test_grpc_calls_refused_by_the_drain_gate_are_counted(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    harness = await make_server(http_port=0)
    # As at the end of a stop's grace: the calls that still reach the server are refused.
    harness.running.gate.closed = True
    for _ in range(2):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id="any"))
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    with pytest.raises(grpc.aio.AioRpcError) as caught:  # A2A 0.3's name for the same RPC
        await v03_stub(harness).GetAgentCard(a2a_v03_pb2.GetAgentCardRequest(), metadata=V03)
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    samples = await scrape(http, harness)
    refused = {"method": "GetTask", "code": "UNAVAILABLE", "transport": "grpc"}
    assert value(samples, "a2a_rpc_requests_total", **refused) == 2
    # Counted under the 1.0 RPC it is served as, the label its served calls have.
    v03 = {"method": "GetExtendedAgentCard", "code": "UNAVAILABLE", "transport": "grpc-0.3"}
    assert value(samples, "a2a_rpc_requests_total", **v03) == 1


async def test_readiness_the_drain_and_the_limits_are_gauged(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    harness = await make_server(
        http_port=0, max_tasks=500, max_store_bytes=10**6, max_concurrent_calls=7
    )
    samples = await scrape(http, harness)
    assert (value(samples, "a2a_ready"), value(samples, "a2a_draining")) == (1, 0)
    assert value(samples, "a2a_store_tasks_limit") == 500
    assert value(samples, "a2a_store_bytes_limit") == 10**6
    assert value(samples, "a2a_calls_in_flight_limit") == 7
    assert (
        value(samples, "a2a_open_streams_limit") == harness.running.handler.config.max_open_streams
    )
    health = health_pb2_grpc.HealthStub(harness.channel)
    watch = health.Watch(health_pb2.HealthCheckRequest(service=""))
    assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
    stopping = asyncio.ensure_future(harness.running.stop(grace=0.5, drain_delay=3600))
    assert (await watch.read()).status == health_pb2.HealthCheckResponse.NOT_SERVING
    watch.cancel()
    # The drain delay: still scraped, and saying why it takes no new work.
    samples = await scrape(http, harness)
    assert (value(samples, "a2a_ready"), value(samples, "a2a_draining")) == (0, 1)
    harness.running.skip_drain_delay()
    await asyncio.wait_for(stopping, 10)


async def test_answers_artifacts_and_tasks_without_artifacts_are_counted_by_skill(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    harness = await make_server(http_port=0)
    stub = harness.stub
    await stub.SendMessage(send_request("hello"))  # echo: a task with one artifact
    await stub.SendMessage(send_request("chunks 3"))  # one artifact, in three chunks
    await stub.SendMessage(send_request("reply hi"))  # a direct reply
    await stub.SendMessage(send_request("fail"))  # FAILED, no artifact
    asked = (await stub.SendMessage(send_request("ask"))).task  # INPUT_REQUIRED: not finished
    samples = await scrape(http, harness)
    assert value(samples, "a2a_answers_total", kind="task", skill="echo") == 1
    assert value(samples, "a2a_answers_total", kind="direct_reply", skill="reply") == 1
    assert value(samples, "a2a_answers_total", kind="task", skill="ask") == 1
    assert value(samples, "a2a_task_artifacts_count", skill="echo") == 1
    assert value(samples, "a2a_task_artifacts_sum", skill="chunks") == 1  # chunks: one artifact
    assert value(samples, "a2a_task_artifacts_count", skill="ask") == 0  # not finished yet
    assert value(samples, "a2a_tasks_without_artifacts_total", skill="fail", state="failed") == 1
    answer = send_request("green")
    answer.message.task_id, answer.message.context_id = asked.id, asked.context_id
    await stub.SendMessage(answer)  # the answer completes it with an artifact
    samples = await scrape(http, harness)
    assert value(samples, "a2a_answers_total", kind="task", skill="ask") == 2  # two runs
    assert value(samples, "a2a_task_artifacts_sum", skill="ask") == 1
    assert value(samples, "a2a_task_artifacts_bucket", skill="ask", le="1.0") == 1


async def test_chunks_per_artifact_are_observed_by_skill(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    """A whole artifact is one chunk; a streamed one counts its chunks once its last lands.
    Restarting an artifact id (a first chunk again) starts its count over."""

    class Streams:
        async def execute(self, context: RequestContext, events: TaskEvents) -> None:
            events.use_skill("echo")
            await events.add_artifact([a2a_pb2.Part(text="whole")])
            restarted = await events.add_artifact([a2a_pb2.Part(text="x")], last_chunk=False)
            for index in range(7):
                await events.add_artifact(
                    [a2a_pb2.Part(text=str(index))],
                    artifact_id=restarted,
                    append=index > 0,
                    last_chunk=index == 6,
                )
            await events.add_artifact([a2a_pb2.Part(text="open")], last_chunk=False)  # unfinished

    harness = await make_server(http_port=0, card=demo_card("127.0.0.1:0"), agent=Streams())
    await harness.stub.SendMessage(send_request("go"))
    samples = await scrape(http, harness)
    assert value(samples, "a2a_artifact_chunks_count", skill="echo") == 2  # whole, restarted
    assert value(samples, "a2a_artifact_chunks_sum", skill="echo") == 1 + 7
    assert value(samples, "a2a_artifact_chunks_bucket", skill="echo", le="1.0") == 1
    assert value(samples, "a2a_artifact_chunks_bucket", skill="echo", le="5.0") == 1
    assert value(samples, "a2a_artifact_chunks_bucket", skill="echo", le="10.0") == 2
    demo = await make_server(http_port=0)
    await demo.stub.SendMessage(send_request("chunks 12"))
    await demo.stub.SendMessage(send_request("hello"))
    samples = await scrape(http, demo)
    assert value(samples, "a2a_artifact_chunks_sum", skill="chunks") == 12
    assert value(samples, "a2a_artifact_chunks_bucket", skill="chunks", le="10.0") == 0
    assert value(samples, "a2a_artifact_chunks_bucket", skill="chunks", le="50.0") == 1
    assert value(samples, "a2a_artifact_chunks_count", skill="echo") == 1
    assert value(samples, "a2a_artifact_chunks_count", skill="chunks") == 1
