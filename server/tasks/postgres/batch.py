"""Group commit: the writes of concurrent calls share one transaction, one round trip and one
commit (`WriteBatch.fetchone`, used by the writes every message makes: its claim, its task's
reservation, creation and updates).

Contract: a write through the batch has the effect and the result of `backend.fetchone` on
its own: one row or None, or the error that statement raises alone. What changes is when
it commits, and with what:
- A write that finds no write under way runs at once, alone, in autocommit mode, as before.
- Writes that arrive while a batch runs wait for it, then run together (up to `max_batch`)
  in one transaction sent as one pipeline: the statements, then one Sync, which commits
  them together (PostgreSQL's implicit transaction: no BEGIN or COMMIT, and one round trip
  rather than the two psycopg's `transaction()` takes in a pipeline). A caller learns its
  result after the commit, so nothing it reports is undone later.
- When one statement of a batch fails, the transaction rolls back and every write of the
  batch runs again alone, so that only the failing one gets its error (a lost version race
  is no error: its statement returns no row). A batch the database does not answer fails
  every write in it with the backend's retryable StoreUnavailableError, as a round trip
  would; none of them applied, or (timed out) any of them may still apply, as for one write.
- One batch runs at a time per replica. Its writes are independent (each is one call's), so
  any order is theirs: a batch runs them in the order every writer takes rows in (`order`:
  message-id claims by digest, then task creations by id, then the other writes of task rows
  by id, then reservations, whose room count row every other writer also takes after its task
  rows; a task is created by the replica that reserved it and written by none other until
  then, so no row is a creation in one batch and an update in another), and the writes of one
  statement go to the database together (`_same_statement`). No count row is shared by writers
  of the same scope (schema.py, version 2). Batches of several replicas therefore do not
  deadlock on each other; should one lose a deadlock all the same, it rolls back and its
  writes run again alone.
- A write that waited the backend's `timeout` for its batch fails unwritten with the
  retryable busy error, and `admit` refuses new messages while the oldest write has waited
  `busy_wait` (as for calls waiting for a connection, backend.py): a write waits at most
  `timeout` for its batch, then its batch's round trip is bounded by `timeout` too. A write
  whose caller went away before its batch formed is not written.

Why: on one core, a SendMessage cost about 3.5 ms of CPU on PostgreSQL, most of it spent per
round trip and per commit rather than per row: 16 connections each writing our task UPDATE
alone cost 540 us of CPU per write (client and server), the same writes 8 to a transaction
and pipeline 185 us (tests/load/RESULTS.md).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

import psycopg

from a2a_grpc.server.tasks.base import StoreUnavailableError
from a2a_grpc.server.tasks.postgres.backend import Connection, PostgresBackend, rolled_back
from a2a_grpc.server.tasks.postgres.sets import GENERIC_PLANS, SetStatement

MAX_BATCH = 32
"""Writes one transaction takes at most: a batch holds its rows' locks until it commits."""

CLAIM = "0"
"""`order` of a message-id claim: CLAIM + its digest."""
CREATE = "1"
"""`order` of a task's creation: CREATE + its id."""
UPDATE = "2"
"""`order` of a write of a created task's row: UPDATE + its id."""
ROOM = "3"
"""`order` of a reservation (the room's count row, after any task row), and of a new task's
claim with its room: ROOM + its digest."""


class _Write:
    __slots__ = ("order", "params", "query", "result", "since")

    def __init__(
        self,
        query: str | SetStatement,
        params: Any,
        order: str,
        result: asyncio.Future[Any],
        since: float,
    ) -> None:
        self.query = query
        self.params = params
        self.order = order
        self.result = result
        self.since = since

    def settle(self, row: Any = None, error: BaseException | None = None) -> None:
        if self.result.done():  # its caller went away; the write ran all the same
            return
        if error is None:
            self.result.set_result(row)
        else:
            self.result.set_exception(error)


class _StatementFailed(Exception):
    """A statement of a batch failed on the database's side (the batch rolled back)."""


