"""What the contract's tests share: the scopes, the tasks and events they write, the listener
they open stores with, and the `make_store` fixture over a suite's `store_factory`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from typing import Any, Protocol

import pytest
import pytest_asyncio

from a2a_grpc.core.event_ids import event_id
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.base import (
    PushConfigs,
    Scope,
    StoreFactory,
    StoreListener,
    StoreSettings,
    Subscription,
    TaskStore,
    Webhooks,
)

ALICE = Scope("tenant-a", "alice")
"""The scope most tests write in."""
BOB = Scope("tenant-a", "bob")
"""Another caller of the same tenant, who must see none of ALICE's tasks."""
WAIT_S = 10.0
"""Upper bound of any one wait on a store's events (a guard: the events end it first)."""


class MakeStore(Protocol):
    """Opens and starts a store from the suite's factory: `settings` are `StoreSettings`
    fields; `listener` defaults to a fresh `RecordedListener`."""

    def __call__(
        self,
        *,
        listener: StoreListener | None = None,
        webhooks: Webhooks | None = None,
        **settings: Any,
    ) -> Awaitable[TaskStore]: ...


class RecordedListener:
    """A `StoreListener` that keeps what its store told it, for the tests to wait on."""

    def __init__(self) -> None:
        self.evicted: list[str] = []
        """Ids of the tasks the store let go of, in order."""
        self.canceled: asyncio.Queue[str] = asyncio.Queue()
        """Ids of the tasks canceled on another replica while a run here worked on them."""
        self.health: list[bool] = []
        """Every health change the store reported, in order."""
        self.recovered = asyncio.Event()
        """Set once the store reported its backend healthy again."""
        self.down = asyncio.Event()
        """Set once the store reported its backend unhealthy."""

    def task_evicted(self, task_id: str) -> None:
        self.evicted.append(task_id)

    def canceled_elsewhere(self, task_id: str) -> None:
        self.canceled.put_nowait(task_id)

    def health_changed(self, healthy: bool) -> None:
        self.health.append(healthy)
        if healthy:
            self.recovered.set()
        else:
            self.down.set()


class StoreSuite:
    """The fixtures every contract class has. A subclass gives `store_factory`."""

    @pytest.fixture
    def store_factory(self) -> StoreFactory:
        """The factory of the stores under test: override it in the test class (a fixture,
        which may use other fixtures: a server of the store's backend, say)."""
        raise NotImplementedError(
            f"{type(self).__name__} must define the store_factory fixture: the StoreFactory "
            "(tasks/base.py) that makes the stores under test"
        )

    @pytest_asyncio.fixture
    async def make_store(self, store_factory: StoreFactory) -> AsyncIterator[MakeStore]:
        """Stores from `store_factory`, started; each is closed after the test."""
        made: list[TaskStore] = []

        async def make(
            *,
            listener: StoreListener | None = None,
            webhooks: Webhooks | None = None,
            **settings: Any,
        ) -> TaskStore:
            heard = RecordedListener() if listener is None else listener
            store = store_factory(StoreSettings(**settings), heard, webhooks)
            made.append(store)  # closed even when its start fails
            await store.start()
            return store

        yield make
        for store in reversed(made):
            await store.close()

    async def assert_nothing_left(
        self, store: TaskStore, gone: Collection[tuple[str, Scope, str]]
    ) -> None:
        """Checks that nothing of the tasks `gone` ((task id, scope, context id) each, the
        tasks the store let go of) is left in its backend, beyond what the contract's reads
        show (they show nothing). Override it to look into the backend (the Redis suite checks
        every key and index entry of those tasks); by default nothing more is checked."""

    def push_configs_of(self, store: TaskStore) -> PushConfigs:
        """The push configs the push-config tests use: the store's (`TaskStore.push_configs`).
        Those tests are skipped for a store that keeps none (the server's webhook dispatcher
        keeps them in its process); a suite may give this process's instead."""
        configs = store.push_configs
        if configs is None:
            pytest.skip(
                "the store keeps no push configs: the server's webhook dispatcher keeps them "
                "in its process"
            )
        return configs

    def event_id_order(self, text: str) -> tuple[int, ...]:
        """A key that orders a store's event ids as they grow (per task they only grow,
        core/event_ids.py). By default ids are integers ("<n>") or pairs ("<ms>-<seq>", as
        Redis stream ids); a store whose ids are neither overrides it."""
        return tuple(int(part) for part in text.split("-"))


