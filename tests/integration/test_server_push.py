"""Push notification configs and webhook delivery, against a real HTTP receiver on loopback."""

from __future__ import annotations

import asyncio
import logging
import ssl
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import json_format

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.push.configs import PushConfigStore
from a2a_grpc.server.push.delivery import DeliveryPolicy, WebhookDispatcher
from a2a_grpc.server.push.guard import IPAddress, WebhookGuard
from tests.integration.certs import Authority
from tests.integration.conftest import Factory, Harness, error_reason, send_request
from tests.integration.webhook_receiver import Receiver


async def _no_sleep(_: float) -> None:
    await asyncio.sleep(0)


def dispatcher(**policy: object) -> WebhookDispatcher:
    settings = {"allow_private_targets": True, "max_attempts": 4, "timeout": 5.0, **policy}
    return WebhookDispatcher(PushConfigStore(), DeliveryPolicy(**settings), sleep=_no_sleep)  # type: ignore[arg-type]


class Gated:
    """WORKING, then waits for `go`, then three artifact chunks and COMPLETED."""

    def __init__(self) -> None:
        self.go = asyncio.Event()

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        await events.working()
        await self.go.wait()
        artifact_id = None
        for index in range(3):
            artifact_id = await events.add_artifact(
                [a2a_pb2.Part(text=str(index))],
                artifact_id=artifact_id,
                append=index > 0,
                last_chunk=index == 2,
            )
        await events.complete()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    running = await Receiver().start()
    yield running
    await running.stop()


def events_of(received: list[object]) -> list[a2a_pb2.StreamResponse]:
    return [
        json_format.Parse(r.body, a2a_pb2.StreamResponse())  # type: ignore[attr-defined]
        for r in received
    ]


async def _start_gated(harness: Harness) -> a2a_pb2.Task:
    configuration = a2a_pb2.SendMessageConfiguration(return_immediately=True)
    return (await harness.stub.SendMessage(send_request(configuration=configuration))).task


async def test_deliveries_arrive_in_order_with_headers(
    make_server: Factory, receiver: Receiver
) -> None:
    agent = Gated()
    harness = await make_server(agent=agent, webhooks=dispatcher())
    task = await _start_gated(harness)
    created = await harness.stub.CreateTaskPushNotificationConfig(
        a2a_pb2.TaskPushNotificationConfig(
            task_id=task.id,
            url=receiver.url,
            token="tok-1",
            authentication=a2a_pb2.AuthenticationInfo(scheme="Bearer", credentials="s3cret"),
        )
    )
    assert created.id and created.task_id == task.id
    agent.go.set()
    received = await receiver.wait_for(4)
    events = events_of(received)
    assert [e.WhichOneof("payload") for e in events] == [
        "artifact_update",
        "artifact_update",
        "artifact_update",
        "status_update",
    ]
    assert [e.artifact_update.artifact.parts[0].text for e in events[:3]] == ["0", "1", "2"]
    assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert all(e.status_update.task_id == task.id for e in events[3:])
    headers = received[0].headers
    assert headers["Content-Type"] == "application/a2a+json"
    assert headers["Authorization"] == "Bearer s3cret"
    assert headers["X-A2A-Notification-Token"] == "tok-1"
    assert b'"artifactUpdate"' in received[0].body  # ProtoJSON, camelCase


async def test_deliveries_survive_two_failures(make_server: Factory) -> None:
    receiver = await Receiver(failures=2).start()
    try:
        agent = Gated()
        harness = await make_server(agent=agent, webhooks=dispatcher())
        task = await _start_gated(harness)
        await harness.stub.CreateTaskPushNotificationConfig(
            a2a_pb2.TaskPushNotificationConfig(task_id=task.id, url=receiver.url)
        )
        agent.go.set()
        events = events_of(await receiver.wait_for(4))
        assert [e.artifact_update.artifact.parts[0].text for e in events[:3]] == ["0", "1", "2"]
        assert receiver.attempts == 6
    finally:
        await receiver.stop()


