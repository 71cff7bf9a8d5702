"""Nothing the Redis store writes outlives its tasks: every key either has a TTL or goes with
its task, the ListTasks indexes (the context's too) and the replicas' task sets included.

Two replicas (servers on 127.0.0.1:0) on one real redis-server, or a 3-master Cluster, run
tasks of every kind with `task_ttl` and `dedup_window` of a second; once they have expired the
only key left is the replicas' leases. The same on PostgreSQL: no row of a task is left."""

from __future__ import annotations

import asyncio
import contextlib
import time
import types
import uuid
from collections.abc import AsyncIterator

import grpc
import psycopg
import pytest
import redis.asyncio
import redis.asyncio.cluster

from a2a_grpc.core import event_ids
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.server.app import RunningServer, ServerPlan, start_server
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.demo_agent import DemoAgent
from a2a_grpc.server.tasks.base import TaskQuery
from a2a_grpc.server.tasks.contract import ALICE, created
from a2a_grpc.server.tasks.redis import store as redis_store
from a2a_grpc.server.tasks.redis.store import RedisTaskStore
from tests.integration.webhook_receiver import Receiver
from tests.redis_servers import RedisServer

VERSION = (("a2a-version", "1.0"),)
TTL = 1.0
"""task_ttl and dedup_window of the servers, seconds."""
LISTED_BOUND = TTL + 9.0
"""Seconds after the last task finished within which ListTasks shows none of them: the TTL, a
sweep interval (a quarter of the TTL here, at most 1 s) and room for a loaded machine; far
below the keys' backstop TTL (2 x TTL + 60 s), which was the bound before."""
KEYS_BOUND = 30.0
"""Seconds within which every key but the leases must be gone (claims expire by their TTL)."""


def message(text: str, context_id: str, task_id: str = "") -> a2a_pb2.Message:
    sent = a2a_pb2.Message(
        message_id=uuid.uuid4().hex, role=a2a_pb2.ROLE_USER, context_id=context_id, task_id=task_id
    )
    sent.parts.add().text = text
    return sent


@contextlib.asynccontextmanager
async def replicas(url: str) -> AsyncIterator[list[RunningServer]]:
    config = ServerConfig(
        host="127.0.0.1",
        port=0,
        http_port=None,
        store=url,
        task_ttl=TTL,
        dedup_window=TTL,
        allow_private_webhooks=True,
    )
    servers = [await start_server(ServerPlan(config, DemoAgent())) for _ in range(2)]
    try:
        yield servers
    finally:
        for server in servers:
            await server.stop(0)


async def every_key(url: str, cluster: bool) -> set[str]:
    client: redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster
    if cluster:
        client = redis.asyncio.cluster.RedisCluster.from_url(url)
    else:
        client = redis.asyncio.Redis.from_url(url)
    try:
        return {key.decode() async for key in client.scan_iter(count=1000)}
    finally:
        await client.aclose()


async def run_every_kind(
    a: a2a_pb2_grpc.A2AServiceStub, b: a2a_pb2_grpc.A2AServiceStub, webhook: str
) -> None:
    """Blocking, streamed, cancelled on the other replica, resumed after an event id on the
    other replica, answered after INPUT_REQUIRED, failed, with a push config: each in a context
    of its own."""
    done = await a.SendMessage(
        a2a_pb2.SendMessageRequest(message=message("hello", "blocking")), metadata=VERSION
    )
    assert done.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    streamed = [
        event
        async for event in a.SendStreamingMessage(
            a2a_pb2.SendMessageRequest(message=message("chunks 3", "streamed")), metadata=VERSION
        )
    ]
    assert streamed[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
    immediately = a2a_pb2.SendMessageConfiguration(return_immediately=True)
    slow = await a.SendMessage(
        a2a_pb2.SendMessageRequest(
            message=message("slow 30", "canceled"), configuration=immediately
        ),
        metadata=VERSION,
    )
    canceled = await b.CancelTask(a2a_pb2.CancelTaskRequest(id=slow.task.id), metadata=VERSION)
    assert canceled.status.state == a2a_pb2.TASK_STATE_CANCELED
    resumed = await a.SendMessage(
        a2a_pb2.SendMessageRequest(message=message("slow 1", "resumed"), configuration=immediately),
        metadata=VERSION,
    )
    seen: list[str] = []
    async for event in b.SubscribeToTask(
        a2a_pb2.SubscribeToTaskRequest(id=resumed.task.id), metadata=VERSION
    ):
        seen.append(event_ids.event_id(event) or "")
        if len(seen) == 2:
            break
    after = (*VERSION, (event_ids.LAST_EVENT_ID_KEY, seen[-1]))
    rest = [
        event
        async for event in b.SubscribeToTask(
            a2a_pb2.SubscribeToTaskRequest(id=resumed.task.id), metadata=after
        )
    ]
    assert rest[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
    asked = await a.SendMessage(
        a2a_pb2.SendMessageRequest(message=message("ask", "answered")), metadata=VERSION
    )
    assert asked.task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    answered = await b.SendMessage(
        a2a_pb2.SendMessageRequest(message=message("42", "answered", asked.task.id)),
        metadata=VERSION,
    )
    assert answered.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    failed = await a.SendMessage(
        a2a_pb2.SendMessageRequest(message=message("fail", "failed")), metadata=VERSION
    )
    assert failed.task.status.state == a2a_pb2.TASK_STATE_FAILED
    pushed = a2a_pb2.SendMessageConfiguration(
        task_push_notification_config=a2a_pb2.TaskPushNotificationConfig(url=webhook)
    )
    with_push = await a.SendMessage(
        a2a_pb2.SendMessageRequest(message=message("chunks 2", "pushed"), configuration=pushed),
        metadata=VERSION,
    )
    assert with_push.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    later = await a.SendMessage(
        a2a_pb2.SendMessageRequest(
            message=message("slow 1", "pushed later"), configuration=immediately
        ),
        metadata=VERSION,
    )
    await b.CreateTaskPushNotificationConfig(
        a2a_pb2.TaskPushNotificationConfig(task_id=later.task.id, url=webhook), metadata=VERSION
    )
    async for _ in b.SubscribeToTask(
        a2a_pb2.SubscribeToTaskRequest(id=later.task.id), metadata=VERSION
    ):
        pass


async def expire_and_count(
    a: a2a_pb2_grpc.A2AServiceStub, b: a2a_pb2_grpc.A2AServiceStub, url: str, cluster: bool
) -> None:
    """Waits (bounded) until ListTasks shows none of the tasks and only the leases are left."""
    finished = time.monotonic()
    listed = await a.ListTasks(a2a_pb2.ListTasksRequest(), metadata=VERSION)
    assert listed.tasks  # the last ones, at least: the first may have expired already
    while listed.tasks:  # bounded by LISTED_BOUND
        late = time.monotonic() - finished
        assert late < LISTED_BOUND, [(t.context_id, t.status.state) for t in listed.tasks]
        await asyncio.sleep(0.1)
        listed = await b.ListTasks(a2a_pb2.ListTasksRequest(), metadata=VERSION)
    leases = {"a2a:{room}:replicas"}
    left = await every_key(url, cluster)
    while left - leases:  # bounded by KEYS_BOUND
        assert time.monotonic() - finished < KEYS_BOUND, sorted(left)
        await asyncio.sleep(0.2)
        left = await every_key(url, cluster)
    assert left == leases


@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", ["redis", "cluster"])
async def test_no_key_outlives_its_tasks(kind: str, request: pytest.FixtureRequest) -> None:
    cluster = kind == "cluster"
    url = request.getfixturevalue("redis_cluster" if cluster else "redis_server").url
    receiver = await Receiver().start()
    try:
        async with replicas(url) as (one, two):
            channel_a = grpc.aio.insecure_channel(f"127.0.0.1:{one.port}")
            channel_b = grpc.aio.insecure_channel(f"127.0.0.1:{two.port}")
            try:
                a = a2a_pb2_grpc.A2AServiceStub(channel_a)
                b = a2a_pb2_grpc.A2AServiceStub(channel_b)
                await run_every_kind(a, b, receiver.url)
                await expire_and_count(a, b, url, cluster)
                for server in (one, two):  # nor in what a replica keeps of the runs it wrote
                    assert not server.handler.store._owned  # type: ignore[attr-defined]
            finally:
                await channel_a.close()
                await channel_b.close()
    finally:
        await receiver.stop()


async def test_index_entries_whose_task_expired_are_swept(redis_server: RedisServer) -> None:
    """A task whose keys expired by the backstop (no replica swept meanwhile) leaves its index
    entries behind; a step of the bounded index sweep removes them, and Redis the keys they
    emptied, while a live task's entries stay."""
    store = RedisTaskStore.connect(redis_server.url)
    await store.start()
    try:
        await created(store, "gone", context_id="its own")
        await created(store, "live", context_id="shared")
        await store.client.delete(store.keys.task("gone"))  # as the backstop TTL does
        gone_index = store.keys.indexes(ALICE, a2a_pb2.TASK_STATE_SUBMITTED, "its own")
        assert await store.client.exists(*gone_index) == 3
        assert await store.eviction.sweep_indexes() == 3  # from "all", "s:<state>", "c:<ctx>"
        assert await store.client.exists(gone_index[2]) == 0
        listed = await store.list(ALICE, TaskQuery(page_size=10))
        assert [task.id for task in listed.tasks] == ["live"] and listed.total_size == 1
        assert await store.eviction.sweep_indexes() == 0
    finally:
        await store.close()


async def test_a_replica_forgets_the_channels_of_ended_streams(redis_server: RedisServer) -> None:
    """Each stream follows its task's channel while it is open; once it ended, the replica
    keeps nothing of the channel (redis-py's bookkeeping included: it once kept every channel
    a replica had ever followed, ~1 MiB a minute under load)."""
    store = RedisTaskStore.connect(redis_server.url)
    await store.start()
    try:
        events = store.events
        pubsub = events._pubsub
        assert pubsub is not None
        before = set(pubsub.channels)  # the replica's cancel channel
        for index in range(50):
            await created(store, f"t{index}")
            subscription = await store.subscribe(f"t{index}")
            assert store.keys.channel(f"t{index}").encode() in pubsub.channels
            subscription.cancel()
        for _ in range(500):  # until Redis confirmed the last UNSUBSCRIBE: 5 s at most
            if set(pubsub.channels) == before and not pubsub.pending_unsubscribe_channels:
                break
            await asyncio.sleep(0.01)
        assert set(pubsub.channels) == before
        assert not pubsub.pending_unsubscribe_channels
        assert not events._confirmations and not events._subscribers
    finally:
        await store.close()


PER_TASK_TABLES = ("a2a_tasks", "a2a_events", "a2a_push_configs", "a2a_replies", "a2a_claims")


async def rows_left(url: str) -> dict[str, int]:
    async with await psycopg.AsyncConnection.connect(url) as connection:
        counts = {}
        for table in PER_TASK_TABLES:
            cursor = await connection.execute(f"SELECT count(*) FROM {table}")
            row = await cursor.fetchone()
            counts[table] = 0 if row is None else int(row[0])
        cursor = await connection.execute(
            "SELECT (SELECT coalesce(sum(tasks), 0) FROM a2a_scope_counts) + "
            "(SELECT coalesce(sum(change), 0) FROM a2a_scope_changes)"
        )
        row = await cursor.fetchone()
        counts["counted"] = 0 if row is None else int(row[0])
        cursor = await connection.execute("SELECT count(*) FROM a2a_scope_counts")
        row = await cursor.fetchone()
        counts["a2a_scope_counts rows"] = 0 if row is None else int(row[0])
        return counts


@pytest.mark.timeout(180)
async def test_no_row_outlives_its_tasks_on_postgres(postgres_database: str) -> None:
    receiver = await Receiver().start()
    try:
        async with replicas(postgres_database) as (one, two):
            channel_a = grpc.aio.insecure_channel(f"127.0.0.1:{one.port}")
            channel_b = grpc.aio.insecure_channel(f"127.0.0.1:{two.port}")
            try:
                a = a2a_pb2_grpc.A2AServiceStub(channel_a)
                b = a2a_pb2_grpc.A2AServiceStub(channel_b)
                await run_every_kind(a, b, receiver.url)
                finished = time.monotonic()
                listed = await a.ListTasks(a2a_pb2.ListTasksRequest(), metadata=VERSION)
                while listed.tasks:  # bounded by LISTED_BOUND
                    assert time.monotonic() - finished < LISTED_BOUND, listed.tasks
                    await asyncio.sleep(0.1)
                    listed = await b.ListTasks(a2a_pb2.ListTasksRequest(), metadata=VERSION)
                left = await rows_left(postgres_database)
                while any(left.values()):  # bounded by KEYS_BOUND
                    assert time.monotonic() - finished < KEYS_BOUND, left
                    await asyncio.sleep(0.2)
                    left = await rows_left(postgres_database)
            finally:
                await channel_a.close()
                await channel_b.close()
    finally:
        await receiver.stop()


async def test_settled_copies_older_than_their_age_go(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copies a replica keeps of what it settled, for the blocking reply a moment later,
    go once older than `SETTLED_COPY_AGE` as new ones come, not only past 4,096 of them."""
    clock = [1000.0]
    monkeypatch.setattr(
        redis_store, "time", types.SimpleNamespace(monotonic=lambda: clock[0], time=time.time)
    )
    store = RedisTaskStore.connect(redis_server.url)
    await store.start()
    try:
        for index in range(3):
            await created(store, f"t{index}")
            await store.set_status(f"t{index}", a2a_pb2.TASK_STATE_COMPLETED)
        assert list(store._settled_copies) == ["t0", "t1", "t2"]
        clock[0] += redis_store.SETTLED_COPY_AGE + 0.5
        await created(store, "t3")
        await store.set_status("t3", a2a_pb2.TASK_STATE_COMPLETED)
        assert list(store._settled_copies) == ["t3"]
    finally:
        await store.close()
