"""Message builders: parts, new messages, continuations and refinements."""

from __future__ import annotations

import uuid

import pytest
from google.protobuf import json_format

from a2a_grpc.client import messages
from a2a_grpc.generated import a2a_pb2 as pb


def test_user_message_with_every_part_kind() -> None:
    message = messages.user_message(
        "hello",
        messages.data_part({"n": [1, 2.5, None, True]}),
        messages.file_part(b"\x00\x01", filename="a.bin", media_type="application/octet-stream"),
        messages.url_part("https://example.com/x.pdf", media_type="application/pdf"),
    )
    assert message.role == pb.ROLE_USER
    uuid.UUID(message.message_id)
    kinds = [p.WhichOneof("content") for p in message.parts]
    assert kinds == ["text", "data", "raw", "url"]
    assert message.parts[0].text == "hello"
    assert json_format.MessageToDict(message.parts[1].data) == {"n": [1, 2.5, None, True]}
    assert message.parts[1].media_type == "application/json"
    assert (message.parts[2].raw, message.parts[2].filename) == (b"\x00\x01", "a.bin")
    assert message.parts[3].media_type == "application/pdf"
    assert not message.task_id and not message.context_id


def test_data_part_takes_any_json_value() -> None:
    for value in ("s", 3, [1], None, False):
        part = messages.data_part(value)
        assert json_format.MessageToDict(part.data) == value


def test_every_message_gets_a_fresh_id() -> None:
    ids = {messages.user_message("x").message_id for _ in range(50)}
    assert len(ids) == 50


def test_continue_task_names_the_task_and_context() -> None:
    message = messages.continue_task("t1", "c1", "Ada")
    assert (message.task_id, message.context_id) == ("t1", "c1")
    assert list(message.reference_task_ids) == []


def test_refine_task_starts_a_new_task_in_the_same_context() -> None:
    message = messages.refine_task("t1", "c1", "shorter please")
    assert message.task_id == ""
    assert message.context_id == "c1"
    assert list(message.reference_task_ids) == ["t1"]


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError):
        messages.user_message()
    with pytest.raises(ValueError):
        messages.continue_task("", "c1", "x")
    with pytest.raises(ValueError):
        messages.refine_task("t1", "", "x")
    with pytest.raises((TypeError, ValueError, json_format.ParseError)):
        messages.data_part(object())


def test_send_request_configuration() -> None:
    message = messages.user_message("x")
    bare = messages.send_request(message)
    assert not bare.HasField("configuration")
    configured = messages.send_request(
        message, accepted_output_modes=["text/plain"], history_length=0, return_immediately=True
    )
    assert configured.configuration.HasField("history_length")
    assert configured.configuration.history_length == 0
    assert configured.configuration.return_immediately
    assert list(configured.configuration.accepted_output_modes) == ["text/plain"]
