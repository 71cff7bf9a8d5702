"""Behaviour across replicas: two or three `a2a-grpc serve` processes on one real store (Redis,
and PostgreSQL: every test runs on both), each call sent where a load balancer might send
it."""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import re
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import grpc
import httpx
import pytest
import redis.asyncio as aioredis
from cryptography.fernet import Fernet

from a2a_grpc.client import A2AClient
from a2a_grpc.client.card import CardResolver, select_interface
from a2a_grpc.client.messages import user_message
from a2a_grpc.core import status
from a2a_grpc.core.event_ids import event_id
from a2a_grpc.generated import a2a_pb2, a2a_v03_pb2, a2a_v03_pb2_grpc
from a2a_grpc.server.tasks.base import REPLICA_STOPPED_TEXT
from a2a_grpc.server.tasks.redis.events import parse_stream_id
from tests.integration.sdk_v03_task_reader import read_with_sdk
from tests.integration.tcp_proxy import TcpProxy
from tests.integration.webhook_receiver import Receiver
from tests.redis_servers import RedisServer
from tests.replicas.conftest import StartReplica, StoreServer
from tests.replicas.harness import Replica, start_replica

_ids = itertools.count()
DEMO_AGENT = "a2a_grpc.server.demo_agent:DemoAgent"


def send(text: str, *, message_id: str | None = None, task_id: str = "", **configuration: object):  # type: ignore[no-untyped-def]
    message = a2a_pb2.Message(
        message_id=message_id or f"m{next(_ids)}-{text.replace(' ', '-')}",
        role=a2a_pb2.ROLE_USER,
        task_id=task_id,
    )
    message.parts.add().text = text
    request = a2a_pb2.SendMessageRequest(message=message)
    for name, value in configuration.items():
        setattr(request.configuration, name, value)
    return request


async def started(redis: aioredis.Redis, request: a2a_pb2.SendMessageRequest) -> str:
    """The task id, once the agent is WORKING on it (wherever it runs)."""
    _, task_id = await redis.blpop([f"test:started:{request.message.message_id}"], timeout=30)
    return str(task_id.decode())


CARD_LINE = re.compile(r"agent card at (http://[\d.]+:\d+)/")


async def calls_in_flight(replica: Replica, *, at_least: int) -> None:
    """Returns once the replica's `a2a_calls_in_flight` gauge (its /metrics) reaches `at_least`:
    the unary calls it has taken and not yet answered. Each look is bounded; 30 s in all."""
    async with asyncio.timeout(30), aiohttp.ClientSession() as http:
        for _ in itertools.count():
            # The start-up line naming the HTTP port may still be on its way.
            found = [m for line in replica.output if (m := CARD_LINE.search(line))]
            if found:
                async with http.get(found[0].group(1) + "/metrics") as answer:
                    text = await answer.text()
                gauge = re.search(r"^a2a_calls_in_flight (\S+)$", text, re.MULTILINE)
                if gauge and float(gauge.group(1)) >= at_least:
                    return
            await asyncio.sleep(0.02)


async def subscribe_through_recovery(
    replica: Replica, task_id: str, attempts: int = 5
) -> list[a2a_pb2.StreamResponse]:
    """Every event of a SubscribeToTask stream on `replica`, subscribing again, as a client
    does, when the stream ends UNAVAILABLE: around its store's recovery a replica ends the
    streams it had open ("subscribe again"), one opened just before it included."""
    for attempt in range(attempts):
        stream = replica.stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=task_id))
        try:
            return [await stream.read(), *await collect(stream)]
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.UNAVAILABLE or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


async def collect(stream: grpc.aio.UnaryStreamCall) -> list[a2a_pb2.StreamResponse]:  # type: ignore[type-arg]
    """The rest of a stream read with read() (grpc does not mix read() with iteration)."""
    events = []
    async with asyncio.timeout(30):
        while (event := await stream.read()) is not grpc.aio.EOF:
            events.append(event)
    return events


def describe(events: list[a2a_pb2.StreamResponse]) -> list[str]:
    out = []
    for event in events:
        kind = event.WhichOneof("payload")
        if kind == "status_update":
            out.append(a2a_pb2.TaskState.Name(event.status_update.status.state))
        elif kind == "artifact_update":
            out.append("chunk " + event.artifact_update.artifact.parts[0].text.split()[-1])
        elif kind == "task":
            out.append("task " + a2a_pb2.TaskState.Name(event.task.status.state))
        else:
            out.append(str(kind))
    return out


CARD_AT = re.compile(r"agent card at http://[\d.]+:(\d+)/")


def http_port_of(replica: Replica) -> int:
    """The replica's HTTP port, from its start-up lines."""
    found = next(m for line in replica.output if (m := CARD_AT.search(line)))
    return int(found.group(1))


def port_of(replica: Replica, transport: str) -> int:
    """The port serving `transport` on the replica."""
    return replica.port if transport == "grpc" else http_port_of(replica)


async def client_via(proxy: TcpProxy, replica: Replica, transport: str) -> A2AClient:
    """Our client for `transport`, reaching the replicas through `proxy` (for the HTTP
    bindings, the interface of `replica`'s card with its address replaced by the proxy's)."""
    if transport == "grpc":
        return A2AClient.connect(proxy.address)
    port = http_port_of(replica)
    async with CardResolver() as resolver:
        card = await resolver.get(f"http://127.0.0.1:{port}/.well-known/agent-card.json")
    interface = select_interface(card, (transport,))
    interface.url = interface.url.replace(f"127.0.0.1:{port}", proxy.address)
    return A2AClient.for_card(card, transports=(transport,))


async def test_a_task_created_on_one_replica_is_read_and_listed_on_another(
    replicas: StartReplica,
) -> None:
    a, b = await replicas(), await replicas()
    created = [(await a.stub.SendMessage(send(f"task {n}"))).task for n in range(5)]
    assert all(task.status.state == a2a_pb2.TASK_STATE_COMPLETED for task in created)
    read = await b.stub.GetTask(a2a_pb2.GetTaskRequest(id=created[0].id))
    assert read == created[0]
    pages: dict[str, list[str]] = {}
    for replica, other in ((a, b), (b, a)):
        first = await replica.stub.ListTasks(a2a_pb2.ListTasksRequest(page_size=3))
        rest = await other.stub.ListTasks(  # the token works on any replica
            a2a_pb2.ListTasksRequest(page_size=3, page_token=first.next_page_token)
        )
        assert first.total_size == 5 and not rest.next_page_token
        pages[replica.target] = [task.id for task in (*first.tasks, *rest.tasks)]
    newest_first = [task.id for task in reversed(created)]
    assert pages[a.target] == pages[b.target] == newest_first


async def test_push_configs_are_shared(replicas: StartReplica) -> None:
    a, b = await replicas(), await replicas()
    task = (await a.stub.SendMessage(send("task"))).task
    config = a2a_pb2.TaskPushNotificationConfig(
        task_id=task.id, id="hook", url="http://127.0.0.1:9/hook"
    )
    await a.stub.CreateTaskPushNotificationConfig(config)
    got = await b.stub.GetTaskPushNotificationConfig(
        a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=task.id, id="hook")
    )
    assert got.url == "http://127.0.0.1:9/hook"
    listed = await b.stub.ListTaskPushNotificationConfigs(
        a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id)
    )
    assert [c.id for c in listed.configs] == ["hook"]
    await b.stub.DeleteTaskPushNotificationConfig(
        a2a_pb2.DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="hook")
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await a.stub.GetTaskPushNotificationConfig(
            a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=task.id, id="hook")
        )
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


async def test_subscribers_on_every_replica_see_the_same_events_in_order(
    replicas: StartReplica, redis: aioredis.Redis
) -> None:
    a, b, c = await replicas(), await replicas(), await replicas()
    request = send("hold s1", return_immediately=True)
    await a.stub.SendMessage(request)
    task_id = await started(redis, request)
    streams = [
        replica.stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=task_id))
        for replica in (a, b, c)
    ]
    for stream in streams:  # each has its snapshot: it is subscribed
        assert (await stream.read()).task.status.state == a2a_pb2.TASK_STATE_WORKING
    await redis.rpush("test:release:s1", "5")
    seen = [describe(await collect(stream)) for stream in streams]
    expected = [*(f"chunk {n}" for n in range(5)), "TASK_STATE_COMPLETED"]
    assert seen == [expected, expected, expected]


async def test_cancel_on_another_replica_stops_the_agent_and_every_stream(
    replicas: StartReplica, redis: aioredis.Redis
) -> None:
    a, b = await replicas(), await replicas()
    request = send("hold c1", return_immediately=True)
    await a.stub.SendMessage(request)
    task_id = await started(redis, request)
    streams = [
        replica.stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=task_id))
        for replica in (a, b)
    ]
    for stream in streams:
        await stream.read()
    canceled = await b.stub.CancelTask(a2a_pb2.CancelTaskRequest(id=task_id))
    assert canceled.status.state == a2a_pb2.TASK_STATE_CANCELED
    _, cancelled = await redis.blpop(["test:cancelled"], timeout=30)  # the agent on A
    assert cancelled.decode() == request.message.message_id
    for stream in streams:
        assert describe(await collect(stream)) == ["TASK_STATE_CANCELED"]
    read = await a.stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id))
    assert read.status.state == a2a_pb2.TASK_STATE_CANCELED


async def test_an_answer_can_land_on_any_replica(replicas: StartReplica) -> None:
    a, b = await replicas(), await replicas()
    asked = (await a.stub.SendMessage(send("ask"))).task
    assert asked.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    answered = (await b.stub.SendMessage(send("the blue one", task_id=asked.id))).task
    assert answered.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert f"on {b.process.pid}" in answered.status.message.parts[0].text
    with pytest.raises(grpc.aio.AioRpcError) as caught:  # terminal now, on every replica
        await a.stub.SendMessage(send("again", task_id=asked.id))
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION


@pytest.mark.parametrize("transport", ["grpc", "jsonrpc", "http+json"])
async def test_an_answer_whose_reply_was_lost_gets_its_result_from_another_replica(
    replicas: StartReplica, redis: aioredis.Redis, transport: str
) -> None:
    """Catches intake checking the task's state before the shared claim on the message id:
    the answer runs on B, which completes the task, and the proxy drops B's reply; our client
    sends the answer again (the same message id) and the proxy takes it to A. A's own window
    never saw the id and the task is COMPLETED now: without the claim first, A refuses the
    answer (UNSUPPORTED_OPERATION, "takes no more messages") instead of giving B's result."""
    a, b = await replicas(), await replicas()
    asked = (await a.stub.SendMessage(send("ask"))).task
    assert asked.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    proxy = await TcpProxy(
        port_of(b, transport), also=(port_of(a, transport),), drop_first_reply=True
    ).start()
    try:
        async with await client_via(proxy, b, transport) as client:
            answer = user_message("the blue one", task_id=asked.id)
            answered = await client.send_message(answer)
    finally:
        await proxy.close()
    assert proxy.dropped.is_set()
    assert proxy.routed == [port_of(b, transport), port_of(a, transport)]  # B's reply lost
    assert isinstance(answered, a2a_pb2.Task)
    assert answered.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert answered.status.message.parts[0].text == f"answered, on {b.process.pid}"
    runs = [run.decode() for run in await redis.lrange("test:runs", 0, -1)]
    assert [run.split(":")[0] for run in runs][1:] == [answer.message_id]  # once, on B


async def test_one_message_id_sent_to_two_replicas_runs_once(
    replicas: StartReplica, redis: aioredis.Redis
) -> None:
    a, b = await replicas(), await replicas()
    request = send("hold d1", message_id="the-same-id")
    calls = [
        asyncio.ensure_future(replica.stub.SendMessage(request, timeout=30)) for replica in (a, b)
    ]
    await started(redis, request)
    await redis.rpush("test:release:d1", "0")
    first, second = await asyncio.gather(*calls)
    assert first.task.id == second.task.id
    assert first.task.status.state == second.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    runs = [run.decode() for run in await redis.lrange("test:runs", 0, -1)]
    assert [run.split(":")[0] for run in runs] == ["the-same-id"]


