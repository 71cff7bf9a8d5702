"""Array parameters of the store's writes, sent in PostgreSQL's binary array format.

The writes pass their values as arrays, one element per write or per event (`sets.py`).
psycopg's own list dumpers are Python code that inspects every element and, in text format,
quotes each one; wrapping a sequence in one of the classes below (`TextArray`, `ByteaArray`,
`Int8Array`, `Int4Array`, `Float8Array`, `BoolArray`) sends it in the binary format instead,
built with `struct`. Measured on our task UPDATE (one event, 16 to a pipelined transaction):
88 us of the client's CPU per write with plain lists, 53 us with these (tests/load/RESULTS.md).

Contract: the connections of the store use `ADAPTERS` (backend.py) and UTF-8 as their client
encoding, so a `TextArray`'s elements are sent as UTF-8. The arrays are one-dimensional and
index from 1, as `unnest` and `%s::bytea[]` expect; None is NULL.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import Format

__all__ = [
    "ADAPTERS",
    "BoolArray",
    "ByteaArray",
    "Float8Array",
    "Int4Array",
    "Int8Array",
    "TextArray",
]

_EMPTY = struct.Struct("!iiI")  # dimensions (0), has nulls (0), element type
_ONE_DIMENSION = struct.Struct("!iiIii")  # 1, has nulls, element type, length, lower bound 1
_LENGTH = struct.Struct("!i")
_NULL = _LENGTH.pack(-1)


def _fixed(layout: str) -> Callable[[Any], bytes]:
    packed = struct.Struct("!i" + layout)
    size = packed.size - 4
    return lambda value: packed.pack(size, value)


def _variable(encode: Callable[[Any], bytes]) -> Callable[[Any], bytes]:
    def element(value: Any) -> bytes:
        data = encode(value)
        return _LENGTH.pack(len(data)) + data

    return element


class _Array(tuple[Any, ...]):
    __slots__ = ()
    element_type = 0
    """The element type's OID."""
    element: Callable[[Any], bytes] = staticmethod(bytes)
    """One element as the format has it: its length, then its bytes."""

    def binary(self) -> bytes:
        if not self:
            return _EMPTY.pack(0, 0, self.element_type)
        element = self.element
        parts = [b""]
        has_null = 0
        for item in self:
            if item is None:
                has_null = 1
                parts.append(_NULL)
            else:
                parts.append(element(item))
        parts[0] = _ONE_DIMENSION.pack(1, has_null, self.element_type, len(self), 1)
        return b"".join(parts)


class TextArray(_Array):
    """A `text[]` parameter."""

    __slots__ = ()
    element_type = 25
    element = staticmethod(_variable(str.encode))


class ByteaArray(_Array):
    """A `bytea[]` parameter."""

    __slots__ = ()
    element_type = 17
    element = staticmethod(_variable(bytes))


class Int8Array(_Array):
    """A `bigint[]` parameter."""

    __slots__ = ()
    element_type = 20
    element = staticmethod(_fixed("q"))


class Int4Array(_Array):
    """An `integer[]` parameter."""

    __slots__ = ()
    element_type = 23
    element = staticmethod(_fixed("i"))


class Float8Array(_Array):
    """A `double precision[]` parameter."""

    __slots__ = ()
    element_type = 701
    element = staticmethod(_fixed("d"))


class BoolArray(_Array):
    """A `boolean[]` parameter."""

    __slots__ = ()
    element_type = 16
    element = staticmethod(_fixed("?"))


def _dumper(array: type[_Array], array_type: int) -> type[Dumper]:
    class ArrayDumper(Dumper):
        format = Format.BINARY
        oid = array_type

        def dump(self, obj: Any) -> bytes:
            return obj.binary()  # type: ignore[no-any-return]

    ArrayDumper.__name__ = f"{array.__name__}Dumper"
    return ArrayDumper


ADAPTERS = psycopg.adapt.AdaptersMap(psycopg.adapters)
"""psycopg's adapters, and the dumpers of the arrays above."""
for _array, _array_type in (
    (TextArray, 1009),
    (ByteaArray, 1001),
    (Int8Array, 1016),
    (Int4Array, 1007),
    (Float8Array, 1022),
    (BoolArray, 1000),
):
    ADAPTERS.register_dumper(_array, _dumper(_array, _array_type))
