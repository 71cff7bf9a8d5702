"""The A2A error hierarchy: one class per spec error, with its ErrorInfo reason and gRPC code.

This is the project's one error table (A2A spec v1.0.1, §3.3.2 / §10.6). The server raises these,
the codec in `a2a_grpc.core.status` turns them into rich gRPC statuses and back, and the client
raises the same classes when a peer says no.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import grpc

ERROR_DOMAIN = "a2a-protocol.org"


@dataclass(frozen=True)
class FieldViolation:
    """One invalid request field, reported as a google.rpc.BadRequest field violation."""

    field: str
    description: str


class A2AError(Exception):
    """An error the A2A protocol names. Subclasses set `reason`, `code` and `default_message`."""

    reason: ClassVar[str] = "INTERNAL_ERROR"
    code: ClassVar[grpc.StatusCode] = grpc.StatusCode.INTERNAL
    default_message: ClassVar[str] = "internal error"

    def __init__(
        self,
        message: str | None = None,
        *,
        metadata: Mapping[str, str] | None = None,
        field_violations: Sequence[FieldViolation] = (),
    ) -> None:
        self.message = message or self.default_message
        self.metadata: dict[str, str] = dict(metadata or {})
        self.field_violations: tuple[FieldViolation, ...] = tuple(field_violations)
        super().__init__(self.message)


class TaskNotFoundError(A2AError):
    reason = "TASK_NOT_FOUND"
    code = grpc.StatusCode.NOT_FOUND
    default_message = "task not found"


class TaskNotCancelableError(A2AError):
    reason = "TASK_NOT_CANCELABLE"
    code = grpc.StatusCode.FAILED_PRECONDITION
    default_message = "task is in a terminal state and cannot be canceled"


class PushNotificationNotSupportedError(A2AError):
    reason = "PUSH_NOTIFICATION_NOT_SUPPORTED"
    code = grpc.StatusCode.FAILED_PRECONDITION
    default_message = "this agent does not support push notifications"


class UnsupportedOperationError(A2AError):
    reason = "UNSUPPORTED_OPERATION"
    code = grpc.StatusCode.FAILED_PRECONDITION
    default_message = "operation not supported"


class ContentTypeNotSupportedError(A2AError):
    reason = "CONTENT_TYPE_NOT_SUPPORTED"
    code = grpc.StatusCode.INVALID_ARGUMENT
    default_message = "content type not supported"


class InvalidAgentResponseError(A2AError):
    reason = "INVALID_AGENT_RESPONSE"
    code = grpc.StatusCode.INTERNAL
    default_message = "the agent's response does not conform to the A2A protocol"


class ExtendedAgentCardNotConfiguredError(A2AError):
    reason = "EXTENDED_AGENT_CARD_NOT_CONFIGURED"
    code = grpc.StatusCode.FAILED_PRECONDITION
    default_message = "no extended agent card is configured"


class ExtensionSupportRequiredError(A2AError):
    reason = "EXTENSION_SUPPORT_REQUIRED"
    code = grpc.StatusCode.FAILED_PRECONDITION
    default_message = "a required extension was not activated"


class VersionNotSupportedError(A2AError):
    reason = "VERSION_NOT_SUPPORTED"
    code = grpc.StatusCode.FAILED_PRECONDITION
    default_message = "A2A protocol version not supported"


class InvalidParamsError(A2AError):
    reason = "INVALID_PARAMS"
    code = grpc.StatusCode.INVALID_ARGUMENT
    default_message = "invalid parameters"


class InvalidRequestError(A2AError):
    reason = "INVALID_REQUEST"
    code = grpc.StatusCode.INVALID_ARGUMENT
    default_message = "invalid request"


class MethodNotFoundError(A2AError):
    reason = "METHOD_NOT_FOUND"
    code = grpc.StatusCode.NOT_FOUND
    default_message = "method not found"


class InternalError(A2AError):
    reason = "INTERNAL_ERROR"
    code = grpc.StatusCode.INTERNAL
    default_message = "internal error"


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

ERROR_BY_REASON: Mapping[str, type[A2AError]] = {cls.reason: cls for cls in ERROR_CLASSES}
