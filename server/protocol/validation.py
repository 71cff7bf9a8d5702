"""Request checks that run before any task exists or any agent code runs.

Each check raises the spec's error with a message that says what to fix. The handler calls
them in the order the project documents (required fields first, then content, then extensions).
"""

from __future__ import annotations

from collections.abc import Sequence

from a2a_grpc.core.errors import (
    ContentTypeNotSupportedError,
    ExtensionSupportRequiredError,
    FieldViolation,
    InvalidParamsError,
)
from a2a_grpc.core.media_types import matches
from a2a_grpc.generated import a2a_pb2

MAX_TASKS_PAGE_SIZE = 100
TASKS_PAGE_SIZE = 50


def raise_violations(violations: Sequence[FieldViolation]) -> None:
    if violations:
        summary = "; ".join(f"{v.field}: {v.description}" for v in violations)
        raise InvalidParamsError(f"invalid request: {summary}", field_violations=violations)


def _history_length(
    holder: a2a_pb2.GetTaskRequest | a2a_pb2.ListTasksRequest | a2a_pb2.SendMessageConfiguration,
    path: str,
) -> list[FieldViolation]:
    if holder.HasField("history_length") and holder.history_length < 0:
        return [FieldViolation(path, "must be 0 (no history) or a positive count, or left unset")]
    return []


def check_send_required(request: a2a_pb2.SendMessageRequest) -> None:
    """Required fields of SendMessage / SendStreamingMessage (InvalidParams + field violations)."""
    violations: list[FieldViolation] = []
    if not request.HasField("message"):
        violations.append(FieldViolation("message", "required: the message to send"))
    else:
        message = request.message
        if not message.message_id:
            violations.append(
                FieldViolation("message.message_id", "required: a unique id minted by the sender")
            )
        role = message.role
        if role != a2a_pb2.ROLE_USER:
            violations.append(
                FieldViolation("message.role", "required: set ROLE_USER")
                if role == a2a_pb2.ROLE_UNSPECIFIED
                else FieldViolation("message.role", "messages sent to an agent must be ROLE_USER")
            )
        parts = message.parts
        if not parts:
            violations.append(FieldViolation("message.parts", "required: at least one part"))
        for index, part in enumerate(parts):
            if part.WhichOneof("content") is None:
                violations.append(
                    FieldViolation(f"message.parts[{index}]", "set one of text, raw, url or data")
                )
    if request.HasField("configuration"):
        violations += _history_length(request.configuration, "configuration.history_length")
    if violations:
        raise_violations(violations)


def accepted_input_modes(card: a2a_pb2.AgentCard) -> tuple[str, ...]:
    """The card's input modes to check parts against; empty when it accepts anything (`*/*`)."""
    modes = tuple(card.default_input_modes)
    return () if any(mode.strip() in ("*", "*/*") for mode in modes) else modes


def required_extensions(card: a2a_pb2.AgentCard) -> tuple[str, ...]:
    """The extension URIs the card marks required."""
    return tuple(ext.uri for ext in card.capabilities.extensions if ext.required)


def check_content(
    message: a2a_pb2.Message,
    input_modes: Sequence[str],
    max_inline_bytes: int,
    max_message_bytes: int,
) -> int:
    """Each part in turn: the media type it provides against `accepted_input_modes` (empty:
    any), then its inline size cap, before the next part (so the first bad part is the one
    reported); then the message's serialized size (every part counts: text, data, raw, url, and
    metadata). Returns that size.

    Only a media type the part provides is checked: the spec's ContentTypeNotSupportedError is
    for "a Media Type provided in the request's message parts" (§3.1.1, §3.1.2), and `media_type`
    is optional on every kind of part (§4.1.6 Part), so a part without one (text, data, raw or url)
    is never refused for its type."""
    for index, part in enumerate(message.parts):
        if input_modes:
            media_type = part.media_type
            if media_type and not matches(media_type, input_modes):
                raise ContentTypeNotSupportedError(
                    f"message.parts[{index}] has media type {media_type!r}; this agent accepts "
                    f"{', '.join(input_modes)}",
                    metadata={"mediaType": media_type},
                )
        if part.HasField("raw") and len(part.raw) > max_inline_bytes:
            raise InvalidParamsError(
                f"message.parts[{index}] carries {len(part.raw)} bytes inline; the limit is "
                f"{max_inline_bytes}: send a url part that points to the content instead",
                field_violations=[
                    FieldViolation(
                        f"message.parts[{index}].raw",
                        f"at most {max_inline_bytes} bytes inline; use a url part",
                    )
                ],
            )
    size = message.ByteSize()
    if size > max_message_bytes:
        raise InvalidParamsError(
            f"the message is {size} bytes; the limit is {max_message_bytes}: send large "
            "content as url parts, or split it over several messages",
            field_violations=[
                FieldViolation("message", f"at most {max_message_bytes} bytes serialized")
            ],
        )
    return size


def check_extensions(required: Sequence[str], requested: Sequence[str]) -> None:
    """Every extension in `required_extensions` must be among those the caller activated."""
    missing = [uri for uri in required if uri not in requested]
    if missing:
        raise ExtensionSupportRequiredError(
            f"this agent requires the extension(s) {', '.join(missing)}: list them in the "
            "a2a-extensions request metadata",
            metadata={"extensions": ",".join(missing)},
        )


def check_task_id(task_id: str, path: str = "id") -> None:
    if not task_id:
        raise_violations([FieldViolation(path, "required: the task id")])


def check_get(request: a2a_pb2.GetTaskRequest) -> None:
    violations = [] if request.id else [FieldViolation("id", "required: the task id")]
    raise_violations(violations + _history_length(request, "history_length"))


def list_page_size(request: a2a_pb2.ListTasksRequest) -> int:
    """The validated page size of a ListTasks request (50 when unset)."""
    violations = _history_length(request, "history_length")
    if request.HasField("page_size") and not 1 <= request.page_size <= MAX_TASKS_PAGE_SIZE:
        violations.append(
            FieldViolation(
                "page_size", f"must be between 1 and {MAX_TASKS_PAGE_SIZE}, or left unset"
            )
        )
    if request.status not in a2a_pb2.TaskState.values():
        violations.append(FieldViolation("status", "not a known TaskState"))
    raise_violations(violations)
    return request.page_size if request.HasField("page_size") else TASKS_PAGE_SIZE
