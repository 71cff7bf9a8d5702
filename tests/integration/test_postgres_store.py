"""What only the PostgreSQL store shows, beyond the contract suite (test_store_contract.py runs
it, and its replica tests, on PostgreSQL): how its versioned writes and row locks decide races,
the shared dedup window through two handlers, large events across replicas, exact trimming,
pruning in bounded batches, the kept counts, and the database down, hung and back. Every test
runs a real PostgreSQL (tests/postgres_servers.py)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from a2a_grpc.core.errors import InvalidParamsError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.card import demo_card
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.protocol.call_context import CallContext
from a2a_grpc.server.protocol.dedup import window_for
from a2a_grpc.server.protocol.handler import RequestHandler
from a2a_grpc.server.tasks.base import (
    StoreUnavailableError,
    TaskBusyError,
    TaskFinishedError,
    TaskQuery,
)
from a2a_grpc.server.tasks.contract import (
    ALICE,
    RecordedListener,
    agent_text,
    created,
    drain,
    kinds,
)
from a2a_grpc.server.tasks.postgres.events import INLINE_MAX
from a2a_grpc.server.tasks.postgres.store import PostgresTaskStore
from tests.integration.store_outage_runs import runs_meet_the_store_down
from tests.integration.test_store_contract import AskThenWork, user_text
from tests.postgres_servers import PostgresServer


async def replicas(
    url: str, *, heard: RecordedListener | None = None, **options: Any
) -> tuple[PostgresTaskStore, PostgresTaskStore]:
    """Two stores on one database, as two replicas hold them; the first tells `heard`."""
    one = PostgresTaskStore.connect(url, listener=heard, **options)
    two = PostgresTaskStore.connect(url, **options)
    await one.start()
    await two.start()
    return one, two


@contextlib.asynccontextmanager
async def admin(url: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
        yield connection


async def scalar(url: str, query: str, *params: Any) -> Any:
    async with admin(url) as connection:
        row = await (await connection.execute(query, params)).fetchone()
        return None if row is None else row[0]


async def test_a_write_refused_after_a_cancel_elsewhere_leaves_no_trace(
    postgres_database: str,
) -> None:
    """Versioned writes: the run's COMPLETED, written with the version it read before another
    replica canceled the task, is refused (TaskFinishedError) and changes nothing."""
    one, two = await replicas(postgres_database)
    try:
        await created(one, "t1")
        await one.set_status("t1", a2a_pb2.TASK_STATE_WORKING)
        version = await scalar(postgres_database, "SELECT version FROM a2a_tasks WHERE id='t1'")
        await two.cancel("t1", ALICE)
        with pytest.raises(TaskFinishedError) as refused:
            await one.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)
        assert refused.value.state == a2a_pb2.TASK_STATE_CANCELED
        after = await scalar(postgres_database, "SELECT version FROM a2a_tasks WHERE id='t1'")
        assert after == version + 1  # the cancel's write only
        for store in (one, two):
            every = await store.list(ALICE, TaskQuery(page_size=10))
            assert [task.id for task in every.tasks] == ["t1"] and every.total_size == 1
            assert every.tasks[0].status.state == a2a_pb2.TASK_STATE_CANCELED
            done = await store.list(
                ALICE, TaskQuery(page_size=10, state=a2a_pb2.TASK_STATE_COMPLETED)
            )
            assert done.total_size == 0 and not done.tasks
    finally:
        await one.close()
        await two.close()


async def test_two_replicas_resuming_one_waiting_task_at_once_resume_it_once(
    postgres_database: str,
) -> None:
    """Both resumes reach the task's row while a third connection holds it locked, so both
    wait on the same row at once; when it is let go, exactly one resume wins and the other is
    TaskBusyError (the second reads the row only after the first committed)."""
    one, two = await replicas(postgres_database, lease=3600)
    try:
        await created(one, "t1")
        await one.set_status("t1", a2a_pb2.TASK_STATE_INPUT_REQUIRED, agent_text("which?"))
        async with admin(postgres_database) as holder, holder.transaction():
            await holder.execute("SELECT 1 FROM a2a_tasks WHERE id = 't1' FOR UPDATE")
            answers = [
                a2a_pb2.Message(message_id=f"answer-{n}", role=a2a_pb2.ROLE_USER) for n in (1, 2)
            ]
            resumes = [
                asyncio.ensure_future(store.resume("t1", ALICE, answer))
                for store, answer in zip((one, two), answers, strict=True)
            ]
            async with asyncio.timeout(10):  # until both wait on the row's lock
                while True:
                    waiting = await scalar(
                        postgres_database,
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = "
                        "'Lock' AND query LIKE '%%FOR UPDATE%%' AND pid <> pg_backend_pid()",
                    )
                    if waiting == 2:
                        break
                    await asyncio.sleep(0.01)
        outcomes = await asyncio.gather(*resumes, return_exceptions=True)
        won = [outcome for outcome in outcomes if isinstance(outcome, a2a_pb2.Task)]
        lost = [outcome for outcome in outcomes if isinstance(outcome, TaskBusyError)]
        assert len(won) == 1 and len(lost) == 1, outcomes
        task = await two.get("t1", ALICE)
        assert task is not None and task.status.state == a2a_pb2.TASK_STATE_SUBMITTED
        winner = answers[outcomes.index(won[0])].message_id
        assert [m.message_id for m in task.history][-1] == winner
        assert [m.message_id for m in task.history].count("answer-1") + [
            m.message_id for m in task.history
        ].count("answer-2") == 1
    finally:
        await one.close()
        await two.close()


async def test_one_message_id_sent_to_two_replicas_makes_one_task(postgres_database: str) -> None:
    """The shared dedup window: the same message to two replicas' handlers runs once, and both
    answer with the one task; the same id with other content is refused on the other."""
    one, two = await replicas(postgres_database)
    config = ServerConfig()
    handlers = [
        RequestHandler(
            AskThenWork(),
            demo_card("localhost:50051"),
            config,
            store=store,
            dedup=window_for(store.claims, window=config.dedup_window, capacity=100),
        )
        for store in (one, two)
    ]
    try:
        caller = CallContext()
        first, second = await asyncio.gather(
            *(handler.send_message(user_text("hi", "m-same"), caller) for handler in handlers)
        )
        assert first.task.id == second.task.id
        assert await scalar(postgres_database, "SELECT count(*) FROM a2a_tasks") == 1
        with pytest.raises(InvalidParamsError):
            await handlers[1].send_message(user_text("other text", "m-same"), caller)
    finally:
        await one.close()
        await two.close()


async def test_a_large_event_reaches_another_replica_s_stream(postgres_database: str) -> None:
    """Events larger than a notification carries are read from the table by the replicas
    that stream their task, in order with the small ones."""
    one, two = await replicas(postgres_database)
    try:
        await created(one, "t1")
        watched = await two.watch("t1", ALICE, until_terminal=True)
        assert watched is not None
        sizes = [10, INLINE_MAX * 3, 20]
        for number, size in enumerate(sizes):

            def event(number: int = number, size: int = size) -> a2a_pb2.StreamResponse:
                response = a2a_pb2.StreamResponse()
                artifact = response.artifact_update.artifact
                artifact.artifact_id = f"a{number}"
                artifact.parts.add().text = "x" * size
                return response

            await one.update("t1", lambda task: None, event)
        await one.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)
        events = await drain(watched[1])
        assert kinds(events) == ["artifact_update"] * 3 + ["TASK_STATE_COMPLETED"]
        assert [len(e.artifact_update.artifact.parts[0].text) for e in events[:3]] == sizes
    finally:
        await one.close()
        await two.close()


async def test_a_task_keeps_its_last_stream_length_events_exactly(postgres_database: str) -> None:
    store = PostgresTaskStore.connect(postgres_database, stream_length=100)
    await store.start()
    try:
        await created(store, "t1")
        for _ in range(300):
            await store.update(
                "t1",
                lambda task: None,
                lambda: a2a_pb2.StreamResponse(
                    artifact_update=a2a_pb2.TaskArtifactUpdateEvent(task_id="t1")
                ),
            )
        kept = await scalar(
            postgres_database, "SELECT count(*) FROM a2a_events WHERE task_id = 't1'"
        )
        first = await scalar(postgres_database, "SELECT min(seq) FROM a2a_events")
        assert (kept, first) == (100, 202)  # the task event and 300 chunks: 301 in all
    finally:
        await store.close()


async def test_expired_tasks_go_in_bounded_batches_with_their_rows(
    postgres_database: str,
) -> None:
    """Pruning deletes at most one batch per call (room.PRUNE_BATCH), and an expired task's
    events, push configs, claims and replies go with it."""
    from a2a_grpc.server.tasks.postgres.room import PRUNE_BATCH

    store = PostgresTaskStore.connect(postgres_database, terminal_ttl=0, max_tasks=1000)
    await store.start()
    try:
        for number in range(PRUNE_BATCH + 10):
            await created(store, f"t{number}")
            await store.set_status(f"t{number}", a2a_pb2.TASK_STATE_COMPLETED)
        await store.push_configs.put(
            a2a_pb2.TaskPushNotificationConfig(task_id="t0", id="c", url="https://a.example/h")
        )
        assert await store.claims.claim("digest", "value", 0.001) is None
        await store.reply("r1", agent_text("hi"))
        await scalar(postgres_database, "UPDATE a2a_replies SET expires_at = now() RETURNING 1")
        assert await store.evict_expired() == PRUNE_BATCH
        assert await store.evict_expired() == 10
        assert await store.evict_expired() == 0
        for table in ("a2a_tasks", "a2a_events", "a2a_push_configs", "a2a_claims", "a2a_replies"):
            assert await scalar(postgres_database, f"SELECT count(*) FROM {table}") == 0, table
        assert (await store.stats()).tasks == 0
    finally:
        await store.close()


async def test_a_database_down_is_a_fast_unavailable_then_recovers(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.create_database()
    heard = RecordedListener()
    store = PostgresTaskStore.connect(url, timeout=2.0, listener=heard)
    await store.start()
    try:
        await created(store, "t1")
        postgres_server.kill()
        began = time.monotonic()
        with pytest.raises(StoreUnavailableError):
            await store.get("t1", ALICE)
        assert time.monotonic() - began < 1.0  # refused at once, not after the timeout
        assert heard.health == [False]
        with pytest.raises(StoreUnavailableError):
            await store.watch("t1", ALICE, until_terminal=True)
        postgres_server.start()
        await asyncio.wait_for(heard.recovered.wait(), 20)
        assert await store.get("t1", ALICE) is not None
        # The listener reconnects once the probe got through (restart() cleared it by then).
        await asyncio.wait_for(store.events.listening.wait(), 20)
        watched = await store.watch("t1", ALICE, until_terminal=True)
        assert watched is not None
        await store.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)
        assert kinds(await drain(watched[1])) == ["TASK_STATE_COMPLETED"]
    finally:
        await store.close()


async def test_a_hung_database_is_a_bounded_unavailable(
    postgres_server: PostgresServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A round trip to a database that stopped answering fails within the store's bound, and
    what it left behind is settled: no task's error is left for asyncio to log."""
    url = postgres_server.create_database()
    heard = RecordedListener()
    store = PostgresTaskStore.connect(url, timeout=0.3, listener=heard)
    await store.start()
    await created(store, "t1")
    try:
        postgres_server.pause()
        began = time.monotonic()
        with pytest.raises(StoreUnavailableError):
            await store.get("t1", ALICE)
        assert time.monotonic() - began < 2.0  # the store's own 0.3 s bound, not psycopg's
        await asyncio.wait_for(heard.down.wait(), 10)  # the probe got no answer either
        assert heard.health == [False]
    finally:
        postgres_server.resume()
    await asyncio.wait_for(heard.recovered.wait(), 10)
    assert await store.get("t1", ALICE) is not None
    await store.close()
    gc.collect()  # asyncio logs a task's unretrieved error when the task is collected
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


