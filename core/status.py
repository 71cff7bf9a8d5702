"""The one codec between A2A errors and rich gRPC statuses (google.rpc.Status in the trailer).

Encoding puts ErrorInfo (domain a2a-protocol.org) and, for invalid fields, BadRequest into the
`grpc-status-details-bin` trailer; the Status code and message always equal the call's own.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

from a2a_grpc.core.errors import ERROR_BY_REASON, ERROR_DOMAIN, A2AError, FieldViolation

STATUS_DETAILS_KEY = "grpc-status-details-bin"


def encode(error: A2AError) -> tuple[grpc.StatusCode, str, tuple[tuple[str, bytes], ...]]:
    """The gRPC code, message and trailing metadata that carry `error` to a peer."""
    info = error_details_pb2.ErrorInfo(
        reason=error.reason, domain=ERROR_DOMAIN, metadata=error.metadata
    )
    details = [_pack(info)]
    if error.field_violations:
        bad_request = error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(
                    field=violation.field, description=violation.description
                )
                for violation in error.field_violations
            ]
        )
        details.append(_pack(bad_request))
    status = status_pb2.Status(code=error.code.value[0], message=error.message, details=details)
    return error.code, error.message, ((STATUS_DETAILS_KEY, status.SerializeToString()),)


def decode(
    code: grpc.StatusCode, message: str, trailing_metadata: Sequence[tuple[str, str | bytes]] | None
) -> A2AError | None:
    """The A2A error a failed call carries, or None when it carries no A2A ErrorInfo.

    A status whose details disagree with the call's own code or message is not trusted.
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
    error_class: type[A2AError] | None = None
    metadata: dict[str, str] = {}
    violations: list[FieldViolation] = []
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            if info.domain == ERROR_DOMAIN:
                error_class = ERROR_BY_REASON.get(info.reason)
                metadata = dict(info.metadata)
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad_request = error_details_pb2.BadRequest()
            detail.Unpack(bad_request)
            violations += [
                FieldViolation(v.field, v.description) for v in bad_request.field_violations
            ]
    if error_class is None:
        return None
    return error_class(message, metadata=metadata, field_violations=violations)


def _pack(message: error_details_pb2.ErrorInfo | error_details_pb2.BadRequest) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed
