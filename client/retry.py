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
    initial_backoff_s: float = 0.2
    max_backoff_s: float = 5.0
    multiplier: float = 2.0
    deadline_s: float | None = None

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
    rand: Random = random.random
    clock: Clock = time.monotonic


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
    budget = deadline_s if deadline_s is not None else policy.deadline_s
    deadline = None if budget is None else backoff.clock() + budget
    retry = 0
    while True:
        remaining = None if deadline is None else deadline - backoff.clock()
        if remaining is not None and remaining <= 0:
            raise DeadlineExceededError("the overall deadline expired before the call was made")
        try:
            return await attempt(remaining)
        except (A2ATransportError, StatusError) as error:
            if not is_retryable(error) or retry + 1 >= policy.max_attempts:
                raise
            delay = policy.backoff(retry, backoff.rand)
            if isinstance(error, StatusError) and error.retry_delay is not None:
                delay = max(delay, error.retry_delay)
            if deadline is not None and backoff.clock() + delay >= deadline:
                raise
            retry += 1
            await backoff.sleep(delay)
