"""Quiet logs for failures that repeat: one line when a thing starts failing, at most one a
minute while it goes on, one when it works again, and a count of every failure for metrics."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

REPEAT_INTERVAL = 60.0
"""Seconds between two lines about one failure that goes on."""


class FailureLog:
    """How one component's failures are logged (a Redis store, an audit file, a webhook receiver).

    `failed` logs the first failure of an outage at `level` (with the exception's traceback
    only when `traceback` is asked for: a known outage such as StoreUnavailableError needs
    none), then at most one line every `interval` seconds saying how many failures came since
    the last line; `recovered` logs one INFO line, with how long the outage lasted and how many
    failures it had, and ends the outage. `failures` counts every failure ever, for metrics.
    Safe to call from any thread (the audit writer runs on its own).
    """

    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        *,
        level: int = logging.WARNING,
        interval: float = REPEAT_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = logger
        self.what = what
        """What fails, as the lines name it (e.g. "the task store (Redis)")."""
        self._level = level
        self._interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self.failures = 0
        """Failures counted since the start (every one, logged or not)."""
        self._since: float | None = None  # when the outage began; None: no outage
        self._outage_failures = 0
        self._last_line = 0.0
        self._unlogged = 0

    @property
    def failing(self) -> bool:
        """Whether an outage is going on (a failure came and no recovery since)."""
        return self._since is not None

    def failed(self, problem: str, *, traceback: BaseException | None = None) -> None:
        """Counts one failure, `problem` saying what went wrong; logs it as the class says."""
        with self._lock:
            now = self._clock()
            self.failures += 1
            self._outage_failures += 1
            if self._since is None:
                self._since = self._last_line = now
                self._unlogged = 0
                first = True
            elif now - self._last_line >= self._interval:
                first = False
                count, self._unlogged = self._unlogged + 1, 0
                self._last_line = now
            else:
                self._unlogged += 1
                return
        if first:
            self._log.log(self._level, "%s: %s", self.what, problem, exc_info=traceback)
        else:
            self._log.log(
                self._level,
                "%s still fails: %s (%d failures in the last %.0f s)",
                self.what,
                problem,
                count,
                self._interval,
            )

    def recovered(self, note: str | None = "works again") -> None:
        """Ends an outage with one INFO line saying `note` (no line when None; nothing at all
        when there was no outage)."""
        with self._lock:
            if self._since is None:
                return
            lasted = self._clock() - self._since
            failures, self._outage_failures = self._outage_failures, 0
            self._since = None
        if note is not None:
            self._log.info("%s %s after %.1f s (%d failures)", self.what, note, lasted, failures)
