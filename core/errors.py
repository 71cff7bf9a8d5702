"""The error table: one class per error the server sends, with its gRPC code, ErrorInfo reason
and domain, and whether retrying can help.

`A2AError` subclasses are the A2A 1.0.1 errors (spec §3.3.2 / §10.6, domain a2a-protocol.org).
`ServiceError` subclasses are the few failures the spec does not name (RESOURCE_EXHAUSTED,
UNAVAILABLE, UNAUTHENTICATED) under this project's own domain, so A2A peers still see a plain
gRPC status.
The server raises these, `a2a_grpc.core.status` turns them into rich statuses and back, and the
client raises the same classes when a peer says no.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import grpc

ERROR_DOMAIN = "a2a-protocol.org"
"""The ErrorInfo domain of the errors the A2A spec names (`A2AError`)."""
SERVICE_DOMAIN = "a2a-grpc"
"""The ErrorInfo domain of this project's own errors (`ServiceError`)."""
RETRYABLE_KEY = "retryable"
"""ErrorInfo metadata key: "true" when the same request may succeed later, else "false"."""


@dataclass(frozen=True)
class FieldViolation:
    """One invalid request field, reported as a google.rpc.BadRequest field violation."""

    field: str
    """The field's path from the request's root, e.g. `message.message_id` or
    `message.metadata['...']`."""
    description: str
    """What is wrong with the field, and what to send instead."""


class StatusError(Exception):
    """An error carried as a gRPC status with an ErrorInfo.

    Subclasses set `reason`, `code`, `domain`, `default_message` and `transient` (whether retrying
    the same request can help). An instance's `retryable` starts as `transient` and can be set,
    e.g. by the decoder from what a peer said; `retry_delay` (seconds) travels as RetryInfo.
    """

    reason: ClassVar[str] = "INTERNAL_ERROR"
    """The ErrorInfo reason (`TASK_NOT_FOUND`): with `domain`, what names the error on the wire."""
    code: ClassVar[grpc.StatusCode] = grpc.StatusCode.INTERNAL
    """The gRPC status code the error is sent with."""
    domain: ClassVar[str] = ERROR_DOMAIN
    """The ErrorInfo domain: `ERROR_DOMAIN` for A2A's errors, `SERVICE_DOMAIN` for ours."""
    default_message: ClassVar[str] = "internal error"
    """The message when none is given."""
    transient: ClassVar[bool] = False
    """Whether retrying the same request can help, for every error of this class; an
    instance's `retryable` starts from it."""
    jsonrpc_code: ClassVar[int] = -32603
    """The JSON-RPC 2.0 binding's error code (spec §3.1)."""
    http_status: ClassVar[int] = 500
    """The HTTP status of the HTTP+JSON binding (spec §3.1; also used by JSON-RPC for refusals
    that happen before any JSON-RPC processing, such as a body over the size limit)."""

    def __init__(
        self,
        message: str | None = None,
        *,
        metadata: Mapping[str, str] | None = None,
        field_violations: Sequence[FieldViolation] = (),
        retryable: bool | None = None,
        retry_delay: float | None = None,
    ) -> None:
        self.message = message or self.default_message
        """What went wrong and what to do about it: the status message the peer sees."""
        self.metadata: dict[str, str] = dict(metadata or {})
        """ErrorInfo metadata sent with the error (e.g. `taskId`); `retryable` adds its key."""
        self.field_violations: tuple[FieldViolation, ...] = tuple(field_violations)
        """The invalid request fields, sent as a google.rpc.BadRequest; empty: none named."""
        self.retryable: bool = self.transient if retryable is None else retryable
        """Whether the same request may succeed later, sent as ErrorInfo metadata `retryable`:
        `transient` unless given; on the client, what the peer said."""
        self.retry_delay = retry_delay
        """Seconds to wait before trying again, sent as RetryInfo (the client's retry waits at
        least that long); None: no delay given."""
        super().__init__(self.message)


class A2AError(StatusError):
    """An error the A2A protocol names (domain a2a-protocol.org); never worth retrying as is."""


