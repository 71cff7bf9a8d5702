"""Decoding agent responses from the wire (bytes) or a webhook (ProtoJSON), payload checks included.

A protobuf parser keeps only the last member of a oneof, so a response carrying two payload
members (say `task` and `message`) looks valid once parsed. These decoders read the raw bytes'
top-level field numbers first, which is the only place the second member is still visible;
for the HTTP bindings' JSON the same check is on the object's keys (`payload_from_json`), before
ProtoJSON parsing. Zero members is checked on the parsed message.

A stream event whose only members are ones this client does not know (JSON keys, or protobuf
field numbers, that A2A 1.0's StreamResponse lacks) is an event of a newer kind: it decodes to
`UnknownEvent`, which `follow` skips and counts, as the official SDK's client skips it. An
event with no member at all is still InvalidAgentResponseError.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message

from a2a_grpc.core.errors import InvalidAgentResponseError
from a2a_grpc.generated import a2a_pb2

_PayloadMessage = TypeVar("_PayloadMessage", a2a_pb2.StreamResponse, a2a_pb2.SendMessageResponse)
_Parsed = TypeVar("_Parsed", bound=Message)
_KIND_CHARS = 64
"""The most of an unknown kind's name kept (the server chooses it)."""
_STREAM_MEMBERS = frozenset(
    name
    for field in a2a_pb2.StreamResponse.DESCRIPTOR.fields
    for name in (field.name, field.json_name)
)
"""Every name a StreamResponse member has in ProtoJSON (camelCase and the proto's)."""


@dataclass(frozen=True)
class UnknownEvent:
    """A stream event of a kind this client does not know (a newer A2A version's): `kind` is
    its JSON member (`taskGenerationUpdate`) or its protobuf field (`field 9`)."""

    kind: str


def stream_event(raw: bytes) -> a2a_pb2.StreamResponse | UnknownEvent:
    """A StreamResponse with exactly one payload member, or an UnknownEvent when it has no
    field this client knows but some it does not; InvalidAgentResponseError otherwise."""
    try:
        return _decode(a2a_pb2.StreamResponse, raw)
    except InvalidAgentResponseError:
        numbers = _field_numbers_or_none(raw)
        known = a2a_pb2.StreamResponse.DESCRIPTOR.fields_by_number
        if not numbers or any(number in known for number in numbers):
            raise
        return UnknownEvent(f"field {min(numbers)}")


def stream_event_from_json(value: object) -> a2a_pb2.StreamResponse | UnknownEvent:
    """A StreamResponse from its ProtoJSON object (as an HTTP binding streams it), with exactly
    one payload member, or an UnknownEvent for an object whose members this client knows none
    of; InvalidAgentResponseError otherwise."""
    if isinstance(value, dict) and value and _STREAM_MEMBERS.isdisjoint(value):
        return UnknownEvent(str(next(iter(value)))[:_KIND_CHARS])
    return payload_from_json(a2a_pb2.StreamResponse, value)


def decode_stream_response(raw: bytes) -> a2a_pb2.StreamResponse:
    """A StreamResponse with exactly one payload member, or InvalidAgentResponseError."""
    return _decode(a2a_pb2.StreamResponse, raw)


def decode_send_message_response(raw: bytes) -> a2a_pb2.SendMessageResponse:
    """A SendMessageResponse with exactly one payload member, or InvalidAgentResponseError."""
    return _decode(a2a_pb2.SendMessageResponse, raw)


def stream_response_from_json(text: str | bytes) -> a2a_pb2.StreamResponse:
    """A push-notification body (ProtoJSON StreamResponse) with exactly one payload member.

    Unknown fields are ignored (spec §5.7); anything else malformed is InvalidAgentResponseError.
    """
    event = a2a_pb2.StreamResponse()
    try:
        json_format.Parse(text, event, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError) as error:
        raise InvalidAgentResponseError(f"malformed StreamResponse JSON: {error}") from error
    require_one_payload(event)
    return event


def payload_from_json(cls: type[_Parsed], value: object) -> _Parsed:
    """A StreamResponse or SendMessageResponse from its ProtoJSON object (as an HTTP binding
    returns it), with exactly one payload member, or InvalidAgentResponseError. Unknown members
    are ignored (spec §5.7)."""
    name = cls.DESCRIPTOR.name
    if not isinstance(value, dict):
        raise InvalidAgentResponseError(f"{name} is not a JSON object")
    members = [
        field.name
        for field in cls.DESCRIPTOR.oneofs_by_name["payload"].fields
        if field.json_name in value or field.name in value
    ]
    if len(members) > 1:
        raise InvalidAgentResponseError(f"{name} has {len(members)} payloads: {', '.join(members)}")
    return message_from_json(cls, value)


