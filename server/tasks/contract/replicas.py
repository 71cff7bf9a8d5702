"""What a store other processes share keeps across them (tasks/base.py, `StoreKind.shared`):
two stores from one factory stand for two replicas on one backend. Remote cancels reach the
run, a replica whose lease ran out has its tasks failed and cannot write over that, a lost race
is an error and never a silent overwrite, events reach every replica with the same ids,
message-id claims, push configs and page tokens are the same everywhere."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import pytest

from a2a_grpc.core.errors import ServiceUnavailableError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.base import (
    REPLICA_STOPPED_TEXT,
    LiveTaskLimitError,
    TaskFinishedError,
    TaskQuery,
    TaskStore,
)
from a2a_grpc.server.tasks.contract.single import NOT_NOW, StoreContract
from a2a_grpc.server.tasks.contract.support import (
    ALICE,
    BOB,
    WAIT_S,
    MakeStore,
    RecordedListener,
    agent_text,
    chunks,
    created,
    drain,
    ids,
    kinds,
)


class SharedStoreContract(StoreContract):
    """The single-store tests, and those of two replicas on one backend. A subclass gives
    `store_factory` (every store it makes shares one backend) and `abandon`."""

    room_settles_with_the_write = True
    """Whether the write that ends a task gives its live share back in the same atomic step,
    so that a reader that saw the task end finds the share free. A Redis Cluster, whose
    scripts reach one slot, gives it back just after (False): the lease test then leaves the
    shares of a reaped replica's tasks unchecked."""

    def abandon(self, store: TaskStore) -> None:
        """Makes `store` stop renewing its lease without giving anything up, as when its
        process is killed: another replica must reap its tasks within the lease. Override it
        (the Redis suite stops the lease keeper: `RedisTaskStore.abandon`)."""
        raise NotImplementedError(
            f"{type(self).__name__} must define abandon(store): how a replica dies without "
            "giving up its lease, for the lease tests of a shared store"
        )

    async def replicas(
        self, make_store: MakeStore, heard: RecordedListener | None = None, **settings: Any
    ) -> tuple[TaskStore, TaskStore]:
        """Two stores on one backend, as two replicas hold them; the first tells `heard`."""
        one = await make_store(listener=heard, **settings)
        two = await make_store(**settings)
        return one, two

    async def test_a_shared_store_ends_a_cut_run_as_failed_and_has_claims(
        self, make_store: MakeStore
    ) -> None:
        store = await make_store()
        assert store.stopped_run_status == (a2a_pb2.TASK_STATE_FAILED, REPLICA_STOPPED_TEXT)
        assert store.claims is not None  # else a message repeated to another replica runs again

    async def test_message_id_claims_are_seen_by_every_replica(self, make_store: MakeStore) -> None:
        one, two = await self.replicas(make_store)
        assert one.claims is not None and two.claims is not None
        assert await one.claims.claim("digest-1", "first", 60) is None
        assert await two.claims.claim("digest-1", "second", 60) == "first"
        await two.claims.unclaim("digest-1", "second")  # not its claim: nothing changes
        assert await one.claims.claim("digest-1", "third", 60) == "first"
        await one.claims.unclaim("digest-1", "first")
        assert await two.claims.claim("digest-1", "second", 60) is None

    async def test_the_outcome_of_a_delivery_withdrawn_before_it_is_followed_is_unavailable(
        self, make_store: MakeStore
    ) -> None:
        """A replica sees a delivery's claim on a message id; the delivery is then withdrawn
        (its id given back, its task removed, the notice sent) before that replica follows its
        outcome, whose stream opens too late for the notice: the outcome is unavailable at
        once, not a wait on a task that will not come. While the claim holds, a delivery with
        nothing stored yet is one still to come, and its outcome follows it to its end."""
        one, two = await self.replicas(make_store)
        assert one.claims is not None and two.claims is not None
        assert await one.claims.claim("digest-1", "content|t1", 60) is None
        await created(one, "t1")
        await one.set_status("t1", a2a_pb2.TASK_STATE_WORKING)
        assert await two.claims.claim("digest-1", "content|t9", 60) == "content|t1"
        await one.claims.unclaim("digest-1", "content|t1")
        await one.withdraw("t1", ALICE, NOT_NOW)
        late = await two.claims.outcome("t1", ALICE, "m1", ("digest-1", "content|t1"))
        assert late.settled.is_set()
        assert isinstance(late.unavailable, ServiceUnavailableError)
        assert late.unavailable.retryable
        assert await one.claims.claim("digest-2", "content|t2", 60) is None
        coming = await two.claims.outcome("t2", ALICE, "m2", ("digest-2", "content|t2"))
        assert not coming.started.is_set()
        await created(one, "t2")
        await one.set_status("t2", a2a_pb2.TASK_STATE_COMPLETED)
        await asyncio.wait_for(coming.settled.wait(), WAIT_S)
        assert coming.unavailable is None and coming.task_id == "t2"

    async def test_a_cancel_on_another_replica_reaches_the_run(self, make_store: MakeStore) -> None:
        heard = RecordedListener()
        one, two = await self.replicas(make_store, heard)
        await created(one, "t1")
        await one.set_status("t1", a2a_pb2.TASK_STATE_WORKING)
        watched = await two.watch("t1", ALICE, until_terminal=True)
        assert watched is not None
        await two.cancel("t1", ALICE)
        assert await asyncio.wait_for(heard.canceled.get(), WAIT_S) == "t1"
        with pytest.raises(TaskFinishedError):  # the run's next write changes nothing
            await one.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)
        assert kinds(await drain(watched[1])) == ["TASK_STATE_CANCELED"]

    async def test_events_reach_every_replica_with_the_same_ids_and_replay_there(
        self, make_store: MakeStore
    ) -> None:
        one, two = await self.replicas(make_store)
        sender = await one.subscribe("t1")
        await created(one, "t1")
        await one.set_status("t1", a2a_pb2.TASK_STATE_WORKING)
        watched = await two.watch("t1", ALICE, until_terminal=True)
        assert watched is not None and watched[0].status.state == a2a_pb2.TASK_STATE_WORKING
        await chunks(one, "t1", range(3))
        await one.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)
        here, there = await drain(sender), await drain(watched[1])
        assert kinds(there) == ["artifact_update"] * 3 + ["TASK_STATE_COMPLETED"]
        assert ids(there) == ids(here)[2:]
        replayed = await two.watch("t1", ALICE, until_terminal=True, after=ids(here)[2])
        assert replayed is not None
        assert ids(await drain(replayed[1])) == ids(here)[3:]

    async def test_page_tokens_are_valid_on_every_replica(self, make_store: MakeStore) -> None:
        one, two = await self.replicas(make_store)
        for number in range(5):
            await created(one, f"t{number}")
        first = await one.list(ALICE, TaskQuery(page_size=3))
        rest = await two.list(ALICE, TaskQuery(page_size=3, page_token=first.next_page_token))
        listed = [task.id for task in (*first.tasks, *rest.tasks)]
        assert listed == ["t4", "t3", "t2", "t1", "t0"]
        assert not rest.next_page_token and rest.total_size == 5
        assert (await two.list(BOB, TaskQuery(page_size=3))).total_size == 0

    async def test_a_push_config_registered_on_one_replica_is_read_on_another(
        self, make_store: MakeStore
    ) -> None:
        one, two = await self.replicas(make_store)
        await created(one, "t1")
        given = a2a_pb2.TaskPushNotificationConfig(
            task_id="t1", id="c03", url="https://a.example/h"
        )
        await self.push_configs_of(one).put(given, "0.3")
        other = self.push_configs_of(two)
        assert await other.for_task("t1") == [given]
        assert await other.protocols("t1") == {"c03": "0.3"}

    async def test_a_write_refused_after_a_cancel_elsewhere_is_listed_once(
        self, make_store: MakeStore
    ) -> None:
        """A run's COMPLETED, refused because the task was canceled on another replica, leaves
        the task listed once, as CANCELED, and nothing listed as COMPLETED."""
        one, two = await self.replicas(make_store)
        await created(one, "t1")
        await one.set_status("t1", a2a_pb2.TASK_STATE_WORKING)
        await two.cancel("t1", ALICE)
        with pytest.raises(TaskFinishedError):
            await one.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)
        for store in (one, two):
            every = await store.list(ALICE, TaskQuery(page_size=10))
            assert [task.id for task in every.tasks] == ["t1"] and every.total_size == 1
            assert every.tasks[0].status.state == a2a_pb2.TASK_STATE_CANCELED
            done = await store.list(
                ALICE, TaskQuery(page_size=10, state=a2a_pb2.TASK_STATE_COMPLETED)
            )
            assert done.total_size == 0 and not done.tasks

    async def test_a_cancel_racing_the_run_s_writes_still_cancels(
        self, make_store: MakeStore
    ) -> None:
        one, two = await self.replicas(make_store)
        for attempt in range(20):  # the cancel reads a version the run's writes then move on
            task_id = f"t{attempt}"
            await created(one, task_id)
            await one.set_status(task_id, a2a_pb2.TASK_STATE_WORKING)
            running = asyncio.Event()

            async def run_writes(task_id: str = task_id, running: asyncio.Event = running) -> int:
                written = 0
                with contextlib.suppress(TaskFinishedError):
                    for number in range(100):
                        await one.update(task_id, numbered(number))
                        written += 1
                        running.set()
                return written

            writes = asyncio.ensure_future(run_writes())
            await running.wait()
            canceled = await two.cancel(task_id, ALICE)
            assert canceled is not None
            assert canceled.status.state == a2a_pb2.TASK_STATE_CANCELED
            assert await writes < 100  # the run's next write after the cancel was refused

    async def test_a_replica_whose_lease_ran_out_has_its_tasks_failed(
        self, make_store: MakeStore
    ) -> None:
        one, two = await self.replicas(make_store, lease=0.3, max_live_per_owner=3)
        await created(one, "t1")
        await one.set_status("t1", a2a_pb2.TASK_STATE_WORKING)
        await created(one, "t2")
        await one.set_status("t2", a2a_pb2.TASK_STATE_INPUT_REQUIRED, agent_text("which?"))
        await one.reserve(ALICE, 10, "r1")  # room for a task it never got to create
        watched = await two.watch("t1", ALICE, until_terminal=True)
        assert watched is not None
        self.abandon(one)  # the replica "dies": its lease is no longer renewed
        events = await drain(watched[1])  # two reaps it
        assert kinds(events) == ["TASK_STATE_FAILED"]
        text = events[0].status_update.status.message.parts[0].text
        assert text == REPLICA_STOPPED_TEXT
        parked = await two.get("t2", ALICE)  # nobody was running it: it still waits
        assert parked is not None
        assert parked.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
        if not self.room_settles_with_the_write:
            return
        await two.reserve(ALICE, 10, "t3")  # t1's and r1's shares came back; t2 holds one
        await two.reserve(ALICE, 10, "t4")
        with pytest.raises(LiveTaskLimitError):
            await two.reserve(ALICE, 10, "t5")

    async def test_a_replica_whose_lease_ran_out_cannot_write_over_the_reaper_s_failed(
        self, make_store: MakeStore
    ) -> None:
        """A replica whose lease ran out, reaped by another (its task FAILED), writes COMPLETED
        with the version it last wrote: that write is refused (a lost race is an error, never
        a silent overwrite) and the task stays FAILED."""
        one, two = await self.replicas(make_store, lease=0.3)
        subscription = await two.subscribe("t1")  # from the start: whenever the reap comes
        await created(one, "t1")
        await one.set_status("t1", a2a_pb2.TASK_STATE_WORKING)
        self.abandon(one)  # its lease is no longer renewed; it still holds the run's copy
        events = await drain(subscription)  # two reaps it
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


def numbered(number: int) -> Callable[[a2a_pb2.Task], None]:
    """A task mutation that sets the task's metadata `n` to `number`."""

    def mutate(task: a2a_pb2.Task) -> None:
        task.metadata.update({"n": number})

    return mutate
