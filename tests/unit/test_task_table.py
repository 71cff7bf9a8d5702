"""The in-memory task table: copies, scoping, eviction, TTL, paging (no sockets)."""

from __future__ import annotations

import gc

import pytest

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.base import (
    InvalidPageTokenError,
    LiveTaskLimitError,
    Scope,
    StoreFullError,
    TaskFinishedError,
    TaskQuery,
)
from a2a_grpc.server.tasks.table import TaskTable

SCOPE = Scope("tenant", "alice")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def task(task_id: str, state: int = a2a_pb2.TASK_STATE_WORKING, context: str = "c") -> a2a_pb2.Task:
    return a2a_pb2.Task(id=task_id, context_id=context, status=a2a_pb2.TaskStatus(state=state))


def finish(store: TaskTable, task_id: str) -> None:
    def mutate(t: a2a_pb2.Task) -> None:
        t.status.state = a2a_pb2.TASK_STATE_COMPLETED

    store.update(task_id, mutate, status_changed=True)


def test_copies_in_and_out() -> None:
    store = TaskTable()
    original = task("t1")
    store.create(original, SCOPE)
    original.context_id = "changed after create"
    got = store.get("t1", SCOPE)
    assert got is not None and got.context_id == "c"
    got.artifacts.add(artifact_id="a")
    got.status.state = a2a_pb2.TASK_STATE_FAILED
    again = store.get("t1", SCOPE)
    assert again is not None
    assert len(again.artifacts) == 0 and again.status.state == a2a_pb2.TASK_STATE_WORKING
    listed = store.list(SCOPE, TaskQuery(page_size=10, include_artifacts=True))
    listed.tasks[0].context_id = "x"
    assert store.get("t1", SCOPE).context_id == "c"  # type: ignore[union-attr]


def test_other_scopes_see_nothing() -> None:
    store = TaskTable()
    store.create(task("t1"), SCOPE)
    assert store.get("t1", Scope("tenant", "bob")) is None
    assert store.get("t1", Scope("other", "alice")) is None
    assert store.list(Scope("tenant", "bob"), TaskQuery(page_size=10)).total_size == 0


def test_terminal_tasks_are_frozen() -> None:
    store = TaskTable()
    store.create(task("t1"), SCOPE)
    finish(store, "t1")
    with pytest.raises(TaskFinishedError, match="TASK_STATE"):
        finish(store, "t1")


def test_full_store_evicts_the_oldest_terminal_task_first() -> None:
    store = TaskTable(max_tasks=3)
    for name in ("a", "b", "c"):
        store.create(task(name), SCOPE)
    finish(store, "b")
    finish(store, "a")
    store.create(task("d"), SCOPE)
    assert store.get("b", SCOPE) is None  # settled first, evicted first
    assert store.get("a", SCOPE) is not None
    store.create(task("e"), SCOPE)
    assert store.get("a", SCOPE) is None
    assert len(store) == 3


def test_expiry_stays_exact_through_evictions_and_an_empty_table() -> None:
    """The table notes when its oldest finished task is due and looks no earlier: evictions
    for room, and a table that emptied of finished tasks and filled again, must not make it
    miss one."""
    clock = Clock()
    start = clock.now
    store = TaskTable(max_tasks=2, terminal_ttl=60, monotonic=clock)
    for name, at in (("a", 0), ("b", 10)):
        clock.now = start + at
        store.create(task(name), SCOPE)
        finish(store, name)
    assert store.evict_expired() == 0  # notes a's time
    clock.now = start + 20
    store.create(task("c"), SCOPE)  # evicts a for room
    finish(store, "c")
    clock.now = start + 70  # b is due
    assert store.evict_expired() == 1 and store.get("b", SCOPE) is None
    clock.now = start + 200
    assert store.evict_expired() == 1 and len(store) == 0
    store.create(task("d"), SCOPE)
    finish(store, "d")
    clock.now = start + 259
    assert store.evict_expired() == 0
    clock.now = start + 260
    assert store.evict_expired() == 1 and len(store) == 0


