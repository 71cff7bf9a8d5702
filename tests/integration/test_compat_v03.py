"""A2A 0.3 callers (`a2a.v1.A2AService`) on the same port as 1.0, over real channels."""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import struct_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from a2a_grpc.core import status
from a2a_grpc.core import v03 as translate
from a2a_grpc.core.budget import BUDGET_EXTENSION
from a2a_grpc.generated import a2a_pb2, a2a_v03_pb2, a2a_v03_pb2_grpc
from a2a_grpc.server.agent import RequestContext, TaskEvents
from a2a_grpc.server.app import StartupError
from a2a_grpc.server.card import demo_card
from tests.integration.conftest import VERSION, Factory, Harness, Held, send_request
from tests.integration.sdk_v03_task_reader import read_with_sdk
from tests.integration.test_server_push import Gated, dispatcher, events_of
from tests.integration.webhook_receiver import Receiver

V03 = (("a2a-version", "0.3"),)


def v03_stub(harness: Harness) -> a2a_v03_pb2_grpc.A2AServiceStub:
    return a2a_v03_pb2_grpc.A2AServiceStub(harness.channel)


def v03_send(text: str = "hello", **configuration: Any) -> a2a_v03_pb2.SendMessageRequest:
    request = a2a_v03_pb2.SendMessageRequest(
        request=a2a_v03_pb2.Message(
            message_id=str(uuid.uuid4()),
            role=a2a_v03_pb2.ROLE_USER,
            content=[a2a_v03_pb2.Part(text=text)],
        )
    )
    if configuration:
        request.configuration.CopyFrom(a2a_v03_pb2.SendMessageConfiguration(**configuration))
    return request


def reason_of(error: grpc.aio.AioRpcError) -> str:
    """The ErrorInfo reason of a 0.3 error, checking the 0.3 message convention on the way."""
    details = error.details() or ""
    name, _, text = details.partition(": ")
    assert name.endswith("Error") and text, details
    decoded = status.decode(error.code(), details, error.trailing_metadata())
    assert decoded is not None, details
    assert type(decoded).__name__ == name
    return decoded.reason


async def collect(stream: Any) -> list[a2a_v03_pb2.StreamResponse]:
    events = []
    while (event := await stream.read()) is not grpc.aio.EOF:
        events.append(event)
    return events


# -- send, get, cancel: one set of tasks for both versions ------------------------------------


async def test_a_blocking_send_returns_the_finished_task_in_0_3_shape(demo: Harness) -> None:
    reply = await v03_stub(demo).SendMessage(v03_send("hello"), metadata=V03)
    task = reply.task
    assert task.status.state == a2a_v03_pb2.TASK_STATE_COMPLETED
    assert [p.text for p in task.artifacts[0].parts] == ["hello"]
    assert task.history[0].content[0].text == "hello"
    # the same task, read by a 1.0 caller
    seen = await demo.stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=VERSION)
    assert seen.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert seen.context_id == task.context_id
    assert seen.artifacts[0].parts[0].text == "hello"


async def test_blocking_false_returns_at_once(make_server: Factory) -> None:
    agent = Held()
    harness = await make_server(agent=agent)
    reply = await v03_stub(harness).SendMessage(v03_send("x", blocking=False))
    assert reply.task.status.state in (
        a2a_v03_pb2.TASK_STATE_SUBMITTED,
        a2a_v03_pb2.TASK_STATE_WORKING,
    )
    agent.go.set()
    # a configuration with blocking true waits, as does no configuration at all
    done = await v03_stub(harness).SendMessage(v03_send("y", blocking=True))
    assert done.task.status.state == a2a_v03_pb2.TASK_STATE_COMPLETED


