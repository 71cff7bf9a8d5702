"""Replica leases in PostgreSQL: each replica renews its lease (`a2a_replicas`) every third of
`lease` seconds; any replica that finds an expired lease claims its reaping by deleting its
row (one DELETE wins) and hands the stopped replica's id to `on_dead` (the store fails the
tasks it was running and goes on with its webhook deliveries: spec decision §9.11). Expiry is
judged by the database's clock, so the replicas' clocks need not agree. Closing lets this
replica's lease run out at once; `abandon` leaves it to expire, as a crash would.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from a2a_grpc.core.failure_log import FailureLog
from a2a_grpc.server.tasks.base import StoreUnavailableError
from a2a_grpc.server.tasks.postgres.backend import STORE_LOGGER, PostgresBackend

log = logging.getLogger(STORE_LOGGER)

_HEARTBEAT = """
WITH renewed AS (
    INSERT INTO a2a_replicas VALUES (%(me)s, clock_timestamp() + make_interval(secs => %(lease)s))
    ON CONFLICT (id) DO UPDATE SET expires_at = EXCLUDED.expires_at
)
SELECT id FROM a2a_replicas WHERE expires_at < clock_timestamp() AND id <> %(me)s
"""


class Leases:
    """This replica's lease, and the reaping of the others' (see the module docstring)."""

    def __init__(
        self,
        backend: PostgresBackend,
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
        self._background.append(asyncio.get_running_loop().create_task(self._keep_lease()))

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
        backend = self.backend
        expired = await backend.fetchall(
            _HEARTBEAT, {"me": backend.replica_id, "lease": self.lease}
        )
        for (replica,) in expired:
            claimed = await backend.fetchone(
                "DELETE FROM a2a_replicas WHERE id = %s AND expires_at < clock_timestamp() "
                "RETURNING id",
                (replica,),
            )
            if claimed is not None:
                await self._on_dead(replica)

    def abandon(self) -> None:
        """Stops renewing the lease, leaving it to expire."""
        for task in self._background:
            task.cancel()

    async def close(self) -> None:
        """Stops renewing the lease and lets it run out now."""
        self.abandon()
        if self._background:
            await asyncio.wait(self._background, timeout=self.backend.timeout + self.lease)
        self._background.clear()
        with contextlib.suppress(StoreUnavailableError):
            await self.backend.execute(
                "UPDATE a2a_replicas SET expires_at = clock_timestamp() - interval '1 ms' "
                "WHERE id = %s",
                (self.backend.replica_id,),
            )