def test_full_store_of_live_tasks_refuses_new_ones() -> None:
    store = TaskTable(max_tasks=2)
    store.create(task("a"), SCOPE)
    store.create(task("b"), SCOPE)
    with pytest.raises(StoreFullError, match="retry later"):
        store.create(task("c"), SCOPE)
    assert {store.get(n, SCOPE) is not None for n in ("a", "b")} == {True}


def test_terminal_tasks_expire_after_the_ttl() -> None:
    clock = Clock()
    store = TaskTable(terminal_ttl=60, monotonic=clock)
    store.create(task("a"), SCOPE)
    store.create(task("b"), SCOPE)
    finish(store, "a")
    clock.now += 61
    assert store.evict_expired() == 1
    assert store.get("a", SCOPE) is None
    assert store.get("b", SCOPE) is not None  # live tasks never expire
    assert store.list(SCOPE, TaskQuery(page_size=10)).total_size == 1


def test_list_orders_by_last_status_change_and_pages_stably() -> None:
    ticks = iter(range(1, 1000))
    store = TaskTable(clock_ns=lambda: next(ticks))
    for name in "abcde":
        store.create(task(name), SCOPE)
    finish(store, "b")  # b changed last, so it comes first
    first = store.list(SCOPE, TaskQuery(page_size=2))
    assert [t.id for t in first.tasks] == ["b", "e"]
    second = store.list(SCOPE, TaskQuery(page_size=2, page_token=first.next_page_token))
    assert [t.id for t in second.tasks] == ["d", "c"]
    third = store.list(SCOPE, TaskQuery(page_size=2, page_token=second.next_page_token))
    assert [t.id for t in third.tasks] == ["a"]
    assert third.next_page_token == ""


def test_list_rejects_foreign_tokens() -> None:
    store = TaskTable()
    with pytest.raises(InvalidPageTokenError):
        store.list(SCOPE, TaskQuery(page_size=2, page_token="garbage"))


def test_history_length_trims_oldest_first() -> None:
    store = TaskTable()
    t = task("a")
    for index in range(5):
        t.history.add(message_id=str(index))
    store.create(t, SCOPE)
    got = store.get("a", SCOPE, history_length=2)
    assert got is not None and [m.message_id for m in got.history] == ["3", "4"]
    got = store.get("a", SCOPE, history_length=0)
    assert got is not None and len(got.history) == 0


def test_reserved_room_is_kept_for_the_task_that_claimed_it() -> None:
    store = TaskTable(max_tasks=2)
    store.create(task("a"), SCOPE)
    store.reserve(SCOPE)
    with pytest.raises(StoreFullError):
        store.reserve(SCOPE)  # one live task and one promise fill the store
    with pytest.raises(StoreFullError):
        store.create(task("b"), SCOPE)
    store.adopt(task("c"), SCOPE, reserved_size=0)  # the promise is honoured
    assert len(store) == 2
    finish(store, "a")
    store.reserve(SCOPE)  # evicts the finished task to make room
    assert store.get("a", SCOPE) is None
    store.release(SCOPE)
    store.create(task("d"), SCOPE)
    assert len(store) == 2


def test_set_status_stamps_keeps_the_message_in_history_and_freezes_terminal_tasks() -> None:
    ticks = iter(range(5_000_000_000, 5_000_000_100))
    store = TaskTable(clock_ns=lambda: next(ticks))
    store.create(task("t1"), SCOPE)
    note = a2a_pb2.Message(message_id="m1", role=a2a_pb2.ROLE_AGENT)
    note.parts.add(text="need input")
    store.set_status("t1", a2a_pb2.TASK_STATE_INPUT_REQUIRED, note)
    got = store.get("t1", SCOPE)
    assert got is not None
    assert got.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    assert got.status.message == note and list(got.history) == [note]
    assert (got.status.timestamp.seconds, got.status.timestamp.nanos) == (5, 1)
    store.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)  # no message: the old one is cleared
    got = store.get("t1", SCOPE)
    assert got is not None and not got.status.HasField("message") and len(got.history) == 1
    assert store.list(SCOPE, TaskQuery(page_size=5)).tasks[0].status.state == (
        a2a_pb2.TASK_STATE_COMPLETED
    )
    with pytest.raises(TaskFinishedError, match="TASK_STATE"):
        store.set_status("t1", a2a_pb2.TASK_STATE_WORKING)


