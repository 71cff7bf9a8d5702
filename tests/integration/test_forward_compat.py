"""Forward-compatible parsing, over real servers on every binding:

- unknown request members are ignored (A2A 1.0.1 §5.7), counted in /metrics and logged once
  per name, and refused with `strict_parsing`;
- a null or empty body is the empty request;
- HTTP+JSON answers take the JSON media type the request accepts;
- a stream that fails before its first event answers a caller that asked for
  text/event-stream with a stream of one error event, and the client reads either form;
- the client reads what a newer server answers (members and event kinds 1.0 does not have,
  through `newer_peer.py`), the events of unknown kinds skipped and counted.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from a2a_grpc.client import A2AClient
from a2a_grpc.client.messages import user_message
from a2a_grpc.core.errors import TaskNotCancelableError, TaskNotFoundError, UnauthenticatedError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.demo_agent import DemoAgent
from tests.integration.bindings import rest_error, sse_data
from tests.integration.conftest import Factory, Harness, Held, send_request
from tests.integration.newer_peer import UNKNOWN_KIND, NewerPeer, start_newer_peer
from tests.integration.test_client_cli import run_process
from tests.integration.test_metrics import scrape, value

COMPLETED = a2a_pb2.TASK_STATE_COMPLETED
SSE = {"Accept": "text/event-stream"}
JSON = {"Content-Type": "application/json"}


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def base_of(harness: Harness) -> str:
    assert harness.running.http_server is not None
    return harness.running.http_server.base_url


def fresh(prefix: str = "future") -> str:
    """A member name no other request in the test used."""
    return f"{prefix}{uuid.uuid4().hex[:10]}"


def message(text: str = "hi", **extra: Any) -> dict[str, Any]:
    return {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        **extra,
    }


async def send(
    http: aiohttp.ClientSession,
    harness: Harness,
    binding: str,
    rpc: str,
    params: Any,
    *,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any, str]:
    """One unary call over a JSON binding: (HTTP status, the result or error, content type)."""
    headers = {**JSON, **(headers or {})}
    if binding == "jsonrpc":
        body = {"jsonrpc": "2.0", "id": 1, "method": rpc, "params": params}
        async with http.post(base_of(harness) + "/", json=body, headers=headers) as r:
            answer = await r.json()
            return r.status, answer.get("result", answer.get("error")), r.content_type
    path = {"SendMessage": "/message:send", "ListTasks": "/tasks"}[rpc]
    verb = "POST" if rpc == "SendMessage" else "GET"
    async with http.request(
        verb, base_of(harness) + path, json=params if verb == "POST" else None, headers=headers
    ) as r:
        return r.status, await r.json(content_type=None), r.content_type


# -- unknown members: ignored, counted, logged once; refused when strict --------------------


@pytest.mark.parametrize("binding", ["jsonrpc", "http+json"])
async def test_unknown_members_are_ignored_counted_and_logged_once(
    make_server: Factory,
    http: aiohttp.ClientSession,
    caplog: pytest.LogCaptureFixture,
    binding: str,
) -> None:
    harness = await make_server(http_port=0)
    top, inner, deep = fresh(), fresh(), fresh()
    for _ in range(2):
        params = {
            "message": {**message(), inner: 1, "parts": [{"text": "hi", deep: {"x": [1]}}]},
            top: "high",
        }
        with caplog.at_level(logging.WARNING, "a2a_grpc"):
            status, result, _ = await send(http, harness, binding, "SendMessage", params)
        assert status == 200
        assert result["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    samples = await scrape(http, harness)
    counted = "a2a_ignored_request_fields_total"
    assert value(samples, counted, field=f"SendMessageRequest.{top}") == 2
    assert value(samples, counted, field=f"Message.{inner}") == 2
    assert value(samples, counted, field=f"Part.{deep}") == 2
    logged = [r for r in caplog.records if top in r.getMessage()]
    assert len(logged) == 1, "logged once per name"
    assert f"SendMessageRequest.{top}" in logged[0].getMessage()


async def test_an_unknown_query_parameter_is_ignored_and_counted(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    harness = await make_server(http_port=0)
    task = (await harness.stub.SendMessage(send_request("hi"))).task
    name = fresh()
    async with http.get(f"{base_of(harness)}/tasks/{task.id}?{name}=1&historyLength=1") as r:
        assert r.status == 200
        assert (await r.json(content_type=None))["id"] == task.id
    samples = await scrape(http, harness)
    assert value(samples, "a2a_ignored_request_fields_total", field=f"GetTaskRequest.{name}") == 1


async def test_grpc_ignores_unknown_fields_as_protobuf_does(demo: Harness) -> None:
    inner = user_message("hi")
    inner.MergeFromString(b"\x98\x06\x01")  # field 99: no 1.0 Message has it
    request = a2a_pb2.SendMessageRequest(message=inner)
    raw = request.SerializeToString() + b"\xa2\x06\x02hi"  # and field 100 on the request
    call = demo.channel.unary_unary("/lf.a2a.v1.A2AService/SendMessage", response_deserializer=None)
    answer = a2a_pb2.SendMessageResponse.FromString(
        await call(raw, metadata=(("a2a-version", "1.0"),))
    )
    assert answer.task.status.state == COMPLETED


async def test_a_flood_of_made_up_members_is_served_and_bounded(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    harness = await make_server(http_port=0)
    made_up: dict[str, Any] = {fresh("m"): i for i in range(5000)}
    made_up.update({"bad\nline": 1, "x" * 10_000: 2, "": 3, "a.b": 4, "[ext]": 5})
    for binding in ("jsonrpc", "http+json"):
        params = {"message": {**message(), **made_up}, **made_up}
        status, result, _ = await send(http, harness, binding, "SendMessage", params)
        assert status == 200
        assert result["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    samples = await scrape(http, harness)
    labels = [
        dict(key[1])["field"] for key in samples if key[0] == "a2a_ignored_request_fields_total"
    ]
    assert len(labels) == 65 and "other" in labels  # 64 names, then everything else as other
    assert sum(
        count for key, count in samples.items() if key[0] == "a2a_ignored_request_fields_total"
    ) == 2 * 2 * len(made_up)


@pytest.mark.parametrize("binding", ["jsonrpc", "http+json"])
async def test_strict_parsing_refuses_unknown_members(
    make_server: Factory, http: aiohttp.ClientSession, binding: str
) -> None:
    harness = await make_server(http_port=0, strict_parsing=True)
    name = fresh()
    status, error, _ = await send(
        http, harness, binding, "SendMessage", {"message": message(), name: 1}
    )
    if binding == "jsonrpc":
        assert (status, error["code"]) == (200, -32602)
        assert name in error["message"]
    else:
        assert status == 400
        assert rest_error(error, 400).reason == "INVALID_PARAMS"
        assert name in error["error"]["message"]
        async with http.get(f"{base_of(harness)}/tasks?{name}=1") as r:
            assert r.status == 400
            assert name in (await r.json(content_type=None))["error"]["message"]
    samples = await scrape(http, harness)
    assert not [key for key in samples if key[0] == "a2a_ignored_request_fields_total"]


@pytest.mark.parametrize("binding", ["jsonrpc", "http+json"])
async def test_a_wrong_known_member_is_refused_beside_unknown_ones(
    make_server: Factory, http: aiohttp.ClientSession, binding: str
) -> None:
    harness = await make_server(http_port=0)
    wrong = [
        {"message": {**message(), "role": "ROLE_SYSTEM"}, "generation": 1},
        {"message": {**message(), "messageId": 5}, "generation": 1},
        {"message": message(), "configuration": {"historyLength": "many"}, "generation": 1},
    ]
    for params in wrong:
        status, error, _ = await send(http, harness, binding, "SendMessage", params)
        if binding == "jsonrpc":
            assert (status, error["code"]) == (200, -32602), error
        else:
            assert status == 400
            assert rest_error(error, 400).reason == "INVALID_PARAMS"


# -- null and empty bodies --------------------------------------------------------------------


@pytest.mark.parametrize("body", [b"null", b"", b" \n"])
async def test_a_null_or_empty_body_cancels(
    make_server: Factory, http: aiohttp.ClientSession, body: bytes
) -> None:
    held = Held()
    harness = await make_server(held, http_port=0)
    started = (await harness.stub.SendMessage(immediate())).task
    await held.entered.wait()
    url = f"{base_of(harness)}/tasks/{started.id}:cancel"
    async with http.post(url, data=body, headers=JSON if body else {}) as r:
        assert r.status == 200, await r.text()
        assert (await r.json(content_type=None))["status"]["state"] == "TASK_STATE_CANCELED"


def immediate() -> a2a_pb2.SendMessageRequest:
    """A send that returns as soon as its task exists."""
    request = send_request("hold")
    request.configuration.return_immediately = True
    return request


async def test_a_null_body_subscribes(make_server: Factory, http: aiohttp.ClientSession) -> None:
    held = Held()
    harness = await make_server(held, http_port=0)
    started = (await harness.stub.SendMessage(immediate())).task
    await held.entered.wait()
    url = f"{base_of(harness)}/tasks/{started.id}:subscribe"
    async with http.post(url, data=b"null", headers={**JSON, **SSE}) as r:
        assert (r.status, r.content_type) == (200, "text/event-stream")
        events = sse_data(r)
        first = json.loads(await anext(events))
        assert first["task"]["id"] == started.id
        held.go.set()
        last = [json.loads(data) async for data in events][-1]
        assert last["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_null_params_over_jsonrpc_are_the_empty_request(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    harness = await make_server(http_port=0)
    await harness.stub.SendMessage(send_request("hi"))
    url = base_of(harness) + "/"
    for envelope in (
        {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": None},
        {"jsonrpc": "2.0", "id": 1, "method": "ListTasks"},
    ):
        async with http.post(url, json=envelope) as r:
            assert (await r.json())["result"]["totalSize"] == 1
    # The empty request is checked as any other: CancelTask needs the task's id.
    envelope = {"jsonrpc": "2.0", "id": 2, "method": "CancelTask", "params": None}
    async with http.post(url, json=envelope) as r:
        error = (await r.json())["error"]
    assert error["code"] == -32602 and "id" in error["message"]
    async with http.post(base_of(harness) + "/message:send", data=b"null", headers=JSON) as r:
        assert r.status == 400
        assert "message" in (await r.json(content_type=None))["error"]["message"]


# -- the JSON media type of HTTP+JSON answers ---------------------------------------------


@pytest.mark.parametrize(
    ("accept", "media_type"),
    [
        ("*/*", "application/a2a+json"),
        ("application/json", "application/json"),
        ("application/json; charset=utf-8", "application/json"),
        ("application/json, application/a2a+json", "application/a2a+json"),
        ("application/a2a+json;q=0, application/json", "application/json"),
        ("text/event-stream", "application/a2a+json"),
    ],
)
async def test_http_json_answers_take_the_accepted_media_type(
    make_server: Factory, http: aiohttp.ClientSession, accept: str, media_type: str
) -> None:
    harness = await make_server(http_port=0)
    task = (await harness.stub.SendMessage(send_request("hi"))).task
    base = base_of(harness)
    headers = {"Accept": accept}
    for path, status in ((f"/tasks/{task.id}", 200), ("/tasks/nope", 404), ("/no/route", 404)):
        async with http.get(base + path, headers=headers) as r:
            assert (r.status, r.content_type) == (status, media_type), path
    async with http.post(f"{base}/tasks/{task.id}:cancel", headers=headers) as r:
        assert (r.status, r.content_type) == (400, media_type)


# -- a stream that fails before its first event ----------------------------------------------


async def sse_events(response: aiohttp.ClientResponse) -> list[tuple[str, Any]]:
    """Every event of an SSE body: (its `event:` name, its data as JSON)."""
    events = []
    async for data in sse_data(response):
        value = json.loads(data)
        if "__event" in value:
            events.append((value["__event"], json.loads(value["data"])))
        else:
            events.append(("message", value))
    return events


async def test_a_jsonrpc_stream_that_fails_first_is_one_error_event(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    harness = await make_server(http_port=0)
    envelope = {"jsonrpc": "2.0", "id": 9, "method": "SubscribeToTask", "params": {"id": "nope"}}
    url = base_of(harness) + "/"
    async with http.post(url, json=envelope, headers={"Accept": "text/event-stream"}) as r:
        assert (r.status, r.content_type) == (200, "text/event-stream")
        ((_, event),) = await sse_events(r)
    assert event["id"] == 9 and event["error"]["code"] == -32001
    assert event["error"]["data"][0]["reason"] == "TASK_NOT_FOUND"
    bad = {**envelope, "method": "SendStreamingMessage", "params": {"message": {"parts": 5}}}
    async with http.post(url, json=bad, headers={"Accept": "text/event-stream, */*"}) as r:
        assert (r.status, r.content_type) == (200, "text/event-stream")
        ((_, event),) = await sse_events(r)
    assert event["error"]["code"] == -32602
    # A caller that did not ask for an event stream keeps the plain JSON-RPC error.
    for accept in ({}, {"Accept": "*/*"}, {"Accept": "application/json"}):
        async with http.post(url, json=envelope, headers=accept) as r:
            assert (r.status, r.content_type) == (200, "application/json")
            assert (await r.json())["error"]["code"] == -32001


async def test_an_http_json_stream_that_fails_first_is_one_error_event(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    harness = await make_server(http_port=0)
    base = base_of(harness)
    async with http.get(base + "/tasks/nope:subscribe", headers=SSE) as r:
        assert (r.status, r.content_type) == (200, "text/event-stream")
        ((name, body),) = await sse_events(r)
    assert name == "error"
    assert rest_error(body, 404).reason == "TASK_NOT_FOUND"
    async with http.post(base + "/message:stream", json={"message": {}}, headers=SSE) as r:
        ((name, body),) = await sse_events(r)
    assert name == "error" and rest_error(body, 400).reason == "INVALID_PARAMS"
    text = {"Content-Type": "text/plain", **SSE}
    async with http.post(base + "/message:stream", data="hi", headers=text) as r:
        ((name, body),) = await sse_events(r)
    assert name == "error" and rest_error(body, 415).reason == "INVALID_REQUEST"
    async with http.get(base + "/tasks/nope:subscribe") as r:  # curl's */*: the plain error
        assert (r.status, r.content_type) == (404, "application/a2a+json")


@pytest.mark.parametrize("path", ["/", "/tasks/nope:subscribe"])
async def test_a_refused_caller_keeps_its_401_on_a_stream(
    make_server: Factory, http: aiohttp.ClientSession, path: str
) -> None:
    harness = await make_server(http_port=0, tokens={"s3cret": "alice"})
    envelope = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": "x"}}
    async with http.request(
        "POST" if path == "/" else "GET",
        base_of(harness) + path,
        json=envelope if path == "/" else None,
        headers=SSE,
    ) as r:
        assert r.status == 401
        assert r.headers["WWW-Authenticate"] == "Bearer"
        assert r.content_type != "text/event-stream"


@pytest.mark.parametrize("binding", ["jsonrpc", "http+json"])
async def test_the_client_reads_a_plain_error_before_the_first_event(
    make_server: Factory, binding: str
) -> None:
    harness = await make_server(http_port=0, tokens={"s3cret": "alice"})
    assert harness.running.card_url is not None
    async with A2AClient.connect(harness.running.card_url, transports=(binding,)) as client:
        with pytest.raises(UnauthenticatedError):  # a 401: plain, whatever the stream accepts
            [item async for item in client.subscribe_to_task("nope")]


# -- the client and a newer server --------------------------------------------------------


@pytest.fixture
async def newer(make_server: Factory) -> AsyncIterator[NewerPeer]:
    harness = await make_server(DemoAgent(), http_port=0)
    peer = await start_newer_peer(base_of(harness), f"127.0.0.1:{harness.running.port}")
    yield peer
    await peer.close()


@pytest.mark.parametrize("binding", ["grpc", "jsonrpc", "http+json"])
async def test_the_client_reads_a_newer_server(newer: NewerPeer, binding: str) -> None:
    async with A2AClient.connect(newer.card_url, transports=(binding,)) as client:
        sent = await client.send_message(user_message("hello"))
        assert isinstance(sent, a2a_pb2.Task) and sent.status.state == COMPLETED
        assert (await client.get_task(sent.id)).id == sent.id
        assert (await client.list_tasks()).tasks[0].id == sent.id
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(sent.id)
        items = [item async for item in client.send_streaming_message(user_message("hello"))]
        with pytest.raises(TaskNotFoundError):
            [item async for item in client.subscribe_to_task("nope")]
    kinds = [event.WhichOneof("payload") for event, _ in items]
    assert kinds[0] == "task" and None not in kinds  # the unknown one is not yielded
    final = items[-1][1]
    assert (final.state, final.skipped_events) == (COMPLETED, 1)
    assert final.task is not None and final.task.artifacts


@pytest.mark.parametrize(("binding", "kind"), [("grpc", "field 9"), ("http+json", UNKNOWN_KIND)])
async def test_the_cli_streams_past_an_unknown_event_kind(
    newer: NewerPeer, binding: str, kind: str
) -> None:
    code, out, err = await run_process(
        "send", "--stream", newer.card_url, "--transport", binding, "hello"
    )
    assert code == 0, err
    assert "completed" in out
    (warning,) = err.splitlines()
    assert "skipped a stream event of a kind this client does not know" in warning
    assert kind in warning
