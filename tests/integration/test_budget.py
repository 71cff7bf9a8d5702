"""The budget-and-cost extension over a real channel, and a peer that knows nothing of it."""

from __future__ import annotations

from decimal import Decimal

import grpc
import pytest
from google.protobuf import json_format

from a2a_grpc.client import A2AClient
from a2a_grpc.client.messages import user_message
from a2a_grpc.core.budget import BUDGET_EXTENSION, Money, budget_of, cost_of, with_budget
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from a2a_grpc.server.protocol.spend import DEFAULT_CURRENCY
from tests.integration.conftest import Factory, Harness, error_reason, send_request


def budgeted(text: str, amount: str, currency: str = "EUR") -> a2a_pb2.SendMessageRequest:
    request = send_request(text)
    request.message.CopyFrom(with_budget(request.message, amount, currency))
    return request


def reason_of(task: a2a_pb2.Task) -> dict[str, object]:
    data = next(p.data for p in task.status.message.parts if p.HasField("data"))
    return dict(json_format.MessageToDict(data))


async def test_cost_is_reported_in_the_task_and_the_last_status_update(demo: Harness) -> None:
    events = [e async for e in demo.stub.SendStreamingMessage(budgeted("spend 3", "10"))]
    last = events[-1].status_update
    assert last.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert cost_of(last) == Money(Decimal("3.0"), "EUR")
    task = await demo.stub.GetTask(a2a_pb2.GetTaskRequest(id=events[0].task.id))
    assert cost_of(task) == Money(Decimal("3.0"), "EUR")
    assert budget_of(task) == Money(Decimal("10"), "EUR")


async def test_spend_without_a_budget_completes_and_reports_its_cost(demo: Harness) -> None:
    task = (await demo.stub.SendMessage(send_request("spend 0.02"))).task
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert cost_of(task) == Money(Decimal("0.02"), DEFAULT_CURRENCY)
    assert budget_of(task) is None


async def test_echo_is_charged_per_part(demo: Harness) -> None:
    task = (await demo.stub.SendMessage(budgeted("hello", "1.00", "USD"))).task
    assert cost_of(task) == Money(Decimal("0.01"), "USD")


async def test_a_quote_over_budget_is_rejected_with_the_reason(demo: Harness) -> None:
    task = (await demo.stub.SendMessage(budgeted("spend 50", "10"))).task
    assert task.status.state == a2a_pb2.TASK_STATE_REJECTED
    reason = reason_of(task)
    assert reason["reason"] == "over_budget"
    assert reason["budget"] == {"amount": "10", "currency": "EUR"}
    assert reason["requested"] == {"amount": "50", "currency": "EUR"}
    assert cost_of(task) is None


async def test_a_charge_over_budget_fails_the_task_and_is_not_recorded(
    make_server: Factory,
) -> None:
    class Greedy:
        async def execute(self, context: RequestContext, events: TaskEvents) -> None:
            await events.working()
            await events.charge("6")
            await events.add_artifact([a2a_pb2.Part(text="first half")])
            await events.charge("6")
            await events.add_artifact([a2a_pb2.Part(text="never")])  # pragma: no cover

    harness = await make_server(agent=Greedy())
    task = (await harness.stub.SendMessage(budgeted("go", "10"))).task
    assert task.status.state == a2a_pb2.TASK_STATE_FAILED
    assert reason_of(task)["reason"] == "budget_exceeded"
    assert cost_of(task) == Money(Decimal("6"), "EUR")  # the refused charge is not spent
    assert [a.parts[0].text for a in task.artifacts] == ["first half"]  # kept, not lost


async def test_a_charge_of_exactly_the_budget_completes_a_cent_more_fails(
    make_server: Factory,
) -> None:
    """Catches a charge equal to the budget being refused (`>=` for `>` in `Ledger.charge`):
    the agent charges all of the budget and completes with it as its cost; a cent more, then,
    fails the task with `budget_exceeded` and is not recorded."""

    class Exact:
        async def execute(self, context: RequestContext, events: TaskEvents) -> None:
            await events.working()
            await events.charge("0.10")
            if context.text() == "and a cent more":
                await events.charge("0.01")
            await events.complete("spent")

    harness = await make_server(agent=Exact())
    task = (await harness.stub.SendMessage(budgeted("all of it", "0.10"))).task
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert cost_of(task) == Money(Decimal("0.10"), "EUR")
    task = (await harness.stub.SendMessage(budgeted("and a cent more", "0.10"))).task
    assert task.status.state == a2a_pb2.TASK_STATE_FAILED
    assert reason_of(task)["reason"] == "budget_exceeded"
    assert cost_of(task) == Money(Decimal("0.10"), "EUR")


async def test_the_demo_spends_exactly_its_budget(demo: Harness) -> None:
    """Catches a charge equal to the budget being refused, on the `spend X` path: the demo's
    quote of 0.10 passes a budget of 0.10, and its two charges of 0.05 reach it exactly."""
    task = (await demo.stub.SendMessage(budgeted("spend 0.10", "0.10"))).task
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert cost_of(task) == Money(Decimal("0.10"), "EUR")


async def test_malformed_budget_is_invalid_params(demo: Harness) -> None:
    request = send_request("hello")
    request.message.metadata.update({BUDGET_EXTENSION: {"budget": {"amount": 5}}})
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await demo.stub.SendMessage(request)
    assert error_reason(caught.value) == "INVALID_PARAMS"
    assert "decimal string" in (caught.value.details() or "")


async def test_budget_carries_over_to_a_continuation(make_server: Factory) -> None:
    class TwoTurns:
        async def execute(self, context: RequestContext, events: TaskEvents) -> None:
            await events.charge("4")
            if context.task is None:
                await events.require_input("more?")
            else:
                await events.complete()

    harness = await make_server(agent=TwoTurns())
    first = (await harness.stub.SendMessage(budgeted("one", "7"))).task
    second = (await harness.stub.SendMessage(send_request("two", task_id=first.id))).task
    assert second.status.state == a2a_pb2.TASK_STATE_FAILED  # 4 + 4 > 7
    assert reason_of(second)["cost"] == {"amount": "4", "currency": "EUR"}


async def test_client_helpers(demo: Harness) -> None:
    async with A2AClient.connect(demo.running.address) as client:
        task = await client.send_message(with_budget(user_message("spend 2"), "5", "GBP"))
    assert isinstance(task, a2a_pb2.Task)
    assert cost_of(task) == Money(Decimal("2.0"), "GBP")


async def test_a_peer_without_the_extension_is_served_as_before(demo: Harness) -> None:
    task = (await demo.stub.SendMessage(send_request("hello"))).task
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert cost_of(task) is None and not task.HasField("metadata")
