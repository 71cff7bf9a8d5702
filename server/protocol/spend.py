"""The budget extension's arithmetic for one task: what it may spend and what it has spent.

A `Ledger` holds the budget the request stated (or the task carried) and the cost charged so
far. It checks amounts the agent quotes or charges, and says when one would cross the budget;
the task run records what follows (REJECTED for a quote, FAILED for a charge). Amounts are
decimals in one currency per task: the budget's, else the first charge's, else
`DEFAULT_CURRENCY`.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any, NamedTuple

from a2a_grpc.core.budget import BUDGET_EXTENSION, Money
from a2a_grpc.server.agent import AgentContractError

DEFAULT_CURRENCY = "USD"
"""The currency of a cost recorded without a budget or a currency named by the agent."""


class OverBudget(NamedTuple):
    """Why a quote or charge was refused: `reason` ("over_budget" or "budget_exceeded"), a
    sentence for the status message, and the details for its data part."""

    reason: str
    text: str
    details: dict[str, Any]
    summary: str
    """For the exception the agent sees."""


class Ledger:
    """Budget and cost of one task (either may be None: no budget stated, nothing charged)."""

    __slots__ = ("budget", "cost")

    def __init__(self, budget: Money | None, cost: Money | None) -> None:
        self.budget = budget
        self.cost = cost

    def quote(self, amount: Decimal | str) -> OverBudget | None:
        """The refusal when the quoted work would take the cost over the budget, else None
        (always None without a budget: nothing to exceed)."""
        price = self._money(amount, None)
        if self.budget is not None and self._spent() + price.amount > self.budget.amount:
            return self._refusal(
                "over_budget",
                price,
                "the quoted work would exceed the budget",
                f"quote {price} exceeds the budget {self.budget}",
            )
        return None

    def charge(self, amount: Decimal | str, currency: str | None = None) -> OverBudget | None:
        """Adds `amount` to the cost, or returns the refusal when it would cross the budget
        (the cost then stays as it was)."""
        price = self._money(amount, currency)
        total = Money(self._spent() + price.amount, price.currency)
        if self.budget is not None and total.amount > self.budget.amount:
            return self._refusal(
                "budget_exceeded",
                price,
                "the work ran over its budget",
                f"charge {price} would exceed the budget {self.budget}",
            )
        self.cost = total
        return None

    def metadata(self) -> dict[str, Any] | None:
        """The task metadata entry stating budget and cost; None when there is neither."""
        if self.budget is None and self.cost is None:
            return None  # most tasks: no dict built (read at every task's start and end)
        entry: dict[str, Any] = {}
        if self.budget is not None:
            entry["budget"] = self.budget.to_json()
        if self.cost is not None:
            entry["cost"] = self.cost.to_json()
        return {BUDGET_EXTENSION: entry} if entry else None

    def _spent(self) -> Decimal:
        return self.cost.amount if self.cost is not None else Decimal(0)

    def _money(self, amount: Decimal | str, currency: str | None) -> Money:
        known = self.budget or self.cost
        code = currency or (known.currency if known else DEFAULT_CURRENCY)
        if known is not None and code != known.currency:
            raise AgentContractError(
                f"charge() in {code}, but this task counts in {known.currency}"
            )
        try:
            value = Decimal(str(amount))
        except InvalidOperation:
            raise AgentContractError(f"not an amount: {amount!r}") from None
        if not value.is_finite() or value < 0:
            raise AgentContractError(f"amounts must be finite and non-negative: {amount!r}")
        return Money(value, code)

    def _refusal(self, reason: str, requested: Money, text: str, summary: str) -> OverBudget:
        details = {
            "reason": reason,
            "budget": self.budget.to_json() if self.budget else None,
            "cost": self.cost.to_json() if self.cost else None,
            "requested": requested.to_json(),
        }
        return OverBudget(reason, text, details, summary)
