"""The demo agent's card describes every keyword it knows, and says which answer directly."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

import grpc
import httpx
import pytest
from google.protobuf import json_format

from a2a_grpc.core.budget import cost_of
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server import demo_agent
from tests.integration.conftest import VERSION, Factory, send_request


async def test_the_card_describes_each_keyword_and_which_answer_without_a_task(
    make_server: Factory,
) -> None:
    harness = await make_server(http_port=0)
    assert harness.running.card_url is not None
    async with httpx.AsyncClient() as http:
        served = (await http.get(harness.running.card_url)).json()
    card = json_format.ParseDict(served, a2a_pb2.AgentCard(), ignore_unknown_fields=True)

    # Every keyword the agent documents is a skill on its card, and nothing else is.
    documented = set(re.findall(r"^- `(\w+)", demo_agent.__doc__ or "", re.MULTILINE))
    keywords = {skill.id for skill in card.skills}
    assert keywords == documented | {"echo"}
    for keyword in documented:
        assert keyword in card.description

    # Walk the card: each skill's example answers as the card says, a direct message (and no
    # task) exactly for the skills that say so.
    direct = {skill.id for skill in card.skills if "direct message" in skill.description}
    assert direct == {"reply"}
    for keyword in direct:
        assert f"'{keyword}' answers with a direct message and creates no task" in card.description
    for skill in card.skills:
        assert skill.examples and skill.examples[0].split()[0] in (skill.id, "hello")
        stream = harness.stub.SendStreamingMessage(
            send_request(skill.examples[0]), metadata=VERSION
        )
        try:
            first = await stream.read()
        except grpc.aio.AioRpcError:
            first = None  # an agent that fails before its first event: no direct message
        stream.cancel()
        answered_directly = first is not None and first.HasField("message")
        assert answered_directly == (skill.id in direct), skill.id
        if answered_directly:
            assert first is not None
            page = await harness.stub.ListTasks(
                a2a_pb2.ListTasksRequest(context_id=first.message.context_id), metadata=VERSION
            )
            assert list(page.tasks) == []
        else:
            assert first is None or first.HasField("task"), skill.id


async def test_an_echo_the_caller_does_not_accept_says_so(make_server: Factory) -> None:
    harness = await make_server()
    request = send_request("hello")
    request.configuration.accepted_output_modes.append("application/json")
    task = (await harness.stub.SendMessage(request, metadata=VERSION)).task
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert task.artifacts[0].parts[0].text == "hello"  # delivered all the same (no spec error)
    note = task.status.message.parts[0].text
    assert note == (
        "note: the echo holds text/plain, which you do not accept (application/json): an echo "
        "can only send back what it got"
    )
    accepted = send_request("hello")
    accepted.configuration.accepted_output_modes.append("text/*")
    plain = (await harness.stub.SendMessage(accepted, metadata=VERSION)).task
    assert not plain.status.HasField("message")


async def test_an_answer_is_kept_in_the_history_and_the_artifact_and_only_quoted_after(
    make_server: Factory,
) -> None:
    harness = await make_server()
    asked = await harness.stub.SendMessage(send_request("ask"))
    answer = "word " * 10_000
    request = send_request(answer)
    request.message.task_id = asked.task.id
    done = (await harness.stub.SendMessage(request)).task
    assert done.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert done.history[2].parts[0].text == answer  # after "ask" and the question
    assert done.artifacts[0].parts[0].text == answer
    quoted = done.status.message.parts[0].text
    assert quoted == f"Thanks, got it: {answer[: demo_agent.QUOTE_CHARS]}…"
    assert len(done.SerializeToString()) < 2 * len(answer) + 2000  # two copies, not four


def _texts(parts: Iterable[a2a_pb2.Part]) -> list[str]:
    return [part.text for part in parts if part.HasField("text")]


async def test_every_skill_ends_with_an_artifact_or_says_why_not(make_server: Factory) -> None:
    """Each skill's own example, sent blocking (`slow` for no time): a task that completes holds
    an artifact; any other end states its reason in the status message."""
    harness = await make_server()
    for behaviour in demo_agent.BEHAVIOURS:
        text = "slow 0" if behaviour.keyword == "slow" else behaviour.example
        response = await harness.stub.SendMessage(send_request(text), metadata=VERSION)
        if behaviour.direct:
            assert _texts(response.message.parts), behaviour.keyword
            continue
        task = response.task
        if task.status.state == a2a_pb2.TASK_STATE_COMPLETED:
            assert task.artifacts and _texts(task.artifacts[-1].parts), behaviour.keyword
        else:
            assert _texts(task.status.message.parts), behaviour.keyword
    spent = (await harness.stub.SendMessage(send_request("spend 0.02"), metadata=VERSION)).task
    assert [(a.name, _texts(a.parts)) for a in spent.artifacts] == [("receipt", ["charged 0.02"])]


async def test_slow_reports_progress_then_its_artifact(make_server: Factory) -> None:
    harness = await make_server()
    stream = harness.stub.SendStreamingMessage(send_request("slow 1.2"), metadata=VERSION)
    events = [event async for event in stream]
    said = [
        _texts(event.status_update.status.message.parts)
        for event in events
        if event.HasField("status_update")
    ]
    assert said == [["working for 1.2 s"], ["1 of 1.2 s"], ["done after 1.2 s"]]
    (artifact,) = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
    assert (artifact.name, _texts(artifact.parts)) == ("slow", ["worked 1.2 s"])
    assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


@pytest.mark.parametrize(
    ("text", "got"),
    [("spend -1", "; got '-1'"), ("spend abc", "; got 'abc'"), ("spend NaN", "; got 'NaN'"),
     ("spend", "")],
)  # fmt: skip
async def test_spend_refuses_what_is_not_an_amount_without_a_traceback(
    make_server: Factory, caplog: pytest.LogCaptureFixture, text: str, got: str
) -> None:
    harness = await make_server()
    with caplog.at_level(logging.WARNING):
        task = (await harness.stub.SendMessage(send_request(text), metadata=VERSION)).task
    assert task.status.state == a2a_pb2.TASK_STATE_REJECTED
    assert _texts(task.status.message.parts) == [
        f"spend takes an amount, a non-negative decimal number such as 'spend 0.02'{got}"
    ]
    assert not task.artifacts and cost_of(task) is None
    assert [record.getMessage() for record in caplog.records] == []
