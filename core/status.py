"""The one codec between status errors and rich gRPC statuses (google.rpc.Status in the trailer).

Encoding puts into the `grpc-status-details-bin` trailer: ErrorInfo (reason, domain, and the
metadata with `retryable` = "true" / "false"), BadRequest for invalid fields, and RetryInfo when a
delay is known. The Status code and message always equal the call's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc
from google.protobuf import any_pb2, duration_pb2, json_format
from google.rpc import error_details_pb2, status_pb2

from a2a_grpc.core.errors import (
    ERROR_BY_KEY,
    ERROR_CLASSES,
    RETRYABLE_KEY,
    SERVICE_ERROR_CLASSES,
    FieldViolation,
    StatusError,
)

STATUS_DETAILS_KEY = "grpc-status-details-bin"


MAX_MESSAGE_CHARS = 1024
MAX_DETAIL_CHARS = 256
"""Caps on what an error echoes back (e.g. an id the caller sent): trailers are limited to 16 KiB
by gRPC, and a status that does not fit would reach the caller as RESOURCE_EXHAUSTED instead."""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def details(error: StatusError) -> list[any_pb2.Any]:
    """The google.rpc details that describe `error`: ErrorInfo (reason, domain, the metadata with
    `retryable`), then RetryInfo when a delay is known and BadRequest for invalid fields."""
    metadata = {key: _clip(value, MAX_DETAIL_CHARS) for key, value in error.metadata.items()}
    metadata[RETRYABLE_KEY] = "true" if error.retryable else "false"
    info = error_details_pb2.ErrorInfo(reason=error.reason, domain=error.domain, metadata=metadata)
    packed = [_pack(info)]
    if error.retry_delay is not None:
        delay = duration_pb2.Duration()
        delay.FromNanoseconds(int(error.retry_delay * 1e9))
        packed.append(_pack(error_details_pb2.RetryInfo(retry_delay=delay)))
    if error.field_violations:
        bad_request = error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(
                    field=_clip(violation.field, MAX_DETAIL_CHARS),
                    description=_clip(violation.description, MAX_DETAIL_CHARS),
                )
                for violation in error.field_violations
            ]
        )
        packed.append(_pack(bad_request))
    return packed


def message_of(error: StatusError) -> str:
    """The error's message as sent to a peer (clipped)."""
    return _clip(error.message, MAX_MESSAGE_CHARS)


def details_json(error: StatusError) -> list[dict[str, Any]]:
    """`details(error)` as ProtoJSON objects, each with its `@type`, for the HTTP bindings (the
    JSON-RPC `error.data` array and the AIP-193 `error.details` array)."""
    return [json_format.MessageToDict(detail) for detail in details(error)]


def encode(error: StatusError) -> tuple[grpc.StatusCode, str, tuple[tuple[str, bytes], ...]]:
    """The gRPC code, message and trailing metadata that carry `error` to a peer."""
    message = message_of(error)
    status = status_pb2.Status(code=error.code.value[0], message=message, details=details(error))
    return error.code, message, ((STATUS_DETAILS_KEY, status.SerializeToString()),)


def encode_named(
    error: StatusError,
) -> tuple[grpc.StatusCode, str, tuple[tuple[str, bytes], ...]]:
    """`encode`, with the message prefixed by the error's class name (`TaskNotFoundError: …`):
    A2A 0.3's gRPC convention, which official 0.3 clients parse into typed errors."""
    message = f"{type(error).__name__}: {message_of(error)}"
    status = status_pb2.Status(code=error.code.value[0], message=message, details=details(error))
    return error.code, message, ((STATUS_DETAILS_KEY, status.SerializeToString()),)


def to_bytes(error: StatusError) -> bytes:
    """`error` as a serialized google.rpc.Status, for passing it on elsewhere than in a call's
    trailers (e.g. between replicas); `from_bytes` reads it back."""
    status = status_pb2.Status(
        code=error.code.value[0], message=message_of(error), details=details(error)
    )
    serialized: bytes = status.SerializeToString()
    return serialized


