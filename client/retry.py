"""Client-side retry for calls gRPC cannot retry by itself: full-jitter backoff, one deadline.

Retried: "could not talk" errors (`A2ATransportError`), and errors the server marked retryable
in their ErrorInfo (e.g. RESOURCE_EXHAUSTED), waiting at least the RetryInfo delay it gave. An
A2A error is the agent's answer and is raised at once. The caller makes every attempt identical
(SendMessage keeps its message_id, so a server that deduplicates returns the original outcome,
spec §3.3.1).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from a2a_grpc.client.errors import A2ATransportError, DeadlineExceededError
from a2a_grpc.core.errors import StatusError

T = TypeVar("T")

Sleep = Callable[[float], Awaitable[None]]
Random = Callable[[], float]
Clock = Callable[[], float]


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try. `deadline_s` bounds all attempts and sleeps together (None: no bound).

    `max_attempts=1` disables retries.
    """

    max_attempts: int = 5
    """Attempts in all, the first included (for stream resumption: resubscriptions in a row
    that bring nothing new); at least 1, and 1 turns retries off."""
    initial_backoff_s: float = 0.2
    """Seconds: the upper bound of the random wait before the first retry (full jitter)."""
    max_backoff_s: float = 5.0
    """Seconds: the most that bound grows to (a retried call still waits at least the delay a
    server's RetryInfo asks for)."""
    multiplier: float = 2.0
    """The factor the bound grows by from one retry to the next; at least 1."""
    deadline_s: float | None = None
    """Seconds all attempts and waits together may take; None: no bound. For `send_message`
    a timeout of the call or the client, when set, takes its place; for stream resumption it
    is the window after each drop."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.initial_backoff_s < 0 or self.max_backoff_s < 0 or self.multiplier < 1:
            raise ValueError("backoffs must be non-negative and the multiplier at least 1")

    def backoff(self, retry: int, rand: Random = random.random) -> float:
        """Full jitter: uniform in [0, min(max_backoff, initial * multiplier**retry))."""
        ceiling = min(self.max_backoff_s, self.initial_backoff_s * self.multiplier**retry)
        return ceiling * rand()


def is_retryable(error: BaseException) -> bool:
    """Could not talk, or the server said in ErrorInfo that trying again can help."""
    if isinstance(error, A2ATransportError):
        return True
    return isinstance(error, StatusError) and error.retryable


@dataclass(frozen=True)
class Backoff:
    """The injectable time sources retry and stream resumption use (tests pass fakes)."""

    sleep: Sleep = asyncio.sleep
    """Waits the given seconds (`asyncio.sleep`)."""
    rand: Random = random.random
    """A uniform random number in [0, 1), the jitter (`random.random`)."""
    clock: Clock = time.monotonic
    """Seconds on a monotonic clock, for deadlines (`time.monotonic`)."""


class Attempts:
    """The retry decisions of one call under `policy`, with `deadline_s` (else the policy's) as
    the one deadline for all its attempts and sleeps. A blocking SendMessage and a streaming
    send that fails before its first event share it, so both retry alike."""

    def __init__(
        self, policy: RetryPolicy, *, deadline_s: float | None = None, backoff: Backoff = Backoff()
    ) -> None:
        budget = deadline_s if deadline_s is not None else policy.deadline_s
        self._policy = policy
        self._backoff = backoff
        self._deadline = None if budget is None else backoff.clock() + budget
        self.made = 0
        """Attempts made so far (counted by `remaining`)."""

    def remaining(self) -> float | None:
        """Counts an attempt about to be made; the seconds left for it before the deadline (None
        when unbounded). DeadlineExceededError when nothing is left."""
        remaining = None if self._deadline is None else self._deadline - self._backoff.clock()
        if remaining is not None and remaining <= 0:
            raise DeadlineExceededError("the overall deadline expired before the call was made")
        self.made += 1
        return remaining

    def delay_after(self, error: A2ATransportError | StatusError) -> float | None:
        """Seconds to wait before the next attempt after `error`; None (give up) when it is not
        retryable, the attempts are used up, or the wait would overrun the deadline."""
        policy = self._policy
        if not is_retryable(error) or self.made >= policy.max_attempts:
            return None
        delay = policy.backoff(self.made - 1, self._backoff.rand)
        if isinstance(error, StatusError) and error.retry_delay is not None:
            delay = max(delay, error.retry_delay)
        if self._deadline is not None and self._backoff.clock() + delay >= self._deadline:
            return None
        return delay


async def call_with_retry(
    attempt: Callable[[float | None], Awaitable[T]],
    policy: RetryPolicy,
    *,
    deadline_s: float | None = None,
    backoff: Backoff = Backoff(),
) -> T:
    """`await attempt(remaining_s)` until it succeeds, fails with a non-transport error, runs out
    of attempts, or would overrun the deadline (`deadline_s`, else the policy's).

    `remaining_s` is the time left before the overall deadline, for the attempt's own timeout
    (None when unbounded). The last transport error is raised when retries are exhausted.
    """
    attempts = Attempts(policy, deadline_s=deadline_s, backoff=backoff)
    while True:
        remaining = attempts.remaining()
        try:
            return await attempt(remaining)
        except (A2ATransportError, StatusError) as error:
            delay = attempts.delay_after(error)
            if delay is None:
                raise
            await backoff.sleep(delay)