async def test_the_kept_counts_match_the_rows_under_concurrent_writers(
    postgres_database: str,
) -> None:
    """ListTasks' total comes from counts kept per scope and state (a2a_scope_counts): with 32
    writers moving tasks of one scope through their states at once, and a full store evicting
    finished ones, the counts end equal to the rows, and no writer deadlocks."""
    store = PostgresTaskStore.connect(postgres_database, max_tasks=64)
    await store.start()
    numbers = iter(range(600))

    async def writer() -> None:
        for number in numbers:
            task_id = f"t{number}"
            await created(store, task_id)
            await store.set_status(task_id, a2a_pb2.TASK_STATE_WORKING)
            if number % 3 == 0:
                await store.set_status(task_id, a2a_pb2.TASK_STATE_INPUT_REQUIRED)
                await store.resume(task_id, ALICE, a2a_pb2.Message(message_id=f"a{number}"))
            await store.set_status(task_id, a2a_pb2.TASK_STATE_COMPLETED)

    try:
        await asyncio.gather(*(writer() for _ in range(32)))
        async with admin(postgres_database) as connection:
            cursor = await connection.execute(
                "SELECT state, count(*) FROM a2a_tasks WHERE state > 0 GROUP BY 1 ORDER BY 1"
            )
            rows = await cursor.fetchall()
            cursor = await connection.execute(
                "SELECT state, sum(tasks)::bigint FROM (SELECT state, tasks FROM "
                "a2a_scope_counts UNION ALL SELECT state, change FROM a2a_scope_changes) AS kept "
                "GROUP BY 1 HAVING sum(tasks) <> 0 ORDER BY 1"
            )
            kept = await cursor.fetchall()
        assert kept == rows
        page = await store.list(ALICE, TaskQuery(page_size=1))
        done = await store.list(ALICE, TaskQuery(page_size=1, state=a2a_pb2.TASK_STATE_COMPLETED))
        assert page.total_size == done.total_size == sum(count for _, count in rows) <= 64
    finally:
        await store.close()


