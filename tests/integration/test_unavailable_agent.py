"""An agent that says "not now, try again" by raising ServiceUnavailableError (server/agent.py):
on every binding the caller gets UNAVAILABLE, retryable, with the agent's RetryInfo; the
message was not taken, so sending it again (the same message_id) runs the agent again; a task
the message made is removed, a task it answered waits for the answer again; our client retries
within its policy, and the CLI exits 13 once its retries are spent."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from a2a_grpc.client import A2AClient, Backoff, RetryPolicy
from a2a_grpc.client.card import CardResolver
from a2a_grpc.client.messages import user_message
from a2a_grpc.core.errors import ServiceUnavailableError
from a2a_grpc.core.exit_codes import AGENT_BUSY
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from tests.integration.bindings import Binding, CallError
from tests.integration.conftest import Factory, Harness, collect, send_request
from tests.integration.test_bindings import Start, over
from tests.integration.test_client_cli import run_process

__all__ = ["over"]

RETRY_DELAY = 2.5
DOWN = "the weather service is down"
BINDINGS = ("grpc", "jsonrpc", "http+json")


class NotNow:
    """Raises ServiceUnavailableError (retry in RETRY_DELAY s) on its first `refusals` runs,
    after `before` events of its own (1: WORKING; 2: WORKING and a "draft" artifact), then
    works: COMPLETED with a "result" artifact. A message "ask" starts a task that asks which
    one first (that run refuses nothing); its answer is worked on like any message."""

    def __init__(self, refusals: int = 1, before: int = 0) -> None:
        self.refusals = refusals
        self.before = before
        self.runs = 0
        """Runs that worked on a message (the question's run aside)."""

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        if context.task is None and context.text() == "ask":
            await events.require_input("which one?")
            return
        self.runs += 1
        if self.before >= 1:
            await events.working("looking it up")
        if self.before >= 2:
            await events.add_artifact([a2a_pb2.Part(text="draft")], name="draft")
        if self.refusals:
            self.refusals -= 1
            raise ServiceUnavailableError(DOWN, retry_delay=RETRY_DELAY)
        await events.add_artifact([a2a_pb2.Part(text="sunny")], name="result")
        await events.complete("done")


def assert_unavailable(error: CallError, binding: Binding) -> None:
    """UNAVAILABLE as each binding says it (core/errors.py), with the agent's words and its
    RetryInfo."""
    assert error.reason == "UNAVAILABLE"
    assert DOWN in error.message
    assert error.retry_delay == RETRY_DELAY
    if binding.name == "grpc":
        assert error.grpc_code == "UNAVAILABLE"
    elif binding.name == "jsonrpc":
        assert error.jsonrpc_code == -32000
    else:
        assert error.http_status == 503 and error.grpc_code == "UNAVAILABLE"
    info = [d for d in error.details if d["@type"].endswith("ErrorInfo")]
    assert binding.name == "grpc" or info[0]["metadata"]["retryable"] == "true"


def describe(events: list[a2a_pb2.StreamResponse]) -> list[str]:
    """States by name, artifacts by theirs."""
    return [
        event.artifact_update.artifact.name
        if event.HasField("artifact_update")
        else a2a_pb2.TaskState.Name(event.status_update.status.state).removeprefix("TASK_STATE_")
        for event in events
    ]


async def stored(harness: Harness) -> list[a2a_pb2.Task]:
    listed = await harness.stub.ListTasks(a2a_pb2.ListTasksRequest(include_artifacts=True))
    return list(listed.tasks)


async def test_unavailable_before_any_event_stores_nothing_and_a_resend_runs_again(
    over: Start,
) -> None:
    agent = NotNow()
    harness, binding = await over(agent)
    request = send_request("weather in Paris")
    with pytest.raises(CallError) as refused:
        await binding.call("SendMessage", request)
    assert_unavailable(refused.value, binding)
    assert await stored(harness) == []
    again = await binding.call("SendMessage", request)  # the same message_id
    assert isinstance(again, a2a_pb2.SendMessageResponse)
    assert again.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert agent.runs == 2
    assert [task.id for task in await stored(harness)] == [again.task.id]


async def test_a_task_the_message_made_is_removed_and_its_stream_ends_unavailable(
    over: Start,
) -> None:
    agent = NotNow(before=2)
    harness, binding = await over(agent)
    request = send_request("weather in Paris")
    events: list[a2a_pb2.StreamResponse] = []
    with pytest.raises(CallError) as refused:
        async for event in binding.stream("SendStreamingMessage", request):
            events.append(event)
    assert_unavailable(refused.value, binding)
    kinds = [event.WhichOneof("payload") for event in events]
    assert kinds == ["task", "status_update", "artifact_update"]
    removed = events[0].task.id
    with pytest.raises(CallError) as gone:
        await binding.call("GetTask", a2a_pb2.GetTaskRequest(id=removed))
    assert gone.value.reason == "TASK_NOT_FOUND"
    assert await stored(harness) == []
    resent = [event async for event in binding.stream("SendStreamingMessage", request)]
    assert resent[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
    (task,) = await stored(harness)
    assert task.id != removed and [a.name for a in task.artifacts] == ["draft", "result"]
    assert agent.runs == 2


async def test_an_answer_not_taken_leaves_the_task_waiting_with_what_it_had(over: Start) -> None:
    agent = NotNow(before=2)
    harness, binding = await over(agent)
    asked = await binding.call("SendMessage", send_request("ask"))
    assert isinstance(asked, a2a_pb2.SendMessageResponse)
    task_id = asked.task.id
    subscriber = harness.stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=task_id))
    assert (await subscriber.read()).task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    answer = send_request("Paris", task_id=task_id)
    with pytest.raises(CallError) as refused:
        await binding.call("SendMessage", answer)
    assert_unavailable(refused.value, binding)
    waiting = await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id))
    assert waiting.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    assert DOWN in waiting.status.message.parts[0].text
    assert [a.name for a in waiting.artifacts] == ["draft"]  # what the run recorded stays
    assert answer.message.message_id in [message.message_id for message in waiting.history]
    done = await binding.call("SendMessage", answer)  # the same answer again
    assert isinstance(done, a2a_pb2.SendMessageResponse)
    assert done.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert agent.runs == 2
    # A subscriber stayed on the task through the answer that was not taken, and on.
    assert describe(await collect(subscriber)) == [
        "SUBMITTED", "WORKING", "draft", "INPUT_REQUIRED",
        "SUBMITTED", "WORKING", "draft", "result", "COMPLETED",
    ]  # fmt: skip


