"""One call gate for every transport: the same scenario over gRPC 1.0, gRPC 0.3, JSON-RPC and
HTTP+JSON leaves the same spans, audit records and metric samples.

Each transport gets a server of its own (its own audit trail and metrics), and the scenario is
the same on each: a blocking send, a streaming send, a GetTask of a task that does not exist,
a call without credentials, and, once the server's drain gate has closed, one more GetTask.
What must match is everything but the transport's own name: span names, `a2a.task_id` /
`a2a.context_id`, status codes, audit records (method, outcome, principal, whether they name
the task and the message) and the (method, code) counts of `a2a_rpc_requests_total`.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from a2a_grpc.generated import a2a_pb2, a2a_v03_pb2
from tests.integration.conftest import Factory, Harness, Held, send_request
from tests.integration.spans import record_spans
from tests.integration.test_compat_v03 import v03_send, v03_stub
from tests.integration.test_metrics import base_of, scrape

EXPORTER = InMemorySpanExporter()
TOKENS = {"alice-token": "alice"}
GRPC_AUTH = (("authorization", "Bearer alice-token"),)
HTTP_AUTH = {"Authorization": "Bearer alice-token"}
SPAN_PREFIX = "lf.a2a.v1.A2AService/"
MAX_SCRAPES = 500
"""Bound on the /metrics scrapes a test makes while it waits for the server to count a call."""

Scenario = Callable[[Harness, aiohttp.ClientSession], Awaitable[None]]


@pytest.fixture(scope="module", autouse=True)
def recording_spans() -> Iterator[None]:
    record_spans(EXPORTER)
    yield


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


# -- the scenario, once per transport -------------------------------------------------------


async def over_grpc(harness: Harness, http: aiohttp.ClientSession) -> None:
    metadata = (("a2a-version", "1.0"), *GRPC_AUTH)
    await harness.stub.SendMessage(send_request("hello"), metadata=metadata)
    _ = [e async for e in harness.stub.SendStreamingMessage(send_request("hi"), metadata=metadata)]
    for call_metadata in (metadata, (("a2a-version", "1.0"),)):  # the second has no credentials
        with pytest.raises(grpc.aio.AioRpcError):
            await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id="nope"), metadata=call_metadata)
    harness.running.gate.close()
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id="nope"), metadata=metadata)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


async def over_grpc_v03(harness: Harness, http: aiohttp.ClientSession) -> None:
    stub = v03_stub(harness)
    metadata = (("a2a-version", "0.3"), *GRPC_AUTH)
    await stub.SendMessage(v03_send("hello"), metadata=metadata)
    _ = [e async for e in stub.SendStreamingMessage(v03_send("hi"), metadata=metadata)]
    missing = a2a_v03_pb2.GetTaskRequest(name="tasks/nope")
    for call_metadata in (metadata, (("a2a-version", "0.3"),)):
        with pytest.raises(grpc.aio.AioRpcError):
            await stub.GetTask(missing, metadata=call_metadata)
    harness.running.gate.close()
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stub.GetTask(missing, metadata=metadata)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


def json_message(text: str) -> dict[str, Any]:
    return {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}


async def over_jsonrpc(harness: Harness, http: aiohttp.ClientSession) -> None:
    url = base_of(harness) + "/"
    headers = {"A2A-Version": "1.0", "Content-Type": "application/json", **HTTP_AUTH}

    async def call(method: str, params: dict[str, Any], call_headers: dict[str, str]) -> str:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        async with http.post(url, data=json.dumps(body), headers=call_headers) as response:
            return await response.text()

    assert '"result"' in await call("SendMessage", {"message": json_message("hello")}, headers)
    streamed = await call("SendStreamingMessage", {"message": json_message("hi")}, headers)
    assert "TASK_STATE_COMPLETED" in streamed
    unauthenticated = {key: value for key, value in headers.items() if key != "Authorization"}
    for call_headers in (headers, unauthenticated):
        assert '"error"' in await call("GetTask", {"id": "nope"}, call_headers)
    harness.running.gate.close()
    assert "shutting down" in await call("GetTask", {"id": "nope"}, headers)


async def over_http_json(harness: Harness, http: aiohttp.ClientSession) -> None:
    base = base_of(harness)
    headers = {"A2A-Version": "1.0", "Content-Type": "application/json", **HTTP_AUTH}
    for path, text in (("/message:send", "hello"), ("/message:stream", "hi")):
        body = json.dumps({"message": json_message(text)})
        async with http.post(base + path, data=body, headers=headers) as response:
            assert response.status == 200, await response.text()
            await response.read()
    unauthenticated = {key: value for key, value in headers.items() if key != "Authorization"}
    for call_headers in (headers, unauthenticated):
        async with http.get(base + "/tasks/nope", headers=call_headers) as response:
            assert response.status in (401, 404)
    harness.running.gate.close()
    async with http.get(base + "/tasks/nope", headers=headers) as response:
        assert response.status == 503


# -- what the gate left behind --------------------------------------------------------------


def span_summary() -> list[tuple[Any, ...]]:
    """The server spans, transport-free: name, status code, whether they name the task."""
    spans = [s for s in EXPORTER.get_finished_spans() if s.name.startswith(SPAN_PREFIX)]
    return sorted(
        (
            span.name,
            span.attributes.get("rpc.grpc.status_code", "OK") if span.attributes else "OK",
            bool(span.attributes and span.attributes.get("a2a.task_id")),
            bool(span.attributes and span.attributes.get("a2a.context_id")),
            span.kind.name,
        )
        for span in spans
    )


def audit_summary(path: Path) -> list[tuple[Any, ...]]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return sorted(
        (
            row["kind"],
            row.get("method", ""),
            row["outcome"],
            row["principal"],
            bool(row["task_id"]),
            bool(row.get("message_id")),
        )
        for row in rows
        if row["kind"] in ("request", "outcome")
    )


async def metric_summary(harness: Harness, http: aiohttp.ClientSession) -> dict[Any, float]:
    """The `a2a_rpc_requests_total` samples, by (method, code)."""
    return {
        (dict(labels)["method"], dict(labels)["code"]): sample
        for (name, labels), sample in (await scrape(http, harness)).items()
        if name == "a2a_rpc_requests_total"
    }


async def run_scenario(
    make_server: Factory, http: aiohttp.ClientSession, tmp_path: Path, scenario: Scenario
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], dict[Any, float]]:
    log = tmp_path / f"{scenario.__name__}.jsonl"
    harness = await make_server(http_port=0, audit_log=str(log), tokens=TOKENS)
    EXPORTER.clear()
    await scenario(harness, http)
    metrics = await metric_summary(harness, http)
    spans = span_summary()
    await harness.running.stop(0)  # flushes the audit trail
    return spans, audit_summary(log), metrics


async def test_every_transport_leaves_the_same_spans_audit_records_and_metrics(
    make_server: Factory, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    seen = {
        scenario.__name__: await run_scenario(make_server, http, tmp_path, scenario)
        for scenario in (over_grpc, over_grpc_v03, over_jsonrpc, over_http_json)
    }
    spans, audit, metrics = seen["over_grpc"]
    # What gRPC 1.0 leaves is what the gate promises: checked once, then compared.
    assert spans == sorted(
        [
            (SPAN_PREFIX + "GetTask", "NOT_FOUND", True, False, "SERVER"),
            # Refused before the request was read: no task named.
            (SPAN_PREFIX + "GetTask", "UNAUTHENTICATED", False, False, "SERVER"),
            (SPAN_PREFIX + "GetTask", "UNAVAILABLE", False, False, "SERVER"),
            (SPAN_PREFIX + "SendMessage", "OK", True, True, "SERVER"),
            (SPAN_PREFIX + "SendStreamingMessage", "OK", True, True, "SERVER"),
        ]
    )
    requests = [row for row in audit if row[0] == "request"]
    assert requests == sorted(
        [
            ("request", "GetTask", "NOT_FOUND", "alice", True, False),
            ("request", "GetTask", "UNAUTHENTICATED", "", False, False),
            ("request", "GetTask", "UNAVAILABLE", "alice", False, False),
            ("request", "SendMessage", "OK", "alice", True, True),
            ("request", "SendStreamingMessage", "OK", "alice", True, True),
        ]
    )
    assert metrics == {
        ("SendMessage", "OK"): 1,
        ("SendStreamingMessage", "OK"): 1,
        ("GetTask", "NOT_FOUND"): 1,
        ("GetTask", "UNAUTHENTICATED"): 1,
        ("GetTask", "UNAVAILABLE"): 1,
    }
    for name, (other_spans, other_audit, other_metrics) in seen.items():
        assert other_spans == spans, name
        assert other_audit == audit, name
        assert other_metrics == metrics, name


async def test_a_unary_call_its_caller_cancels_is_counted_and_audited_as_cancelled(
    make_server: Factory, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    log = tmp_path / "audit.jsonl"
    held = Held()
    harness = await make_server(held, http_port=0, audit_log=str(log))
    call = harness.stub.SendMessage(send_request("hold"), metadata=(("a2a-version", "1.0"),))
    await held.entered.wait()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    # The server learns of the cancel on its own time: ask its metrics (each answer a real
    # round trip, no clock) until the call's end is counted, then stop, which flushes the trail.
    cancelled = ("SendMessage", "CANCELLED")
    for _ in range(MAX_SCRAPES):
        if cancelled in await metric_summary(harness, http):
            break
    assert cancelled in await metric_summary(harness, http)
    await harness.running.stop(0)
    requests = [row for row in audit_summary(log) if row[0] == "request"]
    assert requests == [("request", "SendMessage", "CANCELLED", "", False, True)]