async def test_a_store_starts_on_a_database_slower_to_connect_than_a_call_s_bound(
    postgres_server: PostgresServer,
) -> None:
    """Start's connection may take SLOW_CONNECT, and start's own round trips (the first lease
    renewal) run on it: a replica restarted on a database busy forking other replicas'
    connections starts, where it used to exit with "refuses connections". PostgreSQL's own
    `pre_auth_delay` makes every new connection take a second, twice the calls' bound."""
    url = postgres_server.create_database()
    async with admin(url) as connection:
        await connection.execute("ALTER SYSTEM SET pre_auth_delay = 1")
        await connection.execute("SELECT pg_reload_conf()")
    for _ in range(50):  # until the server forks new connections with the setting
        async with admin(url) as connection:
            said = await (await connection.execute("SHOW pre_auth_delay")).fetchone()
        if said is not None and said[0] == "1s":
            break
    else:
        pytest.fail("pre_auth_delay did not take effect")
    store = PostgresTaskStore.connect(url, timeout=0.5)
    try:
        await store.start()
        await created(store, "t1")
        assert await store.get("t1", ALICE) is not None
    finally:
        await store.close()


async def test_runs_that_meet_the_database_down_log_nothing_and_end_once_it_is_back(
    postgres_server: PostgresServer, caplog: pytest.LogCaptureFixture
) -> None:
    """tests/integration/store_outage_runs.py, on PostgreSQL stopped and started again."""
    url = postgres_server.create_database()
    try:
        await runs_meet_the_store_down(
            lambda settings, listener, webhooks: PostgresTaskStore.connect(
                url, listener=listener, timeout=0.5
            ),
            stop=postgres_server.stop,
            start=postgres_server.start,
            caplog=caplog,
        )
    finally:
        if not postgres_server.running:
            postgres_server.start()


