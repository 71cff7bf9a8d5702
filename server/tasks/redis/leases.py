"""Replica leases in Redis: each replica renews its lease every third of `lease` seconds
(HEARTBEAT); any replica that finds an expired lease claims its reaping (ZREM, so one replica
reaps each) and hands the stopped replica's id to `on_dead` (the store fails the tasks it was
running and goes on with its webhook deliveries: spec decision §9.11). Closing lets this
replica's lease run out at once; `abandon` leaves it to expire, as a crash would.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from a2a_grpc.core.failure_log import FailureLog
from a2a_grpc.server.tasks.base import StoreUnavailableError
from a2a_grpc.server.tasks.redis.backend import STORE_LOGGER, RedisBackend

log = logging.getLogger(STORE_LOGGER)


class Leases:
    """This replica's lease, and the reaping of the others' (see the module docstring)."""

    def __init__(
        self,
        backend: RedisBackend,
        *,
        lease: float,
        on_dead: Callable[[str], Awaitable[None]],
    ) -> None:
        self.backend = backend
        self.lease = lease
        self._on_dead = on_dead
        self._background: list[asyncio.Task[None]] = []
        self.failures = FailureLog(log, "lease renewal", level=logging.ERROR)

    async def start(self) -> None:
        """Renews the lease once (reaping what expired), then keeps renewing it."""
        await self._heartbeat()
        loop = asyncio.get_running_loop()
        self._background.append(loop.create_task(self._keep_lease()))

    async def _keep_lease(self) -> None:
        while not self.backend.closing:
            await asyncio.sleep(self.lease / 3)
            try:
                await self._heartbeat()
            except StoreUnavailableError:
                pass  # counted and logged as the store's outage; the next beat tries again
            except Exception as exc:
                self.failures.failed(f"{type(exc).__name__}: {exc}", traceback=exc)
            else:
                self.failures.recovered()

    async def _heartbeat(self) -> None:
        """Renews this replica's lease, and reaps the replicas whose lease ran out."""
        backend = self.backend
        keys = backend.keys
        now = time.time()
        dead = await backend.run_script(
            "HEARTBEAT",
            [keys.replicas],
            [backend.replica_id, int((now + self.lease) * 1000), int(now * 1000)],
        )
        for replica in dead:
            name = replica.decode()
            if name != backend.replica_id and await backend.call(
                backend.client.zrem(keys.replicas, name)
            ):
                await self._on_dead(name)

    def abandon(self) -> None:
        """Stops renewing the lease (the backend is closing), leaving it to expire."""
        for task in self._background:
            task.cancel()

    async def close(self) -> None:
        """Stops renewing the lease and lets it run out now."""
        self.abandon()
        backend = self.backend
        if self._background:
            # Bounded: a cancel that lands inside a Redis call can be lost on Python 3.11
            # (asyncio.timeout and redis-py's connection handling); the flag ends the loop.
            await asyncio.wait(self._background, timeout=backend.timeout + self.lease)
        self._background.clear()
        with contextlib.suppress(StoreUnavailableError):
            expired = int(time.time() * 1000) - 1
            await backend.call(
                backend.client.zadd(backend.keys.replicas, {backend.replica_id: expired})
            )
