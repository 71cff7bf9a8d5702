"""The store contract suite (`a2a_grpc.server.tasks.contract`) on every built-in store, each
opened through the registry by its URL scheme: in memory, on Redis (a real redis-server per
test), on a 3-master Redis Cluster (one per module, a key prefix per test) and on PostgreSQL
(a real server, a database per test). Redis and PostgreSQL are shared stores: they also pass
the replica tests, two stores on one backend as two replicas hold them. What only Redis shows
is in test_redis_store.py, what only PostgreSQL shows in test_postgres_store.py; a store a
package adds runs the same suite (tests/integration/test_store_plugin.py).

Plus one handler test over every store: what the handler does with a store's snapshot."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Collection

import pytest

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from a2a_grpc.server.card import demo_card
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.protocol.call_context import CallContext
from a2a_grpc.server.protocol.dedup import window_for
from a2a_grpc.server.protocol.handler import RequestHandler
from a2a_grpc.server.protocol.push_config_rpcs import LocalPushConfigs
from a2a_grpc.server.push.configs import PushConfigStore
from a2a_grpc.server.tasks.base import PushConfigs, Scope, StoreFactory, StoreSettings, TaskStore
from a2a_grpc.server.tasks.contract import (
    RecordedListener,
    SharedStoreContract,
    StoreContract,
    kinds,
)
from a2a_grpc.server.tasks.postgres.store import PostgresTaskStore
from a2a_grpc.server.tasks.redis.store import RedisTaskStore
from a2a_grpc.server.tasks.redis.urls import redis_factory
from a2a_grpc.server.tasks.registry import store_kind
from tests.redis_servers import RedisCluster, RedisServer

_prefixes = itertools.count()


class TestMemoryStore(StoreContract):
    @pytest.fixture
    def store_factory(self) -> StoreFactory:
        return store_kind("memory://").factory("memory://")

    def push_configs_of(self, store: TaskStore) -> PushConfigs:
        # The memory store keeps none: the dispatcher's own, in this process.
        return LocalPushConfigs(PushConfigStore())


class RedisChecks:
    """What the Redis suites look into beyond the contract's reads."""

    def abandon(self, store: TaskStore) -> None:
        assert isinstance(store, RedisTaskStore)
        store.abandon()

    async def assert_nothing_left(
        self, store: TaskStore, gone: Collection[tuple[str, Scope, str]]
    ) -> None:
        """No key of a task that went, no room, and no member of any ListTasks index of its
        scope and context, in any state (read before a ListTasks page could sweep one)."""
        assert isinstance(store, RedisTaskStore)
        keys, client = store.keys, store.client
        for task_id, scope, context_id in gone:
            for key in keys.of_task(task_id):
                assert not await client.exists(key), key
            assert await client.zscore(keys.room_all, task_id) is None
            for state in a2a_pb2.TaskState.values():
                for index in keys.indexes(scope, state, context_id):
                    members = await client.zrange(index, 0, -1)
                    assert task_id not in {member.decode().split("|")[-1] for member in members}


class TestRedisStore(RedisChecks, SharedStoreContract):
    @pytest.fixture
    def store_factory(self, redis_server: RedisServer) -> StoreFactory:
        return store_kind(redis_server.url).factory(redis_server.url)


class TestRedisClusterStore(RedisChecks, SharedStoreContract):
    # A write's room settles just after it on a Cluster (tasks/redis/backend.py, `batch`).
    room_settles_with_the_write = False

    @pytest.fixture
    def store_factory(self, redis_cluster: RedisCluster) -> StoreFactory:
        # One Cluster for the module: a key prefix per test keeps the tests apart.
        url = redis_cluster.url.replace("redis://", "redis+cluster://", 1)
        assert store_kind(url).shared
        return redis_factory(url, prefix=f"contract{next(_prefixes)}")


class PostgresChecks:
    """What the PostgreSQL suite looks into beyond the contract's reads."""

    def abandon(self, store: TaskStore) -> None:
        assert isinstance(store, PostgresTaskStore)
        store.abandon()

    async def assert_nothing_left(
        self, store: TaskStore, gone: Collection[tuple[str, Scope, str]]
    ) -> None:
        """No row of a task that went: task, events, push configs."""
        assert isinstance(store, PostgresTaskStore)
        ids = [task_id for task_id, _, _ in gone]
        for table, column in (
            ("a2a_tasks", "id"),
            ("a2a_events", "task_id"),
            ("a2a_push_configs", "task_id"),
        ):
            row = await store.backend.fetchone(
                f"SELECT count(*) FROM {table} WHERE {column} = ANY(%s)", (ids,)
            )
            assert row == (0,), table


@pytest.mark.postgres
class TestPostgresStore(PostgresChecks, SharedStoreContract):
    @pytest.fixture
    def store_factory(self, postgres_database: str) -> StoreFactory:
        assert store_kind(postgres_database).shared
        return store_kind(postgres_database).factory(postgres_database)


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


@pytest.fixture(
    params=["memory", "redis", "cluster", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def built_in_store(request: pytest.FixtureRequest) -> AsyncIterator[TaskStore]:
    """A started store of one built-in kind, closed after the test."""
    if request.param == "memory":
        factory = store_kind("").factory("")
    elif request.param in ("redis", "postgres"):
        fixture = "redis_server" if request.param == "redis" else "postgres_database"
        server = request.getfixturevalue(fixture)
        url = server if isinstance(server, str) else server.url
        factory = store_kind(url).factory(url)
    else:
        url = request.getfixturevalue("redis_cluster").url
        factory = redis_factory(url, prefix=f"handler{next(_prefixes)}")
    store = factory(StoreSettings(), RecordedListener(), None)
    await store.start()
    yield store
    await store.close()


async def test_a_continued_task_s_stream_opens_submitted_on_every_store(
    built_in_store: TaskStore,
) -> None:
    """After an answer, a continuation's stream opens with the task as `resume` left it:
    SUBMITTED, with the answer last in its history, on every store (docs/server.md, "Behaviour
    worth knowing"). Catches the handler starting the agent before it takes that snapshot: on
    a store whose `watch` waits on its backend (Redis), the agent's first event would already
    be in it (WORKING), while the memory store showed SUBMITTED."""
    handler = handler_over(built_in_store)
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
