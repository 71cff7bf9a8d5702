"""The ListTasks indexes on their own: a page's cost does not grow with the store (no sockets)."""

from __future__ import annotations

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
