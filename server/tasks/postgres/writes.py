"""The write statements of the PostgreSQL store: tasks' rows with their events, the events'
notifications and the trimming of their kept events, in one statement for any number of tasks
(sets.py: one round trip, atomic in autocommit mode, or one step of a caller's transaction).

A write names the version it read; a row whose version moved is not written (the write's row
says it found none) and the caller learns why from `STATE_OF`: a lost race is an error, never
a silent overwrite. What a write settles goes with it: the replica running the task (`runner`),
when a finished task expires, since when a task waits for input, and which replica delivers
its webhooks.

Each statement takes one element per write in its arrays (`w`, in the writes' order), and the
writes' events flattened (`e`: the write's ordinal, the event's place in it, its bytes, flags
and notification); its rows are (found, the task's last event sequence, its push configs'
version), one per write, in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from a2a_grpc.server.tasks.postgres.arrays import (
    BoolArray,
    ByteaArray,
    Float8Array,
    Int4Array,
    Int8Array,
    TextArray,
)
from a2a_grpc.server.tasks.postgres.events import event_payload
from a2a_grpc.server.tasks.postgres.sets import SetStatement

_EVENTS = """
), e AS (
    SELECT * FROM unnest(%(e_write)s::integer[], %(e_place)s::integer[], %(e_body)s::bytea[],
        %(e_flags)s::text[], %(e_payload)s::text[]) WITH ORDINALITY
        AS e(i, place, body, flags, payload, o)
), added AS (
    INSERT INTO a2a_events (task_id, seq, flags, body)
    SELECT done.id, done.last_event - done.n + e.place, e.flags, e.body
    FROM done JOIN e ON e.i = done.i
), trimmed AS (
    DELETE FROM a2a_events AS kept USING done
    WHERE kept.task_id = ANY(%(trimmed)s::text[]) AND kept.task_id = done.id
        AND kept.seq <= done.trim
), notified AS (
    SELECT pg_notify('a2a_events', payload) FROM (
        SELECT e.payload FROM done JOIN e ON e.i = done.i ORDER BY e.o) AS told
)
SELECT done.i IS NOT NULL, done.last_event, done.push_version, (SELECT count(*) FROM notified)
FROM w LEFT JOIN done ON done.i = w.i
ORDER BY w.i
"""
# `told` keeps each task's notifications in the order of its events: a stream reads them in
# that order (events.py). `trimmed` names the tasks that have events to trim (seldom any): their
# events are found on the primary key whatever the planner's estimate of `done`, where a plan
# made for no particular parameters could otherwise read the whole table.

_UPDATE = (
    """
