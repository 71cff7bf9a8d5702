"""Streams that resume where they broke (core/event_ids.py), over every binding and both
stores: a 50-event task's stream, cut at seeded random points (a connection reset by the
client's side, and one the server's side ends), yields exactly the uncut run's events, each
once and in order, with ids that only grow; and when the server no longer keeps the events
after the last id, the client falls back to a snapshot and says so on the view. A stream the
server ends because its Redis died is resumed once Redis is back."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from a2a_grpc.client import A2AClient, CardResolver, RetryPolicy, TaskView
from a2a_grpc.client.card import select_interface
from a2a_grpc.client.messages import user_message
from a2a_grpc.client.retry import Backoff
from a2a_grpc.core.event_ids import EVENT_ID_EXTENSION, LAST_EVENT_ID_HEADER, event_id
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from a2a_grpc.server.app import STORE_HEALTH_SERVICE
from tests.integration.conftest import Factory, Held
from tests.integration.tcp_proxy import TcpProxy
from tests.redis_servers import RedisServer

TRANSPORTS = ("grpc", "jsonrpc", "http+json")
EVENTS = 50
"""The stream's events: the Task, WORKING, 47 chunks of one artifact, COMPLETED."""
CHUNKS = EVENTS - 3
LEAD = 3
"""How many events the agent may run ahead of what the client has read: at a cut, some are
in flight or still to come."""


class Fifty:
    """Emits the 49 events after the Task one at a time, each once the test allows it."""

    def __init__(self) -> None:
        self.allowed = 0
        self.emitted = 0
        self._more = asyncio.Event()
        self._progress = asyncio.Event()

    def allow(self, events: int) -> None:
        """Lets the agent emit events up to the stream's `events`-th (the Task is the first)."""
        self.allowed = max(self.allowed, events)
        self._more.set()

    async def emitted_up_to(self, events: int) -> None:
        while self.emitted + 1 < events:
            self._progress.clear()
            await self._progress.wait()

    async def _turn(self) -> None:
        while self.emitted + 1 >= self.allowed:
            self._more.clear()
            await self._more.wait()

    async def _done(self) -> None:
        self.emitted += 1
        self._progress.set()

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        await self._turn()
        await events.working()
        await self._done()
        artifact_id = None
        for n in range(CHUNKS):
            await self._turn()
            part = a2a_pb2.Part(text=f"chunk {n}")
            artifact_id = await events.add_artifact(
                [part],
                artifact_id=artifact_id,
                append=n > 0,
                last_chunk=n == CHUNKS - 1,
            )
            await self._done()
        await self._turn()
        await events.complete()
        await self._done()


async def no_sleep(seconds: float) -> None:
    await asyncio.sleep(0)  # the client's backoff, not the test, would wait: not here


Shape = tuple[str, str, str, tuple[str, ...], bool, bool]


def shape(event: a2a_pb2.StreamResponse) -> Shape:
    """What an event says, without the ids that differ from run to run (task, time, event)."""
    kind = event.WhichOneof("payload")
    if kind == "status_update":
        state = a2a_pb2.TaskState.Name(event.status_update.status.state)
        return (kind, state, "", (), False, False)
    if kind == "artifact_update":
        update = event.artifact_update
        texts = tuple(part.text for part in update.artifact.parts)
        return (kind, "", "", texts, update.append, update.last_chunk)
    task = event.task
    return (str(kind), a2a_pb2.TaskState.Name(task.status.state), "", (), False, False)


def view_shape(view: TaskView) -> tuple[Any, ...]:
    assert view.task is not None
    task = view.task
    assert EVENT_ID_EXTENSION not in task.metadata.fields
    parts = tuple(tuple(p.text for p in artifact.parts) for artifact in task.artifacts)
    return (task.status.state, parts, len(task.history), view.completed_artifacts != frozenset())


def order_of(text: str) -> tuple[int, int]:
    head, _, tail = text.partition("-")
    return int(head), int(tail or 0)


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture(params=["memory", "redis"])
def store_url(request: pytest.FixtureRequest) -> str | None:
    if request.param == "memory":
        return None
    url: str = request.getfixturevalue("redis_server").url
    return url


Open = Callable[..., Awaitable[tuple[A2AClient, TcpProxy]]]


