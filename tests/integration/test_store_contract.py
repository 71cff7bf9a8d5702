"""The TaskStore contract (server/tasks/base.py), one suite run against every store: the
in-memory one and Redis (a real redis-server per test). Plus what only a shared store can
show: two stores on one Redis, as two replicas would hold them."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from a2a_grpc.core.errors import EventIdExpiredError, ServiceUnavailableError
from a2a_grpc.core.event_ids import EVENT_ID_EXTENSION, event_id
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from a2a_grpc.server.card import demo_card
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.protocol.call_context import CallContext
from a2a_grpc.server.protocol.dedup import window_for
from a2a_grpc.server.protocol.handler import RequestHandler
from a2a_grpc.server.protocol.push_config_rpcs import LocalPushConfigs, PushConfigs
from a2a_grpc.server.push.configs import PushConfigStore
from a2a_grpc.server.tasks.base import (
    FirstStatus,
    InvalidPageTokenError,
    LiveTaskLimitError,
    Scope,
    StoreFullError,
    Subscription,
    TaskBusyError,
    TaskFinishedError,
    TaskQuery,
    TaskStore,
    eviction_batch,
)
from a2a_grpc.server.tasks.broker import Broker
from a2a_grpc.server.tasks.memory import InMemoryTaskStore
from a2a_grpc.server.tasks.redis.store import REPLICA_STOPPED_TEXT, RedisTaskStore
from a2a_grpc.server.tasks.table import TaskTable
from tests.redis_servers import RedisServer

ALICE = Scope("tenant-a", "alice")
BOB = Scope("tenant-a", "bob")

MakeStore = Callable[..., Awaitable[TaskStore]]


_prefixes = itertools.count()


@pytest.fixture(params=["memory", "redis", "cluster"])
async def make_store(request: pytest.FixtureRequest) -> AsyncIterator[MakeStore]:
    """Stores of one kind: in memory, on a fresh redis-server, or on the module's 3-master
    Redis Cluster (under a key prefix of their own, so tests do not see each other's keys)."""
    made: list[TaskStore] = []
    url = None
    prefix = "a2a"
    if request.param == "redis":
        url = request.getfixturevalue("redis_server").url
    elif request.param == "cluster":
        url = request.getfixturevalue("redis_cluster").url
        prefix = f"contract{next(_prefixes)}"

    async def make(**options: Any) -> TaskStore:
        store: TaskStore
        if url is None:
            table_options = {
                k: v for k, v in options.items() if k not in ("lease", "replay_length")
            }
            broker = Broker(queue_size=64, replay_length=options.get("replay_length", 1000))
            store = InMemoryTaskStore(TaskTable(**table_options), broker)
        else:
            if "replay_length" in options:
                options["stream_length"] = options.pop("replay_length")
            store = RedisTaskStore.connect(url, prefix=prefix, **options)
        await store.start()
        made.append(store)
        return store

    yield make
    for store in made:
        await store.close()


def new_task(task_id: str, context_id: str = "ctx") -> a2a_pb2.Task:
    task = a2a_pb2.Task(id=task_id, context_id=context_id)
    task.status.state = a2a_pb2.TASK_STATE_SUBMITTED
    task.history.add(message_id=f"m-{task_id}", role=a2a_pb2.ROLE_USER).parts.add().text = "hi"
    return task


async def created(store: TaskStore, task_id: str, scope: Scope = ALICE, **kw: Any) -> None:
    await store.reserve(scope, 100, task_id)
    await store.create(new_task(task_id, **kw), scope, reserved_size=100)


def agent_text(text: str) -> a2a_pb2.Message:
    message = a2a_pb2.Message(message_id=f"a-{text}", role=a2a_pb2.ROLE_AGENT)
    message.parts.add().text = text
    return message


async def drain(subscription: Subscription) -> list[a2a_pb2.StreamResponse]:
    events = []
    async with asyncio.timeout(10):
        async for event in subscription:
            events.append(event)
    return events


def kinds(events: list[a2a_pb2.StreamResponse]) -> list[str]:
    out = []
    for event in events:
        kind = event.WhichOneof("payload")
        if kind == "status_update":
            out.append(a2a_pb2.TaskState.Name(event.status_update.status.state))
        else:
            out.append(str(kind))
    return out


# -- the contract --------------------------------------------------------------------------


async def test_reads_are_copies_and_scoped(make_store: MakeStore) -> None:
    store = await make_store()
    await created(store, "t1")
    first = await store.get("t1", ALICE)
    assert first is not None and first.status.HasField("timestamp")
    first.history.add().message_id = "mutated"
    again = await store.get("t1", ALICE)
    assert again is not None and len(again.history) == 1
    assert await store.get("t1", BOB) is None
    assert await store.get("t1", Scope("tenant-b", "alice")) is None
    assert await store.get("unknown", ALICE) is None
    target = a2a_pb2.Task()
    assert not await store.copy_into("t1", BOB, target) and target.id == ""
    assert await store.copy_into("t1", ALICE, target, history_length=0)
    assert target.id == "t1" and len(target.history) == 0


async def test_stats_count_the_stored_tasks(make_store: MakeStore) -> None:
    store = await make_store()
    assert (await store.stats()).tasks == 0
    await created(store, "t1")
    await created(store, "t2", BOB)
    await store.set_status("t2", a2a_pb2.TASK_STATE_COMPLETED)
    stats = await store.stats()
    assert stats.tasks == 2
    # By state and bytes, where the store can tell them cheaply (None where it cannot).
    if stats.by_state is not None:
        assert stats.by_state == {
            a2a_pb2.TASK_STATE_SUBMITTED: 1,
            a2a_pb2.TASK_STATE_COMPLETED: 1,
        }
    if stats.bytes is not None:
        assert stats.bytes > 0


async def test_status_changes_keep_the_message_and_end_at_terminal(make_store: MakeStore) -> None:
    store = await make_store()
    await created(store, "t1")
    await store.set_status("t1", a2a_pb2.TASK_STATE_WORKING, agent_text("on it"))
    await store.update("t1", lambda task: task.artifacts.add(artifact_id="a1"))
    await store.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)
    task = await store.get("t1", ALICE)
    assert task is not None
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert not task.status.HasField("message")
    assert [m.message_id for m in task.history] == ["m-t1", "a-on it"]
    assert [a.artifact_id for a in task.artifacts] == ["a1"]
    with pytest.raises(TaskFinishedError):
        await store.set_status("t1", a2a_pb2.TASK_STATE_WORKING)
    with pytest.raises(TaskFinishedError):
        await store.update("t1", lambda task: None)


async def test_watch_gives_a_snapshot_then_exactly_the_later_events(
    make_store: MakeStore,
) -> None:
    store = await make_store()
    await created(store, "t1")
    await store.set_status("t1", a2a_pb2.TASK_STATE_WORKING)
    watched = await store.watch("t1", ALICE, until_terminal=True)
    assert watched is not None
    snapshot, subscription = watched
    assert snapshot.status.state == a2a_pb2.TASK_STATE_WORKING

    def chunk() -> a2a_pb2.StreamResponse:
        event = a2a_pb2.StreamResponse()
        event.artifact_update.task_id = "t1"
        event.artifact_update.artifact.artifact_id = "a1"
        return event

    await store.update("t1", lambda task: task.artifacts.add(artifact_id="a1"), chunk)
    await store.set_status("t1", a2a_pb2.TASK_STATE_INPUT_REQUIRED, agent_text("which?"))
    await store.resume("t1", ALICE, a2a_pb2.Message(message_id="m2", role=a2a_pb2.ROLE_USER))
    await store.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)
    events = await drain(subscription)
    assert kinds(events) == [
        "artifact_update",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_SUBMITTED",
        "TASK_STATE_COMPLETED",
    ]
    assert await store.watch("t1", BOB, until_terminal=True) is None


def order_of(event_id_text: str) -> tuple[int, int]:
    """An event id as a tuple that orders like the ids of both stores ("<n>", "<ms>-<seq>")."""
    head, _, tail = event_id_text.partition("-")
    return int(head), int(tail or 0)


def ids(events: list[a2a_pb2.StreamResponse]) -> list[str]:
    found = [event_id(event) for event in events]
    assert None not in found, found
    return [text for text in found if text is not None]


def chunk_event(task_id: str, n: int) -> Callable[[], a2a_pb2.StreamResponse]:
    def build() -> a2a_pb2.StreamResponse:
        event = a2a_pb2.StreamResponse()
        event.artifact_update.task_id = task_id
        event.artifact_update.artifact.artifact_id = f"a{n}"
        return event

    return build


async def chunks(store: TaskStore, task_id: str, numbers: range) -> None:
    for n in numbers:
        await store.update(task_id, lambda task: None, chunk_event(task_id, n))


def artifact_ids(events: list[a2a_pb2.StreamResponse]) -> list[str]:
    return [e.artifact_update.artifact.artifact_id for e in events if e.HasField("artifact_update")]


async def test_stream_events_carry_growing_ids_the_same_for_every_subscriber(
    make_store: MakeStore,
) -> None:
    store = await make_store()
    sender = await store.subscribe("t1")
    await created(store, "t1")
    await store.set_status("t1", a2a_pb2.TASK_STATE_WORKING)
    watched = await store.watch("t1", ALICE, until_terminal=True)
    assert watched is not None
    snapshot, late = watched
    await chunks(store, "t1", range(3))
    await store.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)
    first, second = await drain(sender), await drain(late)
    first_ids = ids(first)
    assert [order_of(i) for i in first_ids] == sorted({order_of(i) for i in first_ids})
    # The later subscriber sees the same ids for the same events; its snapshot includes the
    # events up to the one it names.
    assert ids(second) == first_ids[2:]
    assert late.snapshot_id == first_ids[1]
    # Only the streams' copies carry ids: the stored task never does.
    stored = await store.get("t1", ALICE)
    assert stored is not None and EVENT_ID_EXTENSION not in stored.metadata.fields
    assert EVENT_ID_EXTENSION not in snapshot.metadata.fields


async def test_watch_after_an_id_replays_exactly_the_later_events_then_live_ones(
    make_store: MakeStore,
) -> None:
    store = await make_store()
    sender = await store.subscribe("t1")
    await created(store, "t1")
    await chunks(store, "t1", range(5))
    reading = aiter(sender)
    async with asyncio.timeout(10):
        seen = [await anext(reading) for _ in range(4)]  # the task, a0, a1, a2
    sender.cancel()  # the stream broke there
    cursor = ids(seen)[3]
    watched = await store.watch("t1", ALICE, until_terminal=True, after=cursor)
    assert watched is not None
    resumed = watched[1]
    await chunks(store, "t1", range(5, 7))
    await store.set_status("t1", a2a_pb2.TASK_STATE_INPUT_REQUIRED, agent_text("which?"))
    await store.resume("t1", ALICE, a2a_pb2.Message(message_id="m2", role=a2a_pb2.ROLE_USER))
    await store.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)
    events = await drain(resumed)
    assert artifact_ids(events) == ["a3", "a4", "a5", "a6"]
    assert kinds(events)[4:] == [
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_SUBMITTED",
        "TASK_STATE_COMPLETED",
    ]
    orders = [order_of(i) for i in ids(events)]
    assert orders == sorted(set(orders)) and orders[0] > order_of(cursor)
    assert await store.watch("t1", BOB, until_terminal=True, after=cursor) is None
    # After it finished: the kept events after the id, and the stream ends.
    finished = await store.watch("t1", ALICE, until_terminal=True, after=ids(events)[3])
    assert finished is not None
    assert kinds(await drain(finished[1])) == kinds(events)[4:]
    last = await store.watch("t1", ALICE, until_terminal=True, after=ids(events)[-1])
    assert last is not None and await drain(last[1]) == []


async def test_an_id_older_than_the_kept_events_or_not_the_task_s_is_refused(
    make_store: MakeStore,
) -> None:
    store = await make_store(replay_length=10)
    sender = await store.subscribe("t1")
    await created(store, "t1")
    events = []
    reading = aiter(sender)
    async with asyncio.timeout(10):
        for n in range(250):  # Redis trims whole stream nodes (100 entries)
            await chunks(store, "t1", range(n, n + 1))
            events.append(await anext(reading))  # read as they come: no reader falls behind
    await store.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)
    events += await drain(sender)
    with pytest.raises(EventIdExpiredError, match="no longer keeps"):
        await store.watch("t1", ALICE, until_terminal=True, after=ids(events)[1])
    recent = await store.watch("t1", ALICE, until_terminal=True, after=ids(events)[-3])
    assert recent is not None
    assert kinds(await drain(recent[1])) == ["artifact_update", "TASK_STATE_COMPLETED"]
    beyond = ids(events)[-1] + "9"
    with pytest.raises(EventIdExpiredError, match="not an event id"):
        await store.watch("t1", ALICE, until_terminal=True, after=beyond)
    with pytest.raises(EventIdExpiredError, match="not an event id"):
        await store.watch("t1", ALICE, until_terminal=True, after="not-an-id")


async def test_a_send_stream_sees_creation_and_closes_when_interrupted(
    make_store: MakeStore,
) -> None:
    store = await make_store()
    subscription = await store.subscribe("t1")
    await created(store, "t1")
    await store.set_status("t1", a2a_pb2.TASK_STATE_WORKING)
    await store.set_status("t1", a2a_pb2.TASK_STATE_INPUT_REQUIRED, agent_text("which?"))
    assert kinds(await drain(subscription)) == [
        "task",
        "TASK_STATE_WORKING",
        "TASK_STATE_INPUT_REQUIRED",
    ]


async def test_a_task_created_with_its_first_status(make_store: MakeStore) -> None:
    """`create(first_status=...)`: a stream sees the task as given, then the status update;
    without a stream the stored task is the same; a first status that settles frees its
    live share at once."""
    store = await make_store(max_live_per_owner=2)
    subscription = await store.subscribe("seen")
    await store.reserve(ALICE, 100, "seen")
    first = FirstStatus(a2a_pb2.TASK_STATE_INPUT_REQUIRED, agent_text("which?"))
    await store.create(new_task("seen"), ALICE, reserved_size=100, first_status=first)
    events = await drain(subscription)
    assert kinds(events) == ["task", "TASK_STATE_INPUT_REQUIRED"]
    assert events[0].task.status.state == a2a_pb2.TASK_STATE_SUBMITTED
    await store.reserve(ALICE, 100, "unseen")
    first = FirstStatus(a2a_pb2.TASK_STATE_COMPLETED, agent_text("done"))
    await store.create(new_task("unseen"), ALICE, reserved_size=100, first_status=first)
    for task_id, state, text in (
        ("seen", a2a_pb2.TASK_STATE_INPUT_REQUIRED, "which?"),
        ("unseen", a2a_pb2.TASK_STATE_COMPLETED, "done"),
    ):
        stored = await store.get(task_id, ALICE)
        assert stored is not None and stored.status.state == state
        assert stored.status.message.parts[0].text == text
        assert [m.parts[0].text for m in stored.history] == ["hi", text]
    listed = await store.list(ALICE, TaskQuery(page_size=10, state=a2a_pb2.TASK_STATE_COMPLETED))
    assert [task.id for task in listed.tasks] == ["unseen"] and listed.total_size == 1
    submitted = await store.list(ALICE, TaskQuery(page_size=10, state=a2a_pb2.TASK_STATE_SUBMITTED))
    assert submitted.total_size == 0
    # "seen", waiting for input, holds one of the two shares; "unseen" gave its back
    await store.reserve(ALICE, 100, "next")


async def test_a_direct_reply_reaches_the_stream_and_closes_it(make_store: MakeStore) -> None:
    store = await make_store()
    subscription = await store.subscribe("r1")
    await store.reserve(ALICE, 10, "r1")
    await store.release(ALICE, "r1")
    await store.reply("r1", agent_text("hello"))
    events = await drain(subscription)
    assert [event.message.message_id for event in events] == ["a-hello"]
    assert await store.get("r1", ALICE) is None


async def test_resume_claims_an_interrupted_task_once(make_store: MakeStore) -> None:
    store = await make_store()
    await created(store, "t1")
    answer = a2a_pb2.Message(message_id="m2", role=a2a_pb2.ROLE_USER)
    with pytest.raises(TaskBusyError):  # its run still works on it
        await store.resume("t1", ALICE, answer)
    await store.set_status("t1", a2a_pb2.TASK_STATE_INPUT_REQUIRED, agent_text("which?"))
    assert await store.resume("t1", BOB, answer) is None
    before = await store.resume("t1", ALICE, answer)
    assert before is not None and before.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    with pytest.raises(TaskBusyError):
        await store.resume("t1", ALICE, answer)
    task = await store.get("t1", ALICE)
    assert task is not None and task.status.state == a2a_pb2.TASK_STATE_SUBMITTED
    assert task.history[-1].message_id == "m2" and task.history[-1].task_id == "t1"
    await store.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)
    with pytest.raises(TaskFinishedError):
        await store.resume("t1", ALICE, answer)


class AskThenWork:
    """Asks which one; an answer is worked on at once (WORKING), then completes the task."""

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        if context.task is None:
            await events.require_input("which one?")
            return
        await events.working("on it")
        await events.complete()


def handler_over(store: TaskStore) -> RequestHandler:
    """A request handler over `store`, with the idempotency window the store calls for."""
    config = ServerConfig()
    return RequestHandler(
        AskThenWork(),
        demo_card("localhost:50051"),
        config,
        store=store,
        dedup=window_for(store.claims, window=config.dedup_window, capacity=config.max_tasks),
    )


def user_text(text: str, message_id: str, task_id: str = "") -> a2a_pb2.SendMessageRequest:
    message = a2a_pb2.Message(message_id=message_id, role=a2a_pb2.ROLE_USER, task_id=task_id)
    message.parts.add().text = text
    return a2a_pb2.SendMessageRequest(message=message)


async def test_a_continued_task_s_stream_opens_submitted_on_every_store(
    make_store: MakeStore,
) -> None:
    """After an answer, a continuation's stream opens with the task as `resume` left it:
    SUBMITTED, with the answer last in its history, on every store (docs/server.md, "Behaviour
    worth knowing"). Catches the handler starting the agent before it takes that snapshot: on
    a store whose `watch` waits on its backend (Redis), the agent's first event would already
    be in it (WORKING), while the memory store showed SUBMITTED."""
    handler = handler_over(await make_store())
    caller = CallContext()
    asked = (await handler.send_message(user_text("hi", "m-ask"), caller)).task
    assert asked.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    stream = handler.send_streaming_message(user_text("the blue one", "m-answer", asked.id), caller)
    async with asyncio.timeout(10):
        events = [event async for event in stream]
    opening = events[0].task
    assert opening.status.state == a2a_pb2.TASK_STATE_SUBMITTED
    assert opening.history[-1].message_id == "m-answer"
    assert kinds(events) == ["task", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]


NOT_NOW = ServiceUnavailableError("not now", retry_delay=2.0)


async def refused_after(subscription: Subscription) -> list[str]:
    """The kinds of the events a subscription yields before it ends with NOT_NOW."""
    events: list[a2a_pb2.StreamResponse] = []
    with pytest.raises(ServiceUnavailableError) as ended:
        async with asyncio.timeout(10):
            async for event in subscription:
                events.append(event)
    assert str(ended.value) == "not now" and ended.value.retry_delay == 2.0
    return kinds(events)


async def test_withdraw_removes_the_message_s_task_and_ends_its_streams(
    make_store: MakeStore,
) -> None:
    store = await make_store(max_live_per_owner=1)
    sent = await store.subscribe("t1")  # the send stream, before the task exists
    await created(store, "t1")
    await store.set_status("t1", a2a_pb2.TASK_STATE_WORKING)
    watched = await store.watch("t1", ALICE, until_terminal=True)
    assert watched is not None
    await store.update(
        "t1", lambda task: task.artifacts.add(artifact_id="a1"), chunk_event("t1", 1)
    )
    await store.withdraw("t1", ALICE, NOT_NOW)
    assert await refused_after(sent) == ["task", "TASK_STATE_WORKING", "artifact_update"]
    assert await refused_after(watched[1]) == ["artifact_update"]
    assert await store.get("t1", ALICE) is None
    assert (await store.list(ALICE, TaskQuery(page_size=10))).total_size == 0
    assert (await store.stats()).tasks == 0
    await store.reserve(ALICE, 100, "t2")  # its share of live tasks was given back
    waiting = await store.subscribe("t2")
    await store.withdraw("t2", ALICE, NOT_NOW)  # made no task: the room it was promised goes
    assert await refused_after(waiting) == []
    await created(store, "t3")


async def test_withdraw_of_an_answer_puts_the_task_back_to_wait(make_store: MakeStore) -> None:
    store = await make_store()
    await created(store, "t1")
    await store.set_status("t1", a2a_pb2.TASK_STATE_INPUT_REQUIRED, agent_text("which?"))
    subscribed = await store.watch("t1", ALICE, until_terminal=True)
    answer = a2a_pb2.Message(message_id="m2", role=a2a_pb2.ROLE_USER)
    await store.resume("t1", ALICE, answer)
    sent = await store.watch("t1", ALICE, until_terminal=False)  # the answer's send stream
    assert subscribed is not None and sent is not None
    await store.set_status("t1", a2a_pb2.TASK_STATE_WORKING)
    await store.update(
        "t1", lambda task: task.artifacts.add(artifact_id="a1"), chunk_event("t1", 1)
    )
    again = agent_text("not now: send it again")
    await store.withdraw("t1", ALICE, NOT_NOW, (a2a_pb2.TASK_STATE_INPUT_REQUIRED, again))
    assert await refused_after(sent[1]) == ["TASK_STATE_WORKING", "artifact_update"]
    task = await store.get("t1", ALICE)
    assert task is not None and task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    assert task.status.message.parts[0].text == "not now: send it again"
    assert [artifact.artifact_id for artifact in task.artifacts] == ["a1"]
    assert await store.resume("t1", ALICE, answer) is not None  # nobody works on it now
    await store.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)
    assert kinds(await drain(subscribed[1])) == [
        "TASK_STATE_SUBMITTED",
        "TASK_STATE_WORKING",
        "artifact_update",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_SUBMITTED",
        "TASK_STATE_COMPLETED",
    ]


def text_of(size: int, message_id: str = "big") -> a2a_pb2.Message:
    message = a2a_pb2.Message(message_id=message_id, role=a2a_pb2.ROLE_USER)
    message.parts.add().text = "x" * size
    return message


async def test_every_write_counts_against_the_byte_budget(make_store: MakeStore) -> None:
    """Answers, artifacts and status messages are counted when they land; over a budget that
    live tasks fill, each is refused with StoreFullError and changes nothing. A store without a
    byte budget (its stats count no bytes: Redis, bounded by its own maxmemory) takes the same
    writes and refuses none of them for bytes."""
    probe = await make_store()
    budgeted = (await probe.stats()).bytes is not None
    store = await make_store(max_bytes=30_000) if budgeted else probe
    await created(store, "t1")
    await store.set_status("t1", a2a_pb2.TASK_STATE_INPUT_REQUIRED, agent_text("which?"))
    await created(store, "t2")
    await store.set_status("t2", a2a_pb2.TASK_STATE_INPUT_REQUIRED, agent_text("which?"))
    await store.resume("t1", ALICE, text_of(20_000))  # fits

    def add_artifact(task: a2a_pb2.Task) -> None:
        task.artifacts.add(artifact_id="a").parts.add().text = "y" * 10_000

    refused: list[str] = []
    for name, write in (
        ("answer", lambda: store.resume("t2", ALICE, text_of(20_000, "big2"))),
        ("artifact", lambda: store.update("t1", add_artifact, size=10_000)),
        ("status", lambda: store.set_status("t1", a2a_pb2.TASK_STATE_WORKING, text_of(5_000))),
    ):
        try:
            await write()
        except StoreFullError:
            refused.append(name)
    if not budgeted:
        assert refused == []
        return
    assert refused == ["answer", "artifact", "status"]
    waiting = await store.get("t2", ALICE)  # the refused answer left its task as it was
    assert waiting is not None and waiting.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    assert len(waiting.history) == 2
    working = await store.get("t1", ALICE)
    assert working is not None and not working.artifacts
    assert working.status.state == a2a_pb2.TASK_STATE_SUBMITTED
    # The server's own final status lands regardless, counted; once finished, t1 makes room.
    await store.set_status("t1", a2a_pb2.TASK_STATE_FAILED, agent_text("no room"), force_room=True)
    await store.resume("t2", ALICE, text_of(20_000, "big2"))
    assert await store.get("t1", ALICE) is None
    assert (await store.stats()).bytes <= 30_000  # type: ignore[operator]


async def test_cancel_ends_the_task_and_its_streams(make_store: MakeStore) -> None:
    store = await make_store()
    await created(store, "t1")
    await store.set_status("t1", a2a_pb2.TASK_STATE_INPUT_REQUIRED, agent_text("which?"))
    watched = await store.watch("t1", ALICE, until_terminal=True)
    assert watched is not None
    assert await store.cancel("t1", BOB) is None
    canceled = await store.cancel("t1", ALICE)
    assert canceled is not None and canceled.status.state == a2a_pb2.TASK_STATE_CANCELED
    assert kinds(await drain(watched[1])) == ["TASK_STATE_CANCELED"]
    with pytest.raises(TaskFinishedError):
        await store.cancel("t1", ALICE)


async def test_parked_tasks_are_found_and_canceled_once(make_store: MakeStore) -> None:
    store = await make_store()
    await created(store, "t1")
    await created(store, "t2")
    await store.set_status("t1", a2a_pb2.TASK_STATE_INPUT_REQUIRED, agent_text("which?"))
    assert list(await store.parked_longer_than(3600)) == []
    assert list(await store.parked_longer_than(-1)) == ["t1"]
    assert await store.cancel_parked("t2", agent_text("late")) is None  # still running
    assert await store.cancel_parked("t1", agent_text("late")) == ALICE
    assert await store.cancel_parked("t1", agent_text("late")) is None
    task = await store.get("t1", ALICE)
    assert task is not None and task.status.state == a2a_pb2.TASK_STATE_CANCELED
    assert task.status.message.context_id == "ctx"
    assert list(await store.parked_longer_than(-1)) == []


async def test_list_pages_newest_first_with_filters(make_store: MakeStore) -> None:
    store = await make_store()
    for number in range(7):
        await created(store, f"t{number}", context_id="even" if number % 2 == 0 else "odd")
    await created(store, "bobs", scope=BOB)
    await store.set_status("t2", a2a_pb2.TASK_STATE_WORKING)  # t2 moves to the front
    await store.set_status("t4", a2a_pb2.TASK_STATE_COMPLETED)
    ids: list[str] = []
    token = ""
    while True:
        page = await store.list(ALICE, TaskQuery(page_size=3, page_token=token))
        assert page.total_size == 7 and len(page.tasks) <= 3
        ids += [task.id for task in page.tasks]
        token = page.next_page_token
        if not token:
            break
    assert ids == ["t4", "t2", "t6", "t5", "t3", "t1", "t0"]
    working = await store.list(ALICE, TaskQuery(page_size=10, state=a2a_pb2.TASK_STATE_WORKING))
    assert [task.id for task in working.tasks] == ["t2"] and working.total_size == 1
    even = await store.list(ALICE, TaskQuery(page_size=10, context_id="even"))
    assert [task.id for task in even.tasks] == ["t4", "t2", "t6", "t0"]
    both = await store.list(
        ALICE,
        TaskQuery(page_size=10, context_id="even", state=a2a_pb2.TASK_STATE_SUBMITTED),
    )
    assert [task.id for task in both.tasks] == ["t6", "t0"] and both.total_size == 2
    with pytest.raises(InvalidPageTokenError):
        await store.list(ALICE, TaskQuery(page_size=3, page_token="not a token!"))


async def test_live_shares_are_enforced_and_given_back(make_store: MakeStore) -> None:
    store = await make_store(max_live_per_owner=2)
    await created(store, "t1")
    await store.reserve(ALICE, 10, "t2")
    with pytest.raises(LiveTaskLimitError):
        await store.reserve(ALICE, 10, "t3")
    await store.reserve(BOB, 10, "b1")  # another owner has a share of its own
    await store.release(ALICE, "t2")
    await store.reserve(ALICE, 10, "t3")
    await store.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)
    await store.reserve(ALICE, 10, "t4")  # a finished task holds no share


# -- two replicas on one Redis -------------------------------------------------------------


class Heard:
    """A `StoreListener` that keeps what its store told it."""

    def __init__(self) -> None:
        self.evicted: list[str] = []
        self.canceled: asyncio.Queue[str] = asyncio.Queue()
        self.health: list[bool] = []
        self.recovered = asyncio.Event()

    def task_evicted(self, task_id: str) -> None:
        self.evicted.append(task_id)

    def canceled_elsewhere(self, task_id: str) -> None:
        self.canceled.put_nowait(task_id)

    def health_changed(self, healthy: bool) -> None:
        self.health.append(healthy)
        if healthy:
            self.recovered.set()


async def replicas(
    server: RedisServer, *, heard: Heard | None = None, **options: Any
) -> tuple[RedisTaskStore, RedisTaskStore]:
    """Two stores on one Redis, as two replicas hold them; the first tells `heard`."""
    one = RedisTaskStore.connect(server.url, listener=heard, **options)
    two = RedisTaskStore.connect(server.url, **options)
    await one.start()
    await two.start()
    return one, two


async def test_a_cancel_on_another_replica_reaches_the_run(redis_server: RedisServer) -> None:
    heard = Heard()
    one, two = await replicas(redis_server, heard=heard)
    try:
        await created(one, "t1")
        await one.set_status("t1", a2a_pb2.TASK_STATE_WORKING)
        watched = await two.watch("t1", ALICE, until_terminal=True)
        assert watched is not None
        await two.cancel("t1", ALICE)
        assert await asyncio.wait_for(heard.canceled.get(), 5) == "t1"
        with pytest.raises(TaskFinishedError):  # the run's next write changes nothing
            await one.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)
        assert kinds(await drain(watched[1])) == ["TASK_STATE_CANCELED"]
    finally:
        await one.close()
        await two.close()


async def test_a_replica_whose_lease_ran_out_has_its_tasks_failed(
    redis_server: RedisServer,
) -> None:
    one, two = await replicas(redis_server, lease=0.3, max_live_per_owner=3)
    try:
        await created(one, "t1")
        await one.set_status("t1", a2a_pb2.TASK_STATE_WORKING)
        await created(one, "t2")
        await one.set_status("t2", a2a_pb2.TASK_STATE_INPUT_REQUIRED, agent_text("which?"))
        await one.reserve(ALICE, 10, "r1")  # room for a task it never got to create
        watched = await two.watch("t1", ALICE, until_terminal=True)
        assert watched is not None
        one.abandon()  # the replica "dies": its lease is no longer renewed
        events = await drain(watched[1])  # two's own lease keeper reaps it
        assert kinds(events) == ["TASK_STATE_FAILED"]
        text = events[0].status_update.status.message.parts[0].text
        assert text == REPLICA_STOPPED_TEXT
        parked = await two.get("t2", ALICE)  # nobody was running it: it still waits
        assert parked is not None
        assert parked.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
        await two.reserve(ALICE, 10, "t3")  # t1's and r1's shares came back; t2 holds one
        await two.reserve(ALICE, 10, "t4")
        with pytest.raises(LiveTaskLimitError):
            await two.reserve(ALICE, 10, "t5")
    finally:
        await one.close()
        await two.close()


async def test_finished_tasks_go_after_their_ttl_with_their_events(make_store: MakeStore) -> None:
    store = await make_store(terminal_ttl=0)
    await created(store, "t1")
    await created(store, "t2")
    await store.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)
    assert await store.evict_expired() == 1
    assert await store.get("t1", ALICE) is None
    page = await store.list(ALICE, TaskQuery(page_size=10))
    assert [task.id for task in page.tasks] == ["t2"] and page.total_size == 1
    if isinstance(store, RedisTaskStore):  # nothing of it is left in Redis
        keys = store.keys
        for key in (keys.task("t1"), keys.events("t1"), keys.push("t1")):
            assert not await store.client.exists(key)
        assert await store.client.zscore(keys.room_all, "t1") is None


def push_configs_of(store: TaskStore) -> PushConfigs:
    """Where the store's push configs live: beside the tasks in Redis, else in this process."""
    if isinstance(store, RedisTaskStore):
        return store.push_configs
    return LocalPushConfigs(PushConfigStore())


async def test_a_push_config_keeps_its_protocol_version_beside_it(make_store: MakeStore) -> None:
    """The version a webhook speaks is stored next to its config, never in it: a reader of the
    config gets the 1.0 message it gave. Replacing the config sets the version again; deleting
    it, or dropping the task's configs, forgets it."""
    store = await make_store()
    await created(store, "t1")
    configs = push_configs_of(store)
    given = a2a_pb2.TaskPushNotificationConfig(task_id="t1", id="c03", url="https://a.example/h")
    plain = a2a_pb2.TaskPushNotificationConfig(task_id="t1", id="c10", url="https://b.example/h")
    assert await configs.put(given, "0.3") == given
    await configs.put(plain)
    got = await configs.get("t1", "c03")
    assert got is not None
    assert got.SerializeToString(deterministic=True) == given.SerializeToString(deterministic=True)
    assert await configs.for_task("t1") == [given, plain]
    assert await configs.protocols("t1") == {"c03": "0.3"}
    if isinstance(store, RedisTaskStore):  # another replica on the same Redis reads it too
        another = await make_store()
        assert isinstance(another, RedisTaskStore)
        other = another.push_configs
        assert await other.protocols("t1") == {"c03": "0.3"}
    await configs.put(given)  # replaced through 1.0
    assert await configs.protocols("t1") == {}
    await configs.put(given, "0.3")
    await configs.delete("t1", "c03")
    assert await configs.protocols("t1") == {}
    await configs.put(given, "0.3")
    await configs.drop_task("t1")
    assert await configs.protocols("t1") == {}


async def test_a_finished_task_takes_its_push_protocols_with_it(make_store: MakeStore) -> None:
    store = await make_store(terminal_ttl=0)
    await created(store, "t1")
    configs = push_configs_of(store)
    await configs.put(
        a2a_pb2.TaskPushNotificationConfig(task_id="t1", id="c", url="https://a.example/h"), "0.3"
    )
    await store.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)
    assert await store.evict_expired() == 1
    if isinstance(store, RedisTaskStore):  # the memory store's configs go with on_evict
        assert not await store.client.exists(store.keys.push_protocols("t1"))
        assert await configs.protocols("t1") == {}


async def test_a_full_store_makes_room_from_finished_tasks_only(make_store: MakeStore) -> None:
    store = await make_store(max_tasks=2)
    await created(store, "t1")
    await created(store, "t2")
    with pytest.raises(StoreFullError):
        await store.reserve(BOB, 10, "t3")
    await store.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)
    await store.reserve(BOB, 10, "t3")  # the oldest finished task makes room
    assert await store.get("t1", ALICE) is None
    assert await store.get("t2", ALICE) is not None


async def test_a_store_full_of_finished_tasks_takes_every_new_one_under_load(
    make_store: MakeStore,
) -> None:
    """At capacity, with 32 callers making tasks at once, every reservation gets the room of a
    finished task: none is refused (none starves while others take the room it freed)."""
    store = await make_store(max_tasks=40)
    numbers = iter(range(1200))

    async def caller() -> None:
        for number in numbers:
            await created(store, f"t{number}")
            await store.set_status(f"t{number}", a2a_pb2.TASK_STATE_COMPLETED)

    await asyncio.gather(*(caller() for _ in range(32)))
    stored = (await store.stats()).tasks
    assert stored <= 40
    assert await store.get("t1199", ALICE) is not None
    # The evicted tasks left the ListTasks index too (a small page sweeps few stale entries,
    # and the total counts what the index holds).
    page = await store.list(ALICE, TaskQuery(page_size=1))
    assert page.total_size == stored


async def test_every_task_of_an_eviction_batch_leaves_the_store_and_its_indexes(
    make_store: MakeStore,
) -> None:
    """A full store evicts its oldest finished tasks several at a time (`eviction_batch`), here
    from two scopes and three contexts: each evicted task leaves every ListTasks index (all,
    its state's, its context's) and, on Redis, leaves no key behind."""
    store = await make_store(max_tasks=256)
    assert eviction_batch(256) == 4
    scopes = {f"t{number}": ALICE if number % 2 else BOB for number in range(256)}
    contexts = {f"t{number}": f"c{number % 3}" for number in range(256)}
    for task_id, scope in scopes.items():
        await created(store, task_id, scope, context_id=contexts[task_id])
        await store.set_status(task_id, a2a_pb2.TASK_STATE_COMPLETED)
    await created(store, "new", ALICE)  # the room it takes evicts one batch
    present = {task_id for task_id, scope in scopes.items() if await store.get(task_id, scope)}
    assert len(present) == 256 - 4
    if isinstance(store, RedisTaskStore):  # nothing of an evicted task is left in Redis
        keys, client = store.keys, store.client
        evicted = set(scopes) - present
        for task_id in evicted:
            for key in keys.of_task(task_id):
                assert not await client.exists(key)
            assert await client.zscore(keys.room_all, task_id) is None
        for scope in (ALICE, BOB):  # read before a ListTasks page could sweep stale entries
            for number in range(3):
                index_keys = keys.indexes(scope, a2a_pb2.TASK_STATE_COMPLETED, f"c{number}")
                for key in index_keys:
                    members = await client.zrange(key, 0, -1)
                    assert not {member.decode().split("|")[-1] for member in members} & evicted
    for scope in (ALICE, BOB):
        queries = [TaskQuery(page_size=50, state=a2a_pb2.TASK_STATE_COMPLETED)]
        queries += [TaskQuery(page_size=50, context_id=f"c{number}") for number in range(3)]
        for query in queries:
            listed: set[str] = set()
            page = await store.list(scope, query)
            listed |= {task.id for task in page.tasks}
            while page.next_page_token:
                next_query = dataclasses.replace(query, page_token=page.next_page_token)
                page = await store.list(scope, next_query)
                listed |= {task.id for task in page.tasks}
            expected = {
                task_id
                for task_id in present
                if scopes[task_id] == scope and query.context_id in ("", contexts[task_id])
            }
            assert listed == expected, query
            assert page.total_size == len(expected), query


async def test_a_cancel_racing_the_run_s_writes_still_cancels(redis_server: RedisServer) -> None:
    one, two = await replicas(redis_server)
    try:
        for attempt in range(20):  # the cancel reads a version the run's writes then move on
            task_id = f"t{attempt}"
            await created(one, task_id)
            await one.set_status(task_id, a2a_pb2.TASK_STATE_WORKING)
            running = asyncio.Event()

            async def run_writes(task_id: str = task_id, running: asyncio.Event = running) -> int:
                written = 0
                with contextlib.suppress(TaskFinishedError):
                    for number in range(100):
                        await one.update(
                            task_id, lambda task, n=number: task.metadata.update({"n": n})
                        )
                        written += 1
                        running.set()
                return written

            writes = asyncio.ensure_future(run_writes())
            await running.wait()
            canceled = await two.cancel(task_id, ALICE)
            assert canceled is not None
            assert canceled.status.state == a2a_pb2.TASK_STATE_CANCELED
            assert await writes < 100  # the run's next write after the cancel was refused
    finally:
        await one.close()
        await two.close()


async def test_a_replica_whose_lease_ran_out_cannot_write_over_the_reaper_s_failed(
    redis_server: RedisServer,
) -> None:
    """Catches the WRITE script (redis_scripts.py) writing without its version check: a replica
    whose lease ran out, reaped by another (its task FAILED, without a cancel's STOP), writes
    COMPLETED with the version it last wrote. That write must be refused (a lost race is an
    error, never a silent overwrite) and the task stay FAILED."""
    one, two = await replicas(redis_server, lease=0.3)
    try:
        subscription = await two.subscribe("t1")  # from the start: whenever the reap comes
        await created(one, "t1")
        await one.set_status("t1", a2a_pb2.TASK_STATE_WORKING)
        one.abandon()  # its lease is no longer renewed; it still holds the run's copy
        events = await drain(subscription)  # two's own lease keeper reaps it
        assert kinds(events) == ["task", "TASK_STATE_WORKING", "TASK_STATE_FAILED"]
        with pytest.raises(TaskFinishedError) as refused:
            await one.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED, agent_text("done"))
        assert refused.value.state == a2a_pb2.TASK_STATE_FAILED
        for store in (one, two):
            task = await store.get("t1", ALICE)
            assert task is not None and task.status.state == a2a_pb2.TASK_STATE_FAILED
            assert task.status.message.parts[0].text == REPLICA_STOPPED_TEXT
        done = await two.list(ALICE, TaskQuery(page_size=10, state=a2a_pb2.TASK_STATE_COMPLETED))
        assert done.total_size == 0
    finally:
        await one.close()
        await two.close()
