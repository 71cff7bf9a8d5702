"""One PostgreSQL database as the store's parts use it: its connections, round trips bounded in
time, and health. Every part (batch.py, store.py, room.py, reads.py, push.py, leases.py,
claims.py, events.py) takes a `PostgresBackend`; the backend knows none of them.

Contract: every round trip goes through `run` (one connection, autocommit: each statement is
atomic on its own) or `transaction` (one connection, one transaction), bounded by `timeout`: a
refused, broken or slow call raises StoreUnavailableError (retryable) and turns `healthy` off
until a probe gets through again (then the hooks given to `after_outage` run). Nothing is
retried inside: the caller's own retry (our client honours RetryInfo) decides.

A replica that is busy is not facing a database that is down, and stays healthy: declaring an
outage would turn its readiness off under load and refuse every call, reads included. A round
trip that outlives `timeout` is an outage only when the database does not answer a probe on a
connection and thread of their own either (probe.py); otherwise this replica is behind (its
event loop backlogged, or its statement waiting on a lock). A call that waits `timeout` for
one of the connections fails too. Both fail with the same retryable error, leave `healthy` on
and are logged by `busy` (one line as it starts, at most one a minute). And `admit` refuses
new work at once while a round trip has waited `busy_wait` (half the `timeout`) for a
connection, so that the queue drains and the work accepted finishes within its bound: a bound
on the wait rather than on how many wait, since how many a replica serves in time depends on
how fast its database answers.

Why a pool of its own rather than psycopg_pool: a pool that refills in the background makes a
caller wait its whole timeout for a connection while the database is down; here a call that
finds no idle connection connects itself, so a refused connection fails at once (a database
down is a fast UNAVAILABLE). A connection that failed takes every idle one with it (after a
database restart they are all dead), so no later call fails on a stale one.

Why no asyncio cancellation inside psycopg: psycopg answers a cancelled coroutine by sending
the server a cancel request and waiting for it (5 s and more against a hung server). A round
trip that outlives `timeout` instead has its socket shut here: psycopg sees the connection end
at once, and the connection is dropped. A caller cancelled meanwhile (its client went away)
leaves the round trip to finish in the background, and its connection to go back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import psycopg

from a2a_grpc.core.failure_log import FailureLog
from a2a_grpc.core.ids import new_id
from a2a_grpc.server.tasks.base import StoreUnavailableError
from a2a_grpc.server.tasks.postgres.arrays import ADAPTERS
from a2a_grpc.server.tasks.postgres.probe import HealthProbe

STORE_LOGGER = "a2a_grpc.server.tasks.postgres.store"
"""The logger of the store's outages, leases and reaps."""

log = logging.getLogger(STORE_LOGGER)

T = TypeVar("T")
Connection = psycopg.AsyncConnection[Any]


