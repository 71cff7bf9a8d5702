"""The error table (spec v1.0.1 §3.3.2) and its codec, pinned."""

from __future__ import annotations

import grpc
import pytest

from a2a_grpc.core import errors, status

SPEC_TABLE = {
    "TaskNotFoundError": (grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND"),
    "TaskNotCancelableError": (grpc.StatusCode.FAILED_PRECONDITION, "TASK_NOT_CANCELABLE"),
    "PushNotificationNotSupportedError": (
        grpc.StatusCode.FAILED_PRECONDITION,
        "PUSH_NOTIFICATION_NOT_SUPPORTED",
    ),
    "UnsupportedOperationError": (grpc.StatusCode.FAILED_PRECONDITION, "UNSUPPORTED_OPERATION"),
    "ContentTypeNotSupportedError": (
        grpc.StatusCode.INVALID_ARGUMENT,
        "CONTENT_TYPE_NOT_SUPPORTED",
    ),
    "InvalidAgentResponseError": (grpc.StatusCode.INTERNAL, "INVALID_AGENT_RESPONSE"),
    "ExtendedAgentCardNotConfiguredError": (
        grpc.StatusCode.FAILED_PRECONDITION,
        "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
    ),
    "ExtensionSupportRequiredError": (
        grpc.StatusCode.FAILED_PRECONDITION,
        "EXTENSION_SUPPORT_REQUIRED",
    ),
    "VersionNotSupportedError": (grpc.StatusCode.FAILED_PRECONDITION, "VERSION_NOT_SUPPORTED"),
    "InvalidParamsError": (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PARAMS"),
    "InvalidRequestError": (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST"),
    "MethodNotFoundError": (grpc.StatusCode.NOT_FOUND, "METHOD_NOT_FOUND"),
    "InternalError": (grpc.StatusCode.INTERNAL, "INTERNAL_ERROR"),
}


def test_table_matches_the_spec() -> None:
    actual = {cls.__name__: (cls.code, cls.reason) for cls in errors.ERROR_CLASSES}
    assert actual == SPEC_TABLE


@pytest.mark.parametrize("cls", errors.ERROR_CLASSES)
def test_codec_round_trip(cls: type[errors.A2AError]) -> None:
    error = cls(
        "explain what to fix",
        metadata={"taskId": "t-1"},
        field_violations=[errors.FieldViolation("message.parts", "must not be empty")],
    )
    code, message, trailers = status.encode(error)
    assert (code, message) == (cls.code, "explain what to fix")
    decoded = status.decode(code, message, trailers)
    assert type(decoded) is cls
    assert decoded.message == "explain what to fix"
    assert decoded.metadata == {"taskId": "t-1"}
    assert decoded.field_violations == error.field_violations


def test_mismatched_status_is_not_trusted() -> None:
    code, message, trailers = status.encode(errors.TaskNotFoundError("gone"))
    assert status.decode(grpc.StatusCode.INTERNAL, message, trailers) is None
    assert status.decode(code, "another message", trailers) is None
    assert status.decode(code, message, ()) is None
    assert status.decode(code, message, ((status.STATUS_DETAILS_KEY, b"\xff\xff"),)) is None


def test_every_error_states_whether_retrying_can_help() -> None:
    from google.rpc import error_details_pb2, status_pb2

    for cls in (*errors.ERROR_CLASSES, *errors.SERVICE_ERROR_CLASSES):
        _, _, trailers = status.encode(cls("x"))
        rich = status_pb2.Status.FromString(trailers[0][1])
        info = error_details_pb2.ErrorInfo()
        rich.details[0].Unpack(info)
        transient = (errors.ResourceExhaustedError, errors.ServiceUnavailableError)
        expected = "true" if cls in transient else "false"
        assert info.metadata["retryable"] == expected, cls.__name__
        assert info.domain == (
            "a2a-grpc" if issubclass(cls, errors.ServiceError) else "a2a-protocol.org"
        )


def test_retry_info_and_retryable_claims_round_trip() -> None:
    error = errors.ResourceExhaustedError("busy", retry_delay=1.5)
    decoded = status.decode(*status.encode(error))
    assert isinstance(decoded, errors.ResourceExhaustedError)
    assert decoded.retryable is True and decoded.retry_delay == 1.5
    assert "retryable" not in decoded.metadata
    claimed = status.decode(*status.encode(errors.ResourceExhaustedError("no", retryable=False)))
    assert claimed is not None and claimed.retryable is False and claimed.retry_delay is None


def test_echoed_text_is_clipped_to_fit_the_trailers() -> None:
    error = errors.TaskNotFoundError(
        "task " + "x" * 20_000 + " not found",
        metadata={"taskId": "x" * 20_000},
        field_violations=[errors.FieldViolation("id", "y" * 5000)],
    )
    code, message, trailers = status.encode(error)
    assert len(message) == status.MAX_MESSAGE_CHARS and message.endswith("…")
    assert sum(len(value) for _, value in trailers) < 4096
    decoded = status.decode(code, message, trailers)
    assert decoded is not None and len(decoded.metadata["taskId"]) == status.MAX_DETAIL_CHARS


# spec §3.1: the JSON-RPC code and HTTP status of each error; the service errors (not in the spec)
# use the implementation-defined JSON-RPC code -32000 and their usual HTTP statuses.
HTTP_TABLE = {
    errors.TaskNotFoundError: (-32001, 404),
    errors.TaskNotCancelableError: (-32002, 400),
    errors.PushNotificationNotSupportedError: (-32003, 400),
    errors.UnsupportedOperationError: (-32004, 400),
    errors.ContentTypeNotSupportedError: (-32005, 400),
    errors.InvalidAgentResponseError: (-32006, 500),
    errors.ExtendedAgentCardNotConfiguredError: (-32007, 400),
    errors.ExtensionSupportRequiredError: (-32008, 400),
    errors.VersionNotSupportedError: (-32009, 400),
    errors.InvalidParamsError: (-32602, 400),
    errors.InvalidRequestError: (-32600, 400),
    errors.MethodNotFoundError: (-32601, 404),
    errors.InternalError: (-32603, 500),
    errors.ResourceExhaustedError: (-32000, 429),
    errors.ServiceUnavailableError: (-32000, 503),
    errors.UnauthenticatedError: (-32000, 401),
    errors.EventIdExpiredError: (-32000, 410),
}


def test_every_error_has_its_jsonrpc_code_and_http_status() -> None:
    assert set(HTTP_TABLE) == {*errors.ERROR_CLASSES, *errors.SERVICE_ERROR_CLASSES}
    for error_class, expected in HTTP_TABLE.items():
        assert (error_class.jsonrpc_code, error_class.http_status) == expected, error_class


def test_details_as_json_for_the_http_bindings() -> None:
    error = errors.InvalidParamsError(
        "bad", field_violations=[errors.FieldViolation("id", "empty")], retry_delay=1.5
    )
    assert status.details_json(error) == [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "INVALID_PARAMS",
            "domain": "a2a-protocol.org",
            "metadata": {"retryable": "false"},
        },
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.500s"},
        {
            "@type": "type.googleapis.com/google.rpc.BadRequest",
            "fieldViolations": [{"field": "id", "description": "empty"}],
        },
    ]
