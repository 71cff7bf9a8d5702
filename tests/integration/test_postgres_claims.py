"""A new task's message-id claim and its room, taken in one statement on PostgreSQL
(`a2a_claim_room`, server/tasks/postgres/claims.py), on a real database: both in one
transaction, a repeat reserves nothing, a refused reservation leaves no claim, and a stream
refused after both gives both back so that a retry runs."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.server.app import ServerPlan, start_server
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.demo_agent import DemoAgent
from a2a_grpc.server.tasks.base import (
    LiveTaskLimitError,
    Scope,
    StoreFullError,
    StoreListener,
    StoreSettings,
    StoreUnavailableError,
    TaskStore,
    Webhooks,
)
from a2a_grpc.server.tasks.registry import open_store
from tests.integration.conftest import VERSION, collect, send_request
from tests.integration.test_postgres_batch import started
from tests.integration.test_postgres_store import scalar

ALICE = Scope("tenant-a", "alice")


async def test_a_new_tasks_claim_and_room_are_one_write(postgres_database: str) -> None:
    """None (this delivery runs): the claim is set and the task's room reserved (its row,
    counted) in one transaction; a second delivery of the message gets the first claim back
    and reserves nothing."""
    async with started(postgres_database) as store:
        claims = store.claims
        assert await claims.claim_with_room("digest-1", "v|task-1", 60, ALICE, 10, "task-1") is None
        assert (
            await claims.claim_with_room("digest-1", "v|task-2", 60, ALICE, 10, "task-2")
            == "v|task-1"
        )
        assert await store.room.count() == 1
    claim_xmin = await scalar(
        postgres_database, "SELECT xmin::text FROM a2a_claims WHERE digest = 'digest-1'"
    )
    task_xmin = await scalar(
        postgres_database, "SELECT xmin::text FROM a2a_tasks WHERE id = 'task-1' AND body IS NULL"
    )
    assert claim_xmin is not None and claim_xmin == task_xmin
    assert await scalar(postgres_database, "SELECT count(*) FROM a2a_tasks") == 1


@pytest.mark.parametrize(
    ("options", "refusal"),
    [({"max_tasks": 1}, StoreFullError), ({"max_live_per_owner": 1}, LiveTaskLimitError)],
)
async def test_a_room_refused_leaves_no_claim(
    postgres_database: str, options: dict[str, Any], refusal: type[Exception]
) -> None:
    """The room full (or the caller at its share of live tasks): the reservation's own error,
    and the message id is not claimed, so a retry once there is room runs."""
    async with started(postgres_database, **options) as store:
        claims = store.claims
        assert await claims.claim_with_room("digest-1", "v|task-1", 60, ALICE, 10, "task-1") is None
        with pytest.raises(refusal):
            await claims.claim_with_room("digest-2", "v|task-2", 60, ALICE, 10, "task-2")
        assert await scalar(postgres_database, "SELECT count(*) FROM a2a_claims") == 1
        assert await scalar(postgres_database, "SELECT count(*) FROM a2a_tasks") == 1
        await store.room.release("task-1")
        assert await claims.claim_with_room("digest-2", "v|task-3", 60, ALICE, 10, "task-3") is None


async def test_a_stream_refused_after_its_claim_and_room_gives_both_back(
    postgres_database: str,
) -> None:
    """SendStreamingMessage whose subscription fails once after the claim and the room were
    taken (as when the store's LISTEN connection drops at that moment): UNAVAILABLE, with no
    task row or claim left behind, and the same message sent again runs to its end."""
    refusals = 1

    def factory(
        settings: StoreSettings, listener: StoreListener, webhooks: Webhooks | None
    ) -> TaskStore:
        store = open_store(postgres_database, settings, listener, webhooks)
        subscribe = store.subscribe

        async def subscribe_failing_once(task_id: str) -> Any:
            nonlocal refusals
            if refusals:
                refusals -= 1
                raise StoreUnavailableError("the LISTEN connection is down; retry shortly")
            return await subscribe(task_id)

        store.subscribe = subscribe_failing_once  # type: ignore[method-assign]
        return store

    settings = ServerConfig(host="127.0.0.1", port=0, http_port=None, drain_delay=0)
    running = await start_server(ServerPlan(settings, DemoAgent(), store=factory))
    try:
        request = send_request("hello")
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await collect(stub.SendStreamingMessage(request, metadata=VERSION))
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
            assert await scalar(postgres_database, "SELECT count(*) FROM a2a_tasks") == 0
            assert await scalar(postgres_database, "SELECT count(*) FROM a2a_claims") == 0
            assert await scalar(postgres_database, "SELECT tasks FROM a2a_counts") == 0
            events = await collect(stub.SendStreamingMessage(request, metadata=VERSION))
        assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
    finally:
        await running.stop(0)
