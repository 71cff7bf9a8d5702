"""Bytes per small finished task in the PostgreSQL store's tables (run by hand, never by tests).

N tasks (default 10,000) go through the store as a blocking SendMessage of the demo agent
writes them: created with its first status (WORKING), an echo artifact, COMPLETED, each with
its message-id claim; then the tables' sizes (heap, TOAST and indexes,
`pg_total_relation_size`, after VACUUM) divided by N, per table and in all. `--json` prints
one JSON line instead (`make bench` reads it).

    .venv/bin/python -m tests.load.postgres_bytes [N] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid

import psycopg

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.base import FirstStatus, Scope
from a2a_grpc.server.tasks.postgres.store import PostgresTaskStore
from tests.postgres_servers import PostgresServer

TABLES = (
    "a2a_tasks",
    "a2a_events",
    "a2a_claims",
    "a2a_scope_counts",
    "a2a_scope_changes",
    "a2a_counts",
)
SCOPE = Scope("", "anonymous")


async def write(store: PostgresTaskStore, count: int) -> None:
    async def one(number: int) -> None:
        task_id = str(uuid.uuid4())
        message = a2a_pb2.Message(message_id=str(uuid.uuid4()), role=a2a_pb2.ROLE_USER)
        message.parts.add().text = f"hello {number}"
        task = a2a_pb2.Task(id=task_id, context_id=str(uuid.uuid4()))
        task.status.state = a2a_pb2.TASK_STATE_SUBMITTED
        task.history.append(message)
        assert await store.claims.claim(str(uuid.uuid4()), f"digest|{task_id}", 3600) is None
        await store.reserve(SCOPE, 100, task_id)
        await store.create(
            task, SCOPE, reserved_size=100, first_status=FirstStatus(a2a_pb2.TASK_STATE_WORKING)
        )

        def artifact(stored: a2a_pb2.Task) -> None:
            stored.artifacts.add(artifact_id="echo").parts.add().text = f"echo: hello {number}"

        await store.update(task_id, artifact)
        await store.set_status(task_id, a2a_pb2.TASK_STATE_COMPLETED)

    numbers = iter(range(count))

    async def caller() -> None:
        for number in numbers:
            await one(number)

    await asyncio.gather(*(caller() for _ in range(16)))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", type=int, nargs="?", default=10_000)
    parser.add_argument("--json", action="store_true", help="one JSON line")
    args = parser.parse_args()
    count = args.tasks
    by_table: dict[str, float] = {}
    with PostgresServer() as server:
        url = server.create_database("bytes")
        store = PostgresTaskStore.connect(url, max_tasks=2 * count)
        await store.start()
        try:
            await write(store, count)
        finally:
            await store.close()
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
            # Count changes are folded within a second by the housekeeper of a running replica
            # (schema.py, version 2): they take room for a second's writes, not per task.
            await connection.execute("SELECT a2a_fold_counts(%s)", (4 * count,))
            await connection.execute("VACUUM ANALYZE")
            total = 0
            for table in TABLES:
                cursor = await connection.execute("SELECT pg_total_relation_size(%s)", (table,))
                row = await cursor.fetchone()
                size = int(row[0]) if row else 0
                total += size
                by_table[table] = size / count
    if args.json:
        figures = {
            "tasks": count,
            "bytes_per_task": total / count,
            "bytes_per_task_by_table": by_table,
        }
        print(json.dumps(figures))
        return
    for table, size in by_table.items():
        print(f"{table:<18} {size:8.0f} bytes per task")
    print(f"{'all':<18} {total / count:8.0f} bytes per task ({count} tasks)")


if __name__ == "__main__":
    asyncio.run(main())
