"""The idempotency window on its own: repeats, reused ids, settling, expiry (no sockets)."""

from __future__ import annotations

import gc
from typing import Any, cast

import pytest

from a2a_grpc.core.errors import InvalidParamsError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.protocol.dedup import DedupWindow
from a2a_grpc.server.protocol.run import TaskRun
from a2a_grpc.server.tasks.base import Scope


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FakeRun:
    """The parts of a TaskRun the window reads."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        self.scope = Scope("t", "alice")
        self.reply_message: a2a_pb2.Message | None = None


def message(text: str, message_id: str = "m1") -> a2a_pb2.Message:
    return a2a_pb2.Message(
        message_id=message_id, role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text=text)]
    )


def run(task_id: str) -> TaskRun:
    return cast(TaskRun, FakeRun(task_id))


KEY = ("t", "alice", "m1")


def test_a_repeat_finds_the_run_then_its_settled_outcome() -> None:
    window = DedupWindow(window=60, capacity=10)
    assert window.repeat_of(KEY, message("hi")) is None
    first = run("task-1")
    window.remember(KEY, message("hi"), first)
    assert window.repeat_of(KEY, message("hi")) is first
    window.settle(KEY, first)
    settled: Any = window.repeat_of(KEY, message("hi"))
    assert settled is not first and settled.task_id == "task-1"
    assert settled.scope == Scope("t", "alice") and settled.settled.is_set()
    assert settled.reply_message is None


async def test_a_claim_finds_a_repeat_that_started_since_it_was_first_looked_up() -> None:
    """A delivery's checks may await (a signer's card) between the handler's `repeat_of` and
    its claim: a repeat that started meanwhile is found at the claim, before any state check."""
    window = DedupWindow(window=60, capacity=10)
    assert window.repeat_of(KEY, message("hi")) is None
    first = run("task-1")
    window.remember(KEY, message("hi"), first)  # the other delivery, meanwhile
    assert await window.claim(KEY, message("hi"), "task-2") is first
    assert await window.claim(("t", "alice", "m2"), message("hi"), "task-3") is None


def test_a_settled_direct_reply_is_given_to_repeats() -> None:
    window = DedupWindow(window=60, capacity=10)
    first = FakeRun("task-1")
    first.reply_message = a2a_pb2.Message(message_id="r1", role=a2a_pb2.ROLE_AGENT)
    window.remember(KEY, message("hi"), cast(TaskRun, first))
    window.settle(KEY, cast(TaskRun, first))
    settled: Any = window.repeat_of(KEY, message("hi"))
    assert settled.reply_message == first.reply_message and settled.started.is_set()


def test_settled_ids_give_the_garbage_collector_nothing_to_track() -> None:
    """A full collection walks every tracked object; the window holds an hour of message ids."""

    def tracked() -> int:
        gc.collect()
        gc.collect()  # a tuple is untracked once the tuples it holds are: it may take two
        return len(gc.get_objects())

    window = DedupWindow(window=60, capacity=10_000)
    runs = [run(f"task-{index}") for index in range(2000)]
    before = tracked()
    for index, first in enumerate(runs):
        key = ("t", "alice", f"m{index}")
        window.remember(key, message("hi", f"m{index}"), first)
        window.settle(key, first)
    assert len(window) == 2000
    assert tracked() - before < 20


def test_the_same_id_with_other_content_is_invalid_params() -> None:
    window = DedupWindow(window=60, capacity=10)
    window.remember(KEY, message("hi"), run("task-1"))
    with pytest.raises(InvalidParamsError, match="already used for a different message"):
        window.repeat_of(KEY, message("something else"))
    assert window.repeat_of(("t", "bob", "m1"), message("something else")) is None


def test_ids_expire_after_the_window_and_beyond_capacity() -> None:
    clock = Clock()
    window = DedupWindow(window=60, capacity=3, clock=clock)
    for index in range(3):
        window.remember(("t", "a", f"m{index}"), message("x", f"m{index}"), run(f"t{index}"))
        clock.now += 10
    window.remember(("t", "a", "m3"), message("x", "m3"), run("t3"))
    assert len(window) == 3 and window.repeat_of(("t", "a", "m0"), message("x", "m0")) is None
    clock.now += 45  # m1 was accepted 65 s ago
    window.expire()
    assert window.repeat_of(("t", "a", "m1"), message("x", "m1")) is None
    assert window.repeat_of(("t", "a", "m2"), message("x", "m2")) is not None


def test_expiry_stays_exact_through_capacity_drops_and_an_empty_window() -> None:
    """The window notes when its oldest entry falls out and looks no earlier: entries dropped
    for capacity, and a window that emptied and filled again, must not make it miss one."""
    clock = Clock()
    window = DedupWindow(window=60, capacity=2, clock=clock)

    def held() -> list[str]:
        return [
            name
            for name in ("m0", "m1", "m2", "m3")
            if window.repeat_of(("t", "a", name), message("x", name)) is not None
        ]

    for name, at in (("m0", 0.0), ("m1", 10.0), ("m2", 20.0)):  # m0 goes for capacity
        clock.now = at
        window.remember(("t", "a", name), message("x", name), run(name))
    assert held() == ["m1", "m2"]
    clock.now = 70.0  # exactly 60 s after m1
    window.expire()
    assert held() == ["m2"]
    clock.now = 200.0
    window.expire()
    assert held() == []
    window.remember(("t", "a", "m3"), message("x", "m3"), run("m3"))
    clock.now = 259.0
    window.expire()
    assert held() == ["m3"]
    clock.now = 260.0
    window.expire()
    assert held() == []