def test_eviction_keeps_oldest_first_order_across_many_turns() -> None:
    # The queues of finished tasks drain from the front; order must hold after many turns.
    store = TaskTable(max_tasks=50)
    for number in range(500):
        store.create(task(f"t{number}"), SCOPE)
        finish(store, f"t{number}")
    kept = sorted(int(t.id[1:]) for t in store.list(SCOPE, TaskQuery(page_size=100)).tasks)
    assert kept == list(range(450, 500))


def test_context_filter_through_one_two_and_no_tasks_in_a_context() -> None:
    # A context's index starts as a bare key, becomes a list at its second task, and goes away
    # with its last task; every step must list the same as a full scan would.
    ticks = iter(range(1, 1000))
    store = TaskTable(max_tasks=3, clock_ns=lambda: next(ticks))

    def listed(context: str, state: int = a2a_pb2.TASK_STATE_UNSPECIFIED) -> list[str]:
        query = TaskQuery(page_size=10, context_id=context, state=state)
        return [t.id for t in store.list(SCOPE, query).tasks]

    store.create(task("a", context="x"), SCOPE)
    assert listed("x") == ["a"] and listed("x", a2a_pb2.TASK_STATE_WORKING) == ["a"]
    store.create(task("b", context="x"), SCOPE)
    assert listed("x") == ["b", "a"]
    finish(store, "a")
    assert listed("x") == ["a", "b"] and listed("x", a2a_pb2.TASK_STATE_COMPLETED) == ["a"]
    store.create(task("c", context="y"), SCOPE)
    store.create(task("d", context="y"), SCOPE)  # full: "a" (finished) is evicted
    assert listed("x") == ["b"] and listed("y") == ["d", "c"]
    finish(store, "b")
    store.create(task("e", context="z"), SCOPE)  # evicts "b", the last task of context x
    assert listed("x") == [] and listed("z") == ["e"]


def test_a_full_large_store_evicts_a_small_batch_of_the_oldest_at_once() -> None:
    # 1/64 of the store (at most 64) goes per eviction; small stores evict one at a time.
    store = TaskTable(max_tasks=640)
    for number in range(640):
        store.create(task(f"t{number}"), SCOPE)
        finish(store, f"t{number}")
    store.create(task("new"), SCOPE)
    assert len(store) == 631
    assert all(store.get(f"t{number}", SCOPE) is None for number in range(10))
    assert store.get("t10", SCOPE) is not None


def big_task(task_id: str, size: int, state: int = a2a_pb2.TASK_STATE_WORKING) -> a2a_pb2.Task:
    made = task(task_id, state)
    made.history.add(message_id="m", parts=[a2a_pb2.Part(text="x" * size)])
    return made


def test_byte_budget_evicts_finished_tasks_then_refuses() -> None:
    store = TaskTable(max_bytes=10_000)
    store.create(big_task("done", 4000, a2a_pb2.TASK_STATE_COMPLETED), SCOPE)
    store.create(big_task("live", 4000), SCOPE)
    assert 8000 < store.bytes < 8200
    store.reserve(SCOPE, 4000)  # the finished task goes to make room
    assert store.get("done", SCOPE) is None and store.get("live", SCOPE) is not None
    store.adopt(big_task("new", 4000), SCOPE, reserved_size=4000)
    with pytest.raises(StoreFullError, match="retry later"):
        store.reserve(SCOPE, 4000)  # only live tasks left, and they fill the budget
    finish(store, "live")
    store.reserve(SCOPE, 4000)
    assert store.get("live", SCOPE) is None


