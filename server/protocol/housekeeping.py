"""Housekeeping: what runs on a timer and at shutdown rather than per call. Expiring tasks that
waited for input too long, finished tasks past their TTL and message ids past the dedup window,
stopping agents that report nothing for too long, and draining the runs when the server stops.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping

from a2a_grpc.core.failure_log import FailureLog
from a2a_grpc.server.agent import agent_message
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.protocol.dedup import Idempotency
from a2a_grpc.server.protocol.run import TaskRun
from a2a_grpc.server.tasks.base import StoreUnavailableError, TaskStore
from a2a_grpc.server.trust.audit import AuditLog

log = logging.getLogger(__name__)

CANCEL_SETTLE_S = 5.0
"""Seconds a shutdown waits for the agents it cancelled to end (their tasks to be stored)."""


class Housekeeping:
    """The sweeps of one handler's store and idempotency window, and its drain."""

    def __init__(
        self,
        config: ServerConfig,
        *,
        store: TaskStore,
        dedup: Idempotency,
        audit: AuditLog | None,
        active: Mapping[str, TaskRun],
        runners: set[asyncio.Task[None]],
    ) -> None:
        self.config = config
        self.store = store
        self.dedup = dedup
        self.audit = audit
        self.active = active
        self.runners = runners
        self._housekeeper: asyncio.Task[None] | None = None
        self._agent_watch: asyncio.Task[None] | None = None
        self._quiet: dict[TaskRun, tuple[int, float]] = {}
        """Each unsettled run's count of reported events when last seen to change, and when."""
        self.failures = FailureLog(log, "housekeeping (expiring tasks)", level=logging.ERROR)
        """Sweeps that failed for another reason than the store being down (those the store
        counts): the first with its traceback, then at most a line a minute."""

    def start(self) -> None:
        """Starts the timer that expires tasks and message ids on time, also on an idle server
        (otherwise they would only go when new work arrives). Call on the server's loop, after
        the store's `start`."""
        loop = asyncio.get_running_loop()
        if self._housekeeper is None:
            self._housekeeper = loop.create_task(self._keep_house())
        if self._agent_watch is None and self.config.agent_inactivity_timeout > 0:
            self._agent_watch = loop.create_task(self._watch_agents())

    @property
    def sweep_interval(self) -> float:
        """Seconds between sweeps: a quarter of the shortest lifetime, within 10 ms .. 1 s."""
        config = self.config
        shortest = min(config.task_ttl, config.interrupted_ttl, config.dedup_window)
        return min(1.0, max(0.01, shortest / 4))

    async def _keep_house(self) -> None:
        while True:
            await asyncio.sleep(self.sweep_interval)
            await self.sweep_once()

    @property
    def watch_interval(self) -> float:
        """Seconds between looks at the runs for silent agents: a quarter of the timeout,
        within 10 ms .. 1 s (a run is stopped at most this long after its timeout)."""
        return min(1.0, max(0.01, self.config.agent_inactivity_timeout / 4))

    async def _watch_agents(self) -> None:
        while True:
            await asyncio.sleep(self.watch_interval)
            self.watch_agents(time.monotonic())

    def watch_agents(self, now: float) -> None:
        """Stops (`TaskRun.time_out`) each run whose agent has reported nothing for
        `agent_inactivity_timeout` seconds as of `now`: its count of reported events has not
        moved since then. A run is first seen at most `watch_interval` after it starts, and an
        event at most that long before the look that notices it, so a silent run is stopped
        between the timeout and the timeout plus `watch_interval` after its last event.
        One pass over the unsettled runs: no timer per run."""
        timeout = self.config.agent_inactivity_timeout
        quiet = self._quiet
        watched: dict[TaskRun, tuple[int, float]] = {}
        for run in self.active.values():
            count = run.events_reported
            seen = quiet.get(run)
            if seen is None or seen[0] != count:
                watched[run] = (count, now)
            elif now - seen[1] >= timeout:
                run.time_out(timeout)  # it settles at once: not watched any more
            else:
                watched[run] = seen
        self._quiet = watched

    async def sweep_once(self) -> None:
        """One `sweep` as the timer runs it: a failure is logged quietly and never stops the
        next sweeps; one because the store is down is not logged here (the store logs its
        outage)."""
        try:
            await self.sweep()
        except StoreUnavailableError:
            return
        except Exception as exc:
            self.failures.failed(f"{type(exc).__name__}: {exc}", traceback=exc)
        else:
            self.failures.recovered()

    async def sweep(self) -> None:
        """Cancels tasks that waited for input longer than `interrupted_ttl`, drops finished
        tasks past `task_ttl` and message ids past the dedup window."""
        store = self.store
        for task_id in await store.parked_longer_than(self.config.interrupted_ttl):
            await self._expire_parked(task_id)
        await store.evict_expired()
        self.dedup.expire(time.monotonic())

    async def _expire_parked(self, task_id: str) -> None:
        text = (
            f"canceled: no answer arrived within {self.config.interrupted_ttl:g} s of a request "
            "for input; start a new task, listing this one in reference_task_ids"
        )
        message = agent_message(text, context_id="", task_id=task_id)  # the store sets it
        scope = await self.store.cancel_parked(task_id, message)
        if scope is not None and self.audit is not None:
            self.audit.canceled(task_id, scope.owner, scope.tenant)

    async def drain(self, grace: float) -> None:
        """Shutdown: lets running agents finish within `grace` seconds, those started meanwhile
        too, then cancels them (their tasks end as the store's `stopped_run_status` says:
        CANCELED, or FAILED saying the replica stopped on a store other replicas share) and
        waits up to CANCEL_SETTLE_S for them to end."""
        if self._housekeeper is not None:
            self._housekeeper.cancel()
            self._housekeeper = None
        if self._agent_watch is not None:
            self._agent_watch.cancel()
            self._agent_watch = None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while (pending := self._running()) and (left := deadline - loop.time()) > 0:
            await asyncio.wait(pending, timeout=left)
        pending = self._running()
        if not pending:
            return
        # How the store ends a task whose run a stop cuts short: FAILED saying the replica
        # stopped when other replicas serve it next (spec decision §9.11), else CANCELED.
        outcome = self.store.stopped_run_status
        for run in self.active.values():
            run.stop_outcome = outcome
        for runner in pending:
            runner.add_done_callback(self.runners.discard)  # if it is cancelled before it began
            runner.cancel()
        await asyncio.wait(pending, timeout=CANCEL_SETTLE_S)

    def _running(self) -> set[asyncio.Task[None]]:
        """The runs' tasks not done yet (a run takes its task out of `runners` as it ends)."""
        return {runner for runner in self.runners if not runner.done()}
