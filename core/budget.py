"""The budget-and-cost A2A extension (`urn:a2a-grpc:budget:v1`), shared by client and server.

Contract:
- A request states a budget in its message: `message.metadata["urn:a2a-grpc:budget:v1"] =
  {"budget": {"amount": "10.00", "currency": "USD"}}`. Amounts are decimal strings (never
  floats); currencies are ISO 4217-style codes, compared as given.
- The agent reports what it spends. The task keeps the running figures in
  `task.metadata["urn:a2a-grpc:budget:v1"] = {"budget": {...}, "cost": {...}}`, and the status
  update that ends a run carries the same entry in its `metadata`.
- Work that would go over the budget does not happen: a quote above it ends the task REJECTED,
  a charge that would cross it ends the task FAILED; either way the status message carries a
  data part `{"reason": "over_budget" | "budget_exceeded", "budget": ..., "cost": ...,
  "requested": ...}`.
A peer that knows nothing of the extension sends no budget and simply sees the extra metadata.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from google.protobuf import json_format, struct_pb2

from a2a_grpc.generated import a2a_pb2

BUDGET_EXTENSION = "urn:a2a-grpc:budget:v1"


class BudgetFormatError(ValueError):
    """A budget or cost entry that is not `{"amount": "<decimal>", "currency": "<code>"}`."""


@dataclass(frozen=True)
class Money:
    amount: Decimal
    currency: str

    @classmethod
    def parse(cls, value: Any, where: str) -> Money:
        if not isinstance(value, dict):
            raise BudgetFormatError(f"{where} must be an object with amount and currency")
        amount, currency = value.get("amount"), value.get("currency")
        if not isinstance(amount, str) or not isinstance(currency, str) or not currency:
            raise BudgetFormatError(
                f'{where} needs "amount" as a decimal string and a non-empty "currency"'
            )
        try:
            parsed = Decimal(amount)
        except InvalidOperation:
            raise BudgetFormatError(f"{where}.amount {amount!r} is not a decimal number") from None
        if not parsed.is_finite() or parsed < 0:
            raise BudgetFormatError(f"{where}.amount must be a finite, non-negative number")
        return cls(parsed, currency)

    def to_json(self) -> dict[str, str]:
        return {"amount": str(self.amount), "currency": self.currency}

    def __str__(self) -> str:
        return f"{self.amount} {self.currency}"


def _entry(metadata: struct_pb2.Struct) -> dict[str, Any] | None:
    if BUDGET_EXTENSION not in metadata.fields:
        return None
    value = json_format.MessageToDict(metadata)[BUDGET_EXTENSION]
    if not isinstance(value, dict):
        raise BudgetFormatError(f"metadata[{BUDGET_EXTENSION!r}] must be an object")
    return value


def requested_budget(message: a2a_pb2.Message) -> Money | None:
    """The budget a message states, None when it states none; BudgetFormatError if malformed."""
    entry = _entry(message.metadata)
    if entry is None or "budget" not in entry:
        return None
    return Money.parse(entry["budget"], f"metadata[{BUDGET_EXTENSION!r}].budget")


def with_budget(message: a2a_pb2.Message, amount: Decimal | str, currency: str) -> a2a_pb2.Message:
    """A copy of `message` stating a budget (client helper)."""
    budget = Money.parse({"amount": str(amount), "currency": currency}, "budget")
    copy = a2a_pb2.Message()
    copy.CopyFrom(message)
    copy.metadata.update({BUDGET_EXTENSION: {"budget": budget.to_json()}})
    if BUDGET_EXTENSION not in copy.extensions:
        copy.extensions.append(BUDGET_EXTENSION)
    return copy


def cost_of(task_or_event: a2a_pb2.Task | a2a_pb2.TaskStatusUpdateEvent) -> Money | None:
    """The cost a task (or the status update that ended a run) reports, None when none."""
    entry = _entry(task_or_event.metadata)
    if entry is None or "cost" not in entry:
        return None
    return Money.parse(entry["cost"], f"metadata[{BUDGET_EXTENSION!r}].cost")


def budget_of(task: a2a_pb2.Task) -> Money | None:
    entry = _entry(task.metadata)
    if entry is None or "budget" not in entry:
        return None
    return Money.parse(entry["budget"], f"metadata[{BUDGET_EXTENSION!r}].budget")
