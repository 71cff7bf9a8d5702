"""The PostgreSQL store's schema: created on start, migrated from every earlier version (and
from a synthetic older one, with tasks in it, to a synthetic newer one), one migrator at a
time, a newer database refused, and `a2a-grpc store migrate` on a real server."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.base import TaskQuery
from a2a_grpc.server.tasks.contract import ALICE, agent_text, created
from a2a_grpc.server.tasks.postgres import schema
from a2a_grpc.server.tasks.postgres.schema import (
    MIGRATIONS,
    SCHEMA_VERSION,
    Migration,
    SchemaTooNewError,
    migrate,
)
from a2a_grpc.server.tasks.postgres.store import PostgresTaskStore
from tests.postgres_servers import PostgresServer

ROOT = Path(__file__).resolve().parents[2]

SYNTHETIC_NEXT = Migration(
    SCHEMA_VERSION + 1,
    "a synthetic next release: a column with a default, an index, a changed function",
    """
    ALTER TABLE a2a_tasks ADD COLUMN labels text NOT NULL DEFAULT '';
    CREATE INDEX a2a_tasks_labels ON a2a_tasks (labels) WHERE labels <> '';
    CREATE OR REPLACE FUNCTION a2a_claim(p_digest text, p_value text,
        p_window double precision) RETURNS text LANGUAGE plpgsql AS $$
    DECLARE existing text;
    BEGIN
        INSERT INTO a2a_claims AS c VALUES (
            p_digest, p_value, clock_timestamp() + make_interval(secs => p_window))
        ON CONFLICT (digest) DO UPDATE SET value = EXCLUDED.value,
            expires_at = EXCLUDED.expires_at WHERE c.expires_at <= clock_timestamp();
        IF FOUND THEN RETURN NULL; END IF;
        SELECT value INTO existing FROM a2a_claims WHERE digest = p_digest;
        RETURN existing;
    END $$;
    """,
)


async def connect(url: str) -> psycopg.AsyncConnection[Any]:
    return await psycopg.AsyncConnection.connect(url, autocommit=True)


async def versions(url: str) -> list[int]:
    async with await connect(url) as connection:
        rows = await (
            await connection.execute("SELECT version FROM a2a_schema ORDER BY 1")
        ).fetchall()
        return [version for (version,) in rows]


async def test_a_store_creates_the_schema_on_start_once(postgres_database: str) -> None:
    store = PostgresTaskStore.connect(postgres_database)
    await store.start()
    await store.close()
    again = PostgresTaskStore.connect(postgres_database)
    await again.start()  # finds it at its version: nothing to do
    await again.close()
    assert await versions(postgres_database) == [m.version for m in MIGRATIONS]


async def test_counts_kept_at_version_1_stay_right_as_changes_at_version_2(
    postgres_database: str,
) -> None:
    """Version 2 keeps scope counts as appended changes: tasks counted by a version 1 database
    are still counted after the upgrade, with those written since, and housekeeping's fold
    leaves the totals as they were and no change unfolded."""
    old = PostgresTaskStore.connect(postgres_database, migrations=MIGRATIONS[:1])
    await old.start()
    try:
        for task_id in ("old-1", "old-2"):
            await created(old, task_id)
            await old.set_status(task_id, a2a_pb2.TASK_STATE_COMPLETED, agent_text("done"))
    finally:
        await old.close()
    new = PostgresTaskStore.connect(postgres_database)
    await new.start()
    done = TaskQuery(page_size=1, state=a2a_pb2.TASK_STATE_COMPLETED)
    try:
        await created(new, "new-1")
        await new.set_status("new-1", a2a_pb2.TASK_STATE_COMPLETED, agent_text("done"))
        await created(new, "new-2")
        await new.set_status("new-2", a2a_pb2.TASK_STATE_WORKING)
        assert (await new.list(ALICE, done)).total_size == 3
        assert (await new.list(ALICE, TaskQuery(page_size=1))).total_size == 4
        await new.evict_expired()  # folds the changes (none expired yet)
        async with await connect(postgres_database) as connection:
            left = await (
                await connection.execute("SELECT count(*) FROM a2a_scope_changes")
            ).fetchone()
        assert left == (0,)
        assert (await new.list(ALICE, done)).total_size == 3
        assert (await new.list(ALICE, TaskQuery(page_size=1))).total_size == 4
    finally:
        await new.close()


async def test_a_count_folded_to_zero_leaves_no_row(postgres_database: str) -> None:
    """Housekeeping's fold (version 4) deletes a scope's count once it is zero, whether it got
    there over two folds or within one: a scope whose tasks are all gone leaves no row, and the
    other scopes' counts stay as they were."""
    store = PostgresTaskStore.connect(postgres_database)
    await store.start()
    await store.close()
    async with await connect(postgres_database) as connection:

        async def fold(*changes: tuple[str, int, int]) -> int:
            for owner, state, change in changes:
                await connection.execute(
                    "SELECT a2a_count('', %s, %s, 0, %s)", (owner, state, change)
                )
            row = await (await connection.execute("SELECT a2a_fold_counts(100)")).fetchone()
            return -1 if row is None else int(row[0])

        async def counts() -> list[tuple[Any, ...]]:
            cursor = await connection.execute(
                "SELECT owner, state, tasks FROM a2a_scope_counts ORDER BY 1, 2"
            )
            return await cursor.fetchall()

        assert await fold(("gone", 3, 1), ("gone", 3, 1), ("kept", 3, 1)) == 3
        assert await counts() == [("gone", 3, 2), ("kept", 3, 1)]
        assert await fold(("gone", 3, -1), ("gone", 3, -1), ("kept", 5, 1)) == 3
        assert await counts() == [("kept", 3, 1), ("kept", 5, 1)]
        assert await fold(("brief", 3, 1), ("brief", 3, -1)) == 2
        assert await counts() == [("kept", 3, 1), ("kept", 5, 1)]
        assert await fold() == 0


