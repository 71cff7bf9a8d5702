"""What only the Redis store shows, beyond the store contract it passes
(tests/integration/test_store_contract.py): its keys, its bounds (maxmemory, a trimmed event
stream), outages (down, hung), credentials and TLS, a Cluster across nodes, and races its
version check decides. A real redis-server (or 3-master Cluster) per test or module."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.app import ServerPlan, StartupError, start_server
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.demo_agent import DemoAgent
from a2a_grpc.server.tasks.base import (
    StoreFullError,
    StoreSettings,
    StoreUnavailableError,
    TaskBusyError,
    TaskFinishedError,
    TaskQuery,
)
from a2a_grpc.server.tasks.contract import ALICE, RecordedListener, created, drain, kinds
from a2a_grpc.server.tasks.contract.support import agent_text, text_of
from a2a_grpc.server.tasks.redis.store import RedisTaskStore
from a2a_grpc.server.tasks.registry import store_kind
from tests.integration.certs import Authority
from tests.integration.store_outage_runs import runs_meet_the_store_down
from tests.redis_servers import RedisCluster, RedisServer, free_ports

_prefixes = itertools.count()


@pytest.mark.parametrize("kind", ["redis", "cluster"])
async def test_a_write_refused_after_a_cancel_elsewhere_leaves_no_trace(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """The index move and the room's settling that go with a task write happen only when the
    write does: a run's COMPLETED, refused because the task was canceled on another replica,
    leaves the task counted once, as CANCELED, and nothing listed as COMPLETED."""
    if kind == "redis":
        url, prefix = request.getfixturevalue("redis_server").url, "a2a"
    else:
        url, prefix = request.getfixturevalue("redis_cluster").url, f"refused{next(_prefixes)}"
    one = RedisTaskStore.connect(url, prefix=prefix)
    two = RedisTaskStore.connect(url, prefix=prefix)
    await one.start()
    await two.start()
    try:
        await created(one, "t1")
        await one.set_status("t1", a2a_pb2.TASK_STATE_WORKING)
        await two.cancel("t1", ALICE)
        with pytest.raises(TaskFinishedError):
            await one.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)
        # Not even a stale member that ListTasks would have to sweep (see the module docstring
        # of tasks/redis/keys.py for the index keys).
        completed_index = one.keys.index(ALICE, f"s:{a2a_pb2.TASK_STATE_COMPLETED}")
        assert await one.client.zcard(completed_index) == 0
        for store in (one, two):
            every = await store.list(ALICE, TaskQuery(page_size=10))
            assert [task.id for task in every.tasks] == ["t1"] and every.total_size == 1
            assert every.tasks[0].status.state == a2a_pb2.TASK_STATE_CANCELED
            done = await store.list(
                ALICE, TaskQuery(page_size=10, state=a2a_pb2.TASK_STATE_COMPLETED)
            )
            assert done.total_size == 0 and not done.tasks
    finally:
        await one.close()
        await two.close()


async def replicas(
    server: RedisServer, *, heard: RecordedListener | None = None, **options: Any
) -> tuple[RedisTaskStore, RedisTaskStore]:
    """Two stores on one Redis, as two replicas hold them; the first tells `heard`."""
    one = RedisTaskStore.connect(server.url, listener=heard, **options)
    two = RedisTaskStore.connect(server.url, **options)
    await one.start()
    await two.start()
    return one, two


async def test_a_redis_at_its_maxmemory_refuses_writes_as_a_full_store(
    make_redis_server: Any,
) -> None:
    """Redis's byte bound is its own `maxmemory` (with noeviction): a write it refuses there is
    StoreFullError, as over a byte budget, and changes nothing (the run's copy is read again)."""
    server = make_redis_server(
        extra_args=["--maxmemory", "4mb", "--maxmemory-policy", "noeviction"]
    )
    store = RedisTaskStore.connect(server.url)
    await store.start()
    try:
        await created(store, "t1")
        written = 0

        def add_artifact(task: a2a_pb2.Task) -> None:
            task.artifacts.add(artifact_id=f"a{written}").parts.add().text = "x" * 500_000

        with pytest.raises(StoreFullError, match="maxmemory"):
            for _ in range(40):
                await store.update("t1", add_artifact, size=500_000)
                written += 1
        stored = await store.get("t1", ALICE)
        assert stored is not None and len(stored.artifacts) == written  # the refused one is not
        with pytest.raises(StoreFullError):
            await store.set_status("t1", a2a_pb2.TASK_STATE_WORKING, text_of(100_000))
        stored = await store.get("t1", ALICE)
        assert stored is not None and stored.status.state == a2a_pb2.TASK_STATE_SUBMITTED
        assert len(stored.artifacts) == written
        await store.client.config_set("maxmemory", "0")  # room again: the next write lands
        await store.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)
        stored = await store.get("t1", ALICE)  # without what was refused
        assert stored is not None and stored.status.state == a2a_pb2.TASK_STATE_COMPLETED
        assert 1 <= written == len(stored.artifacts) and len(stored.history) == 1
    finally:
        await store.close()


