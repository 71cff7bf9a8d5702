"""What the console's page is sent: tasks, messages, parts, events and errors as plain JSON.

The page renders; every decision about what a protobuf means is made here, with the client
library's own helpers (the reducer's view, the error classes, `is_retryable`). Nothing here ever
holds a credential: push configs' tokens and credentials are replaced by `REDACTED`.
"""

from __future__ import annotations

import base64
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

from a2a_grpc.client.errors import (
    A2AClientError,
    A2ATransportError,
    AgentCardError,
    CredentialsError,
    RpcFailedError,
    StreamResumeError,
)
from a2a_grpc.client.reducer import TaskView
from a2a_grpc.client.retry import is_retryable
from a2a_grpc.client.state_names import state_name
from a2a_grpc.core import v03
from a2a_grpc.core.errors import ERROR_DOMAIN, StatusError
from a2a_grpc.core.event_ids import EVENT_ID_EXTENSION, event_id
from a2a_grpc.core.media_types import media_type_of
from a2a_grpc.generated import a2a_pb2

REDACTED = "(set; not shown)"
"""What the page sees in place of a push config's token or credentials."""

MAX_INLINE_BYTES = 8 * 1024 * 1024
"""Raw parts larger than this are sent to the page as their size only."""


def proto_json(message: Message) -> Any:
    """ProtoJSON (lowerCamelCase names, enums by name), as the HTTP bindings carry it."""
    return json_format.MessageToDict(message)


def wire_json(event: a2a_pb2.StreamResponse, interface: a2a_pb2.AgentInterface | None) -> Any:
    """The event as the binding in use carries it: A2A 1.0's StreamResponse as ProtoJSON (the
    gRPC binding's protobuf shown in its JSON mapping), or for an A2A 0.3 interface the 0.3
    StreamResponse the client translated it from."""
    if interface is not None and v03.is_v03(interface.protocol_version):
        return proto_json(v03.stream_response(event))
    return proto_json(event)


def part_view(part: a2a_pb2.Part) -> dict[str, Any]:
    """One part: its kind, media type and content (raw bytes base64, up to MAX_INLINE_BYTES)."""
    view: dict[str, Any] = {
        "mediaType": media_type_of(part),
        "filename": part.filename,
    }
    content = part.WhichOneof("content")
    if content == "text":
        view.update(kind="text", text=part.text)
    elif content == "data":
        view.update(kind="data", data=json_format.MessageToDict(part.data))
    elif content == "raw":
        view.update(kind="raw", size=len(part.raw))
        if len(part.raw) <= MAX_INLINE_BYTES:
            view["base64"] = base64.b64encode(part.raw).decode("ascii")
    elif content == "url":
        view.update(kind="url", url=part.url)
    else:
        view.update(kind="empty")
    return view


def message_view(message: a2a_pb2.Message) -> dict[str, Any]:
    return {
        "messageId": message.message_id,
        "role": a2a_pb2.Role.Name(message.role).removeprefix("ROLE_").lower(),
        "taskId": message.task_id,
        "contextId": message.context_id,
        "parts": [part_view(part) for part in message.parts],
    }


def artifact_view(artifact: a2a_pb2.Artifact, complete: bool = True) -> dict[str, Any]:
    return {
        "artifactId": artifact.artifact_id,
        "name": artifact.name,
        "description": artifact.description,
        "complete": complete,
        "parts": [part_view(part) for part in artifact.parts],
    }


def task_view(
    task: a2a_pb2.Task, completed: frozenset[str] | None = None, *, history: bool = True
) -> dict[str, Any]:
    """A task: ids, state, status message, artifacts (`complete` false while chunks are still
    arriving; `completed` None: all complete) and with `history` the conversation."""
    status = task.status
    view: dict[str, Any] = {
        "id": task.id,
        "contextId": task.context_id,
        "state": state_name(status.state),
        "timestamp": status.timestamp.ToJsonString() if status.HasField("timestamp") else "",
        "statusMessage": message_view(status.message) if status.HasField("message") else None,
        "artifacts": [
            artifact_view(a, completed is None or a.artifact_id in completed)
            for a in task.artifacts
        ],
    }
    if history:
        view["history"] = [message_view(message) for message in task.history]
    return view


