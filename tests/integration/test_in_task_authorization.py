"""In-task authorization (AUTH_REQUIRED, spec §7.6) and its scope (§7.6.4): a credential given
while a task is AUTH_REQUIRED authorizes the run of the message that carried it, and nothing
after it. Real servers on both stores; the agent is written as server/agent.py says an agent
should (it authorizes only a run whose `context.answers_auth` is true, from that message)."""

from __future__ import annotations

from typing import NamedTuple

import grpc
import pytest

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from tests.integration.conftest import VERSION, Factory, Harness, error_reason, send_request

CODE = "approve 7f3a"
"""The approval the guarded agent takes (what a real agent would check with its issuer)."""


class Seen(NamedTuple):
    """What one run of the agent was told."""

    text: str
    answers_auth: bool
    state_answered: int
    history: tuple[str, ...]


class PaysWithApproval:
    """Pays only with an approval given in answer to its AUTH_REQUIRED, one payment each.

    "pay ..." asks for approval (AUTH_REQUIRED). The message that answers it pays if it is the
    approval, then asks what next (INPUT_REQUIRED); anything else there is a refusal of the
    request, which it asks again. A later "pay" on the task asks for approval again.
    """

    def __init__(self) -> None:
        self.seen: list[Seen] = []

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        task = context.task
        self.seen.append(
            Seen(
                context.text(),
                context.answers_auth,
                task.status.state if task is not None else a2a_pb2.TASK_STATE_UNSPECIFIED,
                tuple(m.parts[0].text for m in task.history) if task is not None else (),
            )
        )
        if context.answers_auth:
            if context.text() != CODE:
                await events.require_auth("that is not an approval: send the approval code")
                return
            paid = len(context.task.artifacts) if context.task is not None else 0
            await events.add_artifact([a2a_pb2.Part(text=f"payment {paid + 1}")], name="payment")
            await events.require_input("paid; anything else?")
        elif context.text().startswith("pay"):
            await events.require_auth("a payment needs an approval: send the approval code")
        else:
            await events.complete("nothing to do")


@pytest.fixture(params=["memory", "redis"])
def store_url(request: pytest.FixtureRequest) -> str:
    """The task store: this process's memory (""), or a fresh redis-server's URL."""
    if request.param == "memory":
        return ""
    url: str = request.getfixturevalue("redis_server").url
    return url


async def _send(harness: Harness, text: str, task: a2a_pb2.Task | None = None) -> a2a_pb2.Task:
    request = send_request(text)
    if task is not None:
        request.message.task_id = task.id
    response = await harness.stub.SendMessage(request, metadata=VERSION)
    return response.task


async def test_a_credential_authorizes_the_continuation_it_came_with_only(
    make_server: Factory, store_url: str
) -> None:
    agent = PaysWithApproval()
    harness = await make_server(agent, store=store_url)
    asked = await _send(harness, "pay 10")
    assert asked.status.state == a2a_pb2.TASK_STATE_AUTH_REQUIRED

    paid = await _send(harness, CODE, asked)  # the continuation the credential came with
    assert paid.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    assert [a.parts[0].text for a in paid.artifacts] == ["payment 1"]

    # A later message on the task, without the credential: not authorized by it, although
    # the credential is still in the task's history.
    again = await _send(harness, "pay 10 again", paid)
    assert again.status.state == a2a_pb2.TASK_STATE_AUTH_REQUIRED
    assert [a.parts[0].text for a in again.artifacts] == ["payment 1"]

    # The answer to this second request carries no credential: refused, asked again.
    refused = await _send(harness, "no", again)
    assert refused.status.state == a2a_pb2.TASK_STATE_AUTH_REQUIRED
    assert [a.parts[0].text for a in refused.artifacts] == ["payment 1"]

    # A credential given again authorizes its own continuation again.
    repaid = await _send(harness, CODE, refused)
    assert [a.parts[0].text for a in repaid.artifacts] == ["payment 1", "payment 2"]

    auth, needed = a2a_pb2.TASK_STATE_AUTH_REQUIRED, a2a_pb2.TASK_STATE_INPUT_REQUIRED
    assert [(s.text, s.answers_auth, s.state_answered) for s in agent.seen] == [
        ("pay 10", False, a2a_pb2.TASK_STATE_UNSPECIFIED),
        (CODE, True, auth),
        ("pay 10 again", False, needed),
        ("no", True, auth),
        (CODE, True, auth),
    ]
    # What the later run was handed: the credential in the history (every message stays
    # there), which is why an agent authorizes from the message of a run that answers_auth.
    assert CODE in agent.seen[2].history
    # The server did not take AUTH_REQUIRED, or the task's past, as authorization of its own:
    # every message ran the agent, which decided each time.
    assert len(agent.seen) == 5


async def test_another_caller_cannot_answer_an_auth_request(make_server: Factory) -> None:
    """The continuation that may carry a credential reaches the task only from the caller that
    owns it: to anyone else the task does not exist."""
    agent = PaysWithApproval()
    harness = await make_server(agent, tokens={"alice-token": "alice", "mallory-token": "mallory"})
    alice = (("authorization", "Bearer alice-token"), *VERSION)
    mallory = (("authorization", "Bearer mallory-token"), *VERSION)
    asked = (await harness.stub.SendMessage(send_request("pay 10"), metadata=alice)).task
    assert asked.status.state == a2a_pb2.TASK_STATE_AUTH_REQUIRED
    answer = send_request(CODE)
    answer.message.task_id = asked.id
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await harness.stub.SendMessage(answer, metadata=mallory)
    assert error_reason(refused.value) == "TASK_NOT_FOUND"
    assert [s.text for s in agent.seen] == ["pay 10"]
