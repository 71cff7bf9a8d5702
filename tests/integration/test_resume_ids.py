"""Property: whatever a caller sends as the id to resume a stream after (gRPC metadata
`a2a-last-event-id`, the SSE header `Last-Event-ID` on JSON-RPC and HTTP+JSON), a text that is
not an event id of the task is refused with EVENT_ID_EXPIRED in the binding's terms (gRPC
OUT_OF_RANGE, HTTP 410, JSON-RPC -32000): never INTERNAL, never a replay. Over a seeded
generator of odd texts (server/tasks/contract/odd_ids.py), each binding on each store: memory,
Redis, PostgreSQL. The real ids of the task still replay exactly the events after them."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable

import aiohttp
import pytest

from a2a_grpc.core.event_ids import LAST_EVENT_ID_HEADER, LAST_EVENT_ID_KEY, event_id
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from a2a_grpc.server.tasks.contract.odd_ids import header_value, odd_ids, printable_ascii
from a2a_grpc.server.transports.http.server import CARD_PATH
from tests.integration.bindings import (
    Binding,
    CallError,
    GrpcBinding,
    JsonRpcBinding,
    RestBinding,
)
from tests.integration.conftest import Factory

TEXTS = 150
"""Odd texts per binding and store: each is one call (a few milliseconds)."""
BOUND_S = 20.0
"""What the calls of one binding and store may take at most (a few seconds here)."""
REFUSED = {
    "grpc": ("grpc_code", "OUT_OF_RANGE"),
    "jsonrpc": ("jsonrpc_code", -32000),
    "http+json": ("http_status", 410),
}


@pytest.fixture(params=["memory", "redis", "postgres"])
def store_url(request: pytest.FixtureRequest) -> str:
    if request.param == "memory":
        return ""
    if request.param == "redis":
        redis_url: str = request.getfixturevalue("redis_server").url
        return redis_url
    database: str = request.getfixturevalue("postgres_database")
    return database


@pytest.fixture(params=["grpc", "jsonrpc", "http+json"])
def binding_name(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as opened:
        yield opened


def _with_last_event_id(binding: Binding, text: str) -> Binding:
    """A copy of `binding` whose calls carry `text` as the id to resume after."""
    if isinstance(binding, GrpcBinding):
        copy = GrpcBinding(binding.stub, binding.channel)
        copy.metadata = (*binding.metadata, (LAST_EVENT_ID_KEY, text))
        return copy
    assert isinstance(binding, JsonRpcBinding | RestBinding)
    headed = type(binding)(
        binding.session, binding.url if isinstance(binding, JsonRpcBinding) else binding.base
    )
    headed.headers = {**binding.headers, LAST_EVENT_ID_HEADER: text}
    return headed


async def _subscribe(binding: Binding, task_id: str) -> list[str]:
    """The ids of the events SubscribeToTask yields (CallError when it is refused)."""
    request = a2a_pb2.SubscribeToTaskRequest(id=task_id)
    return [event_id(event) or "" async for event in binding.stream("SubscribeToTask", request)]


async def _streamed(binding: Binding, text: str) -> tuple[str, list[str]]:
    """A task the demo agent streams in chunks: its id and the ids of its events."""
    request = a2a_pb2.SendMessageRequest()
    request.message.message_id = f"m-{text}-{time.monotonic_ns()}"
    request.message.role = a2a_pb2.ROLE_USER
    request.message.parts.add().text = text
    events = [event async for event in binding.stream("SendStreamingMessage", request)]
    ids = [event_id(event) for event in events]
    assert None not in ids
    return events[0].task.id, [text for text in ids if text is not None]


async def test_any_text_but_an_id_of_the_task_is_refused_on_every_binding_and_store(
    make_server: Factory,
    session: aiohttp.ClientSession,
    store_url: str,
    binding_name: str,
) -> None:
    harness = await make_server(http_port=0, store=store_url)
    card_url = harness.running.card_url
    assert card_url is not None
    base = card_url.removesuffix(CARD_PATH)
    binding: Binding
    fits: Callable[[str], bool]
    if binding_name == "grpc":
        binding, fits = GrpcBinding(harness.stub, harness.channel), printable_ascii
    elif binding_name == "jsonrpc":
        binding, fits = JsonRpcBinding(session, base + "/"), header_value
    else:
        binding, fits = RestBinding(session, base), header_value
    _, foreign = await _streamed(binding, "chunks 9")  # an earlier task, with more events
    task_id, real = await _streamed(binding, "chunks 2")
    for at, after in enumerate(real):
        assert await _subscribe(_with_last_event_id(binding, after), task_id) == real[at + 1 :]
    # An empty id is none (as an EventSource sends it): a subscription from a snapshot.
    texts = odd_ids(
        f"{binding_name} {store_url[:5]}",
        TEXTS,
        real=real,
        foreign=foreign,
        fits=lambda text: text != "" and fits(text),
    )
    assert len(texts) >= TEXTS
    field, code = REFUSED[binding_name]
    started = time.monotonic()
    for text in texts:
        with pytest.raises(CallError) as refused:
            await _subscribe(_with_last_event_id(binding, text), task_id)
        error = refused.value
        assert (error.reason, getattr(error, field)) == ("EVENT_ID_EXPIRED", code), (text, error)
        assert "not an event id" in error.message or "no longer keeps" in error.message
    assert time.monotonic() - started < BOUND_S


class Chunks:
    """Streams one artifact in as many chunks as its message says, at once, then completes."""

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        await events.working()
        artifact_id = None
        for n in range(int(context.message.parts[0].text)):
            artifact_id = await events.add_artifact(
                [a2a_pb2.Part(text=f"chunk {n}")], artifact_id=artifact_id, append=n > 0
            )
        await events.complete()


async def test_a_long_task_keeps_exactly_its_last_events_and_resumes_after_the_oldest(
    make_server: Factory, session: aiohttp.ClientSession, store_url: str
) -> None:
    """A 1,053-event task (the server's defaults: 1000 events kept, 1024 queued per stream):
    after the last event let go of, all 1000 kept replay, after the oldest kept 999, at once
    and without overflowing the stream's queue; an older id is refused."""
    harness = await make_server(Chunks(), http_port=0, store=store_url)
    card_url = harness.running.card_url
    assert card_url is not None
    binding = RestBinding(session, card_url.removesuffix(CARD_PATH))
    task_id, real = await _streamed(binding, "1050")
    assert len(real) == 1053
    for after, replayed in ((real[-1001], real[-1000:]), (real[-1000], real[-999:])):
        assert await _subscribe(_with_last_event_id(binding, after), task_id) == replayed
    for older in (real[-1002], real[0]):
        with pytest.raises(CallError) as refused:
            await _subscribe(_with_last_event_id(binding, older), task_id)
        assert refused.value.http_status == 410 and "no longer keeps" in refused.value.message
