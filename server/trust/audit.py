"""The server's audit trail: one record per request and per task outcome, in a hash-chained JSON
Lines file (the chain, its writer and its verifier are `a2a_grpc.core.audit_chain`).

Record fields: `time` (RFC 3339 UTC), `kind` ("request" or "outcome"), `method`, `message_id`,
`message_sha256` (SHA-256 of the message's canonical bytes, see `a2a_grpc.core.canonical`),
`principal`, `tenant`, `task_id`, `outcome` (a gRPC status code name for requests, a task state
for outcomes), `cost` (budget extension), for outcomes `signer` (the verified sender of the
message the run worked on: `kid`, `card_url`, `card_name`, `origin`; null if unsigned) and
`prev`: the SHA-256 (hex) of the previous line's bytes, or 64 zeros for the first line. Each
line is the JCS (RFC 8785) form of its record.

Records are in causal order: the outcome of a run follows the request record of the call that
started it, which is written when that call ends (so a blocking send's outcome, stamped when
its task ended, may carry an earlier `time` than the request record just before it).

`a2a-grpc audit verify FILE` checks the chain; `a2a-grpc audit match` compares it with a
client's trail of the same messages.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, ClassVar

from a2a_grpc.core.audit_chain import GENESIS, ChainWriter, Verdict, message_sha256, now, verify
from a2a_grpc.core.signing import Signer
from a2a_grpc.generated import a2a_pb2

__all__ = ["GENESIS", "AuditLog", "Verdict", "verify"]


class AuditLog(ChainWriter):
    """Appends the server's audit records to `path` (see `ChainWriter` for how records are
    written, held while writes fail, and fenced after a crash). Call `close` to write
    everything and stop.

    With `fail_closed`, `refusing` is True while writes fail: the server then refuses requests
    rather than serve them unaudited. Raises OSError when `path` cannot be opened for appending.
    """

    FENCE_FIELDS: ClassVar[dict[str, Any]] = {
        "method": "",
        "principal": "",
        "tenant": "",
        "task_id": "",
        "message_id": "",
        "message_sha256": "",
        "cost": None,
    }

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        fail_closed: bool = False,
        on_health: Callable[[bool], None] | None = None,
        backlog_limit: int = 64 * 1024 * 1024,
    ) -> None:
        self.fail_closed = fail_closed
        self._held: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        """Outcomes waiting for the request record of the call that sent their message, by
        (tenant, principal, message id)."""
        super().__init__(path, on_health=on_health, backlog_limit=backlog_limit)

    def opened(self, tenant: str, principal: str, message_id: str) -> None:
        """A call sending this message is being handled: the outcome of the run it starts is
        written after the call's request record (`request` releases it)."""
        self._held.setdefault((tenant, principal, message_id), [])

    def close(self) -> None:
        """Writes what is held too (a call that never ended), then as `ChainWriter.close`."""
        held, self._held = self._held, {}
        for records in held.values():
            for record in records:
                self._add(record)
        super().close()

    @property
    def refusing(self) -> bool:
        """Fail-closed and failing: requests should be refused until writes work again."""
        return self.fail_closed and self.failing

    def _failing_note(self) -> str:
        return "; requests are refused until it works" if self.fail_closed else ""

    def request(
        self,
        *,
        method: str,
        principal: str,
        tenant: str,
        outcome: str,
        task_id: str = "",
        message: a2a_pb2.Message | None = None,
    ) -> None:
        """Records one handled RPC."""
        self._add(
            {
                "time": now(),
                "kind": "request",
                "method": method,
                "principal": principal,
                "tenant": tenant,
                "task_id": task_id,
                "outcome": outcome,
                "message_id": message.message_id if message is not None else "",
                "message_sha256": message_sha256(message) if message is not None else "",
                "cost": None,
            }
        )
        if message is not None:
            for held in self._held.pop((tenant, principal, message.message_id), ()):
                self._add(held)

    def canceled(self, task_id: str, principal: str, tenant: str) -> None:
        """Records CANCELED as the outcome of a task no agent was working on (canceled while it
        waited for input, or expired waiting)."""
        self.outcome(
            task_id=task_id,
            state=a2a_pb2.TaskState.Name(a2a_pb2.TASK_STATE_CANCELED),
            principal=principal,
            tenant=tenant,
            message_id="",
            cost=None,
        )

    def outcome(
        self,
        *,
        task_id: str,
        state: str,
        principal: str,
        tenant: str,
        message_id: str,
        cost: dict[str, str] | None,
        signer: Signer | None = None,
    ) -> None:
        """Records how a task's run ended (a terminal or interrupted state, or a direct reply),
        with the verified signer of the message that started the run."""
        record = {
            "time": now(),
            "kind": "outcome",
            "method": "",
            "principal": principal,
            "tenant": tenant,
            "task_id": task_id,
            "outcome": state,
            "message_id": message_id,
            "message_sha256": "",
            "cost": cost,
            "signer": None if signer is None else signer.to_json(),
        }
        held = self._held.get((tenant, principal, message_id)) if message_id else None
        if held is None:
            self._add(record)
        else:
            held.append(record)