def test_a_task_is_measured_again_when_it_settles() -> None:
    store = TaskTable(max_bytes=10**9)
    store.create(task("t"), SCOPE)
    before = store.bytes

    def grow(t: a2a_pb2.Task) -> None:
        t.artifacts.add(artifact_id="a", parts=[a2a_pb2.Part(text="y" * 5000)])

    store.apply("t", grow, status_changed=False)
    assert store.bytes == before  # not measured while it works
    store.set_status("t", a2a_pb2.TASK_STATE_COMPLETED)
    assert store.bytes > before + 5000
    store.reserve(SCOPE, 10**9 - 1)  # the whole budget: the finished task must go
    assert store.get("t", SCOPE) is None and store.bytes == 10**9 - 1  # the promised room


def test_reserved_room_counts_at_once_so_calls_reserving_together_cannot_overshoot() -> None:
    store = TaskTable(max_bytes=10_000)
    store.reserve(SCOPE, 6000)  # its task is not created yet: the agent has not spoken
    with pytest.raises(StoreFullError):
        store.reserve(SCOPE, 6000)
    store.release(SCOPE, 6000)  # e.g. the agent answered with a direct reply
    assert store.bytes == 0
    store.reserve(SCOPE, 6000)
    store.adopt(big_task("t", 5900), SCOPE, reserved_size=6000)
    assert store.bytes == 6000  # counted once


def test_writes_to_a_live_task_are_counted_when_they_land() -> None:
    store = TaskTable(max_bytes=18_000)
    store.create(big_task("done", 4000, a2a_pb2.TASK_STATE_COMPLETED), SCOPE)
    done = store.bytes
    store.create(big_task("live", 100), SCOPE)
    before = store.bytes

    def add_artifact(t: a2a_pb2.Task) -> None:
        t.artifacts.add(artifact_id="a", parts=[a2a_pb2.Part(text="y" * 9000)])

    store.apply("live", add_artifact, status_changed=False, grow=9000)
    assert store.bytes == before + 9000  # counted at once, not when the task settles
    answer = a2a_pb2.Message(message_id="s", parts=[a2a_pb2.Part(text="z" * 3000)])
    # A status message lands twice (status and history): 6000 more do not fit beside the
    # finished task, which goes to make room.
    store.set_status("live", a2a_pb2.TASK_STATE_WORKING, answer, grow=6000)
    assert store.get("done", SCOPE) is None and store.bytes == before + 15_000 - done


def test_a_write_that_does_not_fit_beside_live_tasks_is_refused_and_changes_nothing() -> None:
    store = TaskTable(max_bytes=10_000)
    store.create(big_task("live", 6000), SCOPE)
    kept = store.get("live", SCOPE)
    counted = store.bytes

    def add_artifact(t: a2a_pb2.Task) -> None:
        t.artifacts.add(artifact_id="a", parts=[a2a_pb2.Part(text="y" * 5000)])

    with pytest.raises(StoreFullError, match="task memory"):
        store.apply("live", add_artifact, status_changed=False, grow=5000)
    big = a2a_pb2.Message(message_id="s", parts=[a2a_pb2.Part(text="z" * 3000)])
    with pytest.raises(StoreFullError):
        store.set_status("live", a2a_pb2.TASK_STATE_COMPLETED, big, grow=6000)
    assert store.get("live", SCOPE) == kept and store.bytes == counted
    # The server's own final status lands regardless (counted): the run can always end.
    store.set_status("live", a2a_pb2.TASK_STATE_FAILED, big, grow=6000, refuse=False)
    assert store.get("live", SCOPE).status.state == a2a_pb2.TASK_STATE_FAILED  # type: ignore[union-attr]


def test_a_first_status_message_beyond_the_reserved_room_is_counted() -> None:
    store = TaskTable(max_bytes=10_000)
    store.create(big_task("live", 6000), SCOPE)
    store.reserve(SCOPE, 100)
    with pytest.raises(StoreFullError):
        store.adopt(big_task("new", 100), SCOPE, reserved_size=100, grow=5000)
    assert store.get("new", SCOPE) is None  # nothing stored; the reservation still holds
    store.adopt(big_task("new", 100), SCOPE, reserved_size=100, grow=1000)
    assert store.bytes > 6000 + 100 + 1000


