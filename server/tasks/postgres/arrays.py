"""Array parameters of the store's writes, sent in PostgreSQL's binary array format.

A write passes its events as arrays (their bodies as `bytea[]`, their flags and notification
payloads as `text[]`). psycopg's own list dumpers are Python code that inspects every element
and, in text format, quotes each one; wrapping those lists in `ByteaArray` and `TextArray`
sends them in the binary format instead, built with `struct`. Measured on our task UPDATE
(one event, 16 to a pipelined transaction): 88 us of the client's CPU per write with plain
lists, 53 us with these (tests/load/RESULTS.md).

Contract: the connections of the store use `ADAPTERS` (backend.py) and UTF-8 as their client
encoding, so a `TextArray`'s elements are sent as UTF-8. The arrays are one-dimensional,
never hold NULL and index from 1, as `unnest` and `%s::bytea[]` expect.
"""

from __future__ import annotations

import struct
from typing import Any

import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import Format

__all__ = ["ADAPTERS", "ByteaArray", "TextArray"]

_BYTEA, _BYTEA_ARRAY = 17, 1001
_TEXT, _TEXT_ARRAY = 25, 1009
_EMPTY = struct.Struct("!iiI")  # dimensions (0), has nulls (0), element type
_ONE_DIMENSION = struct.Struct("!iiIii")  # 1, 0, element type, length, lower bound (1)
_LENGTH = struct.Struct("!i")


class ByteaArray(tuple[bytes, ...]):
    """A `bytea[]` parameter."""

    __slots__ = ()


class TextArray(tuple[str, ...]):
    """A `text[]` parameter."""

    __slots__ = ()


def _binary_array(element_type: int, items: tuple[bytes, ...]) -> bytes:
    if not items:
        return _EMPTY.pack(0, 0, element_type)
    parts = [_ONE_DIMENSION.pack(1, 0, element_type, len(items), 1)]
    for item in items:
        parts.append(_LENGTH.pack(len(item)))
        parts.append(item)
    return b"".join(parts)


class _ByteaArrayDumper(Dumper):
    format = Format.BINARY
    oid = _BYTEA_ARRAY

    def dump(self, obj: Any) -> bytes:
        return _binary_array(_BYTEA, obj)


class _TextArrayDumper(Dumper):
    format = Format.BINARY
    oid = _TEXT_ARRAY

    def dump(self, obj: Any) -> bytes:
        return _binary_array(_TEXT, tuple(item.encode() for item in obj))


ADAPTERS = psycopg.adapt.AdaptersMap(psycopg.adapters)
"""psycopg's adapters, and the dumpers of ByteaArray and TextArray."""
ADAPTERS.register_dumper(ByteaArray, _ByteaArrayDumper)
ADAPTERS.register_dumper(TextArray, _TextArrayDumper)
