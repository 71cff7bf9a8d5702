"""Real grpc.aio servers on 127.0.0.1:0 with real channels; only the agent is ever faked."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
import pytest

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.server.agent import AgentExecutor, RequestContext, TaskEvents
from a2a_grpc.server.app import RunningServer, ServerPlan, start_server
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.demo_agent import DemoAgent

VERSION = (("a2a-version", "1.0"),)


@dataclass
class Harness:
    running: RunningServer
    channel: grpc.aio.Channel
    stub: a2a_pb2_grpc.A2AServiceStub

    @property
    def store(self) -> Any:
        """The in-memory store's task table (synchronous), for assertions on what is stored."""
        return self.running.handler.store.table


Factory = Callable[..., Awaitable[Harness]]


class Held:
    """WORKING, then holds the task until `go` is set, then COMPLETED.

    `entered` is set once the task is WORKING; `runs` counts calls to `execute`. Tests wait on
    these events instead of on the clock.
    """

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.go = asyncio.Event()
        self.runs = 0

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        self.runs += 1
        await events.working()
        self.entered.set()
        await self.go.wait()
        await events.complete()


@pytest.fixture
async def make_server() -> AsyncIterator[Factory]:
    made: list[Harness] = []

    async def make(
        agent: AgentExecutor | None = None,
        card: a2a_pb2.AgentCard | None = None,
        *,
        extended_card: a2a_pb2.AgentCard | None = None,
        tokens: dict[str, str] | None = None,
        webhooks: Any = None,
        signature_keys: Any = None,
        card_signer: Any = None,
        signing_keys: Any = None,
        signer_card_keys: Any = None,
        tls: Any = None,
        push_credentials: Any = None,
        **config: Any,
    ) -> Harness:
        # drain_delay 0: a test server stops at once unless the test asks for the delay.
        config.setdefault("drain_delay", 0)
        settings = ServerConfig(host="127.0.0.1", port=0, shutdown_grace=0.5, **config)
        running = await start_server(
            ServerPlan(
                settings,
                agent or DemoAgent(),
                card,
                extended_card=extended_card,
                tokens=tokens,
                webhooks=webhooks,
                signature_keys=signature_keys,
                card_signer=card_signer,
                signing_keys=signing_keys,
                signer_card_keys=signer_card_keys,
                tls=tls,
                push_credentials=push_credentials,
            )
        )
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
        harness = Harness(running, channel, a2a_pb2_grpc.A2AServiceStub(channel))
        made.append(harness)
        return harness

    yield make
    for harness in made:
        await harness.channel.close()
        await harness.running.stop(0)


@pytest.fixture
async def demo(make_server: Factory) -> Harness:
    return await make_server()


def user_message(text: str = "hello", **fields: Any) -> a2a_pb2.Message:
    message = a2a_pb2.Message(
        message_id=fields.pop("message_id", None) or _new_id(), role=a2a_pb2.ROLE_USER, **fields
    )
    message.parts.add(text=text)
    return message


def send_request(text: str = "hello", **fields: Any) -> a2a_pb2.SendMessageRequest:
    configuration = fields.pop("configuration", None)
    tenant = fields.pop("tenant", "")
    request = a2a_pb2.SendMessageRequest(message=user_message(text, **fields), tenant=tenant)
    if configuration is not None:
        request.configuration.CopyFrom(configuration)
    return request


def _new_id() -> str:
    import uuid

    return str(uuid.uuid4())


async def collect(stream: grpc.aio.UnaryStreamCall) -> list[a2a_pb2.StreamResponse]:
    """Reads a stream to its end with read(), so it can follow earlier read() calls."""
    events = []
    while (event := await stream.read()) is not grpc.aio.EOF:
        events.append(event)
    return events


def error_reason(error: grpc.aio.AioRpcError) -> str:
    from a2a_grpc.core import status

    decoded = status.decode(error.code(), error.details() or "", error.trailing_metadata())
    assert decoded is not None, f"no A2A ErrorInfo in {error.code()} {error.details()}"
    return decoded.reason
