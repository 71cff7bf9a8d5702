"""What only the HTTP bindings have: JSON-RPC envelopes, HTTP+JSON routes and query strings,
headers as service parameters, bad HTTP input, and clients that leave mid-stream."""

from __future__ import annotations

import asyncio
import io
import json
import select
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry import trace

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from a2a_grpc.server.app import ServerPlan, start_server
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.transports.http.server import CARD_PATH
from a2a_grpc.server.trust.audit import verify
from a2a_grpc.server.trust.tls import TlsFiles
from tests.integration.bindings import rest_error, sse_data
from tests.integration.certs import Authority
from tests.integration.conftest import VERSION, Factory, Harness, Held, collect
from tests.integration.test_server_discovery_auth import CallerRecorder

MESSAGE = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
BUDGET = "urn:a2a-grpc:budget:v1"


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def base_of(harness: Harness) -> str:
    assert harness.running.card_url is not None
    return harness.running.card_url.removesuffix(CARD_PATH)


def rpc(method: str, params: Any, request_id: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def message(message_id: str = "m-1", text: str = "hi") -> dict[str, Any]:
    return {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}


async def post_rpc(
    http: aiohttp.ClientSession, harness: Harness, body: Any, **kwargs: Any
) -> tuple[int, Any, aiohttp.ClientResponse]:
    data = io.BytesIO(body if isinstance(body, bytes) else json.dumps(body).encode())
    headers = {"Content-Type": "application/json", **kwargs.pop("headers", {})}
    async with http.post(base_of(harness) + "/", data=data, headers=headers, **kwargs) as r:
        text = await r.text()
        return r.status, json.loads(text) if text else None, r


# -- JSON-RPC envelopes ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", -32700),
        ([rpc("GetTask", {"id": "x"})], -32600),
        ({"id": 1, "method": "GetTask", "params": {}}, -32600),
        ({"jsonrpc": "2.0", "id": {"an": "object"}, "method": "GetTask"}, -32600),
        ({"jsonrpc": "2.0", "id": 1, "method": 7}, -32600),
        (rpc("GetTask", ["x"]), -32602),
        # an unknown member is ignored (spec §5.7); a known one of the wrong type is not
        (rpc("GetTask", {"id": "x", "bogus": 1, "historyLength": "many"}), -32602),
        (rpc("GetTask", {"id": "x", "historyLength": "many"}), -32602),
        (rpc("tasks/get", {"id": "x"}), -32601),
    ],
)
async def test_jsonrpc_envelope_errors(
    make_server: Factory, http: aiohttp.ClientSession, body: Any, code: int
) -> None:
    harness = await make_server(http_port=0)
    status, answer, _ = await post_rpc(http, harness, body)
    assert status == 200
    assert answer["jsonrpc"] == "2.0"
    assert answer["error"]["code"] == code
    info = answer["error"]["data"][0]
    assert info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
    assert info["domain"] == "a2a-protocol.org"