async def test_a_dead_webhook_is_given_up_without_hurting_the_task(
    make_server: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    receiver = await Receiver(always_fail=True).start()
    try:
        webhooks = dispatcher(max_attempts=3)
        harness = await make_server(webhooks=webhooks)
        request = send_request("chunks 3")
        request.configuration.task_push_notification_config.url = receiver.url
        with caplog.at_level(logging.WARNING):
            task = (await harness.stub.SendMessage(request)).task
            assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
            await asyncio.wait_for(webhooks.idle(), 10)
        assert receiver.attempts == 3  # one event tried three times, then nothing more
        assert "gave up webhook" in caplog.text
    finally:
        await receiver.stop()


async def test_a_slow_webhook_never_blocks_the_task(make_server: Factory) -> None:
    receiver = await Receiver(gate=asyncio.Event()).start()
    try:
        harness = await make_server(webhooks=dispatcher())
        request = send_request("chunks 3")
        request.configuration.task_push_notification_config.url = receiver.url
        # The receiver holds every request open, yet the blocking call completes.
        task = (await harness.stub.SendMessage(request)).task
        assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
        assert receiver.received == []
        assert receiver.gate is not None
        receiver.gate.set()
        events = events_of(await receiver.wait_for(5))
        assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
    finally:
        await receiver.stop()


async def test_a_webhook_that_times_out_is_retried(make_server: Factory) -> None:
    gate = asyncio.Event()
    receiver = await Receiver(gate=gate).start()
    try:
        webhooks = dispatcher(timeout=0.2, max_attempts=3)
        harness = await make_server(webhooks=webhooks)
        request = send_request("reply-less echo")
        request.configuration.task_push_notification_config.url = receiver.url
        await harness.stub.SendMessage(request)
        await asyncio.wait_for(webhooks.idle(), 10)
        assert receiver.attempts == 3  # each POST timed out, so the first event was retried
        assert receiver.received == []
    finally:
        gate.set()
        await receiver.stop()


async def test_inline_config_is_registered_for_the_new_task(
    make_server: Factory, receiver: Receiver
) -> None:
    harness = await make_server(webhooks=dispatcher())
    request = send_request("hello")
    request.configuration.task_push_notification_config.url = receiver.url
    task = (await harness.stub.SendMessage(request)).task
    events = events_of(await receiver.wait_for(3))
    assert {e.status_update.task_id or e.artifact_update.task_id for e in events} == {task.id}
    listed = await harness.stub.ListTaskPushNotificationConfigs(
        a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id)
    )
    assert [c.url for c in listed.configs] == [receiver.url]


async def test_config_crud(make_server: Factory) -> None:
    harness = await make_server(webhooks=dispatcher())
    task = (await harness.stub.SendMessage(send_request("ask"))).task
    stub = harness.stub
    first = await stub.CreateTaskPushNotificationConfig(
        a2a_pb2.TaskPushNotificationConfig(task_id=task.id, url="https://hooks.example/a")
    )
    second = await stub.CreateTaskPushNotificationConfig(
        a2a_pb2.TaskPushNotificationConfig(task_id=task.id, id="mine", url="https://h.example/b")
    )
    assert second.id == "mine"
    got = await stub.GetTaskPushNotificationConfig(
        a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=task.id, id=first.id)
    )
    assert got == first
    page = await stub.ListTaskPushNotificationConfigs(
        a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id, page_size=1)
    )
    assert [c.id for c in page.configs] == [first.id] and page.next_page_token
    rest = await stub.ListTaskPushNotificationConfigs(
        a2a_pb2.ListTaskPushNotificationConfigsRequest(
            task_id=task.id, page_size=1, page_token=page.next_page_token
        )
    )
    assert [c.id for c in rest.configs] == ["mine"] and rest.next_page_token == ""
    delete = a2a_pb2.DeleteTaskPushNotificationConfigRequest(task_id=task.id, id=first.id)
    await stub.DeleteTaskPushNotificationConfig(delete)
    await stub.DeleteTaskPushNotificationConfig(delete)  # idempotent
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.GetTaskPushNotificationConfig(
            a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=task.id, id=first.id)
        )
    assert error_reason(caught.value) == "TASK_NOT_FOUND"