@pytest.fixture
async def open_client(transport: str) -> AsyncIterator[Callable[..., Awaitable[Any]]]:
    """A client of `transport` for a server's card, through a TCP proxy that tests cut."""
    made: list[tuple[A2AClient, TcpProxy]] = []

    async def open_(card_url: str) -> tuple[A2AClient, TcpProxy]:
        async with CardResolver() as resolver:
            card = await resolver.get(card_url)
        interface = select_interface(card, (transport,))
        host_port = interface.url.split("://")[-1].split("/")[0]
        proxy = await TcpProxy(int(host_port.rpartition(":")[2])).start()
        interface.url = interface.url.replace(host_port, proxy.address)
        client = A2AClient.for_card(
            card,
            transports=(transport,),
            resume=RetryPolicy(max_attempts=50),
            backoff=Backoff(sleep=no_sleep),
        )
        made.append((client, proxy))
        return client, proxy

    yield open_
    for client, proxy in made:
        await client.close()
        await proxy.close()


async def follow_fifty(
    client: A2AClient, agent: Fifty, cuts: set[int], cut: Callable[[], None]
) -> list[tuple[a2a_pb2.StreamResponse, TaskView]]:
    """A streaming send of the 50-event task, cut after each event whose number is in `cuts`."""
    items = []
    agent.allow(LEAD)
    async with asyncio.timeout(60):
        async for event, view in client.send_streaming_message(user_message("fifty")):
            items.append((event, view))
            agent.allow(len(items) + LEAD)
            if len(items) in cuts:
                cut()
    return items


@pytest.mark.parametrize("fault", ["client reset", "server gone"])
async def test_a_stream_cut_at_random_points_yields_every_event_once_in_order(
    make_server: Factory,
    open_client: Callable[..., Awaitable[Any]],
    store_url: str | None,
    transport: str,
    fault: str,
) -> None:
    uncut_agent, cut_agent = Fifty(), Fifty()
    options: dict[str, Any] = {"http_port": 0}
    if store_url is not None:
        options["store"] = store_url
    uncut_server = await make_server(uncut_agent, **options)
    cut_server = await make_server(cut_agent, **options)
    uncut_client, _ = await open_client(uncut_server.running.card_url)
    client, proxy = await open_client(cut_server.running.card_url)
    uncut = await follow_fifty(uncut_client, uncut_agent, set(), lambda: None)
    rand = random.Random(f"{transport} {fault} {store_url is None}")
    cuts = set(rand.sample(range(1, EVENTS), 6))
    cut = proxy.cut if fault == "client reset" else proxy.drop_upstream
    items = await follow_fifty(client, cut_agent, cuts, cut)
    assert len(items) == EVENTS
    assert [shape(event) for event, _ in items] == [shape(event) for event, _ in uncut]
    ids = [event_id(event) for event, _ in items]
    assert None not in ids
    orders = [order_of(text) for text in ids if text is not None]
    assert orders == sorted(set(orders)), ids
    assert proxy.connections > 1  # the cuts were resumed on connections of their own
    final, uncut_final = items[-1][1], uncut[-1][1]
    assert view_shape(final) == view_shape(uncut_final)
    assert not final.resumed_from_snapshot


async def test_an_id_the_server_no_longer_keeps_falls_back_to_a_snapshot_and_says_so(
    make_server: Factory, open_client: Callable[..., Awaitable[Any]]
) -> None:
    agent = Fifty()
    harness = await make_server(agent, http_port=0, replay_events=5)
    client, proxy = await open_client(harness.running.card_url)
    items = []
    agent.allow(LEAD)
    async with asyncio.timeout(60):
        async for event, view in client.send_streaming_message(user_message("fifty")):
            items.append((event, view))
            if len(items) == 3:
                proxy.cut()
                agent.allow(30)
                await agent.emitted_up_to(30)  # the ring of 5 moved past the last id seen
            elif len(items) > 3:
                agent.allow(EVENTS)
    final = items[-1][1]
    assert final.resumed_from_snapshot and final.state == a2a_pb2.TASK_STATE_COMPLETED
    assert items[3][0].HasField("task")  # the snapshot the stream resumed from
    assert [p.text for p in final.task.artifacts[0].parts] == [f"chunk {n}" for n in range(CHUNKS)]


