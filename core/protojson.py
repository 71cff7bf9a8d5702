"""Reading a request from its ProtoJSON, with the members its message types do not know ignored.

A2A 1.0.1 §5.7: "Implementations SHOULD ignore unrecognized fields in messages, allowing for
forward compatibility as the protocol evolves" (the TCK's DM-SERIAL-005); A2A 1.1 adds fields
such as `generation` on Task and the update events, which 1.1 callers send. protobuf's
`json_format` parses (there is no other JSON parser here); this module only finds the members
it would refuse as unknown, names them (`Task.generation`: the message type that lacks the
member, and the member as sent) and leaves them out, so that the caller can count them.

Only unknown *members* are ignored. A known member with a value of the wrong type, an enum
name the type does not have, or a malformed timestamp is still refused: it is not a newer
field, it is a wrong one. `json_format`'s own `ignore_unknown_fields` would also drop unknown
enum names silently, which is why it is not used here.
"""

from __future__ import annotations

from functools import cache
from typing import Any, TypeVar, cast

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

ParseError = json_format.ParseError
_Parsed = TypeVar("_Parsed", bound=Message)
_OPAQUE_PACKAGE = "google.protobuf."
"""Well-known types (Struct, Value, Timestamp, ...) have JSON forms of their own, with no
members to find: `Struct` and `Value` hold any JSON, and are never pruned."""


def parse(value: Any, cls: type[_Parsed], *, ignore_unknown: bool) -> tuple[_Parsed, list[str]]:
    """`cls` from the ProtoJSON `value`, and the names of the unknown members left out (none
    when `ignore_unknown` is off: they are refused then, as `json_format` refuses them).

    Raises `ParseError` (or TypeError / ValueError / RecursionError, as `json_format` does)
    for what is not a `cls`. The common case, nothing unknown, is one `json_format` parse; only
    a request `json_format` refuses is looked at member by member.
    """
    message = cls()
    try:
        json_format.ParseDict(value, message)
    except (ParseError, TypeError, ValueError):
        if not ignore_unknown:
            raise
        known, unknown = without_unknown(value, cast(Descriptor, cls.DESCRIPTOR))
        if not unknown:
            raise  # a wrong value, not an unknown member
    else:
        return message, []
    message = cls()
    json_format.ParseDict(known, message)  # what it refuses now is wrong, not unknown
    return message, unknown


def without_unknown(value: Any, descriptor: Descriptor) -> tuple[Any, list[str]]:
    """`value` with every member that `descriptor`'s message (or a message nested in it) does
    not know left out, and their names (`Type.member`, in the order met). A value that is not
    shaped as the message expects is kept as it is, for `json_format` to refuse."""
    unknown: list[str] = []
    return _prune(value, descriptor, unknown), unknown


def _prune(value: Any, descriptor: Descriptor, unknown: list[str]) -> Any:
    if not isinstance(value, dict) or descriptor.full_name.startswith(_OPAQUE_PACKAGE):
        return value
    fields = _fields(descriptor)
    kept: dict[str, Any] = {}
    for key, item in value.items():
        field = fields.get(key)
        if field is None:
            unknown.append(f"{descriptor.name}.{key}")
            continue
        kept[key] = _prune_field(item, field, unknown)
    return kept


def _prune_field(item: Any, field: FieldDescriptor, unknown: list[str]) -> Any:
    message_type = field.message_type
    if message_type is None:
        return item
    if message_type.GetOptions().map_entry:
        values = message_type.fields_by_name["value"].message_type
        if values is None or not isinstance(item, dict):
            return item
        return {key: _prune(entry, values, unknown) for key, entry in item.items()}
    if field.is_repeated:
        if not isinstance(item, list):
            return item
        return [_prune(entry, message_type, unknown) for entry in item]
    return _prune(item, message_type, unknown)


@cache
def _fields(descriptor: Descriptor) -> dict[str, FieldDescriptor]:
    """A message's fields by every name `json_format` reads them under: the JSON name
    (camelCase) and the proto name."""
    return {
        **{field.name: field for field in descriptor.fields},
        **{field.json_name: field for field in descriptor.fields},
    }
