"""Hostile input: garbage bytes and odd requests never crash the server or corrupt the store."""

from __future__ import annotations

import logging
import random

import grpc
import httpx
import pytest

from a2a_grpc.generated import a2a_pb2
from tests.integration.conftest import Factory, Harness, error_reason, send_request

METHODS = ("SendMessage", "GetTask", "ListTasks", "CancelTask", "CreateTaskPushNotificationConfig")


async def test_garbage_bytes_are_refused_and_the_server_keeps_serving(demo: Harness) -> None:
    rng = random.Random(7)
    malformed = 0
    for index in range(60):
        method = METHODS[index % len(METHODS)]
        call = demo.channel.unary_unary(
            f"/lf.a2a.v1.A2AService/{method}",
            request_serializer=None,
            response_deserializer=None,
        )
        payload = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
        try:
            await call(payload, timeout=5)
        except grpc.aio.AioRpcError as error:
            # Bytes that are not protobuf get INVALID_REQUEST; bytes that happen to parse meet
            # the ordinary checks. Never UNKNOWN, never an exception's text.
            assert error.code() in (
                grpc.StatusCode.INVALID_ARGUMENT,
                grpc.StatusCode.NOT_FOUND,
                grpc.StatusCode.FAILED_PRECONDITION,
            ), error
            assert "Traceback" not in (error.details() or "")
            if error_reason(error) == "INVALID_REQUEST":
                malformed += 1
    assert malformed > 10
    task = (await demo.stub.SendMessage(send_request("still here"))).task
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED


@pytest.mark.parametrize(
    "mutate",
    [
        lambda r: setattr(r.message, "role", 99),  # not a Role
        lambda r: r.message.parts.add(),  # a part with no content
        lambda r: [r.message.parts.add(text="x") for _ in range(2000)],  # many parts
        lambda r: setattr(r.message, "message_id", "\u0000" * 300),  # odd but non-empty id
        lambda r: setattr(r.message, "task_id", "../../etc/passwd"),
        lambda r: r.message.metadata.update({"urn:a2a-grpc:budget:v1": "not an object"}),
        lambda r: r.message.metadata.update({"urn:a2a-grpc:signed-message:v1": {"jws": 5}}),
        lambda r: setattr(r.configuration, "history_length", -(2**31)),
    ],
)
async def test_odd_requests_get_an_answer_not_a_crash(demo: Harness, mutate: object) -> None:
    request = send_request("hello")
    mutate(request)  # type: ignore[operator]
    try:
        response = await demo.stub.SendMessage(request, timeout=10)
        assert response.WhichOneof("payload") in ("task", "message")
    except grpc.aio.AioRpcError as error:
        assert error.code() in (
            grpc.StatusCode.INVALID_ARGUMENT,
            grpc.StatusCode.NOT_FOUND,
            grpc.StatusCode.FAILED_PRECONDITION,
        ), (error.code(), error.details())
    listed = await demo.stub.ListTasks(a2a_pb2.ListTasksRequest(page_size=100))
    assert listed.total_size == len(listed.tasks) <= 1
    for task in listed.tasks:  # whatever was stored reads back whole
        assert (await demo.stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id))).id == task.id


async def test_odd_list_and_get_requests(demo: Harness) -> None:
    odd = [
        demo.stub.ListTasks(a2a_pb2.ListTasksRequest(status=42)),  # not a TaskState
        demo.stub.ListTasks(a2a_pb2.ListTasksRequest(page_token="A" * 5000)),
        demo.stub.GetTask(a2a_pb2.GetTaskRequest(id="x" * 10_000)),
        demo.stub.CancelTask(a2a_pb2.CancelTaskRequest(id="\u0000")),
    ]
    for call in odd:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND)
        assert len(caught.value.details() or "") <= 1024  # echoed ids are clipped


async def test_an_oversized_header_is_refused_with_one_log_line(
    make_server: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    """A header over 8 KiB, from a caller not yet authenticated: the HTTP port answers 431 in
    the binding's form, naming the header (over 64 KiB, aiohttp's own 400), and logs one line
    naming the caller's address, never an ERROR with a traceback; gRPC refuses one over its
    hard limit on its own; the server goes on serving."""
    harness = await make_server(http_port=0, tokens={"s3cret": "alice"})
    assert harness.running.http_server is not None
    base = harness.running.http_server.base_url
    big = {"A2A-Version": "1.0", "X-Padding": "a" * 9000}
    with caplog.at_level(logging.DEBUG):
        async with httpx.AsyncClient(base_url=base, timeout=10) as http:
            for path in ("/tasks", "/nowhere", "/.well-known/agent-card.json"):
                refused = await http.get(path, headers=big)
                assert refused.status_code == 431, path
                error = refused.json()["error"]
                assert error["status"] == "INVALID_ARGUMENT" and error["code"] == 431
                assert "header X-Padding is 9011 bytes" in error["message"], error
                assert "at most 8190 bytes" in error["message"]
            rpc_refused = await http.post(
                "/",
                json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}},
                headers=big,
            )
            assert rpc_refused.status_code == 431
            assert rpc_refused.json()["id"] is None
            assert rpc_refused.json()["error"]["code"] == -32600
            assert "header X-Padding" in rpc_refused.json()["error"]["message"]
            huge = await http.get("/tasks", headers={"Authorization": "Bearer " + "b" * 70_000})
            assert huge.status_code == 400
            served = await http.get("/.well-known/agent-card.json")
            assert served.status_code == 200
        with pytest.raises(grpc.aio.AioRpcError) as rpc:
            await harness.stub.GetTask(
                a2a_pb2.GetTaskRequest(id="t"), metadata=(("x-padding", "a" * 70_000),)
            )
        # grpc's own refusal, past its hard limit of 16 KiB (between 8 and 16 KiB it may let
        # a header through, and the call is then refused as any other: UNAUTHENTICATED).
        assert rpc.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    lines = [r for r in caplog.records if r.name.startswith(("aiohttp", "a2a_grpc"))]
    assert not [r for r in lines if r.levelno >= logging.ERROR or r.exc_info], lines
    refusals = [r.getMessage() for r in lines if "refused an HTTP request" in r.getMessage()]
    too_large = (
        "refused an HTTP request from 127.0.0.1: header X-Padding is 9011 bytes, over 8190 "
        "(answered 431)"
    )
    unreadable = (
        "refused an HTTP request from 127.0.0.1 that cannot be read: a header or request line "
        "over 65536 bytes (answered 400)"
    )
    assert refusals == [too_large] * 4 + [unreadable]
