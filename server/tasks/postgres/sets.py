"""Statements that write a run of writes at once: one statement, one round of psycopg's work
and one execution in PostgreSQL for the writes of many calls (batch.py runs them).

A `SetStatement` takes one item per write and makes one statement of any number of them: its
`sql` takes arrays (arrays.py) with one element per write, and answers one row per write, in
their order, whose first column says whether the write found its row: `rows` gives each write
its columns after that one, or None where it wrote nothing (a version that moved). A write alone
is the same statement with one item, so each write has one statement, whether batched or not.

Why: on one core, an `executemany` of our task UPDATE cost 42 us of the client's CPU and 51 us
of PostgreSQL's per write, 16 writes to a pipelined transaction; one statement over arrays for
the 16 cost 29 and 35 (tests/load/RESULTS.md): psycopg converts, sends and reads one statement
rather than 16, and PostgreSQL binds and starts one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from a2a_grpc.server.tasks.postgres.arrays import (
    BoolArray,
    ByteaArray,
    Float8Array,
    Int4Array,
    Int8Array,
    TextArray,
)
from a2a_grpc.server.tasks.postgres.backend import Connection

__all__ = ["ARRAYS", "GENERIC_PLANS", "FunctionRows", "SetStatement"]

ARRAYS: dict[str, type[tuple[Any, ...]]] = {
    "text": TextArray,
    "bytea": ByteaArray,
    "bigint": Int8Array,
    "integer": Int4Array,
    "double precision": Float8Array,
    "boolean": BoolArray,
}
"""The array parameter of each element type a set statement takes."""


GENERIC_PLANS = (
    "SELECT set_config('plan_cache_mode', 'force_generic_plan', true),"
    " set_config('enable_seqscan', 'off', true)"
)
"""Sent first in every transaction that runs a set statement, for that transaction only.
- Given the arrays' contents, PostgreSQL finds a custom plan cheaper than the generic one
  every time, and so plans these statements of many common table expressions anew on every
  execution (0 generic plans of 12 executions of our task UPDATE): 0.3-0.4 ms of its CPU each.
- A plan is kept for the connection's life: one made while the tables were small scanned
  a2a_tasks whole for each UPDATE, still once they held thousands of rows (4.9 ms for 9
  writes, auto_explain). Every table these statements read has the index they need, so none
  is scanned whole whatever its size then.
The reads keep PostgreSQL's choices."""


class SetStatement(ABC):
    """A statement over arrays, one element per write (see the module docstring)."""

    sql: str

    @abstractmethod
    def params(self, items: Sequence[Any]) -> Any:
        """The statement's parameters for `items`, one per write."""

    @staticmethod
    def rows(rows: Sequence[Sequence[Any]]) -> list[Any]:
        """Each write's row (its columns after `found`), or None where it wrote nothing."""
        return [tuple(row[1:]) if row[0] else None for row in rows]

    async def one(self, connection: Connection, item: Any) -> Any:
        """The statement for one write, on `connection`, inside its caller's transaction."""
        await connection.execute(GENERIC_PLANS)
        cursor = await connection.execute(self.sql, self.params([item]))
        return self.rows(await cursor.fetchall())[0]

    async def alone(self, connection: Connection, item: Any) -> Any:
        """The statement for one write, on `connection` in autocommit mode: one transaction
        sent as one pipeline (what it sends before its Sync is one implicit transaction)."""
        async with connection.pipeline():
            await connection.execute(GENERIC_PLANS)
            cursor = await connection.execute(self.sql, self.params([item]))
        return self.rows(await cursor.fetchall())[0]


class FunctionRows(SetStatement):
    """Calls a function of the schema once per write, in the writes' order, each with its
    write's arguments (a tuple of `types`); each write's row is the function's result."""

    def __init__(self, function: str, types: Sequence[str], columns: str) -> None:
        self.arrays = tuple(ARRAYS[name] for name in types)
        arguments = ", ".join(f"a.c{number}" for number in range(len(types)))
        names = ", ".join(f"c{number}" for number in range(len(types)))
        placeholders = ", ".join(f"%s::{name}[]" for name in types)
        self.sql = (
            f"SELECT true, {columns} FROM unnest({placeholders}) WITH ORDINALITY AS a({names}, i)"
            f" CROSS JOIN LATERAL {function}({arguments}) AS f ORDER BY a.i"
        )

    def params(self, items: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(
            array(item[number] for item in items) for number, array in enumerate(self.arrays)
        )
