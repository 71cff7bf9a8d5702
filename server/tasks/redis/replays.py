"""Replays from Redis: `watch(after=)`'s kept events after an id, read from the task's stream
with the REPLAY script a page at a time (broker.py: pacing), then its live events. See store.py
for the contract and scripts.py for REPLAY."""

from __future__ import annotations

from typing import Any

from a2a_grpc.core.errors import EventIdExpiredError
from a2a_grpc.core.states import TERMINAL_STATES
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.base import Scope
from a2a_grpc.server.tasks.broker import REPLAY_BATCH, Subscription
from a2a_grpc.server.tasks.redis.backend import RedisBackend
from a2a_grpc.server.tasks.redis.events import EventReader, ReplayedEvent, ReplayedPage
from a2a_grpc.server.tasks.replay_ids import no_longer_kept, not_an_id, parse_entry_id


async def watch_after(
    backend: RedisBackend,
    events: EventReader,
    stream_length: int,
    task_id: str,
    scope: Scope,
    subscription: Subscription,
    after: str,
) -> tuple[a2a_pb2.Task, Subscription] | None:
    """`watch(after=)` on `subscription` (just opened): the task, and the subscription fed its
    kept events after `after` page by page (`EventReader.replay`), then the live ones; None
    when the task is not stored in `scope` (the subscription is canceled then, and when this
    raises)."""
    keys = backend.keys
    count = min(REPLAY_BATCH, subscription.room)
    fields = await backend.run_script(
        "REPLAY",
        [keys.task(task_id), keys.events(task_id)],
        ["" if parse_entry_id(after) is None else after, count],
    )
    try:
        page = _page(task_id, scope, after, fields, stream_length)
    except EventIdExpiredError:
        subscription.cancel()
        raise
    if page is None:
        subscription.cancel()
        return None
    subscription.snapshot_id = after

    async def next_page(cursor: str, count: int) -> ReplayedPage:
        fields = await backend.run_script(
            "REPLAY", [keys.task(task_id), keys.events(task_id)], [cursor, count]
        )
        page = _page(task_id, scope, cursor, fields, stream_length)
        if page is None:
            raise EventIdExpiredError(
                f"task {task_id} is no longer stored: its events after {cursor!r} are gone"
            )
        return page

    events.replay(subscription, after, *page, more=count, next_page=next_page)
    return a2a_pb2.Task.FromString(fields[0]), subscription


def _page(
    task_id: str, scope: Scope, after: str, fields: Any, stream_length: int
) -> ReplayedPage | None:
    """REPLAY's answer: its events and whether the task is terminal; None when the task is not
    stored in `scope`; EventIdExpiredError when the events after `after` are not all kept."""
    if not fields or Scope(fields[1].decode(), fields[2].decode()) != scope:
        return None
    verdict = fields[4].decode()
    if verdict != "ok":
        if verdict == "unknown":
            raise not_an_id(task_id, after)
        raise no_longer_kept(task_id, after, stream_length)
    replayed: list[ReplayedEvent] = []
    for entry_id, entry in fields[5:]:
        values = dict(zip(entry[::2], entry[1::2], strict=True))
        replayed.append((entry_id.decode(), values[b"e"], values[b"f"].decode()))
    return replayed, int(fields[3]) in TERMINAL_STATES
