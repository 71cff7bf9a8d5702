"""Mapping a failed gRPC call to an A2A error, a could-not-talk error or a generic failure."""

from __future__ import annotations

import grpc
import pytest

from a2a_grpc.client.errors import (
    A2ATransportError,
    CallCancelledError,
    DeadlineExceededError,
    RpcFailedError,
    UnavailableError,
    from_rpc_error,
)
from a2a_grpc.core import errors, status


def rpc_error(code: grpc.StatusCode, details: str, trailers: tuple = ()) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(
        code, grpc.aio.Metadata(), grpc.aio.Metadata(*trailers), details=details
    )


@pytest.mark.parametrize("cls", errors.ERROR_CLASSES)
def test_error_info_decodes_into_the_shared_class(cls: type[errors.A2AError]) -> None:
    code, message, trailers = status.encode(cls("nope", metadata={"taskId": "t1"}))
    cause = rpc_error(code, message, trailers)
    mapped = from_rpc_error(cause)
    assert type(mapped) is cls
    assert isinstance(mapped, errors.A2AError) and mapped.metadata == {"taskId": "t1"}
    assert mapped.__cause__ is cause


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        (grpc.StatusCode.UNAVAILABLE, UnavailableError),
        (grpc.StatusCode.DEADLINE_EXCEEDED, DeadlineExceededError),
        (grpc.StatusCode.CANCELLED, CallCancelledError),
    ],
)
def test_could_not_talk_family(code: grpc.StatusCode, cls: type[A2ATransportError]) -> None:
    cause = rpc_error(code, "connection refused")
    mapped = from_rpc_error(cause)
    assert type(mapped) is cls and isinstance(mapped, A2ATransportError)
    assert not isinstance(mapped, errors.A2AError)
    assert str(mapped) == "connection refused"
    assert mapped.__cause__ is cause


@pytest.mark.parametrize(
    "code",
    [grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.INTERNAL, grpc.StatusCode.NOT_FOUND],
)
def test_other_failures_without_error_info_are_generic(code: grpc.StatusCode) -> None:
    cause = rpc_error(code, "something")
    mapped = from_rpc_error(cause)
    assert type(mapped) is RpcFailedError
    assert mapped.code is code and mapped.details == "something"
    assert mapped.__cause__ is cause


def test_error_info_from_another_domain_is_not_an_a2a_error() -> None:
    code, _, trailers = status.encode(errors.TaskNotFoundError("x"))
    assert type(from_rpc_error(rpc_error(code, "different text", trailers))) is RpcFailedError