async def test_strict_parsing_names_the_unknown_field(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    harness = await make_server(http_port=0, strict_parsing=True)
    _, answer, _ = await post_rpc(
        http, harness, rpc("SendMessage", {"message": {**MESSAGE, "colour": "red"}})
    )
    assert answer["error"]["code"] == -32602
    assert "colour" in answer["error"]["message"]
    assert answer["error"]["data"][0]["reason"] == "INVALID_PARAMS"


async def test_jsonrpc_notification_gets_no_body(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    harness = await make_server(http_port=0)
    body = {"jsonrpc": "2.0", "method": "SendMessage", "params": {"message": message("n-1")}}
    status, answer, _ = await post_rpc(http, harness, body)
    assert (status, answer) == (204, None)


async def test_a2a_errors_carry_their_jsonrpc_code(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    harness = await make_server(http_port=0)
    _, sent, _ = await post_rpc(http, harness, rpc("SendMessage", {"message": message()}))
    task_id = sent["result"]["task"]["id"]
    _, answer, _ = await post_rpc(http, harness, rpc("CancelTask", {"id": task_id}, "abc"))
    assert answer["id"] == "abc"
    assert answer["error"]["code"] == -32002
    assert answer["error"]["data"][0]["reason"] == "TASK_NOT_CANCELABLE"
    assert answer["error"]["data"][0]["metadata"]["taskId"] == task_id


# -- bad HTTP input -------------------------------------------------------------------------


async def test_wrong_content_type_is_415(make_server: Factory, http: aiohttp.ClientSession) -> None:
    harness = await make_server(http_port=0)
    body = json.dumps(rpc("GetTask", {"id": "x"}))
    headers = {"Content-Type": "text/plain"}
    async with http.post(base_of(harness) + "/", data=body, headers=headers) as response:
        assert response.status == 415
        assert (await response.json())["error"]["code"] == -32600
    async with http.post(
        base_of(harness) + "/message:send", data=json.dumps({"message": MESSAGE}), headers=headers
    ) as response:
        assert response.status == 415
        error = rest_error(await response.json(content_type=None), response.status)
        assert error.reason == "INVALID_REQUEST"


async def test_a2a_json_media_type_is_accepted(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    harness = await make_server(http_port=0)
    headers = {"Content-Type": "application/a2a+json"}
    async with http.post(
        base_of(harness) + "/message:send", data=json.dumps({"message": MESSAGE}), headers=headers
    ) as response:
        assert response.status == 200
        assert response.content_type == "application/a2a+json"


async def test_body_over_the_limit_is_413(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    harness = await make_server(http_port=0)
    limit = harness.running.handler.config.max_receive_bytes
    text = "x" * (limit + 1)
    status, answer, _ = await post_rpc(
        http, harness, rpc("SendMessage", {"message": message(text=text)})
    )
    assert status == 413
    assert answer["error"]["data"][0]["reason"] == "INVALID_REQUEST"
    big = io.BytesIO(json.dumps({"message": message(text=text)}).encode())
    async with http.post(
        base_of(harness) + "/message:send", data=big, headers={"Content-Type": "application/json"}
    ) as response:
        assert response.status == 413


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/message:send", "[1, 2]"),
        ("/message:send", "{not json"),
        ("/message:send", '{"message": {"messageId": 5}}'),
        ("/tasks/abc:cancel", '{"id": "other"}'),
    ],
)
async def test_rest_bad_bodies_are_400(
    make_server: Factory, http: aiohttp.ClientSession, path: str, body: str
) -> None:
    harness = await make_server(http_port=0)
    headers = {"Content-Type": "application/json"}
    async with http.post(base_of(harness) + path, data=body, headers=headers) as response:
        assert response.status == 400
        error = rest_error(await response.json(content_type=None), 400)
        assert error.reason in ("INVALID_PARAMS", "INVALID_REQUEST")
        assert error.grpc_code == "INVALID_ARGUMENT"


async def test_rest_query_parameters(make_server: Factory, http: aiohttp.ClientSession) -> None:
    harness = await make_server(http_port=0)
    base = base_of(harness)
    async with http.get(base + "/tasks?colour=red") as response:
        assert response.status == 200  # a parameter that names no field is ignored (§5.7)
    async with http.get(base + "/tasks?includeArtifacts=maybe") as response:
        assert response.status == 400
    async with http.get(base + "/tasks?status=TASK_STATE_WORKING&page_size=5") as response:
        assert response.status == 200
        assert (await response.json(content_type=None))["pageSize"] == 5
    async with http.delete(base + "/tasks") as response:
        assert response.status == 405


# -- service parameters ---------------------------------------------------------------------


async def test_unsupported_version_header(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    harness = await make_server(http_port=0)
    _, answer, _ = await post_rpc(
        http, harness, rpc("GetTask", {"id": "x"}), headers={"A2A-Version": "0.3"}
    )
    assert answer["error"]["code"] == -32009
    async with http.get(base_of(harness) + "/tasks", headers={"A2A-Version": "2.0"}) as r:
        assert r.status == 400
        assert rest_error(await r.json(content_type=None), 400).reason == "VERSION_NOT_SUPPORTED"


async def test_strict_version_needs_the_header(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    harness = await make_server(http_port=0, strict_version=True)
    _, answer, _ = await post_rpc(http, harness, rpc("GetTask", {"id": "x"}))
    assert answer["error"]["code"] == -32009
    assert answer["error"]["message"] == (
        "no A2A-Version header: a request without it means A2A 0.3, which this server serves "
        "over gRPC only (a2a.v1.A2AService on its gRPC port), not over HTTP; send A2A-Version: "
        "1.0"
    )
    _, answer, _ = await post_rpc(
        http, harness, rpc("GetTask", {"id": "x"}), headers={"A2A-Version": "1.0.3"}
    )
    assert answer["error"]["code"] == -32001


async def test_activated_extensions_are_echoed(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    harness = await make_server(http_port=0)
    headers = {"A2A-Extensions": f"urn:x-unknown, {BUDGET}"}
    _, answer, response = await post_rpc(
        http, harness, rpc("SendMessage", {"message": message()}), headers=headers
    )
    assert "result" in answer
    assert response.headers["A2A-Extensions"] == BUDGET
    async with http.post(
        base_of(harness) + "/message:stream", json={"message": message("m-2")}, headers=headers
    ) as r:
        assert r.headers["A2A-Extensions"] == BUDGET
        assert [json.loads(data) async for data in sse_data(r)]


async def test_bearer_tokens(make_server: Factory, http: aiohttp.ClientSession) -> None:
    harness = await make_server(http_port=0, tokens={"s3cret": "alice"})
    base = base_of(harness)
    status, answer, response = await post_rpc(http, harness, rpc("ListTasks", {}))
    assert status == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert answer["error"]["data"][0]["reason"] == "UNAUTHENTICATED"
    async with http.get(base + "/tasks", headers={"Authorization": "Bearer wrong"}) as r:
        assert r.status == 401
    alice = {"Authorization": "Bearer s3cret"}
    async with http.post(base + "/message:send", json={"message": MESSAGE}, headers=alice) as r:
        assert r.status == 200
        task_id = (await r.json(content_type=None))["task"]["id"]
    # the same principal over gRPC sees the task
    task = await harness.stub.GetTask(
        a2a_pb2.GetTaskRequest(id=task_id), metadata=(*VERSION, ("authorization", "Bearer s3cret"))
    )
    assert task.id == task_id


async def test_tenant_routes(make_server: Factory, http: aiohttp.ClientSession) -> None:
    harness = await make_server(http_port=0)
    base = base_of(harness)
    async with http.post(base + "/acme/message:send", json={"message": MESSAGE}) as r:
        assert r.status == 200
        task_id = (await r.json(content_type=None))["task"]["id"]
    async with http.get(base + f"/acme/tasks/{task_id}") as r:
        assert r.status == 200
    task = await harness.stub.GetTask(
        a2a_pb2.GetTaskRequest(id=task_id, tenant="acme"), metadata=VERSION
    )
    assert task.id == task_id


async def test_subscribe_also_answers_post(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    held = Held()
    harness = await make_server(held, http_port=0)
    request = a2a_pb2.SendMessageRequest(message=a2a_pb2.Message(message_id="s", role=1))
    request.message.parts.add(text="x")
    request.configuration.return_immediately = True
    sent = await harness.stub.SendMessage(request, metadata=VERSION)
    await held.entered.wait()
    async with http.post(base_of(harness) + f"/tasks/{sent.task.id}:subscribe") as r:
        events = sse_data(r)
        first = json.loads(await anext(events))
        assert first["task"]["status"]["state"] == "TASK_STATE_WORKING"
        held.go.set()
        rest = [json.loads(data) async for data in events]
    assert rest[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


# -- streams ----------------------------------------------------------------------------------


async def test_a_client_leaving_mid_stream_leaves_the_task_running(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    held = Held()
    harness = await make_server(held, http_port=0)
    async with http.post(
        base_of(harness) + "/", json=rpc("SendStreamingMessage", {"message": message()})
    ) as response:
        first = json.loads(await anext(sse_data(response)))
        task_id = first["result"]["task"]["id"]
        await held.entered.wait()
        response.close()  # drops the connection
    follow = harness.stub.SubscribeToTask(
        a2a_pb2.SubscribeToTaskRequest(id=task_id), metadata=VERSION
    )
    assert (await follow.read()).task.id == task_id
    held.go.set()
    events = await collect(follow)
    assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_streams_share_the_servers_stream_limit(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    held = Held()
    harness = await make_server(held, http_port=0, max_open_streams=1)
    request = a2a_pb2.SendMessageRequest(message=a2a_pb2.Message(message_id="g", role=1))
    request.message.parts.add(text="x")
    grpc_stream = harness.stub.SendStreamingMessage(request, metadata=VERSION)
    await grpc_stream.read()
    async with http.post(
        base_of(harness) + "/message:stream", json={"message": message("h")}
    ) as response:
        assert response.status == 429
        error = rest_error(await response.json(content_type=None), 429)
        assert error.reason == "RESOURCE_EXHAUSTED"
    held.go.set()
    await collect(grpc_stream)


async def test_the_card_lists_the_http_interfaces(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    harness = await make_server(http_port=0)
    async with http.get(base_of(harness) + CARD_PATH) as response:
        card = await response.json()
    bindings = {i["protocolBinding"]: i["url"] for i in card["supportedInterfaces"]}
    assert bindings["JSONRPC"] == base_of(harness) + "/"
    assert bindings["HTTP+JSON"] == base_of(harness)


# -- audit and tracing ------------------------------------------------------------------------


async def test_http_calls_are_audited_like_grpc_calls(
    make_server: Factory, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    log = tmp_path / "audit.jsonl"
    harness = await make_server(http_port=0, audit_log=str(log), tokens={"alice-token": "alice"})
    alice = {"Authorization": "Bearer alice-token"}
    _, sent, _ = await post_rpc(
        http, harness, rpc("SendMessage", {"message": message(), "tenant": "acme"}), headers=alice
    )
    task_id = sent["result"]["task"]["id"]
    async with http.get(base_of(harness) + "/acme/tasks/nope", headers=alice) as response:
        assert response.status == 404
    async with http.get(base_of(harness) + "/tasks") as response:
        assert response.status == 401
    async with http.post(
        base_of(harness) + "/message:stream", json={"message": message("m-2")}, headers=alice
    ) as response:
        assert [data async for data in sse_data(response)]
    await harness.running.stop(0)  # flushes the trail

    rows = [json.loads(line) for line in log.read_text().splitlines()]
    requests = [
        (r["method"], r["outcome"], r["principal"], r["tenant"])
        for r in rows
        if r["kind"] == "request"
    ]
    assert requests == [
        ("SendMessage", "OK", "alice", "acme"),
        ("GetTask", "NOT_FOUND", "alice", "acme"),
        ("ListTasks", "UNAUTHENTICATED", "", ""),
        ("SendStreamingMessage", "OK", "alice", ""),
    ]
    sent_row = next(r for r in rows if r["kind"] == "request" and r["method"] == "SendMessage")
    assert sent_row["task_id"] == task_id
    assert verify(log)[0] == len(rows)


async def test_trace_context_headers_continue_the_callers_trace(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    seen: list[int] = []

    class Recording:
        async def execute(self, context: RequestContext, events: TaskEvents) -> None:
            seen.append(trace.get_current_span().get_span_context().trace_id)
            await events.complete()

    harness = await make_server(Recording(), http_port=0)
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    headers = {"traceparent": f"00-{trace_id}-00f067aa0ba902b7-01"}
    await post_rpc(http, harness, rpc("SendMessage", {"message": message()}), headers=headers)
    async with http.post(
        base_of(harness) + "/message:send", json={"message": message("m-2")}, headers=headers
    ) as response:
        assert response.status == 200
    assert seen == [int(trace_id, 16)] * 2


@pytest.mark.parametrize("path", ["/", "/message:send"])
async def test_deeply_nested_json_is_a_clear_error(
    make_server: Factory, http: aiohttp.ClientSession, path: str
) -> None:
    harness = await make_server(http_port=0)
    body = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
    headers = {"Content-Type": "application/json"}
    async with http.post(base_of(harness) + path, data=io.BytesIO(body), headers=headers) as r:
        answer = await r.json(content_type=None)
    if path == "/":
        assert answer["error"]["code"] == -32700
    else:
        assert r.status == 400
        assert rest_error(answer, 400).reason == "INVALID_REQUEST"


async def test_http_calls_through_a_stop(make_server: Factory, http: aiohttp.ClientSession) -> None:
    held = Held()
    harness = await make_server(held, http_port=0)
    base = base_of(harness)
    watch = health_pb2_grpc.HealthStub(harness.channel).Watch(
        health_pb2.HealthCheckRequest(service="")
    )
    assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
    async with http.post(base + "/message:stream", json={"message": message()}) as stream:
        events = sse_data(stream)
        task_id = json.loads(await anext(events))["task"]["id"]
        await held.entered.wait()
        stopping = asyncio.ensure_future(harness.running.stop(grace=30, drain_delay=3600))
        assert (await watch.read()).status == health_pb2.HealthCheckResponse.NOT_SERVING
        watch.cancel()
        # The drain delay: served as usual, each response closing its connection.
        async with http.get(base + f"/tasks/{task_id}") as served:
            assert served.status == 200 and served.headers["Connection"] == "close"
        # Past the grace the gate refuses what still arrives, as a stopped server would.
        harness.running.gate.closed = True
        async with http.get(base + f"/tasks/{task_id}") as refused:
            assert refused.status == 503
            error = rest_error(await refused.json(content_type=None), 503)
            assert error.reason == "UNAVAILABLE" and "shutting down" in error.message
        _, answer, _ = await post_rpc(http, harness, rpc("GetTask", {"id": task_id}))
        assert answer["error"]["data"][0]["reason"] == "UNAVAILABLE"
        harness.running.gate.closed = False
        harness.running.skip_drain_delay()
        held.go.set()  # the running task finishes, and its HTTP stream gets the end
        rest = [json.loads(data) async for data in events]
    assert rest[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    await asyncio.wait_for(stopping, 10)


async def test_an_empty_page_states_its_fields(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    harness = await make_server(http_port=0)
    async with http.get(base_of(harness) + "/tasks?contextId=none") as response:
        page = await response.json(content_type=None)
    assert page == {"tasks": [], "nextPageToken": "", "pageSize": 50, "totalSize": 0}
    _, answer, _ = await post_rpc(http, harness, rpc("ListTasks", {"contextId": "none"}))
    assert answer["result"] == page
    async with http.get(
        base_of(harness) + "/tasks?statusTimestampAfter=2020-01-01T00:00:00Z"
    ) as response:
        assert response.status == 200
    async with http.get(base_of(harness) + "/tasks?statusTimestampAfter=yesterday") as response:
        assert response.status == 400


# -- serving some bindings --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bindings", "listed"),
    [
        (("grpc", "jsonrpc"), ["GRPC", "JSONRPC"]),
        (("grpc", "http+json"), ["GRPC", "HTTP+JSON"]),
        (("grpc",), ["GRPC"]),
    ],
)
async def test_only_the_served_bindings_are_listed_and_answered(
    make_server: Factory,
    http: aiohttp.ClientSession,
    bindings: tuple[str, ...],
    listed: list[str],
) -> None:
    harness = await make_server(http_port=0, bindings=bindings)
    base = base_of(harness)
    async with http.get(base + CARD_PATH) as response:
        card = await response.json()
    interfaces = card["supportedInterfaces"]
    assert [i["protocolBinding"] for i in interfaces if i["protocolVersion"] == "1.0"] == listed
    status, answer, _ = await post_rpc(http, harness, rpc("SendMessage", {"message": message()}))
    if "jsonrpc" in bindings:
        assert (status, answer["result"]["task"]["status"]["state"]) == (
            200,
            "TASK_STATE_COMPLETED",
        )
    else:
        assert status == 404
        assert rest_error(answer, 404).reason == "METHOD_NOT_FOUND"
    async with http.post(base + "/message:send", json={"message": message("r")}) as response:
        body = await response.json(content_type=None)
        if "http+json" in bindings:
            assert response.status == 200
            assert body["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        else:
            assert response.status == 404
            assert rest_error(body, 404).reason == "METHOD_NOT_FOUND"
    request = a2a_pb2.SendMessageRequest(message=a2a_pb2.Message(message_id="g", role=1))
    request.message.parts.add(text="x")
    sent = await harness.stub.SendMessage(request, metadata=VERSION)
    assert sent.task.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_a_card_file_interface_of_an_unserved_binding_is_dropped(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    card = a2a_pb2.AgentCard(name="listed")
    card.supported_interfaces.add(url="http://proxy/", protocol_binding="JSONRPC")
    card.supported_interfaces.add(url="http://proxy", protocol_binding="HTTP+JSON")
    harness = await make_server(card=card, http_port=0, bindings=("grpc", "http+json"))
    async with http.get(base_of(harness) + CARD_PATH) as response:
        served = await response.json()
    assert [(i["protocolBinding"], i["url"]) for i in served["supportedInterfaces"]] == [
        ("HTTP+JSON", "http://proxy")
    ]


# -- a client that stops reading ----------------------------------------------------------------


class Flood:
    """For the text "flood": WORKING, then `chunks` artifact chunks of `size` bytes each, then
    COMPLETED, setting `done`. Anything else: COMPLETED at once."""

    def __init__(self, chunks: int, size: int) -> None:
        self.chunks = chunks
        self.part = a2a_pb2.Part(text="x" * size)
        self.done = asyncio.Event()

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        if context.text() != "flood":
            await events.complete()
            return
        await events.working()
        for index in range(self.chunks):
            await events.add_artifact(
                [self.part],
                artifact_id="big",
                append=index > 0,
                last_chunk=index == self.chunks - 1,
            )
        await events.complete()
        self.done.set()


@pytest.mark.parametrize("binding", ["jsonrpc", "http+json"])
async def test_a_client_that_stops_reading_a_stream_is_cut_off(
    make_server: Factory, http: aiohttp.ClientSession, binding: str
) -> None:
    flood = Flood(chunks=2000, size=64 * 1024)  # 128 MiB of events: far above the TCP buffers
    harness = await make_server(flood, http_port=0, max_open_streams=1, stream_write_timeout=0.2)
    assert harness.running.http_server is not None
    loop = asyncio.get_running_loop()
    with socket.socket() as sock:
        # A small receive buffer (no autotuning), so the server's writes soon wait on us.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await loop.sock_connect(sock, ("127.0.0.1", harness.running.http_server.port))
        if binding == "jsonrpc":
            path = "/"
            body = json.dumps(rpc("SendStreamingMessage", {"message": message(text="flood")}))
        else:
            path = "/message:stream"
            body = json.dumps({"message": message(text="flood")})
        head = (
            f"POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        await loop.sock_sendall(sock, (head + body).encode())
        headers = b""
        while not headers.endswith(b"\r\n\r\n"):  # the headers, byte by byte, and no more
            byte = await loop.sock_recv(sock, 1)
            assert byte, f"connection closed after {headers!r}"
            headers += byte
        assert headers.startswith(b"HTTP/1.1 200")
        assert b"text/event-stream" in headers.lower()
        # Now read nothing more and wait until the server ends the stream: its abort (RST)
        # shows as POLLHUP / POLLERR, which poll reports without our reading a byte.
        poller = select.poll()
        poller.register(sock.fileno(), 0)
        ready = await asyncio.to_thread(poller.poll, 60_000)
        assert ready, "the server kept the stream of a client that stopped reading"
        assert ready[0][1] & (select.POLLHUP | select.POLLERR)
    # Its stream slot is free again (max_open_streams=1): a new stream is admitted and served.
    async with http.post(
        base_of(harness) + "/", json=rpc("SendStreamingMessage", {"message": message("m-2")})
    ) as response:
        assert response.status == 200
        answers = [json.loads(data) async for data in sse_data(response)]
    assert answers[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    # The task went on without its reader.
    await asyncio.wait_for(flood.done.wait(), 60)
    tasks = await harness.stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=VERSION)
    states = {task.status.state for task in tasks.tasks}
    assert states == {a2a_pb2.TASK_STATE_COMPLETED}


async def test_the_http_port_serves_tls_and_names_the_client_certificate(
    tmp_path: Path,
) -> None:
    ca = Authority()
    server_pem = ca.issue("localhost", server=True)
    tls = TlsFiles(server_pem.certificate, server_pem.key, client_ca=ca.certificate)
    agent = CallerRecorder()
    running = await start_server(
        ServerPlan(
            ServerConfig(host="127.0.0.1", port=0, http_port=0, shutdown_grace=0.1, drain_delay=0),
            agent,
            tls=tls,
        )
    )

    def client_for(common_name: str | None) -> httpx.AsyncClient:
        context = ssl.create_default_context(cadata=ca.certificate.decode())
        if common_name is not None:
            pem = ca.issue(common_name)
            chain, key = tmp_path / f"{common_name}.pem", tmp_path / f"{common_name}.key"
            chain.write_bytes(pem.certificate)
            key.write_bytes(pem.key)
            context.load_cert_chain(chain, key)
        return httpx.AsyncClient(verify=context)

    def rpc(method: str, params: dict[str, object]) -> dict[str, object]:
        return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}

    headers = {"A2A-Version": "1.0"}
    try:
        url = running.card_url
        assert url is not None and url.startswith("https://")
        async with client_for("alice") as alice, client_for("bob") as bob:
            card = (await alice.get(url)).json()
            https = [
                i["url"] for i in card["supportedInterfaces"] if i["protocolBinding"] != "GRPC"
            ]
            assert https and all(u.startswith("https://") for u in https)
            endpoint = url.removesuffix("/.well-known/agent-card.json") + "/"
            message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
            sent = await alice.post(
                endpoint, json=rpc("SendMessage", {"message": message}), headers=headers
            )
            task_id = sent.json()["result"]["task"]["id"]
            assert agent.callers == ["cert:alice"]  # the principal is the certificate's name
            mine = await alice.post(endpoint, json=rpc("GetTask", {"id": task_id}), headers=headers)
            assert mine.json()["result"]["id"] == task_id
            theirs = await bob.post(endpoint, json=rpc("GetTask", {"id": task_id}), headers=headers)
            assert theirs.json()["error"]["code"] == -32001  # TaskNotFound: another principal
        async with client_for(None) as anonymous:
            with pytest.raises(httpx.HTTPError):  # no client certificate: no TLS session
                await anonymous.get(url)
    finally:
        await running.stop(0)