async def test_a_reused_message_id_with_other_content_is_refused_on_another_replica(
    replicas: StartReplica, redis: aioredis.Redis
) -> None:
    """Catches the shared idempotency window (SharedDedupWindow in protocol/dedup.py)
    without its content check: a message id reused for different content, sent to a replica
    other than the one that ran the first message, would get the first message's task instead
    of INVALID_PARAMS (this replica's own window never saw the id, so only the claim in Redis
    can tell)."""
    a, b = await replicas(), await replicas()
    first = await a.stub.SendMessage(send("task one", message_id="reused-id"), timeout=30)
    assert first.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await b.stub.SendMessage(send("task two", message_id="reused-id"), timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    error = status.decode(
        caught.value.code(), caught.value.details() or "", caught.value.trailing_metadata()
    )
    assert error is not None and error.reason == "INVALID_PARAMS"
    assert "already used for a different message" in str(error)
    again = await b.stub.SendMessage(send("task one", message_id="reused-id"), timeout=30)
    assert again.task.id == first.task.id  # the same content is still a repeat
    runs = [run.decode() for run in await redis.lrange("test:runs", 0, -1)]
    assert [run.split(":")[0] for run in runs] == ["reused-id"]


def unavailable(caught: pytest.ExceptionInfo[grpc.aio.AioRpcError]) -> status.StatusError:
    """The error of a call refused UNAVAILABLE by the agent: retryable, with RetryInfo."""
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    error = status.decode(
        caught.value.code(), caught.value.details() or "", caught.value.trailing_metadata()
    )
    assert error is not None and error.reason == "UNAVAILABLE"
    assert error.retryable and error.retry_delay == 0.05
    return error


async def ran(redis: aioredis.Redis, message_id: str) -> list[str]:
    """The pids of the processes whose agent ran `message_id`, in order."""
    runs = [run.decode().split(":") for run in await redis.lrange("test:runs", 0, -1)]
    return [pid for ran_id, pid in runs if ran_id == message_id]


async def test_an_agent_unavailable_on_one_replica_runs_the_message_again_on_another(
    replicas: StartReplica, redis: aioredis.Redis
) -> None:
    """The message was not taken on A, so the claim on its id is given back: sent again to B
    (the same message id), it runs there instead of getting A's refusal as its outcome."""
    a, b = await replicas(), await replicas()
    await redis.rpush("test:busy:u1", "once")
    request = send("busy u1")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await a.stub.SendMessage(request, timeout=30)
    assert str(a.process.pid) in str(unavailable(caught))
    listed = await b.stub.ListTasks(a2a_pb2.ListTasksRequest())
    assert listed.total_size == 0  # no task was made
    done = (await b.stub.SendMessage(request, timeout=30)).task
    assert done.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert done.status.message.parts[0].text == f"done on {b.process.pid}"
    pids = [str(a.process.pid), str(b.process.pid)]
    assert await ran(redis, request.message.message_id) == pids


async def test_our_client_retries_an_unavailable_agent_on_the_next_replica(
    replicas: StartReplica, redis: aioredis.Redis
) -> None:
    """The agent is "not now" on A only; our client, balancing A and B call by call, sends
    each refused message again (the same message id) and it completes on B. Several messages,
    so that some reach A first, whichever replica round robin starts with."""
    a, b = await replicas(), await replicas()
    refused_first = 0
    async with A2AClient.connect(f"{a.target},{b.target}") as client:  # round_robin
        for _ in range(6):
            message = user_message(f"busy-on {a.process.pid}")
            task = await client.send_message(message)
            assert isinstance(task, a2a_pb2.Task)
            assert task.status.message.parts[0].text == f"done on {b.process.pid}"
            pids = await ran(redis, message.message_id)
            assert pids[-1] == str(b.process.pid)
            assert set(pids[:-1]) <= {str(a.process.pid)}  # refused there, sent again
            refused_first += len(pids) > 1
    assert refused_first


async def test_an_answer_not_taken_on_one_replica_is_taken_on_another(
    replicas: StartReplica, redis: aioredis.Redis
) -> None:
    a, b = await replicas(), await replicas()
    asked = (await a.stub.SendMessage(send("ask"))).task
    await redis.rpush("test:busy:u3", "once")
    answer = send("busy u3", task_id=asked.id)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await b.stub.SendMessage(answer, timeout=30)
    unavailable(caught)
    waiting = await a.stub.GetTask(a2a_pb2.GetTaskRequest(id=asked.id))
    assert waiting.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    assert f"busy on {b.process.pid}" in waiting.status.message.parts[0].text
    answered = (await a.stub.SendMessage(answer, timeout=30)).task
    assert answered.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert answered.status.message.parts[0].text == f"answered, on {a.process.pid}"


async def test_a_task_removed_on_one_replica_ends_streams_and_repeats_on_another(
    replicas: StartReplica, redis: aioredis.Redis
) -> None:
    """The task a message made on A is removed when A's agent says "not now": a subscriber on B
    ends UNAVAILABLE, the task is gone, and the message sent again runs anew.

    A repeat of the message sent to B while A's run holds its id follows that run and ends
    UNAVAILABLE with it; one that B claims after A gave the id back (or that came to follow
    A's run only once it was withdrawn: `Claims.outcome`) runs anew on B. Both are right, and
    which one happens is a race between B's claim and A's withdrawal that no caller can order
    (B's gauge of calls in flight says B has taken the call, not that it claimed the id yet).
    So the agent is released for both runs at once, and the test tells from where the agent
    ran (`test:runs`, read without taking anything) which of the two happened."""
    a, b = await replicas(), await replicas()
    await redis.rpush("test:busy:u4", "once")
    request = send("busy-after u4", return_immediately=True)
    message_id = request.message.message_id
    first = (await a.stub.SendMessage(request, timeout=30)).task
    task_id = await started(redis, request)
    assert first.id == task_id
    subscriber = b.stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=task_id))
    assert (await subscriber.read()).task.status.state == a2a_pb2.TASK_STATE_WORKING
    blocking = send("busy-after u4", message_id=message_id)
    repeat = asyncio.ensure_future(b.stub.SendMessage(blocking, timeout=30))
    await calls_in_flight(b, at_least=1)  # most often, the repeat then follows A's run
    # One release for A's run (which takes the "busy" token), one for a run of the message on
    # B: the repeat's, if it came after A's withdrawal, else the message sent again below.
    await redis.rpush("test:release:u4", "go", "go")
    with pytest.raises(grpc.aio.AioRpcError) as ended:
        await collect(subscriber)
    unavailable(ended)
    with pytest.raises(grpc.aio.AioRpcError) as gone:
        await b.stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id))
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND
    try:
        done = (await repeat).task  # B claimed the id after A gave it back: it ran anew
    except grpc.aio.AioRpcError as refused:  # it followed A's run, which did not take it
        unavailable(pytest.ExceptionInfo.from_exception(refused))
        assert await ran(redis, message_id) == [str(a.process.pid)]
        done = (await b.stub.SendMessage(blocking, timeout=30)).task
    assert await ran(redis, message_id) == [str(a.process.pid), str(b.process.pid)]
    assert done.status.state == a2a_pb2.TASK_STATE_COMPLETED and done.id != task_id