class TaskNotFoundError(A2AError):
    """The task id names no task this caller can see: none was made, it is another caller's or
    tenant's, or it was evicted (`task_ttl`, `max_tasks`)."""

    reason = "TASK_NOT_FOUND"
    code = grpc.StatusCode.NOT_FOUND
    default_message = "task not found"
    jsonrpc_code = -32001
    http_status = 404


class TaskNotCancelableError(A2AError):
    """CancelTask on a task that is already in a terminal state."""

    reason = "TASK_NOT_CANCELABLE"
    code = grpc.StatusCode.FAILED_PRECONDITION
    default_message = "task is in a terminal state and cannot be canceled"
    jsonrpc_code = -32002
    http_status = 400


class PushNotificationNotSupportedError(A2AError):
    """A push notification config sent to an agent whose card does not offer push
    notifications."""

    reason = "PUSH_NOTIFICATION_NOT_SUPPORTED"
    code = grpc.StatusCode.FAILED_PRECONDITION
    default_message = "this agent does not support push notifications"
    jsonrpc_code = -32003
    http_status = 400


class UnsupportedOperationError(A2AError):
    """The agent does not do this: streaming or an extended card the card does not offer, a
    message to a task that is terminal or still working, SubscribeToTask on a terminal task, or
    an RPC the peer's protocol version lacks (ListTasks of A2A 0.3)."""

    reason = "UNSUPPORTED_OPERATION"
    code = grpc.StatusCode.FAILED_PRECONDITION
    default_message = "operation not supported"
    jsonrpc_code = -32004
    http_status = 400


class ContentTypeNotSupportedError(A2AError):
    """A message part whose media type the agent's input modes do not accept."""

    reason = "CONTENT_TYPE_NOT_SUPPORTED"
    code = grpc.StatusCode.INVALID_ARGUMENT
    default_message = "content type not supported"
    jsonrpc_code = -32005
    http_status = 400


class InvalidAgentResponseError(A2AError):
    """An answer that breaks the protocol's contract (not A2A, two payloads, another task's
    events...); raised by the client about a peer's answer."""

    reason = "INVALID_AGENT_RESPONSE"
    code = grpc.StatusCode.INTERNAL
    default_message = "the agent's response does not conform to the A2A protocol"
    jsonrpc_code = -32006
    http_status = 500


class ExtendedAgentCardNotConfiguredError(A2AError):
    """GetExtendedAgentCard from an agent whose card offers an extended card that is not
    configured."""

    reason = "EXTENDED_AGENT_CARD_NOT_CONFIGURED"
    code = grpc.StatusCode.FAILED_PRECONDITION
    default_message = "no extended agent card is configured"
    jsonrpc_code = -32007
    http_status = 400


class ExtensionSupportRequiredError(A2AError):
    """The agent's card requires an extension the call did not activate (`a2a-extensions`)."""

    reason = "EXTENSION_SUPPORT_REQUIRED"
    code = grpc.StatusCode.FAILED_PRECONDITION
    default_message = "a required extension was not activated"
    jsonrpc_code = -32008
    http_status = 400


class VersionNotSupportedError(A2AError):
    """The call's `a2a-version` is a version this service does not speak (no `a2a-version` means
    0.3, which the 1.0 service refuses only with `strict_version`)."""

    reason = "VERSION_NOT_SUPPORTED"
    code = grpc.StatusCode.FAILED_PRECONDITION
    default_message = "A2A protocol version not supported"
    jsonrpc_code = -32009
    http_status = 400


class InvalidParamsError(A2AError):
    """A request field is invalid (missing, malformed, too large, a refused signature or budget, a
    message id reused for other content); `field_violations` names each field."""

    reason = "INVALID_PARAMS"
    code = grpc.StatusCode.INVALID_ARGUMENT
    default_message = "invalid parameters"
    jsonrpc_code = -32602
    http_status = 400


class InvalidRequestError(A2AError):
    """The request cannot be read as one: not the expected protobuf, not JSON, not a JSON-RPC 2.0
    request object, or a body over the size limit."""

    reason = "INVALID_REQUEST"
    code = grpc.StatusCode.INVALID_ARGUMENT
    default_message = "invalid request"
    jsonrpc_code = -32600
    http_status = 400