class _CleanupAfterFailure(logging.Filter):
    """psycopg logs a WARNING ("error ignored terminating <AsyncPipeline>", "... in rollback")
    when it cannot end a pipeline or a transaction on a connection that failed, beside the
    error it raises: a round trip this backend shut after its bound, or a database gone, would
    add one or two such lines per call or batch. The backend reports those failures itself,
    one line an episode (FailureLog), so psycopg's lines about that cleanup are dropped; its
    other lines are kept."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and record.msg.startswith("error ignored"))


for _logger in ("psycopg", "psycopg.transaction"):
    logging.getLogger(_logger).addFilter(_CleanupAfterFailure())

MAX_CONNECTIONS = 16
"""Connections one replica opens at most (its round trips beyond wait for one); the event
listener has one more of its own, and the health probe (probe.py) one."""
MAX_IDLE = MAX_CONNECTIONS
"""Idle connections kept for the next round trips: as many as may be open. Under load every
connection is wanted again a moment later; closing those above a lower mark made the store
open a new one (a backend forked and set up on the database) for every few requests."""
BUSY_QUIET = 10.0
"""Seconds without a busy failure before the replica is logged as no longer busy."""
SLOW_CONNECT = 10.0
"""Seconds a connection that no call waits on may take to open (at start, the listener's, the
probe's): a database that refuses fails at once, a slow one gets this long before it counts
as down. A call's own connection is bounded by the call's `timeout`."""


def rolled_back(exc: BaseException) -> bool:
    """Whether the database rolled the statement's transaction back to settle a race it lost
    (SQLSTATE class 40: a deadlock, a serialization failure), which psycopg raises as
    OperationalError like a broken connection."""
    return str(getattr(exc, "sqlstate", None) or "").startswith("40")


class PostgresBackend:
    """Connections, bounded round trips and health of one database (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 2.0,
        replica_id: str | None = None,
        on_health: Callable[[bool], None] | None = None,
        max_connections: int = MAX_CONNECTIONS,
        busy_wait: float | None = None,
    ) -> None:
        self.url = url
        self.timeout = timeout
        self.replica_id = replica_id or new_id()
        self.on_health = on_health
        self.healthy = True
        self.started = False
        self.closing = False
        """Set as the store closes (or is abandoned): the probe and the lease keeper stop."""
        self._idle: list[Connection] = []
        self._slots = asyncio.Semaphore(max_connections)
        self.busy_wait = timeout / 2 if busy_wait is None else busy_wait
        self._waiters: dict[object, float] = {}  # since when each waits, oldest first
        self._last_busy = 0.0  # the event loop's time of the last busy failure
        self._background: set[asyncio.Task[Any]] = set()
        self._probe: asyncio.Task[None] | None = None
        self._after_outage: list[Callable[[], None]] = []
        self.outage = FailureLog(log, "the task store (PostgreSQL)")
        """Its failed round trips, logged quietly and counted (`a2a_store_failures_total`)."""
        self.busy = FailureLog(log, "calls to the task store (PostgreSQL)")
        """Calls that found no connection in time or outlived `timeout` while the database
        answered the probe, and new work refused by `admit`."""
        self.probe = HealthProbe(url, timeout, f"a2a-grpc {self.replica_id} probe")
        self._checking: asyncio.Task[None] | None = None

    @property
    def waiting(self) -> int:
        """Round trips waiting for a connection now."""
        return len(self._waiters)

    def admit(self) -> None:
        """Before new work (a message's claim): StoreUnavailableError (retryable) while the
        round trip that has waited longest for a connection has waited `busy_wait` seconds."""
        if self._waiters:
            self.refuse_after_busy_wait(next(iter(self._waiters.values())), "calls", "a connection")

    def refuse_after_busy_wait(self, since: float, what: str, awaited: str) -> None:
        """`admit`'s rule for any queue: StoreUnavailableError (retryable, logged as busy) when
        its oldest entry, waiting since `since` (the event loop's time), has waited
        `busy_wait` seconds."""
        waited = asyncio.get_running_loop().time() - since
        if waited >= self.busy_wait:
            raise self.busy_failure(f"its {what} wait {waited:.1f} s for {awaited}")

    def _busy_over(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Whether the last busy failure is `BUSY_QUIET` seconds old: under a lasting overload
        a call now and then gets a connection at once, which must not end the episode (a
        WARNING and an INFO line each time it starts and ends again)."""
        return loop.time() - self._last_busy >= BUSY_QUIET

    def busy_failure(self, problem: str) -> StoreUnavailableError:
        """Logs `problem` as this replica being busy (health stays on); the error to raise."""
        self._last_busy = asyncio.get_running_loop().time()
        self.busy.failed(
            f"{problem}: this replica is busy, not the database down; new work and calls that "
            "wait too long fail with UNAVAILABLE"
        )
        return StoreUnavailableError(
            f"the task store (PostgreSQL) is busy here ({problem}); retry shortly"
        )

    def after_outage(self, hook: Callable[[], None]) -> None:
        """Runs `hook` each time the database answers again after an outage."""
        self._after_outage.append(hook)

    # -- connections ----------------------------------------------------------------------

    async def connect(self, bound: float | None = None) -> Connection:
        """A new autocommit connection, within `bound` seconds (default `timeout`; libpq's
        connect_timeout counts whole seconds, at least 2: asyncio's bound is the one that
        holds)."""
        seconds = self.timeout if bound is None else bound
        async with asyncio.timeout(seconds):
            return await psycopg.AsyncConnection.connect(
                self.url,
                autocommit=True,
                context=ADAPTERS,
                client_encoding="utf8",
                connect_timeout=max(2, int(seconds + 0.999)),
                application_name=f"a2a-grpc {self.replica_id}",
            )

    async def _acquire(self) -> Connection:
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed:
                return connection
        return await self.connect()

    def _release(self, connection: Connection, healthy: bool) -> None:
        if (
            healthy
            and not connection.closed
            and connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            and len(self._idle) < MAX_IDLE
            and not self.closing
        ):
            self._idle.append(connection)
            return
        self._discard(connection)

    def _discard(self, connection: Connection) -> None:
        if not connection.closed:
            job = asyncio.get_running_loop().create_task(connection.close())
            self._background.add(job)
            job.add_done_callback(self._background.discard)

    def _drop_idle(self) -> None:
        """After a failure: the idle connections are most likely dead too."""
        idle, self._idle = self._idle, []
        for connection in idle:
            self._discard(connection)

    @staticmethod
    def _shut(connection: Connection) -> None:
        """Ends the connection's socket under psycopg, which then sees it closed at once."""
        with contextlib.suppress(Exception):
            fd = connection.pgconn.socket
            sock = socket.socket(fileno=fd)
            try:
                sock.shutdown(socket.SHUT_RDWR)
            finally:
                sock.detach()

    # -- round trips ----------------------------------------------------------------------

    async def run(self, work: Callable[[Connection], Awaitable[T]]) -> T:
        """`work` on one connection in autocommit mode, bounded by `timeout`."""
        return await self._bounded(work, transaction=False)

    async def transaction(self, work: Callable[[Connection], Awaitable[T]]) -> T:
        """`work` on one connection inside one transaction (committed when it returns, rolled
        back when it raises), bounded by `timeout` as a whole."""
        return await self._bounded(work, transaction=True)

    async def fetchone(self, query: Any, params: Any = None) -> Any:
        """One row of one statement (None when there is none)."""

        async def one(connection: Connection) -> Any:
            cursor = await connection.execute(query, params)
            return await cursor.fetchone()

        return await self.run(one)

    async def fetchall(self, query: Any, params: Any = None) -> list[Any]:
        async def every(connection: Connection) -> list[Any]:
            cursor = await connection.execute(query, params)
            return await cursor.fetchall()

        return await self.run(every)

    async def execute(self, query: Any, params: Any = None) -> None:
        async def once(connection: Connection) -> None:
            await connection.execute(query, params)

        await self.run(once)

    async def _bounded(self, work: Callable[[Connection], Awaitable[T]], transaction: bool) -> T:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        if self._slots.locked():
            await self._wait_for_slot(loop)
        else:
            await self._slots.acquire()  # at once
            if self.busy.failing and not self._waiters and self._busy_over(loop):
                self.busy.recovered("calls get a connection at once again")
        # From here the slot is this call's: given back below, or by `_finish_later`.
        connection: Connection | None = None
        handed_over = False
        reusable = True
        try:
            try:
                connection = await self._acquire()
            except (psycopg.Error, OSError, TimeoutError) as exc:
                raise self._failed("refuses connections", exc) from exc
            job = loop.create_task(self._work(connection, work, transaction))
            try:
                done, _ = await asyncio.wait({job}, timeout=max(0.0, deadline - loop.time()))
            except asyncio.CancelledError:
                # The caller went away: the round trip ends on its own, then gives back its
                # connection and slot.
                self._finish_later(job, connection)
                handed_over = True
                raise
            if not done:
                self._shut(connection)
                reusable = False  # even if its answer made it in: the socket is gone
                with contextlib.suppress(BaseException):
                    await asyncio.wait({job}, timeout=1.0)
                if not job.done():
                    self._finish_later(job, connection, reusable=False)
                    handed_over = True
                elif not job.cancelled():
                    job.exception()  # the shut connection's error: the timeout is the news
                self._check_health("did not answer in time")
                raise self._unavailable("did not answer in time", TimeoutError())
            try:
                result = job.result()
            except (psycopg.OperationalError, psycopg.InterfaceError, OSError) as exc:
                if rolled_back(exc):
                    # A deadlock or serialization race it lost: nothing of it applied, the
                    # database is up, and a retry succeeds.
                    raise self._unavailable("rolled the call back", exc) from exc
                if isinstance(exc, psycopg.errors.QueryCanceled):
                    raise self._failed("canceled a statement", exc) from exc
                raise self._failed("does not answer", exc) from exc
            if not self.healthy:
                self.set_healthy(True)
            return result
        finally:
            # Also when no connection could be had (refused, or the caller went away while it
            # opened): a slot kept then would be lost for good.
            if not handed_over:
                if connection is not None:
                    self._release(connection, healthy=self.healthy and reusable)
                self._slots.release()

    async def _wait_for_slot(self, loop: asyncio.AbstractEventLoop) -> None:
        """Waits up to `timeout` for a connection slot, known to `admit` meanwhile."""
        token = object()
        self._waiters[token] = loop.time()
        try:
            async with asyncio.timeout(self.timeout):
                await self._slots.acquire()
        except TimeoutError:
            raise self.busy_failure(f"no connection was free within {self.timeout:g} s") from None
        finally:
            del self._waiters[token]

    def _finish_later(
        self, job: asyncio.Task[Any], connection: Connection, *, reusable: bool = True
    ) -> None:
        def finished(done: asyncio.Task[Any]) -> None:
            healthy = reusable and not done.cancelled() and done.exception() is None
            self._release(connection, healthy=healthy)
            self._slots.release()

        job.add_done_callback(finished)

    @staticmethod
    async def _work(
        connection: Connection, work: Callable[[Connection], Awaitable[T]], transaction: bool
    ) -> T:
        if not transaction:
            return await work(connection)
        async with connection.transaction():
            return await work(connection)

    # -- health ---------------------------------------------------------------------------

    def _failed(self, problem: str, exc: BaseException) -> StoreUnavailableError:
        """A round trip failed: counted, logged quietly, health off; the error to raise."""
        self._drop_idle()
        self.report_failure(f"{problem} ({type(exc).__name__}: {exc})".replace("\n", " "))
        return self._unavailable(problem, exc)

    @staticmethod
    def _unavailable(problem: str, exc: BaseException) -> StoreUnavailableError:
        """The error a caller gets for a round trip that failed with `exc`."""
        return StoreUnavailableError(
            f"the task store (PostgreSQL) {problem}: {type(exc).__name__}; retry shortly"
        )

    def report_failure(self, problem: str) -> None:
        """One WARNING as an outage starts, at most one line a minute while it lasts
        (core/failure_log.py); health turns off until the database answers again."""
        if not self.started:
            return  # before start(), a failure is start()'s error, not an outage
        self._drop_idle()
        self.outage.failed(f"{problem}; calls fail with UNAVAILABLE")
        self.set_healthy(False)

    def _check_health(self, problem: str) -> None:
        """A round trip outlived `timeout`: an outage only when the database does not answer
        the probe either (probe.py; one check at a time, the calls that time out meanwhile
        wait for its verdict)."""
        if not self.started:
            return
        if self._checking is None or self._checking.done():
            self._checking = asyncio.get_running_loop().create_task(self._probe_after(problem))

    async def _probe_after(self, problem: str) -> None:
        if await self.probe.answers():
            self._last_busy = asyncio.get_running_loop().time()
            self.busy.failed(
                f"a round trip outlived {self.timeout:g} s while the database answers its "
                "health check at once: this replica is busy (its event loop, or a lock its "
                "statement waits on), not the database down; such calls fail with UNAVAILABLE"
            )
        else:
            self.report_failure(problem)

    def set_healthy(self, healthy: bool) -> None:
        if healthy == self.healthy or not self.started:
            return
        self.healthy = healthy
        if healthy:
            self.outage.recovered("answers again")
        elif self._probe is None or self._probe.done():
            self._probe = asyncio.get_running_loop().create_task(self._recover())
        if self.on_health is not None:
            self.on_health(healthy)

    async def _recover(self) -> None:
        """Tries the database until it takes a new connection and answers on it (there is no
        event to wait on for a server coming back; an old connection may still answer while
        the server shuts down), then runs the `after_outage` hooks."""
        while not self.healthy and not self.closing:
            try:
                async with self.dedicated(keep=True) as connection, asyncio.timeout(self.timeout):
                    await connection.execute("SELECT 1")
            except (StoreUnavailableError, psycopg.Error, OSError, TimeoutError):
                await asyncio.sleep(min(1.0, self.timeout / 2))
                continue
            self.set_healthy(True)
        if self.closing:
            return
        for hook in self._after_outage:
            hook()

    @contextlib.asynccontextmanager
    async def dedicated(self, *, keep: bool = False) -> AsyncIterator[Connection]:
        """A connection of its own for the caller (the listener, the probe, start and
        migrations), closed after; it may take `SLOW_CONNECT` seconds to open. With `keep`,
        one that served without an error is kept for the next round trips instead: the
        probe's, so that the first calls after an outage need not open one within their
        `timeout` (on a loaded machine, a new connection can take longer than a short one)."""
        try:
            connection = await self.connect(max(self.timeout, SLOW_CONNECT))
        except (psycopg.Error, OSError, TimeoutError) as exc:
            raise self._failed("refuses connections", exc) from exc
        try:
            yield connection
        except BaseException:
            self._discard(connection)
            raise
        if keep:
            self._release(connection, healthy=True)
        else:
            self._discard(connection)

    async def start(self) -> None:
        """Checks that the database takes a connection (StoreUnavailableError otherwise) and
        keeps it for the first round trips; from now on a failure is an outage.

        The connection may take `SLOW_CONNECT` seconds to open, as nothing waits on it yet;
        the start-up's own round trips (the first lease renewal) then use it rather than
        opening one within a call's `timeout`, which a database busy forking for other
        replicas' connections can miss (a replica restarted under load failed to start so)."""
        try:
            connection = await self.connect(max(self.timeout, SLOW_CONNECT))
        except (psycopg.Error, OSError, TimeoutError) as exc:
            raise self._failed("refuses connections", exc) from exc
        self._release(connection, healthy=True)
        self.probe.warm()
        self.started = True

    def stop_probe(self) -> None:
        if self._probe is not None:
            self._probe.cancel()

    async def close(self) -> None:
        """Closes the idle connections (the parts using the backend have stopped)."""
        self.closing = True
        self.probe.close()
        if self._checking is not None:
            self._checking.cancel()
        idle, self._idle = self._idle, []
        for connection in idle:
            with contextlib.suppress(Exception):
                await connection.close()
        if self._background:
            await asyncio.wait(set(self._background), timeout=self.timeout)
