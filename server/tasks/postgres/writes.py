"""The write statements of the PostgreSQL store: a task's row with its events, their
notifications and the trimming of its kept events, in one statement (one round trip, atomic in
autocommit mode, or one step of a caller's transaction).

A write names the version it read; a row whose version moved is not written (the statement
returns no row) and the caller learns why from `state_of`: a lost race is an error, never a
silent overwrite. What a write settles goes with it: the replica running the task (`runner`),
when a finished task expires, since when a task waits for input, and which replica delivers
its webhooks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from a2a_grpc.server.tasks.postgres.arrays import ByteaArray, TextArray
from a2a_grpc.server.tasks.postgres.events import event_payload

_SETTLE = """
        expires_at = CASE WHEN %(terminal)s
            THEN clock_timestamp() + make_interval(secs => %(ttl)s) ELSE {expires} END,
        parked_at = CASE %(park)s
            WHEN 'park' THEN clock_timestamp() WHEN 'unpark' THEN NULL ELSE {parked} END"""

_EVENTS = """
), added AS (
    INSERT INTO a2a_events (task_id, seq, flags, body)
    SELECT %(id)s, written.last_event - %(n)s + e.i, e.f, e.b
    FROM written, unnest(%(bodies)s::bytea[], %(flags)s::text[]) WITH ORDINALITY AS e(b, f, i)
), trimmed AS (
    DELETE FROM a2a_events
    WHERE task_id = %(id)s AND seq <= %(trim)s AND EXISTS (SELECT 1 FROM written)
), notified AS (
    SELECT pg_notify('a2a_events', p) FROM written, unnest(%(payloads)s::text[]) AS p
)
SELECT written.last_event, written.push_version, (SELECT count(*) FROM notified) FROM written
"""

UPDATE = (
    """
WITH written AS (
    UPDATE a2a_tasks SET
        body = %(body)s, state = %(state)s, updated_ns = %(updated)s, version = version + 1,
        last_event = last_event + %(n)s, runner = coalesce(%(runner)s, runner),
        deliverer = CASE WHEN %(deliverer)s::text IS NOT NULL AND push_version > 0
            THEN %(deliverer)s ELSE deliverer END,"""
    + _SETTLE.format(expires="expires_at", parked="parked_at")
    + """
    WHERE id = %(id)s AND version = %(version)s
    RETURNING last_event, push_version"""
    + _EVENTS
)
"""The write of a stored task at `version`."""

CREATE = (
    """
WITH written AS (
    INSERT INTO a2a_tasks AS k (id, tenant, owner, context_id, state, version, body,
        updated_ns, runner, last_event, expires_at, parked_at)
    VALUES (%(id)s, %(tenant)s, %(owner)s, %(context)s, %(state)s, 0, %(body)s, %(updated)s,
        coalesce(%(runner)s, ''), %(n)s,
        CASE WHEN %(terminal)s THEN clock_timestamp() + make_interval(secs => %(ttl)s) END,
        CASE WHEN %(park)s = 'park' THEN clock_timestamp() END)
    ON CONFLICT (id) DO UPDATE SET
        context_id = EXCLUDED.context_id, state = EXCLUDED.state, version = 0,
        body = EXCLUDED.body, updated_ns = EXCLUDED.updated_ns, runner = EXCLUDED.runner,
        last_event = EXCLUDED.last_event, expires_at = EXCLUDED.expires_at,
        parked_at = EXCLUDED.parked_at,
        deliverer = CASE WHEN %(deliverer)s::text IS NOT NULL AND k.push_version > 0
            THEN %(deliverer)s ELSE k.deliverer END
    WHERE k.version = -1 AND k.tenant = EXCLUDED.tenant AND k.owner = EXCLUDED.owner
    RETURNING last_event, push_version, xmax = 0 AS inserted
), counted AS (
    UPDATE a2a_counts SET tasks = tasks + 1
    WHERE id = 1 AND coalesce((SELECT inserted FROM written), false)"""
    + _EVENTS
)
"""A task's creation in the room its reservation holds (version -1), or without one."""

STATE_OF = "SELECT state, version FROM a2a_tasks WHERE id = %s AND body IS NOT NULL"


@dataclass(slots=True)
class Write:
    """The parameters of one write (see `params`)."""

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

    def params(self, **extra: Any) -> dict[str, Any]:
        seqs = range(self.last_event + 1, self.last_event + 1 + len(self.events))
        last = self.last_event + len(self.events)
        return {
            "id": self.task_id,
            "version": self.version,
            "body": self.body,
            "state": self.state,
            "updated": self.updated_ns,
            "n": len(self.events),
            "runner": self.runner,
            "terminal": self.terminal,
            "park": self.park,
            "ttl": self.ttl,
            "deliverer": self.deliverer,
            "bodies": ByteaArray(body for body, _ in self.events),
            "flags": TextArray(flags for _, flags in self.events),
            "payloads": TextArray(
                event_payload(self.task_id, seq, flags, body)
                for seq, (body, flags) in zip(seqs, self.events, strict=True)
            ),
            "trim": last - self.keep_events if last > self.keep_events else -1,
            **extra,
        }
