"""Canonical bytes: RFC 8785 (JCS), and the signed forms of a Message and of an AgentCard.

These bytes are what signatures cover, so the exact form is a contract that any implementation
can reproduce:

JCS (`canonicalize`), RFC 8785 over the JSON data model (dict, list/tuple, str, int, float, bool,
None), written by the `rfc8785` package behind a depth guard (see `canonicalize`):
- no whitespace anywhere; the output is UTF-8;
- object members sorted by their names compared as sequences of UTF-16 code units;
- strings: `"` and `\\` escaped as `\\"` and `\\\\`; U+0008, U+0009, U+000A, U+000C, U+000D as
  `\\b \\t \\n \\f \\r`; every other code point below U+0020 as `\\u00xx` (lower-case hex); all
  other characters literal (no `\\u` escapes for non-ASCII, U+007F or U+2028). Unpaired
  surrogates are rejected;
- numbers are IEEE 754 doubles written as ECMAScript `Number.prototype.toString` writes them:
  shortest round-tripping digits, `-0` as `0`, integral values without a fraction (`4.5`, `100`,
  `1e+21`), plain notation for 1e-6 <= |x| < 1e21 (`0.000001`) and exponent form outside it
  (`1e-7`, `1.5e+300`). NaN and the infinities are rejected; so are integers beyond
  ±(2**53 - 1), which a double cannot hold exactly;
- `true`, `false`, `null` as such; nesting deeper than `MAX_DEPTH` is rejected.

Message form (`canonical_message_bytes`), used by the signed-message extension: the JCS of the
message's ProtoJSON exactly as `google.protobuf.json_format.MessageToDict` writes it by default:
lowerCamelCase member names, enums by name, bytes as standard base64, int64 as strings, every
field with its default value (and every unset field) left out. Then, when `without_extension` is
given, `metadata[without_extension]` is removed, and `metadata` itself whenever it is then empty
(also when it was set but empty to begin with). Nothing else is removed: `extensions`,
`referenceTaskIds` and all other metadata are covered. Numbers inside metadata are doubles.

Card form (`canonical_card_bytes`), A2A 1.0 §8.4 card signing: the JCS of the card's ProtoJSON
without `signatures`, where an unset `optional` field is left out, an `optional` field that is set
is kept even at its default value, a field annotated `(google.api.field_behavior) = REQUIRED` is
always present (at its ProtoJSON default, e.g. `"skills":[]`, `"capabilities":{}`, when unset), and
every other default-valued field is left out. Values inside `google.protobuf.Struct` (extension
params) are kept as they are, empty strings and empty containers included.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import rfc8785
from google.api import field_behavior_pb2  # type: ignore[import-untyped]
from google.protobuf import descriptor, json_format, message_factory
from google.protobuf.message import Message as ProtoMessage

from a2a_grpc.generated import a2a_pb2

__all__ = [
    "MAX_DEPTH",
    "CanonicalizationError",
    "canonical_card_bytes",
    "canonical_message_bytes",
    "canonicalize",
    "card_document",
    "format_number",
]

MAX_DEPTH = 128
"""Deepest object/array nesting `canonicalize` accepts (Struct values nest freely)."""

_MAX_EXACT_INT = 2**53 - 1

# The stubs type python and upb descriptors apart; both have the attributes used here.
_Field: TypeAlias = Any


class CanonicalizationError(rfc8785.CanonicalizationError):
    """The value has no RFC 8785 form (NaN, infinity, huge integer, bad key or text, too deep)."""


# rfc8785 (0.1.4) writes the canonical bytes. Measured gaps, both closed here (tests/unit/
# test_canonical.py: test_depth_limit, test_values_without_a_json_form):
# - No depth limit: it recurses once per level, so nesting of ~1000 (the interpreter's recursion
#   limit, less the caller's stack) ends in RecursionError, not its CanonicalizationError; 10,000
#   levels fail after 20-40 ms. Protobuf caps what arrives as a Message or a Struct at JSON depth
#   50 (binary and ProtoJSON parsing alike: 100 message levels, 2-3 per JSON level), but a card's
#   JSON as received (`verify_card(document=...)`) is json.loads output, up to ~980 levels deep,
#   and it would rely on a margin of a couple of stack frames. So `_check_depth` walks the value
#   first, without recursion, and refuses nesting deeper than MAX_DEPTH as the SDK's own JCS does.
# - An object key holding a lone surrogate (JSON text "\udc00" decodes to one) escapes as a bare
#   UnicodeEncodeError from its key sort: it is translated here.
# Number text agrees with the writer this module had before on 250,000 random doubles, ints and
# powers of ten; with the guard it is faster on a typical message (~130 µs against ~200 µs).


def canonicalize(value: Any) -> bytes:
    """The RFC 8785 canonical UTF-8 bytes of a JSON value (dict, list/tuple, str, int, float,
    bool, None). Raises CanonicalizationError for anything without a canonical form."""
    _check_depth(value)
    try:
        return rfc8785.dumps(value)
    except rfc8785.CanonicalizationError as error:
        raise CanonicalizationError(str(error)) from error
    except UnicodeEncodeError as error:
        raise CanonicalizationError("object key contains an unpaired surrogate") from error


def _check_depth(value: Any) -> None:
    pending = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth >= MAX_DEPTH:
            raise CanonicalizationError(f"nesting deeper than {MAX_DEPTH}")
        pending.extend((child, depth + 1) for child in children)


def format_number(value: float | int) -> str:
    """An IEEE 754 double as ECMAScript Number.prototype.toString writes it (RFC 8785 §3.2.2.3)."""
    if isinstance(value, bool):
        raise CanonicalizationError("a bool is not a number")
    if isinstance(value, int) and abs(value) > _MAX_EXACT_INT:
        raise CanonicalizationError(
            f"integer {value} is beyond 2**53 - 1, so no JSON number holds it exactly"
        )
    return canonicalize(float(value)).decode("ascii")


def canonical_message_bytes(
    message: a2a_pb2.Message, *, without_extension: str | None = None
) -> bytes:
    """The message form described in the module docstring."""
    data = json_format.MessageToDict(message)
    if without_extension is not None:
        metadata = data.get("metadata")
        if isinstance(metadata, dict):
            metadata.pop(without_extension, None)
            if not metadata:
                del data["metadata"]
    return canonicalize(data)


def card_document(card: a2a_pb2.AgentCard) -> dict[str, Any]:
    """The card form described in the module docstring with its `signatures` kept: the JSON
    object whose JCS without `signatures` is `canonical_card_bytes`, so that a card served as
    this object carries signatures over exactly what it serves."""
    data = json_format.MessageToDict(card)
    _keep_required(card, data)
    return data


def canonical_card_bytes(card: a2a_pb2.AgentCard) -> bytes:
    """The card form described in the module docstring (A2A 1.0 §8.4)."""
    data = card_document(card)
    data.pop("signatures", None)
    return canonicalize(data)


def _required(field: _Field) -> bool:
    behaviors = field.GetOptions().Extensions[field_behavior_pb2.field_behavior]
    return field_behavior_pb2.REQUIRED in behaviors


def _is_wkt(field: _Field) -> bool:
    """Well-known types (Struct, Timestamp...) have their own JSON form; never walked into."""
    return field.message_type is not None and field.message_type.full_name.startswith(
        "google.protobuf."
    )


def _keep_required(message: ProtoMessage, data: dict[str, Any]) -> None:
    """Adds REQUIRED fields that ProtoJSON left out (at their defaults), at every depth."""
    field: _Field
    for field in message.DESCRIPTOR.fields:
        name = field.json_name
        is_map = field.message_type is not None and field.message_type.GetOptions().map_entry
        if name not in data:
            if field.containing_oneof is None and _required(field):
                data[name] = _default_json(field, is_map)
            continue
        if field.type != descriptor.FieldDescriptor.TYPE_MESSAGE or _is_wkt(field):
            continue
        value = getattr(message, field.name)
        if is_map:
            value_field = field.message_type.fields_by_name["value"]
            if value_field.type == descriptor.FieldDescriptor.TYPE_MESSAGE and not _is_wkt(
                value_field
            ):
                for key, item in value.items():
                    json_key = str(key).lower() if isinstance(key, bool) else str(key)
                    _keep_required(item, data[name][json_key])
        elif field.is_repeated:
            for item, item_data in zip(value, data[name], strict=True):
                _keep_required(item, item_data)
        else:
            _keep_required(value, data[name])


def _default_json(field: _Field, is_map: bool) -> Any:
    if is_map:
        return {}
    if field.is_repeated:
        return []
    kind = field.type
    if kind == descriptor.FieldDescriptor.TYPE_MESSAGE:
        return json_format.MessageToDict(_empty(field)) if _is_wkt(field) else _required_only(field)
    if kind == descriptor.FieldDescriptor.TYPE_ENUM:
        return field.enum_type.values_by_number[0].name
    if kind == descriptor.FieldDescriptor.TYPE_BOOL:
        return False
    if kind in (descriptor.FieldDescriptor.TYPE_STRING, descriptor.FieldDescriptor.TYPE_BYTES):
        return ""
    if kind in _INT64_TYPES:
        return "0"
    return 0


def _empty(field: _Field) -> ProtoMessage:
    return message_factory.GetMessageClass(field.message_type)()


def _required_only(field: _Field) -> dict[str, Any]:
    data: dict[str, Any] = {}
    _keep_required(_empty(field), data)
    return data


_INT64_TYPES = frozenset(
    {
        descriptor.FieldDescriptor.TYPE_INT64,
        descriptor.FieldDescriptor.TYPE_UINT64,
        descriptor.FieldDescriptor.TYPE_SINT64,
        descriptor.FieldDescriptor.TYPE_FIXED64,
        descriptor.FieldDescriptor.TYPE_SFIXED64,
    }
)