async def test_redis_down_is_a_fast_unavailable(make_redis_server: Any) -> None:
    server = make_redis_server()
    heard = RecordedListener()
    store = RedisTaskStore.connect(server.url, timeout=0.5, listener=heard)
    await store.start()
    try:
        server.kill()
        with pytest.raises(StoreUnavailableError):
            async with asyncio.timeout(10):  # a guard: the store's own 0.5 s bound answers
                await store.get("t1", ALICE)
        assert heard.health == [False]
        server.restart()
        await asyncio.wait_for(heard.recovered.wait(), 10)
        assert await store.get("t1", ALICE) is None
    finally:
        await store.close()


async def test_a_store_closed_as_redis_answers_again_leaves_nothing_running(
    make_redis_server: Any,
) -> None:
    """Redis answering again restarts the event reader on a fresh pub/sub connection; a close
    at that moment ends the restart before it closes the reader. (A restart left running
    subscribed after the close, on a connection nobody closed: the garbage collector found
    it later, its event loop closed, as a ResourceWarning failing whichever test ran then.)"""
    server = make_redis_server()
    heard = RecordedListener()
    store = RedisTaskStore.connect(server.url, timeout=0.5, listener=heard)
    await store.start()
    server.kill()
    with pytest.raises(StoreUnavailableError):
        async with asyncio.timeout(10):  # a guard: the store's own 0.5 s bound answers
            await store.get("t1", ALICE)
    server.restart()
    await asyncio.wait_for(heard.recovered.wait(), 10)
    await store.close()  # at once: the reader's restart has only just begun
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_runs_that_meet_redis_down_log_nothing_and_end_once_it_is_back(
    make_redis_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """tests/integration/store_outage_runs.py, on a Redis (with its append-only file) stopped
    and started again. Each end is written from the task as Redis holds it: the store's copy,
    which the failed write had changed, is read again (it refused the end as already made)."""
    server = make_redis_server(appendonly=True)
    await runs_meet_the_store_down(
        lambda settings, listener, webhooks: RedisTaskStore.connect(
            server.url, listener=listener, timeout=0.5
        ),
        stop=server.stop,
        start=server.restart,
        caplog=caplog,
    )


async def test_replicas_on_a_cluster_cancel_and_watch_across_nodes(
    redis_cluster: RedisCluster,
) -> None:
    prefix = f"replicas{next(_prefixes)}"
    heard = RecordedListener()
    one = RedisTaskStore.connect(redis_cluster.url, prefix=prefix, listener=heard)
    two = RedisTaskStore.connect(redis_cluster.urls[1], prefix=prefix)
    await one.start()
    await two.start()
    try:
        assert one.client is not one.pubsub_client  # it found the cluster
        for number in range(6):  # task ids in several slots, so on several nodes
            await created(one, f"t{number}")
        watched = await two.watch("t3", ALICE, until_terminal=True)
        assert watched is not None
        await one.set_status("t3", a2a_pb2.TASK_STATE_WORKING)
        await two.cancel("t3", ALICE)
        assert await asyncio.wait_for(heard.canceled.get(), 5) == "t3"
        assert kinds(await drain(watched[1])) == ["TASK_STATE_WORKING", "TASK_STATE_CANCELED"]
        page = await two.list(ALICE, TaskQuery(page_size=10))
        assert page.tasks[0].id == "t3" and page.total_size == 6
    finally:
        await one.close()
        await two.close()


async def test_a_long_task_s_event_stream_is_trimmed(redis_server: RedisServer) -> None:
    store = RedisTaskStore.connect(redis_server.url, stream_length=100)
    await store.start()
    try:
        await created(store, "t1")
        for _ in range(300):
            await store.update(
                "t1",
                lambda task: None,
                lambda: a2a_pb2.StreamResponse(
                    artifact_update=a2a_pb2.TaskArtifactUpdateEvent(task_id="t1")
                ),
            )
        length = await store.client.xlen(store.keys.events("t1"))
        assert 100 <= length < 250  # approximate trimming: whole stream nodes (100 entries)
    finally:
        await store.close()


async def test_a_hung_redis_is_a_bounded_unavailable(redis_server: RedisServer) -> None:
    heard = RecordedListener()
    store = RedisTaskStore.connect(redis_server.url, timeout=0.3, listener=heard)
    await store.start()
    await created(store, "t1")
    try:
        redis_server.pause()
        with pytest.raises(StoreUnavailableError):
            async with asyncio.timeout(10):  # a guard: the store's own 0.3 s bound answers
                await store.get("t1", ALICE)
        # A timeout alone is not an outage: the health probe, unanswered too, makes it one.
        await asyncio.wait_for(heard.down.wait(), 10)
        assert heard.health == [False]
    finally:
        redis_server.resume()
    await asyncio.wait_for(heard.recovered.wait(), 10)
    assert await store.get("t1", ALICE) is not None
    await store.close()


async def test_a_call_held_up_on_this_side_is_no_outage_while_redis_answers(
    redis_server: RedisServer,
) -> None:
    """A call that times out because this server's own command connection is held up (here a
    blocking command in its batch; in a replay storm, a backlog of replies) fails, but Redis
    answers the health probe on its own connection: health stays on and open streams go on."""
    heard = RecordedListener()
    store = RedisTaskStore.connect(redis_server.url, timeout=0.5, listener=heard)
    await store.start()
    try:
        await created(store, "t1")
        watched = await store.watch("t1", ALICE, until_terminal=True)
        assert watched is not None
        with pytest.raises(StoreUnavailableError, match="TimeoutError"):
            async with asyncio.timeout(10):  # a guard: the store's own 0.5 s bound answers
                await store.backend.call(store.client.blpop(["nothing-comes"], timeout=30))
        checking = store.backend._checking
        assert checking is not None
        await asyncio.wait_for(checking, 10)  # the probe's verdict
        assert heard.health == [] and store.healthy and store.backend.behind.failures == 1
        assert store.backend.outage.failures == 0
        await store.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)  # the stream was not ended
        assert kinds(await drain(watched[1])) == ["TASK_STATE_COMPLETED"]
    finally:
        await store.close()


