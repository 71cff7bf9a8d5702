"""Mapping a failed gRPC call to an A2A error, a could-not-talk error or a generic failure."""

from __future__ import annotations

import grpc
import pytest

from a2a_grpc.client.errors import (
    A2ATransportError,
    CallCancelledError,
    DeadlineExceededError,
    RpcFailedError,
    StreamLostError,
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
    [
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.PERMISSION_DENIED,
    ],
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


@pytest.mark.parametrize(
    ("code", "details"),
    [
        (grpc.StatusCode.UNKNOWN, "Stream removed (Data frame with END_STREAM flag received)"),
        (
            grpc.StatusCode.INTERNAL,
            "Stream removed (RST_STREAM (Received RST_STREAM with error code 2))",
        ),
        (grpc.StatusCode.INTERNAL, "boom"),
        (grpc.StatusCode.UNKNOWN, ""),
    ],
)
def test_unknown_or_internal_without_an_a2a_error_is_a_lost_stream(
    code: grpc.StatusCode, details: str
) -> None:
    cause = rpc_error(code, details)
    mapped = from_rpc_error(cause)
    assert type(mapped) is StreamLostError and isinstance(mapped, A2ATransportError)
    assert mapped.code is code
    assert mapped.details == (details or code.name)
    assert mapped.__cause__ is cause


def test_a_servers_internal_error_with_error_info_is_the_a2a_error() -> None:
    code, message, trailers = status.encode(errors.InternalError("the agent broke"))
    assert code is grpc.StatusCode.INTERNAL
    assert type(from_rpc_error(rpc_error(code, message, trailers))) is errors.InternalError


@pytest.mark.parametrize(
    ("code", "details"),
    [
        (grpc.StatusCode.INTERNAL, "InternalError: the agent broke"),
        (grpc.StatusCode.INTERNAL, "JSONParseError: not JSON"),
        (grpc.StatusCode.INTERNAL, "InvalidAgentResponseError: two payloads"),
    ],
)
def test_a_v03_servers_named_error_is_not_a_lost_stream(
    code: grpc.StatusCode, details: str
) -> None:
    """An A2A 0.3 server names its error in the message and sends no ErrorInfo."""
    mapped = from_rpc_error(rpc_error(code, details))
    assert type(mapped) is RpcFailedError and mapped.code is code