async def test_a_busy_replica_refuses_new_messages_at_once_and_stays_healthy(
    postgres_database: str, caplog: pytest.LogCaptureFixture
) -> None:
    """More round trips than connections is this replica being busy, not the database down:
    with its 2 connections held (a claim and a read, on tables another session keeps locked:
    concurrent claims would share one connection, batch.py) and 2 calls waiting for one
    (here as long as `busy_wait`, 0, allows), a new message's claim is refused at once with the
    store's retryable error, health stays on, one line says so; the calls already in flight
    finish once the lock goes, and a new claim is taken again."""
    heard = RecordedListener()
    store = PostgresTaskStore.connect(
        postgres_database, listener=heard, timeout=30, max_connections=2, busy_wait=0
    )
    await store.start()
    claims = store.claims
    try:
        async with admin(postgres_database) as holder:
            await holder.execute("BEGIN")
            await holder.execute("LOCK TABLE a2a_claims, a2a_tasks IN ACCESS EXCLUSIVE MODE")
            holding = [
                asyncio.create_task(claims.claim("digest-0", "task-0", 60)),
                asyncio.create_task(store.get("t1", ALICE)),
            ]
            reads = [asyncio.create_task(store.get("t1", ALICE)) for _ in range(2)]
            for _ in range(100):  # each started: two hold the connections, two wait for one
                if store.backend.waiting == 2:
                    break
                await asyncio.sleep(0)
            assert store.backend.waiting == 2
            with pytest.raises(StoreUnavailableError, match="busy"):  # at once: no wait
                await asyncio.wait_for(claims.claim("digest-new", "task-new", 60), 5)
            await holder.execute("COMMIT")
        assert await asyncio.gather(*holding) == [None] * 2
        assert await asyncio.gather(*reads) == [None] * 2  # no such task: answered all the same
        assert await claims.claim("digest-new", "task-new", 60) is None
        assert heard.health == []
        warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warned) == 1 and "busy, not the database down" in warned[0], warned
    finally:
        await store.close()