async def test_a_password_in_the_url_is_used_and_a_wrong_one_refused(
    make_redis_server: Any,
) -> None:
    server = make_redis_server(extra_args=["--requirepass", "s3cret"])
    url = server.url.replace("redis://", "redis://:s3cret@")
    store = RedisTaskStore.connect(url)
    await store.start()
    try:
        await created(store, "t1")
        assert await store.get("t1", ALICE) is not None
    finally:
        await store.close()
    refused = RedisTaskStore.connect(server.url.replace("redis://", "redis://:wrong@"))
    with pytest.raises(StoreUnavailableError, match="refused the credentials"):
        await refused.start()
    await refused.close()


async def test_rediss_connects_over_tls(make_redis_server: Any, tmp_path: Path) -> None:
    authority = Authority()
    issued = authority.issue("127.0.0.1", server=True)
    files = {"ca.pem": authority.certificate, "cert.pem": issued.certificate}
    files["key.pem"] = issued.key
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    (tls_port,) = free_ports(1)
    server = make_redis_server(
        extra_args=[
            "--tls-port", str(tls_port),
            "--tls-cert-file", str(tmp_path / "cert.pem"),
            "--tls-key-file", str(tmp_path / "key.pem"),
            "--tls-ca-cert-file", str(tmp_path / "ca.pem"),
            "--tls-auth-clients", "no",
        ]
    )  # fmt: skip
    del server
    url = f"rediss://127.0.0.1:{tls_port}/0?ssl_ca_certs={tmp_path / 'ca.pem'}"
    store = RedisTaskStore.connect(url)
    await store.start()
    try:
        await created(store, "t1")
        watched = await store.watch("t1", ALICE, until_terminal=True)  # pub/sub over TLS too
        assert watched is not None
        await store.set_status("t1", a2a_pb2.TASK_STATE_COMPLETED)
        assert kinds(await drain(watched[1])) == ["TASK_STATE_COMPLETED"]
    finally:
        await store.close()