async def test_a_1_0_task_is_read_and_canceled_over_0_3(make_server: Factory) -> None:
    agent = Held()
    harness = await make_server(agent=agent)
    request = send_request("hold")
    request.configuration.return_immediately = True
    task = (await harness.stub.SendMessage(request, metadata=VERSION)).task
    await agent.entered.wait()
    stub = v03_stub(harness)
    seen = await stub.GetTask(a2a_v03_pb2.GetTaskRequest(name=f"tasks/{task.id}"))
    assert seen.status.state == a2a_v03_pb2.TASK_STATE_WORKING
    canceled = await stub.CancelTask(a2a_v03_pb2.CancelTaskRequest(name=f"tasks/{task.id}"))
    assert canceled.status.state == a2a_v03_pb2.TASK_STATE_CANCELLED
    again = await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=VERSION)
    assert again.status.state == a2a_pb2.TASK_STATE_CANCELED
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.CancelTask(a2a_v03_pb2.CancelTaskRequest(name=f"tasks/{task.id}"))
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert reason_of(caught.value) == "TASK_NOT_CANCELABLE"


async def test_history_length_zero_means_no_limit(demo: Harness) -> None:
    stub = v03_stub(demo)
    task = (await stub.SendMessage(v03_send("ask"))).task  # INPUT_REQUIRED: 2 messages so far
    answered = await stub.SendMessage(
        a2a_v03_pb2.SendMessageRequest(
            request=a2a_v03_pb2.Message(
                message_id=str(uuid.uuid4()),
                role=a2a_v03_pb2.ROLE_USER,
                task_id=task.id,
                context_id=task.context_id,
                content=[a2a_v03_pb2.Part(text="answer")],
            )
        )
    )
    everything = await stub.GetTask(a2a_v03_pb2.GetTaskRequest(name=f"tasks/{task.id}"))
    assert len(everything.history) == len(answered.task.history) >= 3
    one = await stub.GetTask(a2a_v03_pb2.GetTaskRequest(name=f"tasks/{task.id}", history_length=1))
    assert len(one.history) == 1


async def test_file_and_data_parts_travel_both_ways(demo: Harness) -> None:
    data = struct_pb2.Struct()
    data.update({"k": [1, "two"]})
    request = v03_send("hello")
    message = request.request
    message.content.add().file.CopyFrom(
        a2a_v03_pb2.FilePart(file_with_bytes=b"\x00\x01", mime_type="image/png", name="a.png")
    )
    message.content.add().file.CopyFrom(
        a2a_v03_pb2.FilePart(file_with_uri="https://example.com/x", mime_type="text/plain")
    )
    message.content.add().data.data.CopyFrom(data)
    task = (await v03_stub(demo).SendMessage(request)).task
    stored = await demo.stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=VERSION)
    parts = stored.history[0].parts
    assert (parts[1].raw, parts[1].media_type, parts[1].filename) == (
        b"\x00\x01",
        "image/png",
        "a.png",
    )
    assert (parts[2].url, parts[2].media_type) == ("https://example.com/x", "text/plain")
    assert parts[3].data.struct_value == data
    echoed = [p for artifact in task.artifacts for p in artifact.parts]
    assert echoed[1].file.file_with_bytes == b"\x00\x01"
    assert echoed[2].file.file_with_uri == "https://example.com/x"
    assert echoed[3].data.data == data


# -- streams --------------------------------------------------------------------------------


async def test_a_stream_ends_with_one_final_status_update(demo: Harness) -> None:
    events = await collect(v03_stub(demo).SendStreamingMessage(v03_send("chunks 3")))
    assert events[0].WhichOneof("payload") == "task"
    kinds = [e.WhichOneof("payload") for e in events]
    assert kinds.count("artifact_update") == 3
    updates = [e.status_update for e in events if e.HasField("status_update")]
    assert updates[-1].status.state == a2a_v03_pb2.TASK_STATE_COMPLETED
    assert [u.final for u in updates] == [False] * (len(updates) - 1) + [True]


async def test_a_direct_reply_streams_one_message(demo: Harness) -> None:
    events = await collect(v03_stub(demo).SendStreamingMessage(v03_send("reply")))
    assert [e.WhichOneof("payload") for e in events] == ["msg"]
    assert events[0].msg.role == a2a_v03_pb2.ROLE_AGENT


async def test_an_interrupted_stream_closes_without_final(demo: Harness) -> None:
    events = await collect(v03_stub(demo).SendStreamingMessage(v03_send("ask")))
    last = events[-1].status_update
    assert last.status.state == a2a_v03_pb2.TASK_STATE_INPUT_REQUIRED
    assert not last.final


