"""Client-side errors: the "could not talk" family, generic call failures, and gRPC error mapping.

A failed call becomes exactly one of:
- a `StatusError` from `a2a_grpc.core.errors` when the peer said no with an ErrorInfo we know: an
  `A2AError` subclass for the A2A errors, a `ServiceError` (e.g. ResourceExhaustedError) else;
- an `A2ATransportError` (unavailable, deadline exceeded, cancelled, a stream lost on the way)
  when we could not talk;
- an `RpcFailedError` for any other non-OK status without A2A details.

UNKNOWN and INTERNAL are what gRPC itself reports for a stream a proxy or a dying connection
removed or reset (`UNKNOWN: Stream removed (Data frame with END_STREAM flag received)`,
`INTERNAL: Stream removed (RST_STREAM …)`), and what a server reports for its own failure. A
server's failure names itself: an A2A 1.0 error carries its ErrorInfo, and an A2A 0.3 server's
error starts with its class name (`InternalError: …`, the 0.3 gRPC convention). So UNKNOWN or
INTERNAL with neither is a `StreamLostError`: a transport failure, retried and resumed as one.
The original `grpc.aio.AioRpcError` is always the `__cause__`. A peer that breaks the protocol's
contract raises `InvalidAgentResponseError` (from core), created on the client side.
"""

from __future__ import annotations

import grpc

from a2a_grpc.core import status
from a2a_grpc.core.errors import InvalidAgentResponseError, StatusError

__all__ = [
    "A2AClientError",
    "A2ATransportError",
    "AgentCardError",
    "CallCancelledError",
    "CredentialsError",
    "DeadlineExceededError",
    "ErrorResponse",
    "InvalidAgentResponseError",
    "RpcFailedError",
    "StreamLostError",
    "StreamResumeError",
    "UnavailableError",
    "from_rpc_error",
]


class A2AClientError(Exception):
    """Base of the errors this client raises that the A2A protocol itself does not name."""


class RpcFailedError(A2AClientError):
    """The call failed with a status that carries no A2A ErrorInfo (e.g. UNIMPLEMENTED)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self.code = code
        """The call's status code (on the HTTP bindings: the one the error body names, else
        the one the HTTP status maps to)."""
        self.details = details
        """The status message, or on the HTTP bindings the error's message or `HTTP <status>`
        and the start of the body; may be empty."""
        super().__init__(f"{code.name}: {details}" if details else code.name)


class A2ATransportError(A2AClientError):
    """We could not talk to the agent; the request may or may not have reached it."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN
    """The gRPC status code the failure stands for: UNAVAILABLE, DEADLINE_EXCEEDED or
    CANCELLED in the subclasses (also for the same failures on the HTTP bindings)."""

    def __init__(self, details: str) -> None:
        self.details = details
        """What failed, as the transport said it (the gRPC status details, the HTTP client's
        error, or a gateway's `HTTP 503: ...`)."""
        super().__init__(details)


class UnavailableError(A2ATransportError):
    """The agent could not be reached (connection refused, reset, DNS, TLS handshake...)."""

    code = grpc.StatusCode.UNAVAILABLE


class DeadlineExceededError(A2ATransportError):
    """The call's deadline expired before the agent answered."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED


class CallCancelledError(A2ATransportError):
    """The call was cancelled before it completed (by either side, or by a closing channel)."""

    code = grpc.StatusCode.CANCELLED


class StreamLostError(A2ATransportError):
    """The call's stream was removed or reset on the way (UNKNOWN or INTERNAL with no A2A error
    in it, see the module): the request may or may not have reached the agent. `code` is the
    status gRPC reported."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self.code = code
        super().__init__(details)


class StreamResumeError(A2AClientError):
    """A stream ended before its task settled and could not be resumed with SubscribeToTask.

    `task_id` names the task and `last_state` is the last state seen; the last error, if any,
    is the `__cause__`.
    """

    def __init__(self, message: str, *, task_id: str, last_state: int) -> None:
        self.task_id = task_id
        """The task whose stream could not be resumed."""
        self.last_state = last_state
        """The last state seen of the task (an `a2a_pb2.TaskState` value, unsettled;
        TASK_STATE_UNSPECIFIED when no event of it arrived)."""
        super().__init__(message)


class AgentCardError(A2AClientError):
    """The agent card could not be used: the HTTP fetch failed or it offers no GRPC interface."""


class CredentialsError(A2AClientError):
    """The call's credentials could not be had: a token file missing or empty, a token endpoint
    that refused the client or could not be reached. The message names the file or endpoint
    (never a secret); `retryable` is True when trying again later may help (the endpoint could
    not be reached, or answered with a server error)."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        self.retryable = retryable
        """Whether trying again later may help (the endpoint could not be reached, or answered
        with a server error)."""
        super().__init__(message)


class ErrorResponse(Exception):
    """An HTTP binding's error answer (a JSON-RPC error object, an AIP-193 body), kept as the
    `__cause__` of the error decoded from it, as an `AioRpcError` is over gRPC. `value` is the
    error object as received."""

    def __init__(self, binding: str, value: object) -> None:
        self.binding = binding
        self.value = value
        super().__init__(f"{binding} error: {value!r}"[:500])


_TRANSPORT_ERRORS: dict[grpc.StatusCode, type[A2ATransportError]] = {
    cls.code: cls for cls in (UnavailableError, DeadlineExceededError, CallCancelledError)
}
_STREAM_LOST_CODES = frozenset({grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL})


def from_rpc_error(error: grpc.aio.AioRpcError) -> StatusError | A2AClientError:
    """The exception that stands for a failed call, with `error` as its `__cause__`."""
    code: grpc.StatusCode = error.code()
    details: str = error.details() or ""
    mapped: StatusError | A2AClientError | None = status.decode(
        code, details, tuple(error.trailing_metadata() or ())
    )
    if mapped is None:
        transport = _TRANSPORT_ERRORS.get(code)
        if transport is not None:
            mapped = transport(details or code.name)
        elif code in _STREAM_LOST_CODES and not status.names_an_error(details):
            mapped = StreamLostError(code, details or code.name)
        else:
            mapped = RpcFailedError(code, details)
    mapped.__cause__ = error
    return mapped