def message_from_json(cls: type[_Parsed], value: Any) -> _Parsed:
    """`cls` parsed from a ProtoJSON value, unknown members ignored; InvalidAgentResponseError
    when it is not one (and, for a payload message, when no payload member is set)."""
    message = cls()
    try:
        json_format.ParseDict(value, message, ignore_unknown_fields=True)
    except (json_format.ParseError, TypeError, ValueError, RecursionError) as error:
        raise InvalidAgentResponseError(f"malformed {cls.DESCRIPTOR.name} JSON: {error}") from error
    if "payload" in cls.DESCRIPTOR.oneofs_by_name:
        require_one_payload(message)
    return message


def require_one_payload(message: Message) -> str:
    """The name of the set `payload` member; InvalidAgentResponseError when none is set."""
    member: str | None = message.WhichOneof("payload")
    if member is None:
        raise InvalidAgentResponseError(f"{type(message).__name__} has no payload")
    return member


def decode_payload(cls: type[_Parsed], raw: bytes) -> _Parsed:
    """Any message with a `payload` oneof (A2A 0.3's StreamResponse, say) from its bytes, with
    exactly one payload member, or InvalidAgentResponseError."""
    return _decode(cls, raw)


_PAYLOAD_NUMBERS: dict[type[Message], frozenset[int]] = {}
"""Each payload message class's `payload` field numbers, read from its descriptor once."""


def _payload_numbers(cls: type[Message]) -> frozenset[int]:
    numbers = _PAYLOAD_NUMBERS.get(cls)
    if numbers is None:
        fields = cls.DESCRIPTOR.oneofs_by_name["payload"].fields
        numbers = _PAYLOAD_NUMBERS[cls] = frozenset(field.number for field in fields)
    return numbers


def _decode(cls: type[_Parsed], raw: bytes) -> _Parsed:
    try:
        message = cls.FromString(raw)
        fields = frozenset() if _one_field(raw) else _top_level_field_numbers(raw)
    except (DecodeError, ValueError) as error:
        raise InvalidAgentResponseError(f"malformed {cls.DESCRIPTOR.name}: {error}") from error
    if len(fields) > 1:
        payload_numbers = _payload_numbers(cls) & fields
        if len(payload_numbers) > 1:
            name = cls.DESCRIPTOR.name
            members = sorted(cls.DESCRIPTOR.fields_by_number[n].name for n in payload_numbers)
            raise InvalidAgentResponseError(
                f"{name} has {len(members)} payloads: {', '.join(members)}"
            )
    if message.WhichOneof("payload") is None:
        require_one_payload(message)  # raises, naming the message
    return message


def _one_field(raw: bytes) -> bool:
    """Whether `raw` is exactly one length-delimited field with a one-byte key: a response with
    its one payload, as it nearly always comes, told apart without the full scan."""
    end = len(raw)
    if end < 2 or raw[0] & 0x87 != 2:  # a key below 128, of wire type 2
        return False
    length = shift = 0
    for pos in range(1, min(end, 6)):
        byte = raw[pos]
        length |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return pos + 1 + length == end
        shift += 7
    return False


def _field_numbers_or_none(raw: bytes) -> set[int]:
    try:
        return _top_level_field_numbers(raw)
    except ValueError:
        return set()


def _top_level_field_numbers(raw: bytes) -> set[int]:
    numbers: set[int] = set()
    pos = 0
    while pos < len(raw):
        key, pos = _varint(raw, pos)
        wire_type = key & 7
        if wire_type == 0:
            _, pos = _varint(raw, pos)
        elif wire_type == 1:
            pos += 8
        elif wire_type == 2:
            length, pos = _varint(raw, pos)
            pos += length
        elif wire_type == 5:
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wire_type}")
        if pos > len(raw):
            raise ValueError("truncated field")
        numbers.add(key >> 3)
    return numbers


def _varint(raw: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while pos < len(raw) and shift < 64:
        byte = raw[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    raise ValueError("truncated varint")