def stream_view(view: TaskView) -> dict[str, Any]:
    """The reducer's running view: the task as the events so far make it (artifact chunks
    assembled), or the direct answer."""
    return {
        "taskId": view.task_id,
        "state": state_name(view.state) if view.task is not None else "",
        "done": view.done,
        "resumedFromSnapshot": view.resumed_from_snapshot,
        "skippedEvents": view.skipped_events,
        "task": (
            task_view(view.task, view.completed_artifacts, history=False)
            if view.task is not None
            else None
        ),
        "message": message_view(view.message) if view.message is not None else None,
    }


def event_summary(event: a2a_pb2.StreamResponse) -> dict[str, Any]:
    """An event's kind and what it changed: a state, an artifact chunk, a message."""
    kind = event.WhichOneof("payload") or "none"
    summary: dict[str, Any] = {"kind": kind, "eventId": event_id(event)}
    if kind == "task":
        summary["state"] = state_name(event.task.status.state)
    elif kind == "status_update":
        status = event.status_update.status
        summary["state"] = state_name(status.state)
        if status.HasField("message"):
            summary["text"] = _texts(status.message.parts)
    elif kind == "artifact_update":
        chunk = event.artifact_update
        summary.update(
            artifactId=chunk.artifact.artifact_id,
            append=chunk.append,
            lastChunk=chunk.last_chunk,
            text=_texts(chunk.artifact.parts),
        )
    elif kind == "message":
        summary["text"] = _texts(event.message.parts)
    return summary


def _texts(parts: Any) -> str:
    return " ".join(part.text for part in parts if part.WhichOneof("content") == "text")


def push_config_view(config: a2a_pb2.TaskPushNotificationConfig) -> dict[str, Any]:
    """A push config with its token and credentials redacted: the page never holds a secret."""
    shown = a2a_pb2.TaskPushNotificationConfig()
    shown.CopyFrom(config)
    if shown.token:
        shown.token = REDACTED
    if shown.HasField("authentication") and shown.authentication.credentials:
        shown.authentication.credentials = REDACTED
    view: dict[str, Any] = proto_json(shown)
    return view


def error_view(error: BaseException) -> dict[str, Any]:
    """An error as the client classifies it: its class, whether retrying may help, and for an
    error the agent sent, the A2A (or service) error's reason, code and message."""
    view: dict[str, Any] = {
        "error": type(error).__name__,
        "retryable": is_retryable(error),
        "message": str(error),
    }
    if isinstance(error, StatusError):
        view.update(
            category="a2a" if error.domain == ERROR_DOMAIN else "service",
            reason=error.reason,
            domain=error.domain,
            code=error.code.name,
            message=error.message,
            metadata=dict(error.metadata),
            fieldViolations=[
                {"field": v.field, "description": v.description} for v in error.field_violations
            ],
        )
    elif isinstance(error, A2ATransportError):
        view.update(category="could-not-talk", code=error.code.name, message=error.details)
    elif isinstance(error, RpcFailedError):
        view.update(category="rpc-failed", code=error.code.name, message=error.details)
    elif isinstance(error, CredentialsError):
        view.update(category="credentials", retryable=error.retryable)
    elif isinstance(error, StreamResumeError):
        view.update(category="stream-cut", taskId=error.task_id)
    elif isinstance(error, AgentCardError):
        view["category"] = "agent-card"
    elif isinstance(error, A2AClientError):
        view["category"] = "client"
    else:
        view["category"] = "console"
    return view


__all__ = [
    "EVENT_ID_EXTENSION",
    "REDACTED",
    "artifact_view",
    "error_view",
    "event_summary",
    "message_view",
    "part_view",
    "proto_json",
    "push_config_view",
    "stream_view",
    "task_view",
    "wire_json",
]