@pytest.mark.parametrize("previous", range(SCHEMA_VERSION))
async def test_a_database_of_every_earlier_version_is_migrated_to_this_one(
    postgres_database: str, previous: int
) -> None:
    async with await connect(postgres_database) as connection:
        assert await migrate(connection, target=previous) == (0, previous)
        assert await migrate(connection) == (previous, SCHEMA_VERSION)
    store = PostgresTaskStore.connect(postgres_database, migrate=False)
    await store.start()
    try:
        await created(store, "t1")
        await store.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED, agent_text("done"))
        assert (await store.list(ALICE, TaskQuery(page_size=10))).total_size == 1
    finally:
        await store.close()


async def test_an_older_database_with_tasks_is_upgraded_and_keeps_them(
    postgres_database: str,
) -> None:
    """A database written by this release (version N) is upgraded by the next one (a synthetic
    N+1): every task, event and claim is still there, and the store goes on writing."""
    old = PostgresTaskStore.connect(postgres_database)
    await old.start()
    try:
        await created(old, "done")
        await old.set_status("done", a2a_pb2.TASK_STATE_COMPLETED, agent_text("done"))
        await created(old, "waiting")
        await old.set_status("waiting", a2a_pb2.TASK_STATE_INPUT_REQUIRED, agent_text("which?"))
        assert await old.claims.claim("d", "first", 600) is None
    finally:
        await old.close()
    # The next release's server migrates on start.
    new = PostgresTaskStore.connect(postgres_database, migrations=(*MIGRATIONS, SYNTHETIC_NEXT))
    await new.start()
    assert await versions(postgres_database) == [
        *(m.version for m in MIGRATIONS),
        SCHEMA_VERSION + 1,
    ]
    try:
        done = await new.get("done", ALICE)
        assert done is not None and done.status.state == a2a_pb2.TASK_STATE_COMPLETED
        assert await new.claims.claim("d", "second", 600) == "first"
        answer = a2a_pb2.Message(message_id="m2", role=a2a_pb2.ROLE_USER)
        assert await new.resume("waiting", ALICE, answer) is not None
        await new.set_status("waiting", a2a_pb2.TASK_STATE_COMPLETED)
        page = await new.list(ALICE, TaskQuery(page_size=10))
        assert [task.id for task in page.tasks] == ["waiting", "done"]
    finally:
        await new.close()


async def test_replicas_migrating_at_once_apply_each_migration_once(
    postgres_database: str,
) -> None:
    connections = [await connect(postgres_database) for _ in range(4)]
    try:
        results = await asyncio.gather(*(migrate(connection) for connection in connections))
    finally:
        for connection in connections:
            await connection.close()
    assert [after for _, after in results] == [SCHEMA_VERSION] * 4
    assert await versions(postgres_database) == [m.version for m in MIGRATIONS]


async def test_a_database_a_newer_release_migrated_is_refused(postgres_database: str) -> None:
    async with await connect(postgres_database) as connection:
        await migrate(connection, (*MIGRATIONS, SYNTHETIC_NEXT))
    store = PostgresTaskStore.connect(postgres_database)
    with pytest.raises(SchemaTooNewError, match="newer than this release knows"):
        await store.start()
    await store.close()
    stale = PostgresTaskStore.connect(postgres_database, migrate=False)
    with pytest.raises(SchemaTooNewError, match="a2a-grpc store migrate"):
        await stale.start()
    await stale.close()
    assert MIGRATIONS[-1].version == schema.SCHEMA_VERSION


def store_command(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "a2a_grpc.cli.main", "store", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )


def test_store_migrate_on_the_command_line(postgres_server: PostgresServer) -> None:
    url = postgres_server.create_database("cli")
    postgres_server.psql("ALTER USER postgres PASSWORD 's3cret'")  # trust: not checked
    with_password = url.replace("postgres@", "postgres:s3cret@")
    first = store_command("migrate", with_password)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == (
        f"postgresql://postgres:***@127.0.0.1:{postgres_server.port}/cli: migrated the a2a "
        f"schema from version 0 to {SCHEMA_VERSION}"
    )
    again = store_command("migrate", env={"A2A_GRPC_STORE": with_password})
    assert again.returncode == 0 and again.stdout.strip().endswith(
        f"is at version {SCHEMA_VERSION}; nothing to do"
    )
    assert "s3cret" not in first.stdout + again.stdout
    redis = store_command("migrate", "redis://127.0.0.1:1/0")
    assert redis.returncode == 0 and "no schema to migrate; nothing to do" in redis.stdout
    unknown = store_command("migrate", "nosuch://here")
    assert (
        unknown.returncode == 2 and "no store is registered for a nosuch:// URL" in unknown.stderr
    )
    postgres_server.kill()
    down = store_command("migrate", with_password)
    assert down.returncode == 2 and down.stdout == ""
    assert down.stderr.startswith("a2a-grpc store migrate: postgresql://postgres:***@")
    assert "s3cret" not in down.stderr and len(down.stderr.strip().splitlines()) == 1
    missing = store_command("migrate", env={"A2A_GRPC_STORE": ""})
    assert missing.returncode == 2 and "postgresql:// URL" in missing.stderr