async def test_a_replica_that_dies_has_its_tasks_failed_within_the_lease(
    replicas: StartReplica, redis: aioredis.Redis
) -> None:
    a, b = await replicas("--task-lease", "1"), await replicas("--task-lease", "1")
    request = send("hold k1", return_immediately=True)
    await a.stub.SendMessage(request)
    task_id = await started(redis, request)
    stream = b.stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=task_id))
    await stream.read()
    await a.kill()
    events = await collect(stream)
    assert describe(events) == ["TASK_STATE_FAILED"]
    assert events[0].status_update.status.message.parts[0].text == REPLICA_STOPPED_TEXT


async def test_the_store_down_is_unavailable_retryable_and_health_follows(
    replicas: StartReplica, store: StoreServer
) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    a = await replicas()
    stub = a.stub  # opens the replica's channel
    assert a.channel is not None
    watch = health_pb2_grpc.HealthStub(a.channel).Watch(health_pb2.HealthCheckRequest(service=""))
    assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
    store.kill()
    began = time.monotonic()
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.GetTask(a2a_pb2.GetTaskRequest(id="any"), timeout=10)
    assert time.monotonic() - began < 1.5  # refused at once, not after the store's timeout
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    error = status.decode(
        caught.value.code(), caught.value.details() or "", caught.value.trailing_metadata()
    )
    assert error is not None and error.retryable and error.retry_delay
    assert (await watch.read()).status == health_pb2.HealthCheckResponse.NOT_SERVING
    ready = f"http://127.0.0.1:{http_port_of(a)}/readyz"
    async with httpx.AsyncClient() as http:
        assert (await http.get(ready)).status_code == 503
        store.start()
        assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
        assert (await http.get(ready)).status_code == 200
    created = await a.stub.SendMessage(send("after"), timeout=10)
    assert created.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    outage = [line for line in a.output if "calls fail with UNAVAILABLE" in line]
    assert len(outage) == 1, outage  # the outage is one log line, however many calls failed