async def test_a_continuation_stream_ends_unavailable_and_the_task_waits(over: Start) -> None:
    agent = NotNow(before=1)
    harness, binding = await over(agent)
    asked = await binding.call("SendMessage", send_request("ask"))
    assert isinstance(asked, a2a_pb2.SendMessageResponse)
    answer = send_request("Paris", task_id=asked.task.id)
    events: list[a2a_pb2.StreamResponse] = []
    with pytest.raises(CallError) as refused:
        async for event in binding.stream("SendStreamingMessage", answer):
            events.append(event)
    assert_unavailable(refused.value, binding)
    assert events[0].task.status.state == a2a_pb2.TASK_STATE_SUBMITTED
    assert [e.status_update.status.state for e in events[1:]] == [a2a_pb2.TASK_STATE_WORKING]
    waiting = await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id=asked.task.id))
    assert waiting.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    resent = [event async for event in binding.stream("SendStreamingMessage", answer)]
    assert resent[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


@pytest.fixture(params=BINDINGS)
async def client_for(request: pytest.FixtureRequest, make_server: Factory) -> AsyncIterator[Any]:
    """Starts a server with an agent and opens our client on the binding under test, with a
    backoff whose sleeps are recorded (and not slept)."""
    clients: list[A2AClient] = []

    async def start(agent: Any, **options: Any) -> tuple[A2AClient, list[float]]:
        harness = await make_server(agent, http_port=0)
        sleeps: list[float] = []

        async def sleep(seconds: float) -> None:
            sleeps.append(seconds)

        backoff = Backoff(sleep=sleep)
        if request.param == "grpc":
            client = A2AClient.connect(harness.running.address, backoff=backoff, **options)
        else:
            assert harness.running.card_url is not None
            async with CardResolver() as resolver:
                card = await resolver.get(harness.running.card_url)
            client = A2AClient.for_card(
                card, transports=(request.param,), backoff=backoff, **options
            )
        clients.append(client)
        return client, sleeps

    yield start
    for client in clients:
        await client.close()


async def test_our_client_sends_again_after_the_agent_s_retry_delay(client_for: Any) -> None:
    agent = NotNow(refusals=2)
    client, sleeps = await client_for(agent)
    task = await client.send_message(user_message("weather in Paris"))
    assert isinstance(task, a2a_pb2.Task) and task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert agent.runs == 3
    assert len(sleeps) == 2 and min(sleeps) >= RETRY_DELAY


async def test_our_client_gives_up_within_its_policy(client_for: Any) -> None:
    agent = NotNow(refusals=10)
    client, sleeps = await client_for(agent, retry=RetryPolicy(max_attempts=3))
    with pytest.raises(ServiceUnavailableError) as refused:
        await client.send_message(user_message("weather in Paris"))
    assert refused.value.retryable and refused.value.retry_delay == RETRY_DELAY
    assert agent.runs == 3 and len(sleeps) == 2


async def test_our_client_streams_the_task_of_the_message_sent_again(client_for: Any) -> None:
    """The stream of a task the agent started and then could not finish ends UNAVAILABLE; our
    client sends the message again and streams the new run's task."""
    agent = NotNow(before=2)
    client, sleeps = await client_for(agent)
    items = [item async for item in client.send_streaming_message(user_message("weather"))]
    first_task = items[0][0].task.id
    final = items[-1][1]
    assert final.task is not None and final.task.id != first_task
    assert final.state == a2a_pb2.TASK_STATE_COMPLETED
    assert [a.name for a in final.task.artifacts] == ["draft", "result"]
    assert agent.runs == 2 and len(sleeps) == 1 and sleeps[0] >= RETRY_DELAY


async def test_the_cli_exits_13_once_its_retries_are_spent(make_server: Factory) -> None:
    agent = NotNow(refusals=100)
    harness = await make_server(agent)
    code, out, err = await run_process("send", harness.running.address, "weather in Paris")
    assert code == AGENT_BUSY == 13, err
    assert DOWN in err and out == ""
    assert agent.runs == 4  # the command's own attempts (client/cli.py SEND_RETRY)


async def test_the_audit_trail_records_the_message_not_taken_then_taken(
    make_server: Factory, tmp_path: Path
) -> None:
    log = tmp_path / "audit.jsonl"
    harness = await make_server(NotNow(), audit_log=str(log))
    request = send_request("weather in Paris")
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await harness.stub.SendMessage(request)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    done = (await harness.stub.SendMessage(request)).task
    await harness.running.stop(0)  # flushes the trail
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    mine = [row for row in rows if row["message_id"] == request.message.message_id]
    assert [(row["kind"], row["outcome"]) for row in mine] == [
        ("request", "UNAVAILABLE"),
        ("outcome", "UNAVAILABLE"),
        ("request", "OK"),
        ("outcome", "TASK_STATE_COMPLETED"),
    ]
    assert mine[1]["task_id"] != done.id  # the task of the run that did not take it