WITH w AS (
    SELECT * FROM unnest(%(id)s::text[], %(version)s::bigint[], %(body)s::bytea[],
        %(state)s::integer[], %(updated)s::bigint[], %(n)s::integer[], %(runner)s::text[],
        %(terminal)s::boolean[], %(park)s::text[], %(ttl)s::double precision[],
        %(deliverer)s::text[], %(trim)s::bigint[]) WITH ORDINALITY
        AS w(id, version, body, state, updated, n, runner, terminal, park, ttl, deliverer,
            trim, i)
), done AS (
    UPDATE a2a_tasks AS k SET
        body = w.body, state = w.state, updated_ns = w.updated, version = k.version + 1,
        last_event = k.last_event + w.n, runner = coalesce(w.runner, k.runner),
        deliverer = CASE WHEN w.deliverer IS NOT NULL AND k.push_version > 0
            THEN w.deliverer ELSE k.deliverer END,
        expires_at = CASE WHEN w.terminal
            THEN clock_timestamp() + make_interval(secs => w.ttl) ELSE k.expires_at END,
        parked_at = CASE w.park
            WHEN 'park' THEN clock_timestamp() WHEN 'unpark' THEN NULL ELSE k.parked_at END
    FROM w
    WHERE k.id = ANY(%(id)s::text[]) AND k.id = w.id AND k.version = w.version
    RETURNING w.i, k.id, k.last_event, k.push_version, w.n, w.trim"""
    + _EVENTS
)
# `k.id = ANY(...)`: the rows are found on the primary key, in its order, whatever the
# planner's estimate of the arrays' length.

_CREATE = (
    """
WITH w AS (
    SELECT * FROM unnest(%(id)s::text[], %(tenant)s::text[], %(owner)s::text[],
        %(context)s::text[], %(body)s::bytea[], %(state)s::integer[], %(updated)s::bigint[],
        %(n)s::integer[], %(runner)s::text[], %(terminal)s::boolean[], %(park)s::text[],
        %(ttl)s::double precision[], %(deliverer)s::text[], %(trim)s::bigint[])
        WITH ORDINALITY
        AS w(id, tenant, owner, context, body, state, updated, n, runner, terminal, park, ttl,
            deliverer, trim, i)
), written AS (
    INSERT INTO a2a_tasks AS k (id, tenant, owner, context_id, state, version, body,
        updated_ns, runner, last_event, expires_at, parked_at)
    SELECT id, tenant, owner, context, state, 0, body, updated, coalesce(runner, ''), n,
        CASE WHEN terminal THEN clock_timestamp() + make_interval(secs => ttl) END,
        CASE WHEN park = 'park' THEN clock_timestamp() END
    FROM w ORDER BY id
    ON CONFLICT (id) DO UPDATE SET
        context_id = EXCLUDED.context_id, state = EXCLUDED.state, version = 0,
        body = EXCLUDED.body, updated_ns = EXCLUDED.updated_ns, runner = EXCLUDED.runner,
        last_event = EXCLUDED.last_event, expires_at = EXCLUDED.expires_at,
        parked_at = EXCLUDED.parked_at,
        deliverer = coalesce(
            (SELECT w.deliverer FROM w WHERE w.id = EXCLUDED.id AND k.push_version > 0),
            k.deliverer)
    WHERE k.version = -1 AND k.tenant = EXCLUDED.tenant AND k.owner = EXCLUDED.owner
    RETURNING k.id, k.last_event, k.push_version, xmax = 0 AS inserted
), counted AS (
    UPDATE a2a_counts SET tasks = tasks + (SELECT count(*) FROM written WHERE inserted)
    WHERE id = 1 AND EXISTS (SELECT 1 FROM written WHERE inserted)
), done AS (
    SELECT w.i, written.id, written.last_event, written.push_version, w.n, w.trim
    FROM written JOIN w ON w.id = written.id"""
    + _EVENTS
)

STATE_OF = "SELECT state, version FROM a2a_tasks WHERE id = %s AND body IS NOT NULL"


@dataclass(slots=True)
class Write:
    """What one write of a task gives its statement."""

    task_id: str
    version: int
    body: bytes
    state: int
    updated_ns: int
    last_event: int
    """The task's last event sequence as read (the new events follow it)."""
    events: list[tuple[bytes, str]]
    """(StreamResponse bytes, flags) of the events the write makes, in order."""
    runner: str | None = None
    """The replica running the task afterwards ("" none; None: unchanged)."""
    terminal: bool = False
    park: str = ""
    """"park": it waits for input from now; "unpark": it no longer does."""
    ttl: float = 0.0
    deliverer: str | None = None
    keep_events: int = 1000
    tenant: str = ""
    owner: str = ""
    context_id: str = ""
    """The task's scope and context: only a creation writes them."""

    @property
    def trim(self) -> int:
        """The last sequence of the events no longer kept (-1: none)."""
        last = self.last_event + len(self.events)
        return last - self.keep_events if last > self.keep_events else -1


class _TaskWrites(SetStatement):
    def __init__(self, sql: str, *, create: bool) -> None:
        self.sql = sql
        self.create = create

    def params(self, items: Sequence[Write]) -> dict[str, Any]:
        e_write: list[int] = []
        e_place: list[int] = []
        e_body: list[bytes] = []
        e_flags: list[str] = []
        e_payload: list[str] = []
        for ordinal, write in enumerate(items, 1):
            for place, (body, flags) in enumerate(write.events, 1):
                e_write.append(ordinal)
                e_place.append(place)
                e_body.append(body)
                e_flags.append(flags)
                e_payload.append(
                    event_payload(write.task_id, write.last_event + place, flags, body)
                )
        params = {
            "id": TextArray(write.task_id for write in items),
            "body": ByteaArray(write.body for write in items),
            "state": Int4Array(write.state for write in items),
            "updated": Int8Array(write.updated_ns for write in items),
            "n": Int4Array(len(write.events) for write in items),
            "runner": TextArray(write.runner for write in items),
            "terminal": BoolArray(write.terminal for write in items),
            "park": TextArray(write.park for write in items),
            "ttl": Float8Array(write.ttl for write in items),
            "deliverer": TextArray(write.deliverer for write in items),
            "trim": Int8Array(write.trim for write in items),
            "trimmed": TextArray(write.task_id for write in items if write.trim >= 0),
            "e_write": Int4Array(e_write),
            "e_place": Int4Array(e_place),
            "e_body": ByteaArray(e_body),
            "e_flags": TextArray(e_flags),
            "e_payload": TextArray(e_payload),
        }
        if self.create:
            params["tenant"] = TextArray(write.tenant for write in items)
            params["owner"] = TextArray(write.owner for write in items)
            params["context"] = TextArray(write.context_id for write in items)
        else:
            params["version"] = Int8Array(write.version for write in items)
        return params


UPDATE: SetStatement = _TaskWrites(_UPDATE, create=False)
"""The writes of stored tasks, each at the version it read."""

CREATE: SetStatement = _TaskWrites(_CREATE, create=True)
"""Tasks' creation, each in the room its reservation holds (version -1), or without one."""
