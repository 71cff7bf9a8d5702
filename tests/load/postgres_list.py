"""ListTasks page time on the PostgreSQL store at 1,000 and 100,000 tasks (run by hand, never by
tests): a real PostgreSQL (tests/postgres_servers.py), the store's own `list`.

One caller's scope holds N tasks (plus as many in another scope, so the index is shared), in
three contexts and two states, written straight into `a2a_tasks` with the store's row layout
(`generate_series`: 100,000 creates through the store would take minutes and measure writes,
not pages). Then, timed with the store's `list` (page size 50, median and p95 of ROUNDS calls):
the first page, a page deep in the list (its token from the middle), a state filter, a context
filter. `total_size` comes with every page: from the counts kept per scope and state, except
with a context filter, where it is counted on the context's index; `count` shows what counting
the whole scope's rows would cost instead.

    .venv/bin/python -m tests.load.postgres_list [N ...] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import psycopg

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.base import Scope, TaskQuery
from a2a_grpc.server.tasks.index import encode_page_token
from a2a_grpc.server.tasks.postgres.store import PostgresTaskStore
from tests.postgres_servers import PostgresServer

SCOPE = Scope("tenant-a", "alice")
PAGE = 50


def sample_body(task_id: str, context_id: str, state: int) -> bytes:
    task = a2a_pb2.Task(id=task_id, context_id=context_id)
    task.status.state = state
    task.history.add(message_id=f"m-{task_id}", role=a2a_pb2.ROLE_USER).parts.add().text = "hi"
    task.artifacts.add(artifact_id="echo").parts.add().text = "echo: hi"
    return task.SerializeToString()


async def fill(url: str, count: int) -> None:
    body = sample_body("x" * 36, "c" * 36, a2a_pb2.TASK_STATE_COMPLETED)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
        for owner in ("alice", "bob"):
            await connection.execute(
                "INSERT INTO a2a_tasks (id, tenant, owner, context_id, state, version, body, "
                "updated_ns, expires_at) SELECT %(owner)s || '-' || n, 'tenant-a', %(owner)s, "
                "'ctx' || (n %% 3), CASE WHEN n %% 2 = 0 THEN %(done)s ELSE %(working)s END, 0, "
                "%(body)s, 1700000000000000000 + n * 1000, CASE WHEN n %% 2 = 0 THEN "
                "now() + interval '1 day' END FROM generate_series(1, %(count)s) AS n",
                {
                    "owner": owner,
                    "count": count,
                    "body": body,
                    "done": a2a_pb2.TASK_STATE_COMPLETED,
                    "working": a2a_pb2.TASK_STATE_WORKING,
                },
            )
        await connection.execute("UPDATE a2a_counts SET tasks = %s", (2 * count,))
        await connection.execute("VACUUM ANALYZE a2a_tasks")
        await connection.execute("SELECT a2a_fold_counts(%s)", (4 * count,))  # as housekeeping
        await connection.execute("VACUUM ANALYZE a2a_scope_counts")  # as autovacuum would
        await connection.execute("VACUUM ANALYZE a2a_scope_changes")


async def timed(store: PostgresTaskStore, query: TaskQuery, rounds: int) -> tuple[float, float]:
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        page = await store.list(SCOPE, query)
        times.append((time.perf_counter() - began) * 1000)
        assert len(page.tasks) == min(PAGE, page.total_size)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1]


async def count_time(url: str, where: str, rounds: int) -> float:
    times = []
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
        for _ in range(rounds):
            began = time.perf_counter()
            await connection.execute(
                "SELECT count(*) FROM a2a_tasks WHERE tenant = 'tenant-a' AND owner = 'alice' "
                f"AND state > 0 {where}"
            )
            times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


async def plan(url: str) -> str:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
        cursor = await connection.execute(
            "EXPLAIN SELECT body, updated_ns, id FROM a2a_tasks WHERE tenant = 'tenant-a' AND "
            "owner = 'alice' AND state > 0 AND (updated_ns, id) < (1700000000050000000, 'x') "
            "ORDER BY updated_ns DESC, id DESC LIMIT 51"
        )
        return " / ".join(row[0].strip() for row in await cursor.fetchall())


async def measure(server: PostgresServer, count: int, rounds: int) -> dict[str, Any]:
    url = server.create_database(f"list{count}")
    store = PostgresTaskStore.connect(url, max_tasks=10 * count)
    await store.start()
    try:
        await fill(url, count)
        middle = 1700000000000000000 + (count // 2) * 1000
        queries = {
            "first page": TaskQuery(page_size=PAGE),
            "deep page": TaskQuery(
                page_size=PAGE, page_token=encode_page_token((middle, f"alice-{count // 2}"))
            ),
            "state filter": TaskQuery(page_size=PAGE, state=a2a_pb2.TASK_STATE_WORKING),
            "context filter": TaskQuery(page_size=PAGE, context_id="ctx1"),
        }
        results: dict[str, Any] = {"tasks": count}
        for name, query in queries.items():
            await timed(store, query, 5)  # warm the cache and the prepared statements
            results[name] = await timed(store, query, rounds)
        results["count"] = await count_time(url, "", rounds)
        results["plan"] = await plan(url)
        return results
    finally:
        await store.close()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("counts", nargs="*", type=int, default=[1000, 100_000])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    with PostgresServer() as server:
        for count in args.counts:
            results = await measure(server, count, args.rounds)
            print(f"{count:>7} tasks per scope (x2 scopes):")
            for name in ("first page", "deep page", "state filter", "context filter"):
                median, p95 = results[name]
                print(f"  {name:<15} p50 {median:6.2f} ms  p95 {p95:6.2f} ms")
            print(f"  {'count (total)':<15} p50 {results['count']:6.2f} ms")
            print(f"  plan: {results['plan']}")


if __name__ == "__main__":
    asyncio.run(main())