async def test_task_subscription_follows_a_task_to_its_end(make_server: Factory) -> None:
    agent = Held()
    harness = await make_server(agent=agent)
    stub = v03_stub(harness)
    task = (await stub.SendMessage(v03_send("x", blocking=False))).task
    await agent.entered.wait()
    stream = stub.TaskSubscription(a2a_v03_pb2.TaskSubscriptionRequest(name=f"tasks/{task.id}"))
    first = await stream.read()
    assert first.task.id == task.id
    agent.go.set()
    rest = await collect(stream)
    assert rest[-1].status_update.status.state == a2a_v03_pb2.TASK_STATE_COMPLETED
    assert rest[-1].status_update.final


# -- errors, names, versions ----------------------------------------------------------------


async def test_an_unknown_task_is_a_named_task_not_found(demo: Harness) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await v03_stub(demo).GetTask(a2a_v03_pb2.GetTaskRequest(name="tasks/nope"))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert (caught.value.details() or "").startswith("TaskNotFoundError: task nope not found")
    assert reason_of(caught.value) == "TASK_NOT_FOUND"


@pytest.mark.parametrize(
    "name", ["", "nope", "tasks/", "task/x", "/tasks/x", "tasks/x/", "tasks/x/y", "tasks//x"]
)
async def test_a_malformed_task_name_is_invalid_argument(demo: Harness, name: str) -> None:
    stub = v03_stub(demo)
    calls = [
        stub.GetTask(a2a_v03_pb2.GetTaskRequest(name=name)),
        stub.CancelTask(a2a_v03_pb2.CancelTaskRequest(name=name)),
        collect(stub.TaskSubscription(a2a_v03_pb2.TaskSubscriptionRequest(name=name))),
        stub.ListTaskPushNotificationConfig(
            a2a_v03_pb2.ListTaskPushNotificationConfigRequest(parent=name)
        ),
    ]
    for call in calls:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert reason_of(caught.value) == "INVALID_PARAMS"
        assert "tasks/{id}" in (caught.value.details() or "")


