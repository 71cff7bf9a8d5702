"""Runs whose agents report while their task store is down, through a handler as `serve` builds
it (`build_handler`: the store's health goes to the unrecorded ends): the callers are answered,
the store's outage is the one line logged (no line, no traceback per task), and once the store
answers again each task is recorded FAILED with why, rather than left WORKING under a live
replica's lease for good. Used by the PostgreSQL and Redis store tests, each with its own
server to stop and start."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.card import demo_card
from a2a_grpc.server.compose import build_handler
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.protocol.call_context import CallContext
from a2a_grpc.server.tasks.base import StoreFactory
from tests.integration.test_store_contract import user_text

RUNS = 6


class HeldAgent:
    """WORKING at once; then waits for `go` and completes (or meets the store down)."""

    def __init__(self, runs: int) -> None:
        self.runs = runs
        self.go = asyncio.Event()
        self.working = 0
        self.all_working = asyncio.Event()
        self.ended = 0
        self.all_ended = asyncio.Event()

    async def execute(self, context: Any, events: Any) -> None:
        try:
            await events.working("on it")
            self.working += 1
            if self.working == self.runs:
                self.all_working.set()
            await self.go.wait()
            await events.complete("done")
        finally:
            self.ended += 1
            if self.ended == self.runs:
                self.all_ended.set()


async def runs_meet_the_store_down(
    store: StoreFactory,
    *,
    stop: Callable[[], Any],
    start: Callable[[], Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The whole check (module docstring): `stop` and `start` the store's server."""
    agent = HeldAgent(RUNS)
    health: list[bool] = []
    back = asyncio.Event()

    def on_health(healthy: bool) -> None:
        health.append(healthy)
        if healthy:
            back.set()

    handler = build_handler(
        agent, demo_card("localhost:50051"), ServerConfig(), store=store, on_store_health=on_health
    )
    await handler.store.start()
    unrecorded = handler.intake.unrecorded
    try:
        caller = CallContext()
        task_ids = []
        for number in range(RUNS):
            request = user_text("hi", f"m-{number}")
            request.configuration.return_immediately = True
            task_ids.append((await handler.send_message(request, caller)).task.id)
        await asyncio.wait_for(agent.all_working.wait(), 20)
        caplog.clear()
        await asyncio.to_thread(stop)
        agent.go.set()
        await asyncio.wait_for(agent.all_ended.wait(), 20)
        for run in list(handler.intake.runners):
            await asyncio.wait_for(run, 20)
        assert len(unrecorded) == RUNS
        warned = [
            record
            for record in caplog.records
            if record.levelno >= logging.WARNING and record.name.startswith("a2a_grpc")
        ]
        assert len(warned) == 1, [record.getMessage() for record in warned]
        assert "task store" in warned[0].getMessage() and warned[0].exc_info is None
        await asyncio.to_thread(start)
        await asyncio.wait_for(back.wait(), 30)
        await asyncio.wait_for(unrecorded.empty.wait(), 30)
        for task_id in task_ids:
            task = await handler.get_task(a2a_pb2.GetTaskRequest(id=task_id), caller)
            assert task.status.state == a2a_pb2.TASK_STATE_FAILED
            assert "task store was unavailable" in task.status.message.parts[0].text
        assert health == [False, True]
    finally:
        await unrecorded.close()
        await handler.store.close()
