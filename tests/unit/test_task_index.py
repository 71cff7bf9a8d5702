"""The ListTasks indexes on their own: a page's cost does not grow with the store (no sockets)."""

from __future__ import annotations

import dataclasses
import random

import pytest

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.base import Scope
from a2a_grpc.server.tasks.index import MAX_DIRTY, IndexFacts, TaskIndex, TaskQuery

SCOPE = Scope("tenant", "alice")


class Tasks:
    """An IndexSource over plain messages that counts its reads, the unit of work of a
    ListTasks page."""

    def __init__(self) -> None:
        self.tasks: dict[str, a2a_pb2.Task] = {}
        self.updated_ns: dict[str, int] = {}
        self.reads = 0

    def index_facts(self, task_id: str) -> IndexFacts:
        self.reads += 1
        task = self.tasks[task_id]
        return (
            (SCOPE.tenant, SCOPE.owner),
            self.updated_ns[task_id],
            task.context_id,
            (task.status.state),
        )

    def load_into(self, task_id: str, target: a2a_pb2.Task) -> None:
        self.reads += 1
        target.CopyFrom(self.tasks[task_id])


def stored(count: int, contexts: int = 10) -> tuple[Tasks, TaskIndex]:
    source = Tasks()
    index = TaskIndex(source)
    for number in range(count):
        task = a2a_pb2.Task(id=f"t{number}", context_id=f"c{number % contexts}")
        task.status.state = a2a_pb2.TASK_STATE_WORKING
        source.tasks[task.id] = task
        source.updated_ns[task.id] = number + 1
        index.changed(task.id)
    return source, index


@pytest.mark.parametrize("count", [1_000, 20_000])
def test_a_page_reads_the_same_number_of_records_however_many_are_stored(count: int) -> None:
    source, index = stored(count)
    index.page(SCOPE, TaskQuery(page_size=1))  # lets the indexes catch up with recent changes
    queries = [
        TaskQuery(page_size=20),
        TaskQuery(page_size=20, context_id="c3"),
        TaskQuery(page_size=20, state=a2a_pb2.TASK_STATE_WORKING),
    ]
    for query in queries:
        source.reads = 0
        page = index.page(SCOPE, query)
        assert len(page.tasks) == 20
        assert source.reads <= 21
        source.reads = 0
        index.page(SCOPE, TaskQuery(page_size=20, page_token=page.next_page_token))
        assert source.reads <= 21


def test_index_catch_up_is_bounded() -> None:
    """Status changes reach the indexes lazily; a page never pays for more than a bounded few."""
    source, index = stored(5000)
    for number, task in enumerate(source.tasks.values()):
        task.status.state = a2a_pb2.TASK_STATE_COMPLETED
        source.updated_ns[task.id] = 10_000 + number
        index.changed(task.id)
    source.reads = 0
    page = index.page(SCOPE, TaskQuery(page_size=20))
    assert [t.id for t in page.tasks[:2]] == ["t4999", "t4998"]  # newest changes first
    assert page.total_size == 5000
    assert source.reads <= MAX_DIRTY + 21


def _expected_page(source: Tasks, query: TaskQuery, alive: set[str]) -> list[str]:
    """What a page must hold, worked out from the tasks themselves (newest status first)."""
    matching = sorted(
        (
            (source.updated_ns[task_id], task_id)
            for task_id in alive
            if (not query.context_id or source.tasks[task_id].context_id == query.context_id)
            and (not query.state or source.tasks[task_id].status.state == query.state)
            and source.updated_ns[task_id] >= query.updated_after_ns
        ),
        reverse=True,
    )
    return [task_id for _, task_id in matching]


def _all_pages(index: TaskIndex, query: TaskQuery) -> tuple[list[str], int]:
    ids: list[str] = []
    token = ""
    while True:
        page = index.page(SCOPE, dataclasses.replace(query, page_token=token))
        ids += [task.id for task in page.tasks]
        token = page.next_page_token
        if not token:
            return ids, page.total_size


@pytest.mark.parametrize("seed", range(6))
def test_pages_match_the_tasks_through_random_changes_finishes_and_evictions(seed: int) -> None:
    """Finished tasks sit in lists they leave from the front; a page reads them merged with
    the unfinished ones, in order, whatever mix of changes, finishes and deletions came."""
    rng = random.Random(seed)
    source, index = Tasks(), TaskIndex(Tasks())
    index._source = source  # the index reads this source's facts
    clock = 0
    alive: set[str] = set()
    finished_order: list[str] = []  # oldest finished first, as the table evicts them
    for number in range(1500):
        clock += 1
        action = rng.random()
        if action < 0.45 or not alive:
            task = a2a_pb2.Task(id=f"t{number}", context_id=f"c{rng.randrange(5)}")
            task.status.state = a2a_pb2.TASK_STATE_WORKING
            source.tasks[task.id] = task
            alive.add(task.id)
        else:
            live = [t for t in sorted(alive) if t not in finished_order]
            if action < 0.75 and live:  # a status change, maybe the final one
                task = source.tasks[rng.choice(live)]
                task.status.state = rng.choice(
                    [
                        a2a_pb2.TASK_STATE_INPUT_REQUIRED,
                        a2a_pb2.TASK_STATE_COMPLETED,
                        a2a_pb2.TASK_STATE_FAILED,
                    ]
                )
                if task.status.state in (a2a_pb2.TASK_STATE_COMPLETED, a2a_pb2.TASK_STATE_FAILED):
                    finished_order.append(task.id)
            elif action < 0.93 and finished_order:  # the oldest finished task is evicted
                gone = finished_order.pop(0)
                alive.discard(gone)
                index.forget(gone)
                continue
            else:  # any task leaves (out of order: the slower path)
                gone = rng.choice(sorted(alive))
                alive.discard(gone)
                if gone in finished_order:
                    finished_order.remove(gone)
                index.forget(gone)
                continue
        source.updated_ns[task.id] = clock
        index.changed(task.id)
        if number % 97 == 0:
            for query in (
                TaskQuery(page_size=7),
                TaskQuery(page_size=5, state=a2a_pb2.TASK_STATE_COMPLETED),
                TaskQuery(page_size=5, state=a2a_pb2.TASK_STATE_WORKING),
                TaskQuery(page_size=3, context_id="c1"),
                TaskQuery(page_size=4, updated_after_ns=clock // 2),
            ):
                expected = _expected_page(source, query, alive)
                assert _all_pages(index, query) == (expected, len(expected)), query