@pytest.mark.parametrize(
    "name",
    [
        "tasks/x",
        "tasks/x/pushNotificationConfigs",
        "tasks/x/pushNotificationConfigs/",
        "tasks/x/configs/c",
        "tasks/x/pushNotificationConfigs/c/d",
    ],
)
async def test_a_malformed_config_name_is_invalid_argument(demo: Harness, name: str) -> None:
    stub = v03_stub(demo)
    for call in (
        stub.GetTaskPushNotificationConfig(
            a2a_v03_pb2.GetTaskPushNotificationConfigRequest(name=name)
        ),
        stub.DeleteTaskPushNotificationConfig(
            a2a_v03_pb2.DeleteTaskPushNotificationConfigRequest(name=name)
        ),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "pushNotificationConfigs/{config}" in (caught.value.details() or "")


async def test_validation_is_the_1_0_validation(demo: Harness) -> None:
    request = v03_send("hello")
    request.request.role = a2a_v03_pb2.ROLE_AGENT
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await v03_stub(demo).SendMessage(request)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert reason_of(caught.value) == "INVALID_PARAMS"
    assert "ROLE_USER" in (caught.value.details() or "")
    empty = v03_send("hello")
    empty.request.content.add()  # a part with none of text, file, data
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await v03_stub(demo).SendMessage(empty)
    assert "message.content[1]" in (caught.value.details() or "")  # the 0.3 field's name
    decoded = status.decode(
        caught.value.code(), caught.value.details() or "", caught.value.trailing_metadata()
    )
    assert decoded is not None
    assert [v.field for v in decoded.field_violations] == ["message.content[1]"]


@pytest.mark.parametrize("version", ["0.3", "0.3.2", " ", None])
async def test_0_3_or_no_version_is_served(make_server: Factory, version: str | None) -> None:
    harness = await make_server(strict_version=True)  # strictness is about 1.0's service
    metadata = () if version is None else (("a2a-version", version),)
    reply = await v03_stub(harness).SendMessage(v03_send("hello"), metadata=metadata)
    assert reply.task.status.state == a2a_v03_pb2.TASK_STATE_COMPLETED


@pytest.mark.parametrize("version", ["1.0", "0.2", "garbage"])
async def test_another_version_is_not_supported(demo: Harness, version: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await v03_stub(demo).SendMessage(v03_send("hello"), metadata=(("a2a-version", version),))
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert reason_of(caught.value) == "VERSION_NOT_SUPPORTED"
    assert "lf.a2a.v1.A2AService" in (caught.value.details() or "")


class NeedsBudget:
    """Completes at once; the card marks the budget extension required."""

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        await events.complete()


@pytest.mark.parametrize("key", ["x-a2a-extensions", "a2a-extensions"])
async def test_both_extension_keys_are_read_and_echoed(make_server: Factory, key: str) -> None:
    card = demo_card("127.0.0.1:0")
    card.capabilities.extensions.add(uri=BUDGET_EXTENSION, required=True)
    harness = await make_server(agent=NeedsBudget(), card=card)
    stub = v03_stub(harness)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.SendMessage(v03_send("hello"))
    assert reason_of(caught.value) == "EXTENSION_SUPPORT_REQUIRED"
    call = stub.SendMessage(v03_send("hello"), metadata=((key, BUDGET_EXTENSION),))
    assert (await call).task.status.state == a2a_v03_pb2.TASK_STATE_COMPLETED
    echoed = dict(await call.initial_metadata())
    assert echoed["x-a2a-extensions"] == echoed["a2a-extensions"] == BUDGET_EXTENSION


async def test_garbage_bytes_are_invalid_argument_never_unknown(demo: Harness) -> None:
    rng = random.Random(3)
    methods = ("SendMessage", "GetTask", "CancelTask", "CreateTaskPushNotificationConfig")
    malformed = 0
    for index in range(40):
        call = demo.channel.unary_unary(
            f"/a2a.v1.A2AService/{methods[index % len(methods)]}",
            request_serializer=None,
            response_deserializer=None,
        )
        try:
            await call(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))), timeout=5)
        except grpc.aio.AioRpcError as error:
            assert error.code() in (
                grpc.StatusCode.INVALID_ARGUMENT,
                grpc.StatusCode.NOT_FOUND,
                grpc.StatusCode.FAILED_PRECONDITION,
            ), error
            if reason_of(error) == "INVALID_REQUEST":
                malformed += 1
                assert "a2a.v1." in (error.details() or "")
    assert malformed > 5
    reply = await v03_stub(demo).SendMessage(v03_send("still here"))
    assert reply.task.status.state == a2a_v03_pb2.TASK_STATE_COMPLETED


# -- push configs ---------------------------------------------------------------------------