async def test_a_stale_event_id_on_a_running_task_says_to_subscribe_without_it(
    make_server: Factory,
) -> None:
    agent = Fifty()
    harness = await make_server(agent, http_port=0)
    assert harness.running.http_server is not None
    base = harness.running.http_server.base_url
    agent.allow(3)
    body = {
        "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "go"}]},
        "configuration": {"returnImmediately": True},
    }
    headers = {"A2A-Version": "1.0"}
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        sent = await http.post("/message:send", json=body, headers=headers)
        task_id = sent.json()["task"]["id"]
        expired = await http.get(
            f"/tasks/{task_id}:subscribe", headers={**headers, LAST_EVENT_ID_HEADER: "999"}
        )
        assert expired.status_code == 410
        assert "; subscribe without it for the task as it stands" in expired.text
        async with http.stream("GET", f"/tasks/{task_id}:subscribe", headers=headers) as stream:
            assert stream.status_code == 200
            agent.allow(EVENTS)
            text = (await stream.aread()).decode()
        assert "TASK_STATE_COMPLETED" in text


async def test_sse_events_carry_their_id_and_last_event_id_replays_after_it(
    make_server: Factory,
) -> None:
    agent = Fifty()
    harness = await make_server(agent, http_port=0)
    assert harness.running.http_server is not None
    base = harness.running.http_server.base_url
    agent.allow(EVENTS)
    body = {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "go"}]}}
    headers = {"A2A-Version": "1.0"}
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        response = await http.post("/message:stream", json=body, headers=headers)
        blocks = [b for b in response.text.split("\n\n") if b.strip()]
        ids = [line[4:] for b in blocks for line in b.splitlines() if line.startswith("id: ")]
        assert ids == [str(n) for n in range(1, EVENTS + 1)]
        task_id = response.text.split('"id":"', 1)[1].split('"', 1)[0]
        replayed = await http.get(
            f"/tasks/{task_id}:subscribe", headers={**headers, LAST_EVENT_ID_HEADER: "47"}
        )
        again = [line[4:] for line in replayed.text.splitlines() if line.startswith("id: ")]
        assert again == ["48", "49", "50"]
        expired = await http.get(
            f"/tasks/{task_id}:subscribe", headers={**headers, LAST_EVENT_ID_HEADER: "99"}
        )
        assert expired.status_code == 410 and "EVENT_ID_EXPIRED" in expired.text
        # The task is finished: the error names what works then, GetTask, since a
        # subscription without the id is refused too.
        assert (
            f"task {task_id} is TASK_STATE_COMPLETED, so nothing is left to stream (a "
            "subscription without the id is refused too): read it with GetTask"
        ) in expired.text
        without = await http.get(f"/tasks/{task_id}:subscribe", headers=headers)
        assert without.status_code == 400 and "read it with GetTask" in without.text
        fetched = await http.get(f"/tasks/{task_id}", headers=headers)
        assert fetched.status_code == 200 and '"TASK_STATE_COMPLETED"' in fetched.text


async def test_a_task_no_stream_followed_keeps_no_events_to_resume_after(
    make_server: Factory, store_url: str | None
) -> None:
    """The decision docs/server.md states ("Event ids"): a task nobody streamed has no event
    log, so any Last-Event-ID on it is EVENT_ID_EXPIRED (HTTP 410), on both stores; the same
    task streamed keeps its events to replay after any of its ids."""
    harness = await make_server(http_port=0, store=store_url or "")
    assert harness.running.http_server is not None
    headers = {"A2A-Version": "1.0"}

    def body(text: str) -> dict[str, Any]:
        message = {
            "messageId": str(random.random()),
            "role": "ROLE_USER",
            "parts": [{"text": text}],
        }
        return {"message": message}

    async with httpx.AsyncClient(base_url=harness.running.http_server.base_url) as http:
        sent = await http.post("/message:send", json=body("chunks 3"), headers=headers)
        unstreamed = sent.json()["task"]
        assert unstreamed["status"]["state"] == "TASK_STATE_COMPLETED"
        streamed = await http.post("/message:stream", json=body("chunks 3"), headers=headers)
        ids = [line[4:] for line in streamed.text.splitlines() if line.startswith("id: ")]
        task_id = streamed.text.split('"id":"', 1)[1].split('"', 1)[0]
        replayed = await http.get(
            f"/tasks/{task_id}:subscribe", headers={**headers, LAST_EVENT_ID_HEADER: ids[0]}
        )
        assert [line[4:] for line in replayed.text.splitlines() if line.startswith("id: ")] == (
            ids[1:]
        )
        for last_id in ("0", ids[0]):
            refused = await http.get(
                f"/tasks/{unstreamed['id']}:subscribe",
                headers={**headers, LAST_EVENT_ID_HEADER: last_id},
            )
            assert refused.status_code == 410 and "EVENT_ID_EXPIRED" in refused.text, last_id


