"""Quiet logs of repeated failures (core/failure_log.py), on a clock the test moves."""

from __future__ import annotations

import logging

import pytest

from a2a_grpc.core.failure_log import FailureLog


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(record.levelname, record.getMessage()) for record in caplog.records]


def test_an_outage_is_one_line_then_one_a_minute_then_one_when_it_ends(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    failures = FailureLog(logging.getLogger("test.outage"), "the thing", clock=clock)
    caplog.set_level(logging.INFO, "test.outage")
    failures.failed("does not answer")
    for _ in range(100):  # a second apart: within the minute, nothing more is said
        clock.now += 0.5
        failures.failed("does not answer")
    assert lines(caplog) == [("WARNING", "the thing: does not answer")]
    clock.now += 10  # 60 s since the first line
    failures.failed("does not answer")
    clock.now += 1
    failures.failed("does not answer")
    assert lines(caplog)[1:] == [
        ("WARNING", "the thing still fails: does not answer (101 failures in the last 60 s)")
    ]
    assert failures.failing
    clock.now += 4
    failures.recovered("answers again")
    failures.recovered("answers again")  # no outage any more: nothing
    assert lines(caplog)[2:] == [("INFO", "the thing answers again after 65.0 s (103 failures)")]
    assert not failures.failing
    failures.failed("does not answer")  # a new outage starts with its own line
    assert lines(caplog)[3:] == [("WARNING", "the thing: does not answer")]
    assert failures.failures == 104


def test_a_traceback_only_when_asked_and_a_silent_recovery(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    failures = FailureLog(
        logging.getLogger("test.outage"), "sweeps", level=logging.ERROR, clock=clock
    )
    caplog.set_level(logging.INFO, "test.outage")
    try:
        raise ValueError("boom")
    except ValueError as exc:
        failures.failed("ValueError: boom", traceback=exc)
    failures.failed("ValueError: boom", traceback=ValueError("again"))  # within the minute
    (record,) = caplog.records
    assert record.levelname == "ERROR" and record.exc_info is not None
    failures.recovered(None)
    assert len(caplog.records) == 1 and not failures.failing
