"""Ends of runs the task store could not write, written once it answers again.

A run whose end (COMPLETED, FAILED, ...) meets a store that is down settles all the same, so
that its callers are answered; its task stays in the store as last written, under this
process's lease. Without a second attempt it would stay so for as long as this process runs
(another replica fails a task only when the lease of the process running it runs out). Such
ends wait here, one per task, and are written when the store's backend reports that it answers
again (`StoreEvents.health_changed`), or `RETRY_AFTER` seconds after the last attempt (a busy
store fails a write without an outage, so no recovery is reported then). The store has logged
its failure once, so nothing is logged per task. A process that stops first leaves them to
the lease failover, and says how many in one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from a2a_grpc.server.tasks.base import StoreUnavailableError

if TYPE_CHECKING:
    from a2a_grpc.server.protocol.run import TaskRun

log = logging.getLogger(__name__)

RETRY_AFTER = 5.0
"""Seconds between two attempts when the store reports no recovery meanwhile."""


class UnrecordedEnds:
    """The ends waiting for the store, by task id: (run, state, status text)."""

    def __init__(self) -> None:
        self._ends: dict[str, tuple[TaskRun, int, str | None]] = {}
        self._writer: asyncio.Task[None] | None = None
        self._recovered = asyncio.Event()
        self._closed = False
        self.empty = asyncio.Event()
        """Set while no end waits."""
        self.empty.set()

    def __len__(self) -> int:
        return len(self._ends)

    def add(self, run: TaskRun, state: int, text: str | None) -> None:
        """`run` settled without its end (`state`, `text`) written."""
        if self._closed:  # a run whose stop outlived the drain: nobody writes it now
            self._left_to_failover(1)
            return
        self._ends[run.task_id] = (run, state, text)
        self.empty.clear()
        self._write()

    def store_recovered(self) -> None:
        """The store answers again: the waiting ends are written now."""
        self._recovered.set()
        self._write()

    def _write(self) -> None:
        if self._ends and (self._writer is None or self._writer.done()):
            self._writer = asyncio.get_running_loop().create_task(self._write_all())

    async def _write_all(self) -> None:
        """Writes the ends in the background (one writer at a time) until none is left; after
        a failure, again at the store's recovery or after `RETRY_AFTER`."""
        while self._ends:
            self._recovered.clear()
            for task_id, (run, state, text) in list(self._ends.items()):
                try:
                    await run.record_end(state, text)
                except StoreUnavailableError:
                    break  # the rest at the next attempt
                except Exception:
                    log.exception("could not record the end of task %s", task_id)
                del self._ends[task_id]
            else:
                continue  # all written, but some may have come meanwhile
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(RETRY_AFTER):
                    await self._recovered.wait()
        self.empty.set()

    async def close(self) -> None:
        """Stops a write in progress; the ends left are the lease failover's, and one line
        says how many (the server is stopping: nothing else would tell). A run whose stop
        outlived the drain and ends after this gets a line of its own."""
        self._closed = True
        writer, self._writer = self._writer, None
        if writer is not None and not writer.done():
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)
        if self._ends:
            self._left_to_failover(len(self._ends))
            self._ends.clear()

    @staticmethod
    def _left_to_failover(count: int) -> None:
        log.warning(
            "could not record the end of %d task%s, the task store being unavailable: "
            "another replica fails %s once this one's lease has run out",
            count,
            "" if count == 1 else "s",
            "it" if count == 1 else "them",
        )