@pytest.mark.parametrize("call", ["send", "subscribe"])
async def test_a_stream_a_redis_outage_ends_is_resumed_once_redis_is_back(
    make_server: Factory,
    make_redis_server: Callable[..., RedisServer],
    transport: str,
    call: str,
) -> None:
    """Redis stops under an open stream (its append-only file keeps the task): the server ends
    the stream with a retryable UNAVAILABLE ("call SubscribeToTask again"). Our client sends
    the message again (a send stream: the same message_id, so the task is not run twice) or
    subscribes again (a subscription), no sooner than the server's RetryInfo says, until Redis
    is back; the task then completes on the new stream."""
    redis_server = make_redis_server(appendonly=True)
    agent = Held()
    harness = await make_server(agent, http_port=0, store=redis_server.url)
    health = health_pb2_grpc.HealthStub(harness.channel)
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        """The client's backoff: the first one brings Redis back and waits until the server
        reads its store again; then the agent may finish."""
        sleeps.append(seconds)
        if not redis_server.running:
            await asyncio.to_thread(redis_server.restart)
            store = health_pb2.HealthCheckRequest(service=STORE_HEALTH_SERVICE)
            async for said in health.Watch(store):
                if said.status == health_pb2.HealthCheckResponse.SERVING:
                    break
            agent.go.set()

    async with CardResolver() as resolver:
        card = await resolver.get(harness.running.card_url)
    client = A2AClient.for_card(card, transports=(transport,), backoff=Backoff(sleep=sleep))
    views = []
    async with client, asyncio.timeout(60):
        if call == "send":
            stream = client.send_streaming_message(user_message("hello"))
        else:
            request = a2a_pb2.SendMessageRequest(message=user_message("hello"))
            request.configuration.return_immediately = True
            task = await client.send_message(request)
            assert isinstance(task, a2a_pb2.Task)
            stream = client.subscribe_to_task(task.id)
        async for _, view in stream:
            views.append(view)
            if view.state == a2a_pb2.TASK_STATE_WORKING and redis_server.running:
                await agent.entered.wait()
                await asyncio.to_thread(redis_server.stop)
    assert views[-1].state == a2a_pb2.TASK_STATE_COMPLETED
    assert agent.runs == 1
    assert sleeps and sleeps[0] >= 1.0  # the server's RetryInfo


@pytest.mark.parametrize("binding", ["grpc", "jsonrpc", "http+json"])
async def test_a_caller_resumes_a_subscription_after_the_last_event_id_it_saw(
    make_server: Factory, binding: str
) -> None:
    """`subscribe_to_task(after=ID)`: exactly the events after ID, no snapshot first; with an ID
    the server no longer keeps, from a snapshot, and the view says so."""
    agent = Fifty()
    harness = await make_server(agent, http_port=0, replay_events=5)
    assert harness.running.card_url is not None
    async with (
        asyncio.timeout(60),
        A2AClient.connect(harness.running.card_url, transports=(binding,)) as client,
    ):
        agent.allow(2)  # the task starts: WORKING
        started = await client.send_message(
            a2a_pb2.SendMessageRequest(
                message=user_message("fifty"),
                configuration=a2a_pb2.SendMessageConfiguration(return_immediately=True),
            )
        )
        assert isinstance(started, a2a_pb2.Task)
        seen: list[str | None] = []
        async for event, _ in client.subscribe_to_task(started.id):
            seen.append(event_id(event))
            agent.allow(5)  # after the opening snapshot: more events follow it live
            if len(seen) == 3:
                break  # the caller stops reading
        last = seen[-1]
        assert last is not None
        await agent.emitted_up_to(5)
        replayed = []
        agent.allow(7)
        async for event, view in client.subscribe_to_task(started.id, after=last):
            replayed.append((event, view))
            if len(replayed) == 2:
                break
        assert not replayed[0][0].HasField("task")  # the events after the id, no snapshot
        assert [event_id(e) for e, _ in replayed] == [str(int(last) + 1), str(int(last) + 2)]
        assert not replayed[-1][1].resumed_from_snapshot
        agent.allow(30)
        await agent.emitted_up_to(30)  # the ring of 5 moved past `last`
        agent.allow(EVENTS)
        items = [item async for item in client.subscribe_to_task(started.id, after=last)]
        assert items[0][0].HasField("task")  # from a snapshot
        final = items[-1][1]
        assert final.resumed_from_snapshot and final.state == a2a_pb2.TASK_STATE_COMPLETED