class WriteBatch:
    """Concurrent writes in shared transactions (see the module docstring)."""

    def __init__(self, backend: PostgresBackend, *, max_batch: int = MAX_BATCH) -> None:
        self.backend = backend
        self.max_batch = max_batch
        self._waiting: deque[_Write] = deque()
        self._writing = False
        """A write is under way (alone, in its caller's task, or the runner's batches)."""
        self._runner: asyncio.Task[None] | None = None

    @property
    def waiting(self) -> int:
        """Writes waiting for a batch now."""
        return len(self._waiting)

    def admit(self) -> None:
        """Before new work (a message's claim): the backend's `admit`, and StoreUnavailableError
        (retryable) while the oldest write waiting for a batch has waited `busy_wait`."""
        self.backend.admit()
        if self._waiting:
            self.backend.refuse_after_busy_wait(self._waiting[0].since, "writes", "a batch")

    async def fetchone(self, query: str | SetStatement, params: Any, order: str) -> Any:
        """The statement's one row (None when it returns none), written with whatever other
        writes wait meanwhile; `order` places it in its batch (CLAIM, CREATE, UPDATE, ROOM).
        For a SetStatement (sets.py), `params` is the write's item, and the row its own."""
        if not self._writing:
            # Nothing to share with: written in the caller's own task, with no hand-over to a
            # runner task, so that a lone write costs what it did before batching. Writes that
            # arrive meanwhile wait for the runner started after it.
            self._writing = True
            try:
                return await _alone(self.backend, query, params)
            finally:
                self._next()
        loop = asyncio.get_running_loop()
        write = _Write(query, params, order, loop.create_future(), loop.time())
        self._waiting.append(write)
        return await write.result

    def _next(self) -> None:
        """After a write: the runner takes the writes that wait, if any."""
        if self._waiting:
            self._runner = asyncio.get_running_loop().create_task(self._run())
        else:
            self._writing = False

    async def _run(self) -> None:
        try:
            while self._waiting:
                batch = self._take()
                if len(batch) == 1:
                    await self._alone(batch[0])
                elif batch:
                    await self._together(batch)
        finally:
            self._runner = None
            self._writing = False

    def _take(self) -> list[_Write]:
        """The next batch, in row order. A write whose caller went away is dropped unwritten,
        as a call cancelled while it waits for a connection is; one that waited `timeout`
        fails unwritten, as this replica being busy."""
        now = asyncio.get_running_loop().time()
        batch: list[_Write] = []
        stale: list[_Write] = []
        while self._waiting and len(batch) < self.max_batch:
            write = self._waiting.popleft()
            if write.result.done():
                continue
            if now - write.since >= self.backend.timeout:
                stale.append(write)
            else:
                batch.append(write)
        if stale:
            error = self.backend.busy_failure(
                f"writes waited {self.backend.timeout:g} s for a batch"
            )
            for write in stale:
                write.settle(error=StoreUnavailableError(*error.args))
        batch.sort(key=_order)
        return batch

    async def _alone(self, write: _Write) -> None:
        try:
            row = await _alone(self.backend, write.query, write.params)
        except Exception as exc:
            write.settle(error=exc)
        else:
            write.settle(row)

    async def _together(self, batch: list[_Write]) -> None:
        async def run(connection: Connection) -> list[Any]:
            try:
                # Autocommit: what a pipeline sends before its one Sync is one transaction.
                async with connection.pipeline():
                    await connection.execute(GENERIC_PLANS)
                    cursors = []
                    for group in _same_statement(batch):
                        query = group[0].query
                        items = [write.params for write in group]
                        if isinstance(query, SetStatement):
                            cursor = await connection.execute(query.sql, query.params(items))
                        else:
                            cursor = connection.cursor()
                            await cursor.executemany(query, items, returning=True)
                        cursors.append((cursor, query, len(group)))
                rows: list[Any] = []
                for cursor, query, results in cursors:
                    if isinstance(query, SetStatement):
                        rows.extend(query.rows(await cursor.fetchall()))
                        continue
                    rows.append(await cursor.fetchone())
                    for _ in range(results - 1):
                        cursor.nextset()
                        rows.append(await cursor.fetchone())
                if len(rows) != len(batch):
                    raise RuntimeError(f"a batch of {len(batch)} writes was answered {len(rows)}")
                return rows
            except psycopg.Error as exc:
                if _statement_failed(exc):
                    raise _StatementFailed() from exc
                raise

        try:
            rows = await self.backend.run(run)
        except _StatementFailed:
            await asyncio.gather(*(self._alone(write) for write in batch))
        except StoreUnavailableError as exc:
            for write in batch:
                write.settle(error=StoreUnavailableError(*exc.args))
        except Exception as exc:
            for write in batch:
                write.settle(error=exc)
        else:
            for write, row in zip(batch, rows, strict=True):
                write.settle(row)


def _order(write: _Write) -> str:
    return write.order


async def _alone(backend: PostgresBackend, query: str | SetStatement, params: Any) -> Any:
    if isinstance(query, SetStatement):
        statement = query

        async def alone(connection: Connection) -> Any:
            return await statement.alone(connection, params)

        return await backend.run(alone)
    return await backend.fetchone(query, params)


def _same_statement(batch: list[_Write]) -> list[list[_Write]]:
    """The batch's runs of writes of one statement, in order: each goes to the database as one
    statement (a SetStatement's, sets.py), or as one `executemany` (one cursor, the statement
    converted once: 9 us less of the client's CPU per write than an `execute` each, on our
    task UPDATE, RESULTS.md)."""
    groups: list[list[_Write]] = []
    for write in batch:
        if groups and groups[-1][0].query == write.query:
            groups[-1].append(write)
        else:
            groups.append([write])
    return groups


def _statement_failed(exc: psycopg.Error) -> bool:
    """Whether the database refused a statement (its own error, or the batch lost a deadlock
    or a serialization race), rather than the connection or the server failing."""
    if rolled_back(exc):
        return True
    return exc.sqlstate is not None and not isinstance(
        exc, psycopg.OperationalError | psycopg.InterfaceError
    )