async def test_config_errors(make_server: Factory) -> None:
    harness = await make_server(webhooks=dispatcher())
    stub = harness.stub
    task = (await stub.SendMessage(send_request("ask", tenant="acme"))).task
    cases = [
        stub.CreateTaskPushNotificationConfig(
            a2a_pb2.TaskPushNotificationConfig(task_id="nope", url="https://h.example")
        ),
        stub.CreateTaskPushNotificationConfig(  # another tenant's task looks unknown
            a2a_pb2.TaskPushNotificationConfig(task_id=task.id, url="https://h.example")
        ),
        stub.ListTaskPushNotificationConfigs(
            a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id="nope")
        ),
        stub.DeleteTaskPushNotificationConfig(
            a2a_pb2.DeleteTaskPushNotificationConfigRequest(task_id="nope", id="x")
        ),
    ]
    for call in cases:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert error_reason(caught.value) == "TASK_NOT_FOUND"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.CreateTaskPushNotificationConfig(
            a2a_pb2.TaskPushNotificationConfig(task_id=task.id, tenant="acme")
        )
    assert error_reason(caught.value) == "INVALID_PARAMS"
    assert "url" in (caught.value.details() or "")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/hook",
        "http://localhost/hook",
        "http://10.1.2.3/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/hook",
        "ftp://hooks.example/x",
    ],
)
async def test_ssrf_guard_refuses_non_public_targets(demo: Harness, url: str) -> None:
    task = (await demo.stub.SendMessage(send_request("ask"))).task
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await demo.stub.CreateTaskPushNotificationConfig(
            a2a_pb2.TaskPushNotificationConfig(task_id=task.id, url=url)
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_reason(caught.value) == "INVALID_PARAMS"
    inline = send_request("hello")
    inline.configuration.task_push_notification_config.url = url
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await demo.stub.SendMessage(inline)
    assert error_reason(caught.value) == "INVALID_PARAMS"
    assert len(demo.store) == 1  # nothing was created for the refused message


def violations(error: grpc.aio.AioRpcError) -> list[str]:
    """The fields a refusal names (BadRequest field violations)."""
    from a2a_grpc.core import status

    decoded = status.decode(error.code(), error.details() or "", error.trailing_metadata())
    assert decoded is not None, f"no A2A ErrorInfo in {error.code()} {error.details()}"
    return [violation.field for violation in decoded.field_violations]


async def _refused(call: object) -> list[str]:
    """Awaits a call that must be refused with INVALID_PARAMS; returns the fields it names."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call  # type: ignore[misc]
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    assert error_reason(caught.value) == "INVALID_PARAMS"
    return violations(caught.value)


async def test_push_configs_are_capped_per_task(make_server: Factory, receiver: Receiver) -> None:
    harness = await make_server(webhooks=dispatcher(), max_push_configs=2)
    stub = harness.stub
    task = (await stub.SendMessage(send_request("ask"))).task

    def config(**fields: str) -> a2a_pb2.TaskPushNotificationConfig:
        return a2a_pb2.TaskPushNotificationConfig(task_id=task.id, url=receiver.url, **fields)

    await stub.CreateTaskPushNotificationConfig(config(id="a"))
    await stub.CreateTaskPushNotificationConfig(config(id="b"))
    await stub.CreateTaskPushNotificationConfig(config(id="b", token="t"))  # a replacement fits
    assert await _refused(stub.CreateTaskPushNotificationConfig(config())) == ["task_id"]
    assert await _refused(stub.CreateTaskPushNotificationConfig(config(id="c"))) == ["task_id"]
    # An inline config on the task's next message is refused before the task changes.
    answer = send_request("yes", task_id=task.id, context_id=task.context_id)
    answer.configuration.task_push_notification_config.url = receiver.url
    assert await _refused(stub.SendMessage(answer)) == [
        "configuration.task_push_notification_config"
    ]
    stored = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id))
    assert stored.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    assert len(stored.history) == len(task.history)
    listed = await stub.ListTaskPushNotificationConfigs(
        a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id)
    )
    assert [(c.id, c.token) for c in listed.configs] == [("a", ""), ("b", "t")]


async def test_webhook_urls_are_bounded(make_server: Factory, receiver: Receiver) -> None:
    harness = await make_server(webhooks=dispatcher())
    task = (await harness.stub.SendMessage(send_request("ask"))).task
    long_url = f"{receiver.url}?pad={'x' * 2048}"
    assert await _refused(
        harness.stub.CreateTaskPushNotificationConfig(
            a2a_pb2.TaskPushNotificationConfig(task_id=task.id, url=long_url)
        )
    ) == ["config.url"]


async def test_a_task_at_the_cap_gets_every_event_and_the_server_keeps_answering(
    make_server: Factory,
) -> None:
    gate = asyncio.Event()
    receiver = await Receiver(gate=gate).start()
    try:
        agent = Gated()
        harness = await make_server(agent=agent, webhooks=dispatcher(max_connections=4))
        cap = ServerConfig().max_push_configs
        task = await _start_gated(harness)
        for index in range(cap):
            await harness.stub.CreateTaskPushNotificationConfig(
                a2a_pb2.TaskPushNotificationConfig(
                    task_id=task.id, url=receiver.url, token=f"hook-{index}"
                )
            )
        agent.go.set()
        await receiver.wait_for_attempts(4)  # the receiver holds these POSTs open
        during = await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id))
        assert during.id == task.id
        gate.set()
        received = await receiver.wait_for(cap * 4)
        by_hook: dict[str, list[a2a_pb2.StreamResponse]] = {}
        for delivery, event in zip(received, events_of(received), strict=True):
            by_hook.setdefault(delivery.headers["X-A2A-Notification-Token"], []).append(event)
        assert sorted(by_hook) == sorted(f"hook-{index}" for index in range(cap))
        for events in by_hook.values():
            assert [e.artifact_update.artifact.parts[0].text for e in events[:3]] == ["0", "1", "2"]
            assert events[3].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
        assert receiver.peak_in_flight <= 4  # the dispatcher's connection limit
    finally:
        gate.set()
        await receiver.stop()


MALFORMED_URLS = [
    "http://[::1/hook",  # urlsplit raises ValueError: was INTERNAL
    "http://127.0.0.1:99999/hook",  # the rest were stored, then failed at every delivery
    "http://127.0.0.1:0/hook",
    "http://127.0.0.1:-1/hook",
    "http://127.0.0.1:http/hook",
    "http://127.0.0.1:80:90/hook",
    "http://xn--a.example/hook",  # not valid IDNA
    "http://exa mple.example/hook",
    "http://127.0.0.1/ho\x01ok",
    "http://127.0.0.1%00/hook",
    "http:///hook",
    "mailto:hooks@example.com",
]


@pytest.mark.parametrize("url", MALFORMED_URLS)
async def test_malformed_webhook_urls_are_refused_at_registration(
    make_server: Factory, url: str
) -> None:
    harness = await make_server(webhooks=dispatcher())  # no SSRF guard: only the form is judged
    task = (await harness.stub.SendMessage(send_request("ask"))).task
    create = a2a_pb2.TaskPushNotificationConfig(task_id=task.id, url=url)
    assert await _refused(harness.stub.CreateTaskPushNotificationConfig(create)) == ["config.url"]
    inline = send_request("hello")
    inline.configuration.task_push_notification_config.url = url
    assert await _refused(harness.stub.SendMessage(inline)) == [
        "configuration.task_push_notification_config.url"
    ]


BAD_HEADER_VALUES = [
    ({"token": "t\u00f6ken"}, "token"),  # becomes a header: ASCII only
    ({"token": "a\r\nX-Injected: 1"}, "token"),
    ({"token": "tab\there"}, "token"),
    ({"token": " padded "}, "token"),
    ({"credentials": "s\u00e9cret"}, "authentication.credentials"),
    ({"credentials": "line\nbreak"}, "authentication.credentials"),
    ({"credentials": "nul\x00"}, "authentication.credentials"),
    ({"scheme": "Bear er"}, "authentication.scheme"),
    ({"scheme": "B\u00e9arer"}, "authentication.scheme"),
    ({"scheme": "Bearer\x7f"}, "authentication.scheme"),
]


@pytest.mark.parametrize(("values", "field"), BAD_HEADER_VALUES)
async def test_tokens_and_credentials_must_make_valid_headers(
    make_server: Factory, receiver: Receiver, values: dict[str, str], field: str
) -> None:
    harness = await make_server(webhooks=dispatcher())
    task = (await harness.stub.SendMessage(send_request("ask"))).task
    config = a2a_pb2.TaskPushNotificationConfig(url=receiver.url, token=values.get("token", ""))
    if "scheme" in values or "credentials" in values:
        config.authentication.scheme = values.get("scheme", "Bearer")
        config.authentication.credentials = values.get("credentials", "s3cret")
    create = a2a_pb2.TaskPushNotificationConfig()
    create.CopyFrom(config)
    create.task_id = task.id
    assert await _refused(harness.stub.CreateTaskPushNotificationConfig(create)) == [
        f"config.{field}"
    ]
    inline = send_request("hello")
    inline.configuration.task_push_notification_config.CopyFrom(config)
    assert await _refused(harness.stub.SendMessage(inline)) == [
        f"configuration.task_push_notification_config.{field}"
    ]
    assert len(harness.store) == 1  # nothing was created for the refused message


@pytest.mark.parametrize("token", ["\u00b2", "9" * 5000, "-1", "1.0", "abc", "3"])
async def test_bad_push_config_page_tokens_are_invalid_params(
    make_server: Factory, token: str
) -> None:
    harness = await make_server(webhooks=dispatcher())
    task = (await harness.stub.SendMessage(send_request("ask"))).task
    for name in ("a", "b"):
        await harness.stub.CreateTaskPushNotificationConfig(
            a2a_pb2.TaskPushNotificationConfig(task_id=task.id, id=name, url="http://h.example/")
        )
    request = a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id, page_token=token)
    assert await _refused(harness.stub.ListTaskPushNotificationConfigs(request)) == ["page_token"]


async def test_a_config_that_cannot_be_sent_is_given_up_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Defence in depth: whatever a delivery raises, the webhook is given up, never silently."""
    webhooks = dispatcher()
    webhooks.configs.put(
        a2a_pb2.TaskPushNotificationConfig(task_id="t1", id="c1", url="http://127.0.0.1:99999/")
    )
    event = a2a_pb2.StreamResponse(
        status_update=a2a_pb2.TaskStatusUpdateEvent(
            task_id="t1", status=a2a_pb2.TaskStatus(state=a2a_pb2.TASK_STATE_WORKING)
        )
    )
    try:
        with caplog.at_level(logging.WARNING):
            webhooks.observe("t1", event)
            await asyncio.wait_for(webhooks.idle(), 10)
        assert "gave up webhook c1" in caplog.text
    finally:
        await webhooks.close()


class LoopbackTwoIsPublic(WebhookGuard):
    """The SSRF guard, with 127.0.0.2 taken for a public address (a receiver there plays one)."""

    def forbidden(self, ip: IPAddress) -> str | None:
        return None if str(ip) == "127.0.0.2" else super().forbidden(ip)


async def _pair(tls: ssl.SSLContext | None = None) -> tuple[Receiver, Receiver]:
    """A receiver on 127.0.0.2 ("public") and another on 127.0.0.1 at the same port."""
    try:
        checked = await Receiver(host="127.0.0.2", tls=tls).start()
    except OSError:
        pytest.skip("127.0.0.2 is not a local address on this machine")
    return checked, await Receiver(host="127.0.0.1", port=checked.port, tls=tls).start()


def _rebinding_dispatcher(
    asked: list[str], ssl_context: ssl.SSLContext | None = None
) -> WebhookDispatcher:
    """The guard's DNS answers 127.0.0.2 for every name; the system's says 127.0.0.1."""

    async def resolve(host: str) -> list[str]:
        asked.append(host)
        return ["127.0.0.2"]

    guard = LoopbackTwoIsPublic(allow_private_targets=False, resolver=resolve)
    policy = DeliveryPolicy(max_attempts=2, timeout=5.0)
    return WebhookDispatcher(
        PushConfigStore(), policy, guard=guard, ssl_context=ssl_context, sleep=_no_sleep
    )


async def test_the_post_connects_to_the_address_the_guard_checked(make_server: Factory) -> None:
    checked, other = await _pair()
    try:
        asked: list[str] = []
        webhooks = _rebinding_dispatcher(asked)
        harness = await make_server(webhooks=webhooks)
        request = send_request("hello")
        request.configuration.task_push_notification_config.url = (
            f"http://localhost:{checked.port}/hook"
        )
        await harness.stub.SendMessage(request)
        events = events_of(await checked.wait_for(3))
        assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
        await asyncio.wait_for(webhooks.idle(), 10)
        assert other.attempts == 0  # a second resolution (the system's) would have led here
        assert asked == ["localhost"] * 4  # registration, then once per POST
        assert checked.received[0].headers["Host"] == f"localhost:{checked.port}"
    finally:
        await checked.stop()
        await other.stop()


def _server_tls(authority: Authority) -> ssl.SSLContext:
    """A certificate for localhost and 127.0.0.1 (not 127.0.0.2)."""
    pem = authority.issue("localhost", server=True)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with tempfile.TemporaryDirectory() as folder:
        cert, key = Path(folder, "cert.pem"), Path(folder, "key.pem")
        cert.write_bytes(pem.certificate)
        key.write_bytes(pem.key)
        context.load_cert_chain(cert, key)
    return context


async def test_https_to_the_checked_address_verifies_the_host_name(make_server: Factory) -> None:
    authority = Authority()
    client_tls = ssl.create_default_context(cadata=authority.certificate.decode())
    checked, other = await _pair(_server_tls(authority))
    try:
        webhooks = _rebinding_dispatcher([], client_tls)
        harness = await make_server(webhooks=webhooks)
        request = send_request("hello")
        request.configuration.task_push_notification_config.url = (
            f"https://localhost:{checked.port}/hook"
        )
        await harness.stub.SendMessage(request)
        events = events_of(await checked.wait_for(3))
        assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
        assert other.attempts == 0
    finally:
        await checked.stop()
        await other.stop()


async def test_a_hanging_webhook_does_not_stretch_shutdown_past_the_grace(
    make_server: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    gate = asyncio.Event()  # held shut: the receiver accepts every POST and never answers
    receiver = await Receiver(gate=gate).start()
    try:
        webhooks = dispatcher(timeout=60.0, max_attempts=1)
        harness = await make_server(webhooks=webhooks)
        configuration = a2a_pb2.SendMessageConfiguration(return_immediately=True)
        request = send_request("slow 30", configuration=configuration)
        request.configuration.task_push_notification_config.url = receiver.url
        await harness.stub.SendMessage(request)
        await receiver.wait_for_attempts(1)
        grace = 1.0
        with caplog.at_level(logging.WARNING):
            # An upper bound, not a speed test: the agent takes the whole grace, and the
            # webhooks get only what is left of it (there was a second grace for them).
            await asyncio.wait_for(harness.running.stop(grace), timeout=grace * 1.5 + 0.1)
        assert "undelivered at shutdown" in caplog.text
    finally:
        gate.set()
        await receiver.stop()


class TwoSteps:
    """WORKING; on `first`, one artifact; on `second`, COMPLETED."""

    def __init__(self) -> None:
        self.first = asyncio.Event()
        self.second = asyncio.Event()

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        await events.working()
        await self.first.wait()
        await events.add_artifact([a2a_pb2.Part(text="one")])
        await self.second.wait()
        await events.complete()


async def test_a_replaced_config_is_delivered_as_replaced(make_server: Factory) -> None:
    old, new = await Receiver().start(), await Receiver().start()
    try:
        agent = TwoSteps()
        harness = await make_server(agent=agent, webhooks=dispatcher())
        task = await _start_gated(harness)

        async def register(url: str, token: str) -> None:
            await harness.stub.CreateTaskPushNotificationConfig(
                a2a_pb2.TaskPushNotificationConfig(task_id=task.id, id="x", url=url, token=token)
            )

        await register(old.url, "old")
        agent.first.set()
        await old.wait_for(1)
        await register(new.url, "new")
        agent.second.set()
        received = await new.wait_for(1)
        assert received[0].headers["X-A2A-Notification-Token"] == "new"
        assert events_of(received)[0].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
        assert len(old.received) == 1
    finally:
        await old.stop()
        await new.stop()


async def test_private_targets_are_called_by_name_when_allowed(
    make_server: Factory, receiver: Receiver
) -> None:
    harness = await make_server(webhooks=dispatcher())  # allow_private_targets: nothing pinned
    request = send_request("hello")
    request.configuration.task_push_notification_config.url = (
        f"http://localhost:{receiver.port}/hook"
    )
    await harness.stub.SendMessage(request)
    events = events_of(await receiver.wait_for(3))
    assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
