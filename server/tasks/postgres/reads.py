"""Reading tasks from PostgreSQL: one task's row as its writers need it (`load`, optionally
locked for the caller's transaction), one task as a caller sees it (`read_into`), ListTasks
pages (`list_page`) and the kept events after an event id (`replay`).

ListTasks walks one of three indexes (the scope's tasks; by state; by context), newest first,
from the page token's (updated_ns, id) on: a page costs the same at any depth and any table
size (keyset pagination, no OFFSET). Page tokens are valid on every replica. The total is read
from the counts kept per scope and state (a few rows), except with a context or update-time
filter, where it is counted on that filter's index (a context's tasks are usually few).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.base import Scope, TaskQuery
from a2a_grpc.server.tasks.index import decode_page_token, encode_page_token, trim_history
from a2a_grpc.server.tasks.postgres.backend import Connection, PostgresBackend


@dataclass(slots=True)
class Loaded:
    task: a2a_pb2.Task
    scope: Scope
    version: int
    runner: str
    last_event: int
    push_version: int
    updated_ns: int


_LOAD = (
    "SELECT body, tenant, owner, version, runner, last_event, push_version, updated_ns "
    "FROM a2a_tasks "
    "WHERE id = %s AND body IS NOT NULL"
)


def _loaded(row: Any) -> Loaded | None:
    if row is None:
        return None
    body, tenant, owner, version, runner, last_event, push_version, updated_ns = row
    return Loaded(
        a2a_pb2.Task.FromString(body),
        Scope(tenant, owner),
        int(version),
        runner,
        int(last_event),
        int(push_version),
        int(updated_ns),
    )


async def load(backend: PostgresBackend, task_id: str) -> Loaded | None:
    return _loaded(await backend.fetchone(_LOAD, (task_id,)))


async def load_locked(connection: Connection, task_id: str) -> Loaded | None:
    """The task's row, locked until the caller's transaction ends (`FOR UPDATE`): writes of
    other replicas wait, then find its version moved."""
    cursor = await connection.execute(_LOAD + " FOR UPDATE", (task_id,))
    return _loaded(await cursor.fetchone())


async def read_into(
    backend: PostgresBackend,
    task_id: str,
    scope: Scope,
    target: a2a_pb2.Task,
    history_length: int | None,
) -> bool:
    row = await backend.fetchone(
        "SELECT body FROM a2a_tasks WHERE id = %s AND tenant = %s AND owner = %s "
        "AND body IS NOT NULL",
        (task_id, scope.tenant, scope.owner),
    )
    if row is None:
        return False
    target.ParseFromString(row[0])
    trim_history(target, history_length)
    return True


async def list_page(
    backend: PostgresBackend, scope: Scope, query: TaskQuery
) -> a2a_pb2.ListTasksResponse:
    response = a2a_pb2.ListTasksResponse(page_size=query.page_size)
    where = ["tenant = %(tenant)s", "owner = %(owner)s", "state > 0"]
    params: dict[str, Any] = {"tenant": scope.tenant, "owner": scope.owner}
    if query.context_id:
        where.append("context_id = %(context)s")
        params["context"] = query.context_id
    if query.state:
        where.append("state = %(state)s")
        params["state"] = query.state
    if query.updated_after_ns:
        where.append("updated_ns >= %(floor)s")
        params["floor"] = query.updated_after_ns
    filters = " AND ".join(where)
    page_where = filters
    if query.page_token:
        updated, last_id = decode_page_token(query.page_token)
        page_where += " AND (updated_ns, id) < (%(updated)s, %(last_id)s)"
        params.update(updated=updated, last_id=last_id)
    params["limit"] = query.page_size + 1

    if query.context_id or query.updated_after_ns:  # counted on the filter's index
        count = f"SELECT count(*) FROM a2a_tasks WHERE {filters}"
    else:  # kept counts per scope and state, and their changes not folded yet (schema.py)
        kept = " AND ".join(where[:2] + where[3:])
        count = (
            f"SELECT (SELECT coalesce(sum(tasks), 0) FROM a2a_scope_counts WHERE {kept}) + "
            f"(SELECT coalesce(sum(change), 0) FROM a2a_scope_changes WHERE {kept})"
        )

    async def page_and_count(connection: Connection) -> tuple[list[Any], int]:
        cursor = await connection.execute(
            f"SELECT body, updated_ns, id FROM a2a_tasks WHERE {page_where} "
            "ORDER BY updated_ns DESC, id DESC LIMIT %(limit)s",
            params,
        )
        rows = await cursor.fetchall()
        cursor = await connection.execute(count, params)
        counted = await cursor.fetchone()
        return rows, int(counted[0]) if counted else 0

    rows, total = await backend.run(page_and_count)
    if len(rows) > query.page_size:
        rows.pop()
        _, updated_ns, task_id = rows[-1]
        response.next_page_token = encode_page_token((int(updated_ns), task_id))
    for body, _, _ in rows:
        task = response.tasks.add()
        task.ParseFromString(body)
        if not query.include_artifacts:
            del task.artifacts[:]
        trim_history(task, query.history_length)
    response.total_size = total
    return response


async def replay(
    backend: PostgresBackend, task_id: str, after: int | None, count: int
) -> tuple[Any, str, list[tuple[int, bytes, str]]]:
    """The task's row (body, tenant, owner, state; None when it is not stored) and the first
    `count` events after sequence `after`: "ok" with them, "expired" when some are no longer
    kept, "unknown" when `after` is no event of the task (None: a text that is no sequence; 0:
    before its first event, which no snapshot names, as a task is created with one; past its
    last). A replay reads page after page, each checked as the first."""

    async def read(connection: Connection) -> tuple[Any, str, list[tuple[int, bytes, str]]]:
        cursor = await connection.execute(
            "SELECT body, tenant, owner, state, last_event FROM a2a_tasks "
            "WHERE id = %s AND body IS NOT NULL",
            (task_id,),
        )
        row = await cursor.fetchone()
        if row is None:
            return None, "", []
        if after is None or after < 1 or after > int(row[4]):
            return row, "unknown", []
        cursor = await connection.execute(
            "SELECT seq, body, flags FROM a2a_events WHERE task_id = %s AND seq > %s "
            "ORDER BY seq LIMIT %s",
            (task_id, after, count),
        )
        events = [(int(seq), bytes(body), flags) for seq, body, flags in await cursor.fetchall()]
        first_wanted = after + 1
        if int(row[4]) >= first_wanted and (not events or events[0][0] != first_wanted):
            return row, "expired", []
        return row, "ok", events

    # One snapshot for the row and its events: REPEATABLE READ would be stricter, but events
    # only grow at the end and the row names the last one, so a later event read here is one
    # the subscription also gets (and skips, being after this one).
    return await backend.run(read)
