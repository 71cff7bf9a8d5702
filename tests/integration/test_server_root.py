"""The composition root (server/compose.py) owns what it opened: a store and a webhook
dispatcher given through `ServerPlan` become the server's, are started before the first call
and closed after the last one, the dispatcher before the store (the reverse of their opening);
a start that fails closes what it had opened and gives its port back."""

from __future__ import annotations

import socket
from typing import Any

import grpc
import pytest

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.server.app import ServerPlan, StartupError, start_server
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.demo_agent import DemoAgent
from a2a_grpc.server.push.configs import PushConfigStore
from a2a_grpc.server.push.delivery import DeliveryPolicy, WebhookDispatcher
from a2a_grpc.server.tasks.base import (
    Scope,
    StoreListener,
    StoreSettings,
    StoreUnavailableError,
    TaskStore,
    Webhooks,
)
from a2a_grpc.server.tasks.registry import open_store
from tests.integration.conftest import VERSION, send_request
from tests.redis_servers import free_ports


class Recorded:
    """A store over a memory store opened through the registry, writing its life to `log`;
    with `refuse_start`, its start fails as a backend that does not answer."""

    def __init__(self, inner: TaskStore, log: list[str], *, refuse_start: bool = False) -> None:
        self._inner = inner
        self._log = log
        self._refuse_start = refuse_start

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def start(self) -> None:
        self._log.append("store started")
        if self._refuse_start:
            raise StoreUnavailableError("the backend did not answer")
        await self._inner.start()

    async def close(self) -> None:
        self._log.append("store closed")
        await self._inner.close()


class RecordedDispatcher(WebhookDispatcher):
    def __init__(self, log: list[str]) -> None:
        super().__init__(PushConfigStore(), DeliveryPolicy())
        self._log = log

    async def close(self, grace: float = 0.0) -> None:
        self._log.append("webhooks closed")
        await super().close(grace)


def settings_of(**config: Any) -> ServerConfig:
    config = {"host": "127.0.0.1", "port": 0, "http_port": None, "drain_delay": 0, **config}
    return ServerConfig(**config)


async def send_one(port: int) -> a2a_pb2.Task:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        return (await stub.SendMessage(send_request("hello"), metadata=VERSION)).task


async def test_a_store_factory_is_given_the_server_s_settings_and_its_store_is_owned() -> None:
    log: list[str] = []
    given: list[StoreSettings] = []

    def factory(
        settings: StoreSettings, listener: StoreListener, webhooks: Webhooks | None
    ) -> TaskStore:
        given.append(settings)
        return Recorded(open_store("memory://", settings, listener, webhooks), log)  # type: ignore[return-value]

    running = await start_server(
        ServerPlan(
            settings_of(max_tasks=123, replay_events=7, task_ttl=60),
            DemoAgent(),
            store=factory,
            webhooks=RecordedDispatcher(log),
        )
    )
    (settings,) = given
    assert (settings.max_tasks, settings.replay_length, settings.terminal_ttl) == (123, 7, 60)
    assert log == ["store started"]
    task = await send_one(running.port)
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    stored = await running.handler.store.get(task.id, Scope("", ""))  # the factory's store
    assert stored is not None and stored.status.state == a2a_pb2.TASK_STATE_COMPLETED
    await running.stop(0)
    assert log == ["store started", "webhooks closed", "store closed"]


async def test_a_store_object_is_the_server_s_from_start_on() -> None:
    log: list[str] = []
    store = Recorded(open_store("memory://", StoreSettings(), _Silent(), None), log)
    running = await start_server(ServerPlan(settings_of(), DemoAgent(), store=store))  # type: ignore[arg-type]
    assert (await send_one(running.port)).status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert running.handler.store is store
    await running.stop(0)
    assert log == ["store started", "store closed"]


async def test_a_store_given_twice_is_refused() -> None:
    store = open_store("memory://", StoreSettings(), _Silent(), None)
    with pytest.raises(StartupError, match="give the store once"):
        await start_server(ServerPlan(settings_of(store="memory://"), DemoAgent(), store=store))


async def test_a_store_that_cannot_start_stops_the_start_and_everything_opened_closes() -> None:
    log: list[str] = []

    def factory(
        settings: StoreSettings, listener: StoreListener, webhooks: Webhooks | None
    ) -> TaskStore:
        inner = open_store("memory://", settings, listener, webhooks)
        return Recorded(inner, log, refuse_start=True)  # type: ignore[return-value]

    (port,) = free_ports(1)
    plan = ServerPlan(
        settings_of(port=port), DemoAgent(), store=factory, webhooks=RecordedDispatcher(log)
    )
    with pytest.raises(StartupError, match="cannot reach the task store: the backend did not"):
        await start_server(plan)
    # The store was opened: it is closed. The dispatcher was never taken into use: it was not.
    assert log == ["store started", "store closed"]
    with socket.socket() as again:  # the port the failed start had bound is free again
        again.bind(("127.0.0.1", port))


class _Silent:
    """A `StoreListener` that hears nothing (a store built apart from a server)."""

    def task_evicted(self, task_id: str) -> None:
        pass

    def canceled_elsewhere(self, task_id: str) -> None:
        pass

    def health_changed(self, healthy: bool) -> None:
        pass
