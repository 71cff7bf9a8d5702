"""Group commit in the PostgreSQL store (server/tasks/postgres/batch.py), on a real database:
concurrent writes share one transaction, a statement that fails fails alone, a database down
fails every write of a batch with the retryable error, and tasks written by several replicas'
batches at once end as written."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.base import StoreUnavailableError, TaskFinishedError, TaskQuery
from a2a_grpc.server.tasks.contract import ALICE, RecordedListener, created
from a2a_grpc.server.tasks.contract.support import drain, ids, kinds
from a2a_grpc.server.tasks.postgres.arrays import ByteaArray, TextArray
from a2a_grpc.server.tasks.postgres.batch import CLAIM
from a2a_grpc.server.tasks.postgres.store import PostgresTaskStore
from tests.integration.test_postgres_store import admin
from tests.postgres_servers import PostgresServer


@contextlib.asynccontextmanager
async def started(url: str, **options: Any) -> AsyncIterator[PostgresTaskStore]:
    store = PostgresTaskStore.connect(url, **options)
    await store.start()
    try:
        yield store
    finally:
        await store.close()


async def rows(url: str, query: str) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
        return await (await connection.execute(query)).fetchall()


async def test_concurrent_claims_are_committed_in_one_transaction(
    postgres_database: str,
) -> None:
    """16 messages claimed at once: each claim is taken (and a second one of the same message
    sees the first), in two transactions rather than 16: the first claim's, written at once
    alone, and one for the 15 that arrived while it was written (one xmin each)."""
    async with started(postgres_database) as store:
        claims = store.claims
        taken = await asyncio.gather(
            *(claims.claim(f"digest-{number}", f"task-{number}", 60) for number in range(16))
        )
        assert taken == [None] * 16
        assert await claims.claim("digest-3", "task-again", 60) == "task-3"
    found = await rows(
        postgres_database,
        "SELECT count(*), count(DISTINCT xmin::text) FROM a2a_claims WHERE value LIKE 'task-%'",
    )
    assert found == [(16, 2)]


async def test_a_statement_that_fails_in_a_batch_fails_alone(postgres_database: str) -> None:
    """A batch with one statement the database refuses: that write gets the database's own
    error, the others are written (each again alone), and health stays on."""
    async with started(postgres_database) as store:
        claims = store.claims
        writes = [claims.claim(f"digest-{number}", f"task-{number}", 60) for number in range(4)]
        refused = store.batch.fetchone("SELECT 1 / %s", (0,), CLAIM + "digest-2a")
        results = await asyncio.gather(*writes, refused, return_exceptions=True)
        assert results[:4] == [None] * 4
        assert isinstance(results[4], psycopg.errors.DivisionByZero)
        assert store.backend.healthy
        found = await rows(postgres_database, "SELECT value FROM a2a_claims ORDER BY value")
        assert found == [(f"task-{number}",) for number in range(4)]


async def test_each_write_of_a_mixed_batch_gets_its_own_row(postgres_database: str) -> None:
    """Writes of several statements, in row order, go to the database as runs of one statement
    each (here three runs of four, then a run of one): every caller still gets its own
    statement's row, or None for a statement that returns no row, and all of them share one
    transaction."""
    async with started(postgres_database) as store:
        batch = store.batch
        first = batch.fetchone("SELECT %s::text", ("alone",), CLAIM + "0")
        queries = [
            ("SELECT %s::text || '-text', txid_current()", CLAIM),
            ("SELECT %s::int * 2, txid_current()", CLAIM),
            ("SELECT %s::text WHERE false", CLAIM),
        ]
        writes = [
            batch.fetchone(query, (str(number),), order + f"{number:02}")
            for number in range(13)
            for query, order in [queries[number // 4 % 3]]
        ]
        results = await asyncio.gather(first, *writes)
    assert results[0] == ("alone",)
    got = results[1:]
    for number, row in enumerate(got):
        kind = number // 4 % 3
        if kind == 0:
            assert row is not None and row[0] == f"{number}-text"
        elif kind == 1:
            assert row is not None and row[0] == 2 * number
        else:
            assert row is None
    assert len({row[1] for row in got if row is not None}) == 1  # one transaction


async def test_the_updates_of_a_batch_go_as_one_statement_each_with_its_own_outcome(
    postgres_database: str,
) -> None:
    """Eight tasks written at once: the writes after the first share one transaction (and one
    set statement); the one whose version moved behind the store's back fails alone (its task
    finished elsewhere) and the others are written; each task's stream gets its own events, in
    order, with growing ids."""
    async with started(postgres_database) as store, admin(postgres_database) as other:
        names = [f"t{number}" for number in range(8)]
        for name in names:
            await created(store, name)
        streams = [await store.subscribe(name) for name in names]
        await other.execute("UPDATE a2a_tasks SET version = version + 1 WHERE id = 't5'")
        working = await asyncio.gather(
            *(store.set_status(name, a2a_pb2.TASK_STATE_WORKING) for name in names),
            return_exceptions=True,
        )
        assert isinstance(working[5], TaskFinishedError), working
        assert all(result is False for number, result in enumerate(working) if number != 5)
        written = await rows(
            postgres_database,
            "SELECT count(DISTINCT xmin::text) FROM a2a_tasks "
            "WHERE id IN ('t1', 't2', 't3', 't4', 't6', 't7')",
        )
        assert written == [(1,)]
        await asyncio.gather(
            *(
                store.set_status(name, a2a_pb2.TASK_STATE_COMPLETED)
                for number, name in enumerate(names)
                if number != 5
            )
        )
        for number, stream in enumerate(streams):
            if number == 5:
                stream.cancel()
                continue
            events = await drain(stream)
            assert kinds(events)[-2:] == ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]
            assert all(event.status_update.task_id == names[number] for event in events[-2:])
            found = [int(event_id) for event_id in ids(events)]
            assert found == sorted(set(found))


async def test_array_parameters_reach_the_database_as_given(postgres_database: str) -> None:
    """The binary array parameters of the writes (arrays.py): empty arrays, empty and
    non-ASCII elements, and bytes of every value come back as they were sent."""
    async with started(postgres_database) as store:
        texts = TextArray(("", "flags", "été \u263a", 'a,b{c}"d\\'))
        blobs = ByteaArray((b"", bytes(range(256)), b"\x00" * 3))
        row = await store.backend.fetchone(
            "SELECT %s::text[], %s::bytea[], cardinality(%s::text[]), cardinality(%s::bytea[])",
            (texts, blobs, TextArray(), ByteaArray()),
        )
    assert row is not None
    assert row[0] == list(texts)
    assert [bytes(blob) for blob in row[1]] == list(blobs)
    assert row[2:] == (0, 0)


async def test_a_batch_the_database_refuses_fails_each_write_retryably(
    postgres_server: PostgresServer,
) -> None:
    """The database down: every write of a batch fails at once with the store's retryable
    error (each caller its own); once it is back, the same writes go through."""
    url = postgres_server.create_database()
    async with started(url, timeout=5) as store:
        await created(store, "t1")
        postgres_server.stop()
        try:
            claims = [store.claims.claim(f"digest-{n}", f"task-{n}", 60) for n in range(4)]
            failed = await asyncio.gather(*claims, return_exceptions=True)
            assert all(isinstance(error, StoreUnavailableError) for error in failed), failed
            assert len({id(error) for error in failed}) == 4
        finally:
            postgres_server.start()
        for _ in range(200):  # the store notices the database back on its own probe
            if store.backend.healthy:
                break
            await asyncio.sleep(0.05)
        taken = await asyncio.gather(
            *(store.claims.claim(f"digest-{n}", f"task-{n}", 60) for n in range(4))
        )
        assert taken == [None] * 4


async def test_writes_that_wait_too_long_for_their_batch_fail_unwritten(
    postgres_database: str,
) -> None:
    """Claims queued behind a write held on a lock: while they wait, a new message is refused
    at once (`admit`, busy_wait 0); one that waited the store's timeout for its batch fails with
    the retryable busy error and is never written; health stays on throughout."""
    heard = RecordedListener()
    async with (
        started(postgres_database, listener=heard, timeout=0.5, busy_wait=0) as store,
        admin(postgres_database) as holder,
    ):
        store.batch.max_batch = 1  # one write a batch: the last waits through both before it
        await holder.execute("BEGIN")
        await holder.execute("LOCK TABLE a2a_claims IN ACCESS EXCLUSIVE MODE")
        claims = [  # as claims.claim writes them, without its `admit`, refused below
            asyncio.create_task(
                store.batch.fetchone(
                    "SELECT a2a_claim(%s, %s, 60)", (f"digest-{n}", f"task-{n}"), CLAIM
                )
            )
            for n in range(3)
        ]
        for _ in range(100):  # the first is written (and held), the other two wait for a batch
            if store.batch.waiting == 2:
                break
            await asyncio.sleep(0)
        with pytest.raises(StoreUnavailableError, match="busy"):
            await store.claims.claim("digest-new", "task-new", 60)
        failed = await asyncio.gather(*claims, return_exceptions=True)
        await holder.execute("COMMIT")
        assert all(isinstance(error, StoreUnavailableError) for error in failed), failed
        assert "waited 0.5 s for a batch" in str(failed[2])
        assert store.backend.healthy and heard.health == []
        found = await rows(postgres_database, "SELECT value FROM a2a_claims WHERE value = 'task-2'")
        assert found == []
        assert await store.claims.claim("digest-2", "task-2", 60) is None


@pytest.mark.timeout(120)
async def test_tasks_written_by_two_replicas_batches_at_once_end_as_written(
    postgres_database: str,
) -> None:
    """Two replicas, each with 24 tasks moving through their states at once (their writes
    batched, creations beside updates): every task ends COMPLETED with all its events, none
    is lost to a deadlock, and the counts match the rows."""
    async with started(postgres_database) as one, started(postgres_database) as two:

        async def run(store: PostgresTaskStore, task_id: str) -> None:
            await created(store, task_id)
            await store.set_status(task_id, a2a_pb2.TASK_STATE_WORKING)
            await store.set_status(task_id, a2a_pb2.TASK_STATE_COMPLETED)

        await asyncio.gather(
            *(
                run(store, f"{name}-{n}")
                for name, store in (("a", one), ("b", two))
                for n in range(24)
            )
        )
        completed = TaskQuery(page_size=1, state=a2a_pb2.TASK_STATE_COMPLETED)
        page = await one.list(ALICE, completed)
        assert page.total_size == 48
        for task_id in ("a-0", "b-23"):
            task = await two.get(task_id, ALICE)
            assert task is not None and task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    events = await rows(
        postgres_database, "SELECT count(*) FROM a2a_events GROUP BY task_id HAVING count(*) <> 3"
    )
    assert events == []
