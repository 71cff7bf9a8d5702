"""Builders for the messages a client sends: parts, a new message, a continuation, a refinement."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from google.protobuf import json_format, struct_pb2

from a2a_grpc.generated import a2a_pb2

PartLike = a2a_pb2.Part | str
"""A Part, or a str taken as a text part."""


def text_part(text: str) -> a2a_pb2.Part:
    return a2a_pb2.Part(text=text)


def data_part(value: Any, *, media_type: str = "application/json") -> a2a_pb2.Part:
    """A data part holding any JSON value (object, array, string, number, bool or None).

    Raises TypeError/ValueError (json_format.ParseError) for a value JSON cannot hold.
    """
    data = struct_pb2.Value()
    json_format.ParseDict(value, data)
    return a2a_pb2.Part(data=data, media_type=media_type)


def file_part(raw: bytes, *, filename: str = "", media_type: str = "") -> a2a_pb2.Part:
    """A part carrying the file's bytes inline."""
    return a2a_pb2.Part(raw=raw, filename=filename, media_type=media_type)


def url_part(url: str, *, filename: str = "", media_type: str = "") -> a2a_pb2.Part:
    """A part pointing at a file by URL."""
    return a2a_pb2.Part(url=url, filename=filename, media_type=media_type)


def user_message(
    *parts: PartLike,
    context_id: str = "",
    task_id: str = "",
    reference_task_ids: Iterable[str] = (),
    metadata: Mapping[str, Any] | None = None,
    extensions: Iterable[str] = (),
    message_id: str | None = None,
) -> a2a_pb2.Message:
    """A ROLE_USER message with a fresh uuid4 message_id (unless given); at least one part."""
    if not parts:
        raise ValueError("a message needs at least one part")
    message = a2a_pb2.Message(
        message_id=message_id or str(uuid.uuid4()),
        role=a2a_pb2.ROLE_USER,
        parts=[text_part(p) if isinstance(p, str) else p for p in parts],
        context_id=context_id,
        task_id=task_id,
        reference_task_ids=list(reference_task_ids),
        extensions=list(extensions),
    )
    if metadata is not None:
        message.metadata.update(dict(metadata))
    return message


def continue_task(task_id: str, context_id: str, *parts: PartLike) -> a2a_pb2.Message:
    """A message that continues a task that is not terminal (e.g. answers input-required)."""
    if not task_id:
        raise ValueError("continuing a task needs its task id")
    return user_message(*parts, task_id=task_id, context_id=context_id)


def refine_task(task_id: str, context_id: str, *parts: PartLike) -> a2a_pb2.Message:
    """A message that starts a new task in a finished task's context, referring to it.

    Terminal tasks cannot restart (spec §3.3); a follow-up is a new task with reference_task_ids.
    """
    if not task_id or not context_id:
        raise ValueError("refining a task needs its task id and context id")
    return user_message(*parts, context_id=context_id, reference_task_ids=[task_id])


def send_request(
    message: a2a_pb2.Message,
    *,
    accepted_output_modes: Iterable[str] = (),
    history_length: int | None = None,
    return_immediately: bool = False,
    metadata: Mapping[str, Any] | None = None,
) -> a2a_pb2.SendMessageRequest:
    """A SendMessageRequest around `message` (tenant is filled in by the client)."""
    request = a2a_pb2.SendMessageRequest(message=message)
    configuration = request.configuration
    configuration.accepted_output_modes.extend(accepted_output_modes)
    configuration.return_immediately = return_immediately
    if history_length is not None:
        configuration.history_length = history_length
    if configuration.ByteSize() == 0:
        request.ClearField("configuration")
    if metadata is not None:
        request.metadata.update(dict(metadata))
    return request