async def test_webhook_events_of_a_replica_that_died_are_delivered_by_another(
    replicas: StartReplica, redis: aioredis.Redis
) -> None:
    receiver = await Receiver(always_fail=True).start()
    try:
        # The replicas seal the webhook's secrets in the store: B opens what A sealed.
        # One argument with "=": a key may begin with "-", which argparse takes for an option.
        sealing = (f"--push-credentials-keys={Fernet.generate_key().decode()}",)
        a = await replicas("--task-lease", "1", *sealing)
        await replicas("--task-lease", "1", *sealing)  # B: the survivor that takes over
        request = send("hold w1", return_immediately=True)
        webhook = request.configuration.task_push_notification_config
        webhook.url = receiver.url
        webhook.token = "token-w1"
        webhook.authentication.scheme = "Bearer"
        webhook.authentication.credentials = "credentials-w1"
        await a.stub.SendMessage(request)
        await started(redis, request)
        await receiver.wait_for_attempts(1)  # A recorded WORKING and could not deliver it
        await a.kill()
        receiver.always_fail = False
        received = await receiver.wait_for(2)  # B took over: WORKING, then FAILED
        states = [
            json.loads(delivery.body)["statusUpdate"]["status"]["state"] for delivery in received
        ]
        assert states[:2] == ["TASK_STATE_WORKING", "TASK_STATE_FAILED"]
        for delivery in received:
            assert delivery.headers["Authorization"] == "Bearer credentials-w1"
            assert delivery.headers["X-A2A-Notification-Token"] == "token-w1"
    finally:
        await receiver.stop()


