"""The budget ledger's arithmetic on its own (no sockets, no task run)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from a2a_grpc.core.budget import BUDGET_EXTENSION, Money
from a2a_grpc.server.agent import AgentContractError
from a2a_grpc.server.protocol.spend import DEFAULT_CURRENCY, Ledger


def test_quotes_and_charges_against_a_budget() -> None:
    ledger = Ledger(Money(Decimal("10"), "EUR"), None)
    assert ledger.quote("10") is None  # exactly the budget is fine
    assert ledger.charge("4") is None and ledger.charge("5.5") is None
    assert ledger.cost == Money(Decimal("9.5"), "EUR")
    refused = ledger.quote("1")
    assert refused is not None and refused.reason == "over_budget"
    assert refused.details["requested"] == {"amount": "1", "currency": "EUR"}
    over = ledger.charge("0.51")
    assert over is not None and over.reason == "budget_exceeded"
    assert ledger.cost == Money(Decimal("9.5"), "EUR")  # a refused charge is not counted
    assert ledger.metadata() == {
        BUDGET_EXTENSION: {
            "budget": {"amount": "10", "currency": "EUR"},
            "cost": {"amount": "9.5", "currency": "EUR"},
        }
    }


def test_a_charge_up_to_exactly_the_budget_is_accepted_a_cent_more_refused() -> None:
    """Catches `Ledger.charge` refusing a charge that reaches the budget exactly (`>=` for
    `>`): spending all of the budget is within it; only the smallest unit more crosses it."""
    ledger = Ledger(Money(Decimal("0.10"), "EUR"), None)
    assert ledger.charge("0.10") is None
    assert ledger.cost == Money(Decimal("0.10"), "EUR")
    over = Ledger(Money(Decimal("0.10"), "EUR"), None).charge("0.11")
    assert over is not None and over.reason == "budget_exceeded"
    ledger = Ledger(Money(Decimal("0.10"), "EUR"), None)  # the running total, likewise
    assert ledger.charge("0.04") is None and ledger.charge("0.06") is None
    assert ledger.cost == Money(Decimal("0.10"), "EUR")
    over = ledger.charge("0.01")
    assert over is not None and over.reason == "budget_exceeded"
    assert ledger.cost == Money(Decimal("0.10"), "EUR")


def test_without_a_budget_charges_only_count() -> None:
    ledger = Ledger(None, None)
    assert ledger.metadata() is None
    assert ledger.quote("1000") is None  # nothing to exceed, no currency needed
    assert ledger.charge("1", "EUR") is None
    assert ledger.charge("0.5") is None  # in the currency the cost is already counted in
    assert ledger.metadata() == {BUDGET_EXTENSION: {"cost": {"amount": "1.5", "currency": "EUR"}}}
    with pytest.raises(AgentContractError, match="counts in EUR"):
        ledger.charge("1", "USD")


def test_without_a_budget_or_a_currency_the_default_currency_counts() -> None:
    ledger = Ledger(None, None)
    assert ledger.charge("0.02") is None
    assert ledger.metadata() == {
        BUDGET_EXTENSION: {"cost": {"amount": "0.02", "currency": DEFAULT_CURRENCY}}
    }
    ledger = Ledger(None, None)
    for bad in ("-1", "NaN", "lots"):
        with pytest.raises(AgentContractError):
            ledger.charge(bad)
