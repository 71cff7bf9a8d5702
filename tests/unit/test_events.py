"""Decoding responses from bytes and ProtoJSON: exactly one payload member."""

from __future__ import annotations

import pytest

from a2a_grpc.client import events
from a2a_grpc.core.errors import InvalidAgentResponseError
from a2a_grpc.generated import a2a_pb2 as pb

TASK = pb.Task(id="t1", context_id="c1", status=pb.TaskStatus(state=pb.TASK_STATE_WORKING))
MESSAGE = pb.Message(message_id="m1", role=pb.ROLE_AGENT, parts=[pb.Part(text="hi")])


def test_one_payload_decodes() -> None:
    raw = pb.StreamResponse(task=TASK).SerializeToString()
    assert events.decode_stream_response(raw).task == TASK
    raw = pb.SendMessageResponse(message=MESSAGE).SerializeToString()
    assert events.decode_send_message_response(raw).message == MESSAGE


def test_two_payloads_on_the_wire_are_detected() -> None:
    # Concatenated encodings = one message with both oneof members; the parser keeps the last.
    raw = (
        pb.StreamResponse(task=TASK).SerializeToString()
        + pb.StreamResponse(message=MESSAGE).SerializeToString()
    )
    assert pb.StreamResponse.FromString(raw).WhichOneof("payload") == "message"
    with pytest.raises(InvalidAgentResponseError, match="2 payloads: message, task"):
        events.decode_stream_response(raw)
    raw = (
        pb.SendMessageResponse(task=TASK).SerializeToString()
        + pb.SendMessageResponse(message=MESSAGE).SerializeToString()
    )
    with pytest.raises(InvalidAgentResponseError, match="2 payloads"):
        events.decode_send_message_response(raw)


@pytest.mark.parametrize("size", [1, 200, 20_000], ids=["1-byte", "2-byte", "3-byte"])
def test_two_payloads_are_detected_whatever_the_first_ones_length(size: int) -> None:
    """The first payload's length takes 1 to 3 bytes; the second still shows."""
    big = pb.Task(id="t1", context_id="c" * size)
    raw = (
        pb.StreamResponse(task=big).SerializeToString()
        + pb.StreamResponse(message=MESSAGE).SerializeToString()
    )
    with pytest.raises(InvalidAgentResponseError, match="2 payloads: message, task"):
        events.decode_stream_response(raw)
    one = pb.StreamResponse(task=big).SerializeToString()
    assert events.decode_stream_response(one).task == big


def test_the_same_member_twice_is_a_legal_merge() -> None:
    raw = pb.StreamResponse(task=TASK).SerializeToString() * 2
    assert events.decode_stream_response(raw).task.id == "t1"


def test_unknown_fields_are_ignored() -> None:
    unknown = bytes([0xA0, 0x06, 0x01])  # field 100, varint 1
    raw = pb.StreamResponse(task=TASK).SerializeToString() + unknown
    assert events.decode_stream_response(raw).task.id == "t1"


@pytest.mark.parametrize("raw", [b"", b"\xa0\x06\x01"], ids=["empty", "only-unknown"])
def test_no_payload_is_an_error(raw: bytes) -> None:
    with pytest.raises(InvalidAgentResponseError, match="no payload"):
        events.decode_stream_response(raw)


@pytest.mark.parametrize("raw", [b"\x0a\x05ab", b"\xff\xff\xff", b"\x0b"], ids=["short", "v", "g"])
def test_garbage_is_an_error(raw: bytes) -> None:
    with pytest.raises(InvalidAgentResponseError, match="malformed"):
        events.decode_stream_response(raw)


def test_push_payload_json() -> None:
    event = events.stream_response_from_json(
        '{"statusUpdate": {"taskId": "t1", "contextId": "c1",'
        ' "status": {"state": "TASK_STATE_COMPLETED"}}, "someFutureField": 1}'
    )
    assert event.status_update.status.state == pb.TASK_STATE_COMPLETED
    with pytest.raises(InvalidAgentResponseError):
        events.stream_response_from_json('{"task": {"id": "t1"}, "message": {"messageId": "m1"}}')
    with pytest.raises(InvalidAgentResponseError, match="no payload"):
        events.stream_response_from_json("{}")
    with pytest.raises(InvalidAgentResponseError):
        events.stream_response_from_json("not json")


def test_a_stream_event_of_an_unknown_kind_is_named() -> None:
    # A StreamResponse of a newer version: a payload member at a field number 1.0 lacks.
    newer = b"\x4a\x03\x0a\x01x"  # field 9, length-delimited
    assert events.stream_event(newer) == events.UnknownEvent("field 9")
    assert events.stream_event(pb.StreamResponse(task=TASK).SerializeToString()).task == TASK
    with pytest.raises(InvalidAgentResponseError, match="no payload"):
        events.stream_event(b"")  # nothing at all is no event
    both = pb.StreamResponse(task=TASK).SerializeToString() + newer
    assert events.stream_event(both).task == TASK  # a known payload: the rest is ignored


def test_a_json_stream_event_of_an_unknown_kind_is_named() -> None:
    newer = {"taskGenerationUpdate": {"taskId": "t1", "generation": 2}}
    assert events.stream_event_from_json(newer) == events.UnknownEvent("taskGenerationUpdate")
    known = {"task": {"id": "t1", "contextId": "c1", "generation": 2}, "futureMember": 1}
    assert events.stream_event_from_json(known) == pb.StreamResponse(
        task=pb.Task(id="t1", context_id="c1")
    )
    for broken in ({}, [], {"task": {"id": 5}}):
        with pytest.raises(InvalidAgentResponseError):
            events.stream_event_from_json(broken)