async def test_calls_refused_a_connection_give_their_slot_back(
    postgres_server: PostgresServer,
) -> None:
    """A round trip that could not open a connection (the database down) gives back its slot:
    with 2 slots, 3 refused calls, then the database back, calls are served (a slot kept by
    each refused call would leave none, and every call would wait out its bound)."""
    url = postgres_server.create_database()
    heard = RecordedListener()
    store = PostgresTaskStore.connect(url, listener=heard, timeout=5, max_connections=2)
    await store.start()
    try:
        await created(store, "t1")
        postgres_server.stop()
        with pytest.raises(StoreUnavailableError):  # on the idle connection the stop broke
            await store.get("t1", ALICE)
        for _ in range(3):
            with pytest.raises(StoreUnavailableError, match="refuses connections"):
                await store.get("t1", ALICE)
        postgres_server.start()
        await asyncio.wait_for(heard.recovered.wait(), 20)
        for _ in range(3):
            assert await asyncio.wait_for(store.get("t1", ALICE), 4) is not None
    finally:
        if not postgres_server.running:
            postgres_server.start()
        await store.close()


async def test_a_round_trip_that_outlives_its_bound_on_a_live_database_is_no_outage(
    postgres_database: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A write that waits on a row lock past the store's bound fails (retryable), but the
    database answers the probe on its own connection at once: health stays on (no streams
    ended, readiness kept), one line says this replica is busy, and the next write goes
    through once the lock is gone."""
    heard = RecordedListener()
    store = PostgresTaskStore.connect(postgres_database, listener=heard, timeout=0.5)
    await store.start()
    try:
        await created(store, "t1")
        async with admin(postgres_database) as holder:
            await holder.execute("BEGIN")
            await holder.execute("SELECT 1 FROM a2a_tasks WHERE id = 't1' FOR UPDATE")
            with pytest.raises(StoreUnavailableError, match="did not answer in time"):
                await store.set_status("t1", a2a_pb2.TASK_STATE_WORKING)
            checking = store.backend._checking
            assert checking is not None
            await asyncio.wait_for(checking, 10)  # the probe's verdict
            await holder.execute("COMMIT")
        assert heard.health == []
        assert store.backend.busy.failing
        warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warned) == 1 and "not the database down" in warned[0], warned
        await store.set_status("t1", a2a_pb2.TASK_STATE_WORKING)
    finally:
        await store.close()


async def test_a_call_that_loses_a_deadlock_is_retryable_and_no_outage(
    postgres_database: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A statement the database rolls back to break a deadlock failed alone: the caller gets
    the store's retryable error, health stays on and no outage is logged."""
    heard = RecordedListener()
    store = PostgresTaskStore.connect(postgres_database, listener=heard)
    await store.start()
    try:
        async with admin(postgres_database) as other:
            await other.execute("CREATE TABLE rows_in_turn (id integer PRIMARY KEY)")
            await other.execute("INSERT INTO rows_in_turn VALUES (1), (2)")
            await other.execute(
                "CREATE FUNCTION take_both() RETURNS void LANGUAGE plpgsql AS $$ BEGIN "
                "UPDATE rows_in_turn SET id = id WHERE id = 2; "
                "UPDATE rows_in_turn SET id = id WHERE id = 1; END $$"
            )
            await other.execute("BEGIN")
            await other.execute("UPDATE rows_in_turn SET id = id WHERE id = 1")
            call = asyncio.create_task(store.backend.fetchone("SELECT take_both()"))
            # A lock wait inside the database has no event to await: asked until it shows.
            while not await scalar(  # noqa: ASYNC110
                postgres_database,
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'",
            ):
                await asyncio.sleep(0.01)
            # The store's statement waits first, so its deadlock check runs first: it is the
            # one rolled back, and this one then gets row 2.
            await other.execute("UPDATE rows_in_turn SET id = id WHERE id = 2")
            await other.execute("COMMIT")
        with pytest.raises(StoreUnavailableError, match="rolled the call back"):
            await call
        assert store.backend.healthy and heard.health == []
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    finally:
        await store.close()
