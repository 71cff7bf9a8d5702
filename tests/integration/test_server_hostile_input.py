"""Hostile input: garbage bytes and odd requests never crash the server or corrupt the store."""

from __future__ import annotations

import random

import grpc
import pytest

from a2a_grpc.generated import a2a_pb2
from tests.integration.conftest import Harness, error_reason, send_request

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