async def test_push_configs_over_0_3(make_server: Factory) -> None:
    agent = Held()
    harness = await make_server(agent=agent, webhooks=dispatcher())
    stub = v03_stub(harness)
    task = (await stub.SendMessage(v03_send("x", blocking=False))).task
    parent = f"tasks/{task.id}"
    config = a2a_v03_pb2.TaskPushNotificationConfig(
        push_notification_config=a2a_v03_pb2.PushNotificationConfig(
            url="http://127.0.0.1:9/hook",
            token="t",
            authentication=a2a_v03_pb2.AuthenticationInfo(schemes=["Bearer"], credentials="c"),
        )
    )
    made = await stub.CreateTaskPushNotificationConfig(
        a2a_v03_pb2.CreateTaskPushNotificationConfigRequest(
            parent=parent, config_id="c1", config=config
        )
    )
    assert made.name == f"{parent}/pushNotificationConfigs/c1"
    assert made.push_notification_config.id == "c1"
    assert list(made.push_notification_config.authentication.schemes) == ["Bearer"]
    assert made.push_notification_config.authentication.credentials == ""  # write-only
    got = await stub.GetTaskPushNotificationConfig(
        a2a_v03_pb2.GetTaskPushNotificationConfigRequest(name=made.name)
    )
    assert got == made
    seen = await harness.stub.ListTaskPushNotificationConfigs(
        a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id), metadata=VERSION
    )
    assert [(c.id, c.url, c.authentication.scheme) for c in seen.configs] == [
        ("c1", "http://127.0.0.1:9/hook", "Bearer")
    ]
    listed = await stub.ListTaskPushNotificationConfig(
        a2a_v03_pb2.ListTaskPushNotificationConfigRequest(parent=parent)
    )
    assert list(listed.configs) == [made]
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.CreateTaskPushNotificationConfig(
            a2a_v03_pb2.CreateTaskPushNotificationConfigRequest(
                parent=parent,
                config_id="c2",
                config=a2a_v03_pb2.TaskPushNotificationConfig(
                    push_notification_config=a2a_v03_pb2.PushNotificationConfig(
                        id="c3", url="http://127.0.0.1:9/hook"
                    )
                ),
            )
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "config_id" in (caught.value.details() or "")
    await stub.DeleteTaskPushNotificationConfig(
        a2a_v03_pb2.DeleteTaskPushNotificationConfigRequest(name=made.name)
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.GetTaskPushNotificationConfig(
            a2a_v03_pb2.GetTaskPushNotificationConfigRequest(name=made.name)
        )
    assert reason_of(caught.value) == "TASK_NOT_FOUND"
    agent.go.set()


def v03_webhook(url: str, **fields: Any) -> a2a_v03_pb2.PushNotificationConfig:
    return a2a_v03_pb2.PushNotificationConfig(url=url, **fields)


def summary(task: dict[str, Any]) -> tuple[str, list[str]]:
    """A task as the SDK's 0.3 model read it: its state, and the texts of its artifacts."""
    texts = [p["text"] for a in task.get("artifacts", []) for p in a["parts"]]
    return task["status"]["state"], texts


async def test_a_0_3_webhook_is_sent_the_task_as_the_0_3_sdk_reads_it(
    make_server: Factory,
) -> None:
    """A config made through the 0.3 service gets the task in 0.3 JSON after every update (as
    the 0.3 SDKs' senders post it); a 1.0 config of the same task still gets StreamResponses."""
    agent = Gated()
    harness = await make_server(agent=agent, webhooks=dispatcher())
    old, new = await Receiver().start(), await Receiver().start()
    try:
        stub = v03_stub(harness)
        task = (await stub.SendMessage(v03_send("x", blocking=False))).task
        webhook = v03_webhook(
            old.url,
            token="tok-3",
            authentication=a2a_v03_pb2.AuthenticationInfo(schemes=["Bearer"], credentials="s"),
        )
        await stub.CreateTaskPushNotificationConfig(
            a2a_v03_pb2.CreateTaskPushNotificationConfigRequest(
                parent=f"tasks/{task.id}",
                config_id="c03",
                config=a2a_v03_pb2.TaskPushNotificationConfig(push_notification_config=webhook),
            )
        )
        await harness.stub.CreateTaskPushNotificationConfig(
            a2a_pb2.TaskPushNotificationConfig(task_id=task.id, id="c10", url=new.url),
            metadata=VERSION,
        )
        agent.go.set()
        received = await old.wait_for(4)
        tasks = read_with_sdk([delivery.body for delivery in received])
        assert [summary(t) for t in tasks] == [
            ("working", ["0"]),
            ("working", ["0", "1"]),
            ("working", ["0", "1", "2"]),
            ("completed", ["0", "1", "2"]),
        ]
        assert {(t["kind"], t["id"], t["contextId"]) for t in tasks} == {
            ("task", task.id, task.context_id)
        }
        assert tasks[-1]["history"][0]["parts"] == [{"kind": "text", "text": "x"}]
        headers = received[0].headers
        assert headers["Content-Type"] == "application/json"
        assert headers["Authorization"] == "Bearer s"
        assert headers["X-A2A-Notification-Token"] == "tok-3"
        events = events_of(await new.wait_for(4))  # the 1.0 webhook: unchanged
        assert [e.WhichOneof("payload") for e in events] == ["artifact_update"] * 3 + [
            "status_update"
        ]
        assert new.received[0].headers["Content-Type"] == "application/a2a+json"
    finally:
        await old.stop()
        await new.stop()


def test_every_part_and_state_of_a_0_3_task_body_reads_in_the_sdk_model() -> None:
    """`task_json` (the 0.3 webhook body) for each part kind and each state, parsed by the SDK."""
    task = a2a_pb2.Task(id="t", context_id="c")
    task.status.state = a2a_pb2.TASK_STATE_CANCELED
    task.status.timestamp.FromJsonString("2026-01-02T03:04:05Z")
    task.status.message.CopyFrom(
        a2a_pb2.Message(message_id="s", role=a2a_pb2.ROLE_AGENT, parts=[a2a_pb2.Part(text="bye")])
    )
    artifact = task.artifacts.add(artifact_id="a", name="out")
    artifact.parts.add(raw=b"\x00\x01", media_type="application/octet-stream", filename="f.bin")
    artifact.parts.add(url="https://a.example/f", media_type="text/plain")
    artifact.parts.add().data.struct_value.update({"k": [1, "v"]})
    artifact.parts.add().data.number_value = 3
    task.history.add(message_id="u", role=a2a_pb2.ROLE_USER).parts.add(text="hi")
    task.metadata.update({"m": True})
    bodies = [json.dumps(translate.task_json(task)).encode()]
    for state in a2a_pb2.TaskState.values():
        other = a2a_pb2.Task(id="t", context_id="c")
        other.status.state = state  # type: ignore[assignment]
        bodies.append(json.dumps(translate.task_json(other)).encode())
    first, *others = read_with_sdk(bodies)
    assert first["status"] == {
        "state": "canceled",
        "timestamp": "2026-01-02T03:04:05Z",
        "message": {
            "kind": "message",
            "messageId": "s",
            "role": "agent",
            "parts": [{"kind": "text", "text": "bye"}],
        },
    }
    assert first["artifacts"] == [
        {
            "artifactId": "a",
            "name": "out",
            "parts": [
                {
                    "kind": "file",
                    "file": {
                        "bytes": "AAE=",
                        "mimeType": "application/octet-stream",
                        "name": "f.bin",
                    },
                },
                {"kind": "file", "file": {"uri": "https://a.example/f", "mimeType": "text/plain"}},
                {"kind": "data", "data": {"k": [1, "v"]}},
                {"kind": "data", "data": {"value": 3}, "metadata": {"data_part_compat": True}},
            ],
        }
    ]
    assert first["history"] == [
        {
            "kind": "message",
            "messageId": "u",
            "role": "user",
            "parts": [{"kind": "text", "text": "hi"}],
        }
    ]
    assert first["metadata"] == {"m": True}
    assert [t["status"]["state"] for t in others] == [  # type: ignore[index]
        "unknown",
        "submitted",
        "working",
        "completed",
        "failed",
        "canceled",
        "input-required",
        "rejected",
        "auth-required",
    ]


async def test_an_inline_0_3_webhook_is_sent_0_3_tasks(make_server: Factory) -> None:
    agent = Gated()
    harness = await make_server(agent=agent, webhooks=dispatcher())
    receiver = await Receiver().start()
    try:
        inline = v03_webhook(receiver.url)
        await v03_stub(harness).SendMessage(v03_send("x", blocking=False, push_notification=inline))
        agent.go.set()
        # Registered before the run began, so WORKING too, then the three chunks and COMPLETED.
        tasks = read_with_sdk([delivery.body for delivery in await receiver.wait_for(5)])
        assert [summary(t)[0] for t in tasks] == ["working"] * 4 + ["completed"]
    finally:
        await receiver.stop()


async def test_a_config_reads_the_same_in_both_versions_and_a_replacement_sets_its_version(
    make_server: Factory,
) -> None:
    """The version is not part of the config: a 0.3 config read through 1.0 is the 1.0 config
    of the same fields, and the reverse. Replacing a config (same id) through the other service
    makes its webhook speak that service's version."""
    agent = Gated()
    harness = await make_server(agent=agent, webhooks=dispatcher())
    receiver = await Receiver().start()
    try:
        stub = v03_stub(harness)
        task = (await stub.SendMessage(v03_send("x", blocking=False))).task
        parent = f"tasks/{task.id}"
        made = await stub.CreateTaskPushNotificationConfig(
            a2a_v03_pb2.CreateTaskPushNotificationConfigRequest(
                parent=parent,
                config_id="c",
                config=a2a_v03_pb2.TaskPushNotificationConfig(
                    push_notification_config=v03_webhook(receiver.url, token="t")
                ),
            )
        )
        read = await harness.stub.GetTaskPushNotificationConfig(
            a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=task.id, id="c"),
            metadata=VERSION,
        )
        expected = a2a_pb2.TaskPushNotificationConfig(
            task_id=task.id, id="c", url=receiver.url, token="t"
        )
        assert read.SerializeToString(deterministic=True) == expected.SerializeToString(
            deterministic=True
        )
        replaced = await harness.stub.CreateTaskPushNotificationConfig(
            a2a_pb2.TaskPushNotificationConfig(
                task_id=task.id, id="c", url=receiver.url, token="t"
            ),
            metadata=VERSION,
        )
        assert replaced == read
        again = await stub.GetTaskPushNotificationConfig(
            a2a_v03_pb2.GetTaskPushNotificationConfigRequest(name=made.name)
        )
        assert again == made
        agent.go.set()
        events = events_of(await receiver.wait_for(4))  # replaced through 1.0: 1.0 bodies
        assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
    finally:
        await receiver.stop()


# -- the card, auth, health, reflection, --no-compat-03 -------------------------------------


async def test_get_agent_card_lists_the_0_3_interface(demo: Harness) -> None:
    card = await v03_stub(demo).GetAgentCard(a2a_v03_pb2.GetAgentCardRequest())
    address = f"127.0.0.1:{demo.running.port}"
    assert (card.url, card.preferred_transport, card.protocol_version) == (address, "GRPC", "0.3")
    assert [(i.url, i.transport) for i in card.additional_interfaces] == [(address, "GRPC")]
    assert card.name == "a2a-grpc demo agent"
    assert card.capabilities.streaming
    # the 1.0 card lists it too, after the 1.0 interfaces
    versions = [
        (i.protocol_binding, i.protocol_version)
        for i in demo.running.handler.card.supported_interfaces
    ]
    assert versions[0] == ("GRPC", "1.0") and versions[-1] == ("GRPC", "0.3")


async def test_get_agent_card_is_the_extended_card_for_an_authenticated_caller(
    make_server: Factory,
) -> None:
    extended = demo_card("127.0.0.1:0")
    extended.name = "the extended one"
    del extended.supported_interfaces[:]
    extended.capabilities.extended_agent_card = True
    public = demo_card("127.0.0.1:0")
    del public.supported_interfaces[:]
    public.capabilities.extended_agent_card = True
    harness = await make_server(card=public, extended_card=extended, tokens={"tok": "alice"})
    stub = v03_stub(harness)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.GetAgentCard(a2a_v03_pb2.GetAgentCardRequest())
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    card = await stub.GetAgentCard(
        a2a_v03_pb2.GetAgentCardRequest(), metadata=(("authorization", "Bearer tok"),)
    )
    assert card.name == "the extended one"
    assert card.supports_authenticated_extended_card
    assert card.protocol_version == "0.3"
    assert "bearer" in card.security_schemes


async def test_get_agent_card_keeps_the_extended_card_the_public_card_does_not_offer(
    make_server: Factory,
) -> None:
    """As 1.0's GetExtendedAgentCard refuses it, 0.3's GetAgentCard does not hand out an
    extended card the public card does not offer (capabilities.extended_agent_card off); and a
    server is not started with an extended card its public card does not offer."""
    extended = demo_card("127.0.0.1:0")
    extended.name = "the extended one"
    del extended.supported_interfaces[:]
    public = demo_card("127.0.0.1:0")
    public.name = "the public one"
    del public.supported_interfaces[:]
    public.capabilities.extended_agent_card = False
    with pytest.raises(StartupError, match=r"set capabilities\.extendedAgentCard to true"):
        await make_server(card=public, extended_card=extended, tokens={"tok": "alice"})
    harness = await make_server(card=public, tokens={"tok": "alice"})
    token = (("authorization", "Bearer tok"),)
    card = await v03_stub(harness).GetAgentCard(a2a_v03_pb2.GetAgentCardRequest(), metadata=token)
    assert card.name == "the public one"
    assert not card.supports_authenticated_extended_card
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await harness.stub.GetExtendedAgentCard(
            a2a_pb2.GetExtendedAgentCardRequest(), metadata=(*token, *VERSION)
        )
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION  # UnsupportedOperation


async def test_every_0_3_call_is_authenticated(make_server: Factory) -> None:
    harness = await make_server(tokens={"tok": "alice"})
    stub = v03_stub(harness)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.SendMessage(v03_send("hello"))
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert (caught.value.details() or "").startswith("UnauthenticatedError: ")
    token = (("authorization", "Bearer tok"),)
    task = (await stub.SendMessage(v03_send("hello"), metadata=token)).task
    # scoped to the caller, as over 1.0
    seen = await harness.stub.GetTask(
        a2a_pb2.GetTaskRequest(id=task.id), metadata=(*token, *VERSION)
    )
    assert seen.id == task.id


async def test_health_and_reflection_know_the_0_3_service(demo: Harness) -> None:
    health = health_pb2_grpc.HealthStub(demo.channel)
    reply = await health.Check(health_pb2.HealthCheckRequest(service="a2a.v1.A2AService"))
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    stub = reflection_pb2_grpc.ServerReflectionStub(demo.channel)
    requests = [
        reflection_pb2.ServerReflectionRequest(list_services=""),
        reflection_pb2.ServerReflectionRequest(
            file_containing_symbol="a2a.v1.A2AService.TaskSubscription"
        ),
    ]
    listed, method = [r async for r in stub.ServerReflectionInfo(iter(requests))]
    assert "a2a.v1.A2AService" in {s.name for s in listed.list_services_response.service}
    files = method.file_descriptor_response.file_descriptor_proto
    assert any(b"TaskSubscription" in f for f in files)


async def test_no_compat_03_turns_the_service_off(make_server: Factory) -> None:
    harness = await make_server(compat_03=False)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await v03_stub(harness).SendMessage(v03_send("hello"))
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
    versions = {i.protocol_version for i in harness.running.handler.card.supported_interfaces}
    assert versions == {"1.0"}
    health = health_pb2_grpc.HealthStub(harness.channel)
    with pytest.raises(grpc.aio.AioRpcError) as unknown:
        await health.Check(health_pb2.HealthCheckRequest(service="a2a.v1.A2AService"))
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND


async def test_the_drain_gate_refuses_0_3_calls_like_1_0_ones(make_server: Factory) -> None:
    harness = await make_server()
    task = (await v03_stub(harness).SendMessage(v03_send("x"))).task
    harness.running.gate.closed = True  # as at the end of a stop's grace
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await v03_stub(harness).GetTask(a2a_v03_pb2.GetTaskRequest(name=f"tasks/{task.id}"))
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "shutting down" in (caught.value.details() or "")


async def test_0_3_health_says_not_serving_once_a_stop_starts(make_server: Factory) -> None:
    harness = await make_server()
    watch = health_pb2_grpc.HealthStub(harness.channel).Watch(
        health_pb2.HealthCheckRequest(service="a2a.v1.A2AService")
    )
    assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
    stopping = asyncio.ensure_future(harness.running.stop(grace=5, drain_delay=3600))
    assert (await watch.read()).status == health_pb2.HealthCheckResponse.NOT_SERVING
    watch.cancel()  # an open Watch would hold the stop for its whole grace
    task = (await v03_stub(harness).SendMessage(v03_send("x"))).task  # served through the delay
    assert task.id
    harness.running.skip_drain_delay()
    await asyncio.wait_for(stopping, 10)


async def test_0_3_calls_are_audited_under_the_1_0_rpc(
    make_server: Factory, tmp_path: Path
) -> None:
    log = tmp_path / "audit.jsonl"
    harness = await make_server(audit_log=str(log))
    stub = v03_stub(harness)
    request = v03_send("hello")
    task = (await stub.SendMessage(request)).task
    with pytest.raises(grpc.aio.AioRpcError):
        await stub.GetTask(a2a_v03_pb2.GetTaskRequest(name="tasks/nope"))
    await harness.running.stop(0)  # flushes the trail
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    sent = next(r for r in rows if r["kind"] == "request" and r["method"] == "SendMessage")
    assert (sent["task_id"], sent["outcome"]) == (task.id, "OK")
    assert sent["message_id"] == request.request.message_id
    failed = next(r for r in rows if r["method"] == "GetTask")
    assert (failed["task_id"], failed["outcome"]) == ("nope", "NOT_FOUND")