def from_bytes(raw: bytes) -> StatusError | None:
    """The error `to_bytes` wrote; None for bytes that are not a Status with an ErrorInfo we
    know."""
    try:
        status = status_pb2.Status.FromString(raw)
    except Exception:  # not ours to read
        return None
    return _from_details(status.message, status.details)


NAMED_ERRORS = frozenset(
    {cls.__name__ for cls in (*ERROR_CLASSES, *SERVICE_ERROR_CLASSES)}
    | {"JSONParseError", "AuthenticatedExtendedCardNotConfiguredError"}
)
"""The error class names a status message may start with (`encode_named`): A2A 1.0's and the
service errors', and the two A2A 0.3 names 1.0 renamed or dropped."""


def names_an_error(message: str) -> bool:
    """Whether a status message starts with an A2A error's class name (`TaskNotFoundError: …`,
    as `encode_named` and A2A 0.3 servers write their errors, ErrorInfo or not)."""
    name, colon, _ = message.partition(":")
    return bool(colon) and name in NAMED_ERRORS


def decode(
    code: grpc.StatusCode, message: str, trailing_metadata: Sequence[tuple[str, str | bytes]] | None
) -> StatusError | None:
    """The error a failed call carries, or None when it carries no ErrorInfo we know.

    A status whose details disagree with the call's own code or message is not trusted. The
    peer's `retryable` claim and RetryInfo delay are kept on the returned error.
    """
    raw = next((value for key, value in trailing_metadata or () if key == STATUS_DETAILS_KEY), None)
    if not isinstance(raw, bytes):
        return None
    try:
        status = status_pb2.Status.FromString(raw)
    except Exception:  # a malformed trailer is the peer's bug; treat as no details
        return None
    if status.code != code.value[0] or status.message != message:
        return None
    return _from_details(message, status.details)


def decode_json(message: str, details: Sequence[Any]) -> StatusError | None:
    """The error an HTTP binding's error carries (the JSON-RPC `error.data` array or the
    AIP-193 `error.details` array: ProtoJSON objects with their `@type`), or None when it holds
    no ErrorInfo we know. Details of an unknown type, or malformed, are skipped."""
    packed: list[any_pb2.Any] = []
    for detail in details:
        if not isinstance(detail, dict):
            continue
        value = any_pb2.Any()
        try:
            json_format.ParseDict(detail, value, ignore_unknown_fields=True)
        except (json_format.ParseError, TypeError, ValueError, RecursionError):
            continue  # a detail we cannot read is the peer's business
        packed.append(value)
    return _from_details(message, packed)


def _from_details(message: str, details: Sequence[any_pb2.Any]) -> StatusError | None:
    """The error `details` (ErrorInfo, RetryInfo, BadRequest) describe, with `message`."""
    error_class: type[StatusError] | None = None
    metadata: dict[str, str] = {}
    violations: list[FieldViolation] = []
    retry_delay: float | None = None
    for detail in details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            known = ERROR_BY_KEY.get((info.domain, info.reason))
            if known is not None:
                error_class = known
                metadata = dict(info.metadata)
        elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry_info = error_details_pb2.RetryInfo()
            detail.Unpack(retry_info)
            retry_delay = retry_info.retry_delay.ToNanoseconds() / 1e9
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad_request = error_details_pb2.BadRequest()
            detail.Unpack(bad_request)
            violations += [
                FieldViolation(v.field, v.description) for v in bad_request.field_violations
            ]
    if error_class is None:
        return None
    claim = metadata.pop(RETRYABLE_KEY, None)
    return error_class(
        message,
        metadata=metadata,
        field_violations=violations,
        retryable=None if claim is None else claim == "true",
        retry_delay=retry_delay,
    )


def _pack(
    message: error_details_pb2.ErrorInfo
    | error_details_pb2.BadRequest
    | error_details_pb2.RetryInfo,
) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed
