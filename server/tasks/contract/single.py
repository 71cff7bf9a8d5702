"""The contract every single store keeps (tasks/base.py), test by test: reads, writes, streams
and their event ids, replay, withdrawals, the byte budget, cancels, ListTasks, room and
eviction, push configs. A test class that subclasses `StoreContract` runs it on its store
factory."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from a2a_grpc.core.errors import EventIdExpiredError, ServiceUnavailableError
from a2a_grpc.core.event_ids import EVENT_ID_EXTENSION
from a2a_grpc.generated import a2a_pb2
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
    eviction_batch,
)
from a2a_grpc.server.tasks.contract.odd_ids import odd_ids
from a2a_grpc.server.tasks.contract.support import (
    ALICE,
    BOB,
    WAIT_S,
    MakeStore,
    StoreSuite,
    adding_artifact,
    agent_text,
    artifact_ids,
    chunk_event,
    chunks,
    created,
    drain,
    ids,
    kinds,
    new_task,
    text_of,
)

NOT_NOW = ServiceUnavailableError("not now", retry_delay=2.0)
"""The error a withdrawn message's streams end with."""


async def refused_after(subscription: Subscription) -> list[str]:
    """The kinds of the events a subscription yields before it ends with NOT_NOW."""
    events: list[a2a_pb2.StreamResponse] = []
    with pytest.raises(ServiceUnavailableError) as ended:
        async with asyncio.timeout(WAIT_S):
            async for event in subscription:
                events.append(event)
    assert str(ended.value) == "not now" and ended.value.retry_delay == 2.0
    return kinds(events)


