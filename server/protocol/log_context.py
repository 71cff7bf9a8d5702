"""What a log record says about the call or task run it was logged in.

The call gate sets `CALL` once a call's caller is known, and a task run sets `RUN` as it starts
its agent (asyncio copies both into the tasks started from there: the agent, its webhooks).
`logs.CallFields` reads them only when a record is actually logged, so a call pays one
`ContextVar.set`, and a run one more.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

CALL: ContextVar[tuple[str, str, Any] | None] = ContextVar("a2a_log_call", default=None)
"""(RPC name, principal, request message) of the call being handled."""

RUN: ContextVar[tuple[str, str] | None] = ContextVar("a2a_log_run", default=None)
"""(task id, context id) of the task run whose agent runs here."""