def new_task(task_id: str, context_id: str = "ctx") -> a2a_pb2.Task:
    """A SUBMITTED task with one user message, "hi" (`m-<task_id>`)."""
    task = a2a_pb2.Task(id=task_id, context_id=context_id)
    task.status.state = a2a_pb2.TASK_STATE_SUBMITTED
    task.history.add(message_id=f"m-{task_id}", role=a2a_pb2.ROLE_USER).parts.add().text = "hi"
    return task


async def created(store: TaskStore, task_id: str, scope: Scope = ALICE, **kw: Any) -> None:
    """Reserves room for `new_task(task_id, **kw)` and creates it in `scope`."""
    await store.reserve(scope, 100, task_id)
    await store.create(new_task(task_id, **kw), scope, reserved_size=100)


def agent_text(text: str) -> a2a_pb2.Message:
    """An agent message (`a-<text>`) saying `text`."""
    message = a2a_pb2.Message(message_id=f"a-{text}", role=a2a_pb2.ROLE_AGENT)
    message.parts.add().text = text
    return message


def adding_artifact(artifact_id: str) -> Callable[[a2a_pb2.Task], None]:
    """A task mutation (`TaskStore.update`) that adds an empty artifact of that id."""

    def mutate(task: a2a_pb2.Task) -> None:
        task.artifacts.add(artifact_id=artifact_id)

    return mutate


def text_of(size: int, message_id: str = "big") -> a2a_pb2.Message:
    """A user message of `size` characters."""
    message = a2a_pb2.Message(message_id=message_id, role=a2a_pb2.ROLE_USER)
    message.parts.add().text = "x" * size
    return message


async def drain(subscription: Subscription) -> list[a2a_pb2.StreamResponse]:
    """Every event of a subscription, until it ends."""
    events = []
    async with asyncio.timeout(WAIT_S):
        async for event in subscription:
            events.append(event)
    return events


def kinds(events: list[a2a_pb2.StreamResponse]) -> list[str]:
    """Each event's kind: its state's name for a status update, else its payload's name."""
    out = []
    for event in events:
        kind = event.WhichOneof("payload")
        if kind == "status_update":
            out.append(a2a_pb2.TaskState.Name(event.status_update.status.state))
        else:
            out.append(str(kind))
    return out


def ids(events: list[a2a_pb2.StreamResponse]) -> list[str]:
    """The events' ids (each must carry one)."""
    found = [event_id(event) for event in events]
    assert None not in found, found
    return [text for text in found if text is not None]


def chunk_event(task_id: str, n: int) -> Callable[[], a2a_pb2.StreamResponse]:
    """An `EventBuilder` of an artifact update of artifact `a<n>`."""

    def build() -> a2a_pb2.StreamResponse:
        event = a2a_pb2.StreamResponse()
        event.artifact_update.task_id = task_id
        event.artifact_update.artifact.artifact_id = f"a{n}"
        return event

    return build


async def chunks(store: TaskStore, task_id: str, numbers: range) -> None:
    """An artifact update per number, each its own write."""
    for n in numbers:
        await store.update(task_id, lambda task: None, chunk_event(task_id, n))


def artifact_ids(events: list[a2a_pb2.StreamResponse]) -> list[str]:
    """The artifact ids of the artifact updates among `events`."""
    return [e.artifact_update.artifact.artifact_id for e in events if e.HasField("artifact_update")]