async def test_a_0_3_webhook_taken_over_by_another_replica_still_gets_0_3_tasks(
    replicas: StartReplica, redis: aioredis.Redis
) -> None:
    """The version a webhook was registered in lives in Redis with its config, so the replica
    that takes over its delivery sends 0.3 tasks too (the SDK's 0.3 model reads them)."""
    receiver = await Receiver(always_fail=True).start()
    try:
        a = await replicas("--task-lease", "1")
        await replicas("--task-lease", "1")  # B: the survivor that takes over
        a.stub  # noqa: B018 (opens the channel the 0.3 stub shares)
        assert a.channel is not None
        stub = a2a_v03_pb2_grpc.A2AServiceStub(a.channel)  # type: ignore[no-untyped-call]
        message_id = f"m{next(_ids)}-hold-w03"
        await stub.SendMessage(
            a2a_v03_pb2.SendMessageRequest(
                request=a2a_v03_pb2.Message(
                    message_id=message_id,
                    role=a2a_v03_pb2.ROLE_USER,
                    content=[a2a_v03_pb2.Part(text="hold w03")],
                ),
                configuration=a2a_v03_pb2.SendMessageConfiguration(
                    blocking=False,
                    push_notification=a2a_v03_pb2.PushNotificationConfig(url=receiver.url),
                ),
            )
        )
        _, task_id = await redis.blpop([f"test:started:{message_id}"], timeout=30)
        await receiver.wait_for_attempts(1)  # A recorded WORKING and could not deliver it
        await a.kill()
        receiver.always_fail = False
        async with asyncio.timeout(30), receiver.arrived:  # B took over, then failed the task
            await receiver.arrived.wait_for(
                lambda: any(b'"failed"' in delivery.body for delivery in receiver.received)
            )
        tasks = read_with_sdk([delivery.body for delivery in receiver.received])
        assert {(t["kind"], t["id"]) for t in tasks} == {("task", task_id.decode())}
        assert tasks[-1]["status"]["state"] == "failed"  # type: ignore[index]
        assert {d.headers["Content-Type"] for d in receiver.received} == {"application/json"}
    finally:
        await receiver.stop()


async def test_a_client_stream_goes_on_through_another_replica_when_its_replica_dies(
    replicas: StartReplica,
) -> None:
    a = await replicas("--task-lease", "1")
    b = await replicas("--task-lease", "1")
    by_pid = {a.process.pid: a, b.process.pid: b}
    killed: Replica | None = None
    views = []
    async with A2AClient.connect(f"{a.target},{b.target}") as client:  # round_robin
        async for _, view in client.send_streaming_message(user_message("hold f1")):
            views.append(view)
            task = view.task
            if killed is None and task is not None and task.status.HasField("message"):
                running_on = int(task.status.message.parts[0].text.split()[-1])
                killed = by_pid[running_on]
                await killed.kill()  # the stream breaks; the client resubscribes elsewhere
    assert killed is not None
    final = views[-1].task
    assert final is not None and final.status.state == a2a_pb2.TASK_STATE_FAILED
    assert final.status.message.parts[0].text == REPLICA_STOPPED_TEXT


async def test_tasks_survive_a_restart_of_every_replica_and_the_store(
    replicas: StartReplica, make_redis_server: Any, store: StoreServer
) -> None:
    if store.kind == "redis":  # appendfsync always: see docs/replicas.md
        durable = make_redis_server(appendonly=True)
        url, stop, start = durable.url, durable.stop, durable.start
    else:
        url, stop, start = store.url, store.kill, store.start  # recovery from the WAL
    a = await replicas(url=url)
    b = await replicas(url=url)
    done = [(await replica.stub.SendMessage(send("task"))).task for replica in (a, b, a)]
    asked = (await b.stub.SendMessage(send("ask"))).task
    hook = a2a_pb2.TaskPushNotificationConfig(
        task_id=asked.id, id="hook", url="http://127.0.0.1:9/hook"
    )
    await a.stub.CreateTaskPushNotificationConfig(hook)
    assert await a.stop() == 0 and await b.stop() == 0
    stop()
    start()
    c = await replicas(url=url)
    for task in done:
        assert await c.stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id)) == task
    listed = await c.stub.ListTasks(a2a_pb2.ListTasksRequest(page_size=10))
    assert listed.total_size == 4
    kept = await c.stub.GetTaskPushNotificationConfig(
        a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=asked.id, id="hook")
    )
    assert kept.url == hook.url
    answered = (await c.stub.SendMessage(send("that one", task_id=asked.id))).task
    assert answered.status.state == a2a_pb2.TASK_STATE_COMPLETED