def test_live_tasks_are_capped_per_owner_and_per_tenant() -> None:
    store = TaskTable(max_live_per_owner=2, max_live_per_tenant=3)
    alice, bob, carol = Scope("t1", "alice"), Scope("t2", "alice"), Scope("t1", "bob")
    store.create(task("a1"), alice)
    store.reserve(bob)  # the same caller in another tenant
    with pytest.raises(LiveTaskLimitError, match="caller"):
        store.reserve(alice)
    with pytest.raises(LiveTaskLimitError, match="caller"):
        store.create(task("a3"), bob)
    store.create(task("b1"), carol)
    store.create(task("b2"), carol)
    with pytest.raises(LiveTaskLimitError, match="tenant"):
        store.create(task("d1"), Scope("t1", "dave"))  # t1 holds a1, b1, b2
    assert store.live_count(owner="alice") == 2 and store.live_count(tenant="t1") == 3
    finish(store, "a1")  # a finished task no longer counts
    store.release(bob)
    assert store.live_count(owner="alice") == 0 and store.live_count(tenant="t1") == 2
    store.create(task("a4"), alice)


def test_parked_tasks_are_listed_oldest_first_until_answered_or_finished() -> None:
    clock = Clock()
    store = TaskTable(monotonic=clock)
    for name in ("p1", "p2", "p3"):
        store.create(task(name), SCOPE)
        store.set_status(name, a2a_pb2.TASK_STATE_INPUT_REQUIRED)
        clock.now += 10
    assert store.parked_since(clock.now) == ["p1", "p2", "p3"]
    assert store.parked_since(clock.now - 15) == ["p1", "p2"]
    store.set_status("p1", a2a_pb2.TASK_STATE_SUBMITTED)  # answered
    store.set_status("p2", a2a_pb2.TASK_STATE_CANCELED)
    assert store.parked_since(clock.now) == ["p3"]


def test_tasks_are_counted_by_state_across_scopes_and_evictions() -> None:
    store = TaskTable(max_tasks=3)
    other = Scope("tenant-b", "bob")
    store.create(task("a"), SCOPE)
    store.create(task("b"), other)
    store.create(task("c", a2a_pb2.TASK_STATE_INPUT_REQUIRED), SCOPE)
    assert store.count_by_state() == {
        a2a_pb2.TASK_STATE_WORKING: 2,
        a2a_pb2.TASK_STATE_INPUT_REQUIRED: 1,
    }
    finish(store, "a")
    finish(store, "b")
    store.create(task("d"), other)  # full: "a" is evicted
    assert store.count_by_state() == {
        a2a_pb2.TASK_STATE_COMPLETED: 1,
        a2a_pb2.TASK_STATE_INPUT_REQUIRED: 1,
        a2a_pb2.TASK_STATE_WORKING: 1,
    }


def test_finished_tasks_give_the_garbage_collector_nothing_to_track() -> None:
    """A full collection walks every tracked object: a store of finished tasks must not add
    one per task (it added two: ~84 ms per full collection at 100,000 tasks)."""

    def tracked() -> int:
        gc.collect()
        gc.collect()  # a tuple is untracked once the tuples it holds are: it may take two
        return len(gc.get_objects())

    store = TaskTable(max_tasks=10_000)
    before = tracked()
    for number in range(2000):
        store.create(task(f"t{number}", context=f"c{number}"), SCOPE)
        store.set_status(f"t{number}", a2a_pb2.TASK_STATE_COMPLETED)
    assert store.list(SCOPE, TaskQuery(page_size=1)).total_size == 2000  # indexes caught up
    # The indexes' sublists (one per 128 tasks), not one object per task. (A context of two or
    # more tasks keeps a list too: one per context.)
    assert tracked() - before < 100
    got = store.get("t7", SCOPE)
    assert got is not None and got.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert got.context_id == "c7"
