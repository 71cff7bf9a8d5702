"""Whether PostgreSQL itself answers, asked apart from this replica's own traffic to it.

A round trip can outlive the store's bound while the database answers others at once: this
replica is behind (its event loop is backlogged on a busy core, or its statement waits on a
lock), not the database down. Taking that for an outage would turn the store's health off, end
every stream and restart the listener, and fail readiness, which makes the backlog worse. The
probe asks the database `SELECT 1` on a connection of its own, from a thread of its own, timed
there: its answer waits behind neither the event loop nor the replica's connections, so only a
database that does not answer it within the store's bound is down.

A database that hangs (it takes the bytes and never answers) would keep the probe's thread in
psycopg's blocking read: `answers` bounds the wait on the event loop's side, then shuts the
probe connection's socket, so the thread is freed and the next probe connects afresh.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg


class HealthProbe:
    """Asks the database at `url` `SELECT 1` on its own connection and thread; `answers()`
    says whether it answered within `timeout` seconds."""

    def __init__(self, url: str, timeout: float, application_name: str) -> None:
        self.url = url
        self.timeout = timeout
        self.application_name = application_name
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="a2a-postgres-probe")
        self._lock = threading.Lock()
        self._connection: psycopg.Connection[tuple[object, ...]] | None = None

    async def answers(self) -> bool:
        """Whether the database answered within the timeout, as the probe's thread timed it."""
        ask = asyncio.get_running_loop().run_in_executor(self._executor, self._ask)
        try:
            return await asyncio.wait_for(ask, self.timeout + 1.0)
        except TimeoutError:  # it hangs: free the thread for the next probe
            self._shut()
            return False

    def warm(self) -> None:
        """Opens the probe's connection in its thread, without waiting: a check under load
        then asks on an open connection rather than one the busy database must fork."""
        self._executor.submit(self._connected)

    def _connected(self) -> psycopg.Connection[tuple[object, ...]] | None:
        try:
            connection = self._connection
            if connection is None or connection.closed:
                connection = psycopg.connect(
                    self.url,
                    autocommit=True,
                    connect_timeout=max(2, int(self.timeout + 0.999)),
                    application_name=self.application_name,
                )
                with self._lock:
                    self._connection = connection
            return connection
        except Exception:
            return None

    def _ask(self) -> bool:
        began = time.monotonic()
        for _ in range(2):  # a connection kept from before a restart of the database: once more
            connection = self._connected()
            if connection is None:
                return False
            try:
                connection.execute("SELECT 1")
            except Exception:  # refused, broken, shut by `answers`: any way of not answering
                self._drop()
                continue
            return time.monotonic() - began <= self.timeout
        return False

    def _shut(self) -> None:
        with self._lock:
            connection = self._connection
        if connection is None:
            return
        with contextlib.suppress(Exception):
            sock = socket.socket(fileno=connection.pgconn.socket)
            try:
                sock.shutdown(socket.SHUT_RDWR)
            finally:
                sock.detach()

    def _drop(self) -> None:
        with self._lock:
            connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                connection.close()

    def close(self) -> None:
        """Closes its connection (shut first, should a probe be waiting on it); never waits."""
        self._shut()
        self._executor.submit(self._drop)
        self._executor.shutdown(wait=False)