async def test_two_replicas_resuming_one_waiting_task_at_once_resume_it_once(
    redis_server: RedisServer,
) -> None:
    """Catches the WRITE script (redis_scripts.py) writing without its version check: two
    replicas that both read a task waiting for input, before either wrote it, would both
    resume it (each its own answer, the second write over the first). Writes are held back
    (CLIENT PAUSE WRITE) until MONITOR has seen both reads, so the race happens every time;
    exactly one resume must win, the other is TaskBusyError."""
    one, two = await replicas(redis_server, lease=3600)  # no lease renewal inside the pause
    admin = redis.asyncio.from_url(redis_server.url)
    try:
        await created(one, "t1")
        await one.set_status("t1", a2a_pb2.TASK_STATE_INPUT_REQUIRED, agent_text("which?"))
        task_key = one.keys.task("t1")
        async with admin.monitor() as monitor:
            await admin.client_pause(60_000, all=False)  # writes (and scripts) wait; reads run
            answers = [
                a2a_pb2.Message(message_id=f"answer-{n}", role=a2a_pb2.ROLE_USER) for n in (1, 2)
            ]
            resumes = [
                asyncio.ensure_future(store.resume("t1", ALICE, answer))
                for store, answer in zip((one, two), answers, strict=True)
            ]
            reads = 0
            async with asyncio.timeout(10):
                async for command in monitor.listen():
                    if command["command"].startswith(f"HMGET {task_key} "):
                        reads += 1
                        if reads == 2:
                            break
            await admin.client_unpause()
        outcomes = await asyncio.gather(*resumes, return_exceptions=True)
        won = [outcome for outcome in outcomes if isinstance(outcome, a2a_pb2.Task)]
        lost = [outcome for outcome in outcomes if isinstance(outcome, TaskBusyError)]
        assert len(won) == 1 and len(lost) == 1, outcomes
        task = await two.get("t1", ALICE)
        assert task is not None and task.status.state == a2a_pb2.TASK_STATE_SUBMITTED
        winner = answers[outcomes.index(won[0])].message_id
        assert [m.message_id for m in task.history][-1] == winner
    finally:
        with contextlib.suppress(Exception):
            await admin.client_unpause()
        await admin.aclose()
        await one.close()
        await two.close()


async def test_the_cluster_scheme_refuses_a_single_redis(redis_server: RedisServer) -> None:
    """`redis+cluster://` requires a Cluster: a single Redis stops the start rather than be
    served as the Cluster the URL meant (`redis://` finds a Cluster by itself)."""
    url = redis_server.url.replace("redis://", "redis+cluster://", 1)
    store = store_kind(url).open(url, StoreSettings(), RecordedListener(), None)
    with pytest.raises(ValueError, match="not a Cluster node"):
        await store.start()
    await store.close()
    config = ServerConfig(host="127.0.0.1", port=0, http_port=None, store=url)
    with pytest.raises(StartupError, match="cannot use the task store at redis\\+cluster://"):
        await start_server(ServerPlan(config, DemoAgent()))
