"""The ListTasks indexes on their own: a page's cost does not grow with the store (no sockets)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.base import Scope
from a2a_grpc.server.tasks.index import MAX_DIRTY, TaskIndex, TaskQuery

SCOPE = Scope("tenant", "alice")


@dataclass
class Record:
    task: a2a_pb2.Task
    scope: Scope
    updated_ns: int
    indexed: tuple[tuple[int, str], str, int] | None = None


class CountingDict(dict[str, Record]):
    """Counts record reads, the unit of work of a ListTasks page."""

    reads = 0

    def __getitem__(self, key: str) -> Record:
        CountingDict.reads += 1
        return super().__getitem__(key)


def stored(count: int, contexts: int = 10) -> tuple[CountingDict, TaskIndex]:
    records = CountingDict()
    index = TaskIndex(records)
    for number in range(count):
        task = a2a_pb2.Task(id=f"t{number}", context_id=f"c{number % contexts}")
        task.status.state = a2a_pb2.TASK_STATE_WORKING
        records[task.id] = Record(task, SCOPE, number + 1)
        index.changed(task.id)
    return records, index


@pytest.mark.parametrize("count", [1_000, 20_000])
def test_a_page_reads_the_same_number_of_records_however_many_are_stored(count: int) -> None:
    _, index = stored(count)
    index.page(SCOPE, TaskQuery(page_size=1))  # lets the indexes catch up with recent changes
    queries = [
        TaskQuery(page_size=20),
        TaskQuery(page_size=20, context_id="c3"),
        TaskQuery(page_size=20, state=a2a_pb2.TASK_STATE_WORKING),
    ]
    for query in queries:
        CountingDict.reads = 0
        page = index.page(SCOPE, query)
        assert len(page.tasks) == 20
        assert CountingDict.reads <= 21
        CountingDict.reads = 0
        index.page(SCOPE, TaskQuery(page_size=20, page_token=page.next_page_token))
        assert CountingDict.reads <= 21


def test_index_catch_up_is_bounded() -> None:
    """Status changes reach the indexes lazily; a page never pays for more than a bounded few."""
    records, index = stored(5000)
    for number, record in enumerate(dict.values(records)):
        record.task.status.state = a2a_pb2.TASK_STATE_COMPLETED
        record.updated_ns = 10_000 + number
        index.changed(record.task.id)
    CountingDict.reads = 0
    page = index.page(SCOPE, TaskQuery(page_size=20))
    assert [t.id for t in page.tasks[:2]] == ["t4999", "t4998"]  # newest changes first
    assert page.total_size == 5000
    assert CountingDict.reads <= MAX_DIRTY + 21
