"""The sender's own audit trail: one record per call an `A2AClient` makes, in the same
hash-chained JSON Lines form as the server's (`a2a_grpc.core.audit_chain`).

Record fields (every record has all of them):
- `time` (RFC 3339 UTC, when the call ended), `kind` ("call"), `method` (the RPC's name);
- `target` (the agent's address, as the client was given it) and `tenant`;
- `message_id` and `message_sha256` (SendMessage and SendStreamingMessage; "" otherwise): the
  SHA-256 of the message's canonical bytes as sent, signature included, the same value the
  server records for the message it received;
- `task_id`; `state`: the task's last state the call saw (`TASK_STATE_COMPLETED`, ...),
  `DIRECT_REPLY` for a direct answer, "" when the call returned no task;
- `outcome`: "OK", or the gRPC status code name the call failed with (`NOT_FOUND`,
  `UNAVAILABLE`, ...), as the server's request records write it; a failure this client found
  itself is `INVALID_AGENT_RESPONSE` (the response broke the protocol), `STREAM_RESUME_FAILED`
  (a stream dropped and could not be resumed) or `CANCELLED` (the caller stopped the call);
- `reason`: the ErrorInfo reason of an A2A error (`TASK_NOT_FOUND`, ...), else "";
- `attempts`: SendMessage attempts made (retries keep the message id), 1 for other calls;
  `resumed`: how many times a stream was resumed with SubscribeToTask;
- `prev`: the chain link.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import grpc

from a2a_grpc.client.errors import (
    A2ATransportError,
    ErrorResponse,
    RpcFailedError,
    StreamResumeError,
)
from a2a_grpc.core.audit_chain import ChainWriter, message_sha256, now
from a2a_grpc.core.errors import StatusError
from a2a_grpc.generated import a2a_pb2

__all__ = ["DIRECT_REPLY", "ClientAuditLog", "outcome_of"]

DIRECT_REPLY = "DIRECT_REPLY"
"""The `state` of a call the agent answered with a message instead of a task (as the server's
outcome records write it)."""


class ClientAuditLog(ChainWriter):
    """Appends the client's audit records to `path`; one log may serve several clients (and
    agents). Close it with `aclose()` (or `close()`, which blocks) when done. Writes never block
    the event loop; records that cannot be written wait in memory (see `ChainWriter`), and
    `failing`, `lost` and `unwritten_bytes` say so. Raises OSError when `path` cannot be opened
    for appending.
    """

    FENCE_FIELDS: ClassVar[dict[str, Any]] = {
        "method": "",
        "target": "",
        "tenant": "",
        "message_id": "",
        "message_sha256": "",
        "task_id": "",
        "state": "",
        "reason": "",
        "attempts": 0,
        "resumed": 0,
    }

    def call(
        self,
        *,
        method: str,
        target: str,
        tenant: str,
        outcome: str,
        reason: str = "",
        task_id: str = "",
        state: str = "",
        message: a2a_pb2.Message | None = None,
        attempts: int = 1,
        resumed: int = 0,
    ) -> None:
        """Records one finished call."""
        self._add(
            {
                "time": now(),
                "kind": "call",
                "method": method,
                "target": target,
                "tenant": tenant,
                "message_id": message.message_id if message is not None else "",
                "message_sha256": message_sha256(message) if message is not None else "",
                "task_id": task_id,
                "state": state,
                "outcome": outcome,
                "reason": reason,
                "attempts": attempts,
                "resumed": resumed,
            }
        )


def outcome_of(error: BaseException) -> tuple[str, str]:
    """(outcome, reason) of a call that raised `error`: the status code the call ended with and
    the A2A error's ErrorInfo reason, or what this client found itself (see the module)."""
    cause = error.__cause__
    if isinstance(error, StatusError):
        if isinstance(cause, grpc.aio.AioRpcError):
            return cause.code().name, error.reason  # the agent's answer, with its code as sent
        if isinstance(cause, ErrorResponse):
            return error.code.name, error.reason  # the same answer over an HTTP binding
        return error.reason, error.reason  # e.g. INVALID_AGENT_RESPONSE, found here
    if isinstance(error, A2ATransportError | RpcFailedError):
        return error.code.name, ""
    if isinstance(error, StreamResumeError):
        return "STREAM_RESUME_FAILED", ""
    if isinstance(error, asyncio.CancelledError | GeneratorExit):
        return "CANCELLED", ""
    return "CLIENT_ERROR", type(error).__name__