class MethodNotFoundError(A2AError):
    """A JSON-RPC method, or an HTTP+JSON route and verb, that A2A or the bindings served do not
    have."""

    reason = "METHOD_NOT_FOUND"
    code = grpc.StatusCode.NOT_FOUND
    default_message = "method not found"
    jsonrpc_code = -32601
    http_status = 404


class InternalError(A2AError):
    """The server failed in a way the caller cannot fix; the message is generic, the details are
    in the server's log."""

    reason = "INTERNAL_ERROR"
    code = grpc.StatusCode.INTERNAL
    default_message = "internal error"
    jsonrpc_code = -32603
    http_status = 500


class ServiceError(StatusError):
    """A failure the A2A spec does not name, under this project's ErrorInfo domain."""

    domain = SERVICE_DOMAIN


class ResourceExhaustedError(ServiceError):
    """A limit of the server is reached (calls or streams at once, task memory, live tasks per
    caller or tenant, a stream fallen too far behind); retryable, with RetryInfo."""

    reason = "RESOURCE_EXHAUSTED"
    code = grpc.StatusCode.RESOURCE_EXHAUSTED
    default_message = "the server is at capacity; retry later"
    transient = True
    jsonrpc_code = -32000
    http_status = 429


class ServiceUnavailableError(ServiceError):
    """The server cannot serve this request right now (e.g. its audit trail cannot be written
    and it fails closed); the same request may succeed later."""

    reason = "UNAVAILABLE"
    code = grpc.StatusCode.UNAVAILABLE
    default_message = "the server cannot serve requests right now; retry later"
    transient = True
    jsonrpc_code = -32000
    http_status = 503


class EventIdExpiredError(ServiceError):
    """SubscribeToTask resumed after an event id the server no longer keeps (its per-task
    buffer is bounded, and it goes with the task), or one that is not an id of the task's
    stream: its message says what works instead, a subscription without the id while the task
    runs, GetTask once it is finished (core/event_ids.py)."""

    reason = "EVENT_ID_EXPIRED"
    code = grpc.StatusCode.OUT_OF_RANGE
    default_message = "the server no longer keeps the events after this id"
    jsonrpc_code = -32000
    http_status = 410


class UnauthenticatedError(ServiceError):
    """The call brought no valid credentials where the server requires them (bearer token, JWT,
    client certificate), or asked for the extended card without any."""

    reason = "UNAUTHENTICATED"
    code = grpc.StatusCode.UNAUTHENTICATED
    default_message = "credentials are required"
    jsonrpc_code = -32000
    http_status = 401


ERROR_CLASSES: tuple[type[A2AError], ...] = (
    TaskNotFoundError,
    TaskNotCancelableError,
    PushNotificationNotSupportedError,
    UnsupportedOperationError,
    ContentTypeNotSupportedError,
    InvalidAgentResponseError,
    ExtendedAgentCardNotConfiguredError,
    ExtensionSupportRequiredError,
    VersionNotSupportedError,
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
    InternalError,
)
"""Every A2A error class, in the spec's order."""

SERVICE_ERROR_CLASSES: tuple[type[ServiceError], ...] = (
    ResourceExhaustedError,
    ServiceUnavailableError,
    UnauthenticatedError,
    EventIdExpiredError,
)
"""Every `ServiceError` class."""

ERROR_BY_KEY: Mapping[tuple[str, str], type[StatusError]] = {
    (cls.domain, cls.reason): cls for cls in (*ERROR_CLASSES, *SERVICE_ERROR_CLASSES)
}
"""(ErrorInfo domain, reason) → error class."""

ERROR_BY_JSONRPC_CODE: Mapping[int, type[A2AError]] = {
    cls.jsonrpc_code: cls for cls in ERROR_CLASSES
}
"""JSON-RPC error code → A2A error class, for a JSON-RPC error that carries no ErrorInfo (each
A2A error has its own code; the service errors share -32000 and are not in it)."""