@pytest.mark.parametrize("transport", ["grpc", "jsonrpc", "http+json"])
async def test_a_stream_whose_replica_is_killed_resumes_on_another_with_every_event_once(
    replicas: StartReplica, redis: aioredis.Redis, transport: str
) -> None:
    """SIGKILL of the replica serving a SubscribeToTask, at seeded random points, three times,
    on each binding: behind a load balancer (a TCP proxy here) the client resumes on another
    replica after the last event id it saw, and yields exactly what an uncut subscriber
    yields, ids growing."""
    runner = await replicas()
    serving = [await replicas() for _ in range(4)]

    def port(replica: Replica) -> int:
        return replica.port if transport == "grpc" else http_port_of(replica)

    balancer = await TcpProxy(port(serving[0])).start()

    async def connect() -> A2AClient:
        if transport == "grpc":
            return A2AClient.connect(balancer.address)
        base = f"http://127.0.0.1:{port(serving[0])}"
        async with CardResolver() as resolver:
            card = await resolver.get(base + "/.well-known/agent-card.json")
        interface = select_interface(card, (transport,))
        interface.url = interface.url.replace(f"127.0.0.1:{port(serving[0])}", balancer.address)
        return A2AClient.for_card(card, transports=(transport,))

    chunks = 47
    cuts = set(random.Random(f"sigkill {transport}").sample(range(2, chunks + 2), 3))
    try:

        async def subscribe(name: str, cut: bool) -> list[a2a_pb2.StreamResponse]:
            request = send(f"drip {name} {chunks}", return_immediately=True)
            await runner.stub.SendMessage(request)
            task_id = await started(redis, request)
            seen: list[a2a_pb2.StreamResponse] = []
            async with await connect() as client:
                async with asyncio.timeout(60):
                    async for event, _ in client.subscribe_to_task(task_id):
                        seen.append(event)
                        # The agent runs up to 3 events ahead of the client, from the snapshot on.
                        permits = ["go"] * (3 if len(seen) == 1 else 1)
                        await redis.rpush(f"test:drip:{name}", *permits)
                        if cut and len(seen) in cuts:
                            victim = serving.pop(0)
                            balancer.upstream_port = port(serving[0])  # where it reconnects
                            await victim.kill()
            return seen

        uncut = await subscribe("uncut", cut=False)
        resumed = await subscribe("cut", cut=True)
    finally:
        await balancer.close()
    assert describe(resumed) == describe(uncut)
    assert describe(resumed)[-1] == "TASK_STATE_COMPLETED" and len(resumed) == chunks + 2
    ids = [event_id(event) for event in resumed]
    assert None not in ids
    orders = [parse_stream_id(text) for text in ids if text is not None]
    assert orders == sorted(set(orders))
    assert len(serving) == 1  # three replicas served the stream and died


async def test_a_replica_stopped_while_redis_is_down_says_so_once_and_its_lease_fails_the_task(
    make_redis_server: Callable[..., RedisServer], redis_server: RedisServer
) -> None:
    """SIGTERM while the store's Redis is down: the replica stops cleanly (exit 0) with one
    line saying what it could not do, no traceback; its task, which it could not mark FAILED,
    is failed by another replica once the stopped one's lease runs out (docs/replicas.md)."""
    store = make_redis_server(appendonly=True)
    options = ("--task-lease", "1", "--shutdown-grace", "0.5", "--agent", DEMO_AGENT)
    a = await start_replica(redis_server.url, *options, store=store.url)
    b = await start_replica(redis_server.url, *options, store=store.url)
    try:
        working = a.stub.SendStreamingMessage(send("slow 600"))
        first = await working.read()
        assert first.task.status.state == a2a_pb2.TASK_STATE_SUBMITTED
        task_id = first.task.id
        assert describe([await working.read()]) == ["TASK_STATE_WORKING"]
        await asyncio.to_thread(store.stop)
        before = len(a.output)
        assert await a.stop() == 0
        assert a.reader is not None
        await a.reader
        said = "".join(a.output[before:])
        assert "Traceback" not in said, said
        down = [line for line in a.output[before:] if "could not record" in line]
        assert len(down) == 1, said
        await asyncio.to_thread(store.restart)
        events = await subscribe_through_recovery(b, task_id)
        assert describe(events)[-1] == "TASK_STATE_FAILED", describe(events)
        assert events[-1].status_update.status.message.parts[0].text == REPLICA_STOPPED_TEXT
    finally:
        await a.kill()
        await b.kill()
