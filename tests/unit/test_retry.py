"""SendMessage retry: only could-not-talk errors, full-jitter backoff, one overall deadline."""

from __future__ import annotations

import grpc
import pytest

from a2a_grpc.client.errors import (
    CallCancelledError,
    DeadlineExceededError,
    RpcFailedError,
    UnavailableError,
)
from a2a_grpc.client.retry import Backoff, RetryPolicy, call_with_retry
from a2a_grpc.core.errors import InvalidParamsError, TaskNotFoundError


class FakeTime:
    """A clock that only moves when the code under test sleeps."""

    def __init__(self, rand: float = 1.0) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []
        self.rand_value = rand

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def backoff(self) -> Backoff:
        return Backoff(sleep=self.sleep, rand=lambda: self.rand_value, clock=lambda: self.now)


class Script:
    """An attempt function that raises the scripted errors, then returns "ok"."""

    def __init__(self, *errors: Exception, cost: float = 0.0, time: FakeTime | None = None) -> None:
        self.errors = list(errors)
        self.remaining: list[float | None] = []
        self.cost = cost
        self.time = time

    async def __call__(self, remaining: float | None) -> str:
        self.remaining.append(remaining)
        if self.time is not None:
            self.time.now += self.cost
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


async def test_retries_transport_errors_until_success() -> None:
    time = FakeTime()
    attempt = Script(
        UnavailableError("down"), DeadlineExceededError("slow"), CallCancelledError("x")
    )
    assert await call_with_retry(attempt, RetryPolicy(), backoff=time.backoff()) == "ok"
    assert len(attempt.remaining) == 4
    assert attempt.remaining == [None] * 4  # no deadline: attempts are unbounded


@pytest.mark.parametrize(
    "error",
    [
        TaskNotFoundError("gone"),
        InvalidParamsError("bad"),
        RpcFailedError(grpc.StatusCode.UNIMPLEMENTED, "no such method"),
    ],
    ids=["task-not-found", "invalid-params", "rpc-failed"],
)
async def test_never_retries_an_answer(error: Exception) -> None:
    time = FakeTime()
    attempt = Script(error)
    with pytest.raises(type(error)):
        await call_with_retry(attempt, RetryPolicy(), backoff=time.backoff())
    assert len(attempt.remaining) == 1
    assert time.sleeps == []


async def test_full_jitter_backoff_grows_and_is_capped() -> None:
    policy = RetryPolicy(max_attempts=6, initial_backoff_s=1.0, max_backoff_s=5.0, multiplier=2.0)
    time = FakeTime(rand=1.0)  # rand() -> 1.0 shows each ceiling
    attempt = Script(*[UnavailableError("down")] * 5)
    await call_with_retry(attempt, policy, backoff=time.backoff())
    assert time.sleeps == [1.0, 2.0, 4.0, 5.0, 5.0]
    jittered = FakeTime(rand=0.25)
    await call_with_retry(
        Script(*[UnavailableError("down")] * 3), policy, backoff=jittered.backoff()
    )
    assert jittered.sleeps == [0.25, 0.5, 1.0]


async def test_gives_up_after_max_attempts_with_the_last_error() -> None:
    time = FakeTime()
    last = UnavailableError("third")
    attempt = Script(UnavailableError("1"), UnavailableError("2"), last)
    with pytest.raises(UnavailableError) as raised:
        await call_with_retry(attempt, RetryPolicy(max_attempts=3), backoff=time.backoff())
    assert raised.value is last
    assert len(time.sleeps) == 2


async def test_one_overall_deadline_bounds_attempts_and_sleeps() -> None:
    time = FakeTime(rand=1.0)
    policy = RetryPolicy(max_attempts=100, initial_backoff_s=1.0, max_backoff_s=1.0)
    attempt = Script(*[UnavailableError("down")] * 100, cost=0.5, time=time)
    with pytest.raises(UnavailableError):
        await call_with_retry(attempt, policy, deadline_s=4.0, backoff=time.backoff())
    # Each attempt gets what is left of the one deadline, and no sleep crosses it.
    assert attempt.remaining[0] == 4.0
    assert attempt.remaining[1] == 2.5
    assert time.now - 100.0 <= 4.0
    assert all(r is not None and r > 0 for r in attempt.remaining)


async def test_policy_deadline_applies_when_the_call_gives_none() -> None:
    time = FakeTime()
    attempt = Script()
    await call_with_retry(attempt, RetryPolicy(deadline_s=7.0), backoff=time.backoff())
    assert attempt.remaining == [7.0]


async def test_expired_deadline_makes_no_call() -> None:
    time = FakeTime()
    attempt = Script()
    with pytest.raises(DeadlineExceededError):
        await call_with_retry(attempt, RetryPolicy(), deadline_s=0.0, backoff=time.backoff())
    assert attempt.remaining == []


def test_policy_validation() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError):
        RetryPolicy(multiplier=0.5)