class StoreContract(StoreSuite):
    """The tests of one store at a time (see the module docstring)."""

    pytestmark = pytest.mark.asyncio

    async def test_reads_are_copies_and_scoped(self, make_store: MakeStore) -> None:
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

    async def test_stats_count_the_stored_tasks(self, make_store: MakeStore) -> None:
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

    async def test_status_changes_keep_the_message_and_end_at_terminal(
        self, make_store: MakeStore
    ) -> None:
        store = await make_store()
        await created(store, "t1")
        await store.set_status("t1", a2a_pb2.TASK_STATE_WORKING, agent_text("on it"))
        await store.update("t1", adding_artifact("a1"))
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
        self, make_store: MakeStore
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

        await store.update("t1", adding_artifact("a1"), chunk)
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

    async def test_stream_events_carry_growing_ids_the_same_for_every_subscriber(
        self, make_store: MakeStore
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
        order = self.event_id_order
        assert [order(i) for i in first_ids] == sorted({order(i) for i in first_ids})
        # The later subscriber sees the same ids for the same events; its snapshot includes the
        # events up to the one it names.
        assert ids(second) == first_ids[2:]
        assert late.snapshot_id == first_ids[1]
        # Only the streams' copies carry ids: the stored task never does.
        stored = await store.get("t1", ALICE)
        assert stored is not None and EVENT_ID_EXTENSION not in stored.metadata.fields
        assert EVENT_ID_EXTENSION not in snapshot.metadata.fields

    async def test_watch_after_an_id_replays_exactly_the_later_events_then_live_ones(
        self, make_store: MakeStore
    ) -> None:
        store = await make_store()
        sender = await store.subscribe("t1")
        await created(store, "t1")
        await chunks(store, "t1", range(5))
        reading = aiter(sender)
        async with asyncio.timeout(WAIT_S):
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
        orders = [self.event_id_order(i) for i in ids(events)]
        assert orders == sorted(set(orders)) and orders[0] > self.event_id_order(cursor)
        assert await store.watch("t1", BOB, until_terminal=True, after=cursor) is None
        # After it finished: the kept events after the id, and the stream ends.
        finished = await store.watch("t1", ALICE, until_terminal=True, after=ids(events)[3])
        assert finished is not None
        assert kinds(await drain(finished[1])) == kinds(events)[4:]
        last = await store.watch("t1", ALICE, until_terminal=True, after=ids(events)[-1])
        assert last is not None and await drain(last[1]) == []

    async def test_a_long_replay_with_live_events_meanwhile_has_no_gap_and_no_repeat(
        self, make_store: MakeStore
    ) -> None:
        # Longer than a replay reads at once (a store may read kept events in batches, as
        # the reader takes them): live events written meanwhile come after the kept ones.
        store = await make_store()
        sender = await store.subscribe("t1")
        await created(store, "t1")
        async with asyncio.timeout(WAIT_S):
            cursor = ids([await anext(aiter(sender))])[0]  # the task's first event
        await chunks(store, "t1", range(300))
        sender.cancel()
        resumed = await store.watch("t1", ALICE, until_terminal=True, after=cursor)
        assert resumed is not None
        seen: list[a2a_pb2.StreamResponse] = []
        reading = aiter(resumed[1])
        async with asyncio.timeout(WAIT_S):
            for n in range(300, 340):  # a live write after every few events read
                seen += [await anext(reading) for _ in range(5)]
                await chunks(store, "t1", range(n, n + 1))
        await store.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)
        seen += await drain(resumed[1])
        assert artifact_ids(seen) == [f"a{n}" for n in range(340)]
        assert kinds(seen)[-1] == "TASK_STATE_COMPLETED"
        orders = [self.event_id_order(i) for i in ids(seen)]
        assert orders == sorted(set(orders))

    async def test_exactly_the_last_kept_events_replay_and_older_ids_are_refused(
        self, make_store: MakeStore
    ) -> None:
        """A store keeps exactly a task's last `replay_length` events: after the last one it
        let go of, they all replay (as many as a stream's queue holds: no overflow), after the
        oldest kept one all but it; anything older is refused."""
        store = await make_store(replay_length=10, queue_size=10)
        sender = await store.subscribe("t1")
        await created(store, "t1")
        events = []
        reading = aiter(sender)
        async with asyncio.timeout(WAIT_S):
            for n in range(24):
                await chunks(store, "t1", range(n, n + 1))
                events.append(await anext(reading))  # read as they come: no reader falls behind
        await store.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)
        events += await drain(sender)
        every = ids(events)
        assert len(every) == 26  # the task, 24 chunks, COMPLETED; the last 10 are kept
        for after, replayed in ((every[15], every[16:]), (every[16], every[17:])):
            watched = await store.watch("t1", ALICE, until_terminal=True, after=after)
            assert watched is not None
            assert ids(await drain(watched[1])) == replayed
        for older in (every[14], every[1], every[0]):
            with pytest.raises(EventIdExpiredError, match="no longer keeps"):
                await store.watch("t1", ALICE, until_terminal=True, after=older)
        beyond = every[-1] + "9"
        with pytest.raises(EventIdExpiredError, match="not an event id"):
            await store.watch("t1", ALICE, until_terminal=True, after=beyond)
        with pytest.raises(EventIdExpiredError, match="not an event id"):
            await store.watch("t1", ALICE, until_terminal=True, after="not-an-id")

    async def test_any_text_but_an_id_of_the_task_is_refused(self, make_store: MakeStore) -> None:
        """Property, over a seeded generator of odd texts (contract/odd_ids.py: digits `int`
        takes that are no ASCII digits, numbers past every range, another task's ids,
        mutations of the task's own, random text): `watch(after=)` with any text that is not
        an id the store gave for the task is EventIdExpiredError (never another error, never
        a replay), and the task's owner only learns it (another caller: None). Every id it
        gave, the snapshot's included, replays exactly the events after it."""
        store = await make_store()
        foreign = await store.subscribe("t0")  # an earlier task, with more events
        await created(store, "t0")
        await chunks(store, "t0", range(20))
        await store.set_status("t0", a2a_pb2.TASK_STATE_COMPLETED)
        foreign_ids = ids(await drain(foreign))
        sender = await store.subscribe("t1")
        await created(store, "t1")
        await chunks(store, "t1", range(3))
        await store.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)
        events = await drain(sender)
        real = ids(events)
        for at, after in enumerate(real):
            watched = await store.watch("t1", ALICE, until_terminal=True, after=after)
            assert watched is not None
            assert ids(await drain(watched[1])) == real[at + 1 :]
        texts = odd_ids("contract", 300, real=real, foreign=foreign_ids)
        for text in texts:
            with pytest.raises(EventIdExpiredError) as refused:
                await store.watch("t1", ALICE, until_terminal=True, after=text)
            message = refused.value.message
            assert "not an event id" in message or "no longer keeps" in message, (text, message)
            assert len(message) < 300, message  # a long text is cut, never echoed whole
        for text in texts[:20]:
            assert await store.watch("t1", BOB, until_terminal=True, after=text) is None

    async def test_a_snapshot_s_id_is_one_to_resume_after(self, make_store: MakeStore) -> None:
        """The id a snapshot names (also one taken before the task's stream had any event of
        its own, as in memory) replays exactly the events after the snapshot."""
        store = await make_store()
        await created(store, "t1")
        watched = await store.watch("t1", ALICE, until_terminal=True)
        assert watched is not None
        snapshot_id = watched[1].snapshot_id
        assert snapshot_id
        await chunks(store, "t1", range(2))
        await store.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)
        seen = await drain(watched[1])
        resumed = await store.watch("t1", ALICE, until_terminal=True, after=snapshot_id)
        assert resumed is not None
        assert ids(await drain(resumed[1])) == ids(seen)

    async def test_a_send_stream_sees_creation_and_closes_when_interrupted(
        self, make_store: MakeStore
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

    async def test_a_task_created_with_its_first_status(self, make_store: MakeStore) -> None:
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
        listed = await store.list(
            ALICE, TaskQuery(page_size=10, state=a2a_pb2.TASK_STATE_COMPLETED)
        )
        assert [task.id for task in listed.tasks] == ["unseen"] and listed.total_size == 1
        submitted = await store.list(
            ALICE, TaskQuery(page_size=10, state=a2a_pb2.TASK_STATE_SUBMITTED)
        )
        assert submitted.total_size == 0
        # "seen", waiting for input, holds one of the two shares; "unseen" gave its back
        await store.reserve(ALICE, 100, "next")

    async def test_a_direct_reply_reaches_the_stream_and_closes_it(
        self, make_store: MakeStore
    ) -> None:
        store = await make_store()
        subscription = await store.subscribe("r1")
        await store.reserve(ALICE, 10, "r1")
        await store.release(ALICE, "r1")
        await store.reply("r1", agent_text("hello"))
        events = await drain(subscription)
        assert [event.message.message_id for event in events] == ["a-hello"]
        assert await store.get("r1", ALICE) is None

    async def test_resume_claims_an_interrupted_task_once(self, make_store: MakeStore) -> None:
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

    async def test_withdraw_removes_the_message_s_task_and_ends_its_streams(
        self, make_store: MakeStore
    ) -> None:
        store = await make_store(max_live_per_owner=1)
        sent = await store.subscribe("t1")  # the send stream, before the task exists
        await created(store, "t1")
        await store.set_status("t1", a2a_pb2.TASK_STATE_WORKING)
        watched = await store.watch("t1", ALICE, until_terminal=True)
        assert watched is not None
        await store.update("t1", adding_artifact("a1"), chunk_event("t1", 1))
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

    async def test_withdraw_of_an_answer_puts_the_task_back_to_wait(
        self, make_store: MakeStore
    ) -> None:
        store = await make_store()
        await created(store, "t1")
        await store.set_status("t1", a2a_pb2.TASK_STATE_INPUT_REQUIRED, agent_text("which?"))
        subscribed = await store.watch("t1", ALICE, until_terminal=True)
        answer = a2a_pb2.Message(message_id="m2", role=a2a_pb2.ROLE_USER)
        await store.resume("t1", ALICE, answer)
        sent = await store.watch("t1", ALICE, until_terminal=False)  # the answer's send stream
        assert subscribed is not None and sent is not None
        await store.set_status("t1", a2a_pb2.TASK_STATE_WORKING)
        await store.update("t1", adding_artifact("a1"), chunk_event("t1", 1))
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

    async def test_every_write_counts_against_the_byte_budget(self, make_store: MakeStore) -> None:
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
        await store.set_status(
            "t1", a2a_pb2.TASK_STATE_FAILED, agent_text("no room"), force_room=True
        )
        await store.resume("t2", ALICE, text_of(20_000, "big2"))
        assert await store.get("t1", ALICE) is None
        assert (await store.stats()).bytes <= 30_000  # type: ignore[operator]

    async def test_cancel_ends_the_task_and_its_streams(self, make_store: MakeStore) -> None:
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

    async def test_parked_tasks_are_found_and_canceled_once(self, make_store: MakeStore) -> None:
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

    async def test_list_pages_newest_first_with_filters(self, make_store: MakeStore) -> None:
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

    async def test_live_shares_are_enforced_and_given_back(self, make_store: MakeStore) -> None:
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

    async def test_finished_tasks_go_after_their_ttl_with_their_events(
        self, make_store: MakeStore
    ) -> None:
        store = await make_store(terminal_ttl=0)
        await created(store, "t1")
        await created(store, "t2")
        await store.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)
        assert await store.evict_expired() == 1
        assert await store.get("t1", ALICE) is None
        page = await store.list(ALICE, TaskQuery(page_size=10))
        assert [task.id for task in page.tasks] == ["t2"] and page.total_size == 1
        await self.assert_nothing_left(store, [("t1", ALICE, "ctx")])

    async def test_a_push_config_keeps_its_protocol_version_beside_it(
        self, make_store: MakeStore
    ) -> None:
        """The version a webhook speaks is stored next to its config, never in it: a reader of the
        config gets the 1.0 message it gave. Replacing the config sets the version again; deleting
        it, or dropping the task's configs, forgets it."""
        store = await make_store()
        await created(store, "t1")
        configs = self.push_configs_of(store)
        given = a2a_pb2.TaskPushNotificationConfig(
            task_id="t1", id="c03", url="https://a.example/h"
        )
        plain = a2a_pb2.TaskPushNotificationConfig(
            task_id="t1", id="c10", url="https://b.example/h"
        )
        assert await configs.put(given, "0.3") == given
        await configs.put(plain)
        got = await configs.get("t1", "c03")
        assert got is not None
        assert got.SerializeToString(deterministic=True) == given.SerializeToString(
            deterministic=True
        )
        assert await configs.for_task("t1") == [given, plain]
        assert await configs.protocols("t1") == {"c03": "0.3"}
        await configs.put(given)  # replaced through 1.0
        assert await configs.protocols("t1") == {}
        await configs.put(given, "0.3")
        await configs.delete("t1", "c03")
        assert await configs.protocols("t1") == {}
        await configs.put(given, "0.3")
        await configs.drop_task("t1")
        assert await configs.protocols("t1") == {}

    async def test_a_finished_task_takes_its_push_protocols_with_it(
        self, make_store: MakeStore
    ) -> None:
        store = await make_store(terminal_ttl=0)
        await created(store, "t1")
        configs = self.push_configs_of(store)
        await configs.put(
            a2a_pb2.TaskPushNotificationConfig(task_id="t1", id="c", url="https://a.example/h"),
            "0.3",
        )
        await store.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)
        assert await store.evict_expired() == 1
        if store.push_configs is not None:  # else they go with `StoreListener.task_evicted`
            assert await configs.protocols("t1") == {}
            assert await configs.for_task("t1") == []
        await self.assert_nothing_left(store, [("t1", ALICE, "ctx")])

    async def test_a_full_store_makes_room_from_finished_tasks_only(
        self, make_store: MakeStore
    ) -> None:
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
        self, make_store: MakeStore
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
        self, make_store: MakeStore
    ) -> None:
        """A full store evicts its oldest finished tasks several at a time (`eviction_batch`), here
        from two scopes and three contexts: each evicted task leaves every ListTasks index (all,
        its state's, its context's) and leaves nothing behind (`assert_nothing_left`)."""
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
        # Read before a ListTasks page could sweep stale index entries.
        evicted = sorted(set(scopes) - present)
        gone = [(task_id, scopes[task_id], contexts[task_id]) for task_id in evicted]
        await self.assert_nothing_left(store, gone)
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
