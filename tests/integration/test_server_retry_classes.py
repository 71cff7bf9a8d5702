"""Every error the server sends says in ErrorInfo whether retrying can help."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from a2a_grpc.core import status
from a2a_grpc.generated import a2a_pb2
from tests.integration.conftest import Factory, Harness, send_request


def details(error: grpc.aio.AioRpcError) -> tuple[error_details_pb2.ErrorInfo, float | None]:
    raw = dict(error.trailing_metadata())[status.STATUS_DETAILS_KEY]
    rich = status_pb2.Status.FromString(raw)
    info = error_details_pb2.ErrorInfo()
    delay = None
    for detail in rich.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            detail.Unpack(info)
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry = error_details_pb2.RetryInfo()
            detail.Unpack(retry)
            delay = retry.retry_delay.ToNanoseconds() / 1e9
    return info, delay


async def test_protocol_errors_are_not_retryable(demo: Harness) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await demo.stub.GetTask(a2a_pb2.GetTaskRequest(id="nope"))
    info, delay = details(caught.value)
    assert (info.reason, info.metadata["retryable"], delay) == ("TASK_NOT_FOUND", "false", None)


async def test_a_full_store_is_retryable_after_a_delay(make_server: Factory) -> None:
    harness = await make_server(max_tasks=1)
    await harness.stub.SendMessage(send_request("ask"))  # stays INPUT_REQUIRED: not evictable
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await harness.stub.SendMessage(send_request("hello"))
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    info, delay = details(caught.value)
    assert (info.domain, info.reason) == ("a2a-grpc", "RESOURCE_EXHAUSTED")
    assert info.metadata["retryable"] == "true"
    assert delay == 1.0


async def test_unauthenticated_is_not_retryable(make_server: Factory) -> None:
    harness = await make_server(tokens={"t": "alice"})
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id="x"))
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    info, _ = details(caught.value)
    assert (info.reason, info.metadata["retryable"]) == ("UNAUTHENTICATED", "false")
