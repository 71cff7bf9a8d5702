"""Matching a sender's audit trail with the receiving server's, message by message.

A client record (kind "call", `a2a_grpc.client.audit`) that carries a message id is paired with
the server's request records (kind "request") of the same message id, and with its outcome
records (kind "outcome": how the run that message started ended). For each pair:
- `unseen`: the server has no request record of the message, yet the client got an answer
  (outcome OK or an error the agent sent). A message that never reached the server (the client
  saw UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED or STREAM_RESUME_FAILED) and that the server
  indeed never recorded is `undelivered`, which is a note, not a disagreement;
- `hash`: a server request record of the message has another message_sha256: the server got
  other bytes under that message id;
- `outcome`: no server request record of the message ended as the client's call did (e.g. the
  client saw DEADLINE_EXCEEDED, the server answered OK). For a stream, OK and CANCELLED count
  as one: a client closes its stream once it has seen the end (or when its caller stops
  reading), and whether the server's stream had ended by then is a matter of timing. Not
  checked for a stream the client resumed: its first call's end is not what the client
  recorded;
- `task`: the server's request records name tasks, none of them the client's;
- `state`: the client saw its task settle (a terminal or interrupted state, or a direct reply)
  and the server's outcome records of the message say otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["NOT_DELIVERED", "SETTLED_STATES", "Finding", "Match", "match"]

Record = tuple[int, dict[str, Any]]
"""A record and its line number in its file."""

NOT_DELIVERED = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED", "STREAM_RESUME_FAILED"})
"""Client outcomes of calls that may never have reached the server."""

SETTLED_STATES = frozenset(
    {
        "TASK_STATE_COMPLETED",
        "TASK_STATE_FAILED",
        "TASK_STATE_CANCELED",
        "TASK_STATE_REJECTED",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_AUTH_REQUIRED",
        "DIRECT_REPLY",
    }
)
"""States a run ends in, as the server's outcome records and the client's records name them."""

STREAMS = frozenset({"SendStreamingMessage"})
QUIET_ENDS = frozenset({"OK", "CANCELLED"})
"""How a stream ends without an error, on either side (see `outcome` in the module)."""

DISAGREEMENTS = ("unseen", "hash", "outcome", "task", "state")


@dataclass(frozen=True)
class Finding:
    """One thing `match` found about one client record."""

    kind: str
    """One of `DISAGREEMENTS`, or "undelivered" (a note)."""
    message_id: str
    client_line: int
    text: str

    @property
    def disagrees(self) -> bool:
        return self.kind in DISAGREEMENTS


@dataclass(frozen=True)
class Match:
    """What `match` found: `sent` client records with a message, `seen` of them recorded by the
    server, and the findings in the client log's order."""

    sent: int
    seen: int
    findings: tuple[Finding, ...]

    @property
    def disagreements(self) -> tuple[Finding, ...]:
        return tuple(finding for finding in self.findings if finding.disagrees)


def match(
    client: Iterable[Record], server: Iterable[Record], *, target: str | None = None
) -> Match:
    """Pairs the client's message records (only those to `target`, when given) with the
    server's records of the same message id; see the module for what is reported."""
    requests: dict[str, list[Record]] = {}
    outcomes: dict[str, list[Record]] = {}
    for line, record in server:
        message_id = record.get("message_id") or ""
        if not message_id:
            continue
        if record.get("kind") == "request":
            requests.setdefault(message_id, []).append((line, record))
        elif record.get("kind") == "outcome":
            outcomes.setdefault(message_id, []).append((line, record))
    sent = seen = 0
    findings: list[Finding] = []
    for line, record in client:
        message_id = record.get("message_id") or ""
        if record.get("kind") != "call" or not message_id:
            continue
        if target is not None and record.get("target") != target:
            continue
        sent += 1
        received = requests.get(message_id, [])
        if received:
            seen += 1
        findings += _compare(line, record, received, outcomes.get(message_id, []))
    return Match(sent, seen, tuple(findings))


def _compare(
    line: int, sent: dict[str, Any], received: Sequence[Record], outcomes: Sequence[Record]
) -> list[Finding]:
    message_id = sent["message_id"]
    outcome = sent.get("outcome", "")
    call = f"{sent.get('method', '')} to {sent.get('target', '') or '?'} at {sent.get('time', '')}"

    def found(kind: str, text: str) -> Finding:
        return Finding(kind, message_id, line, text)

    if not received:
        if outcome in NOT_DELIVERED:
            return [found("undelivered", f"never reached the server ({call}: {outcome})")]
        return [found("unseen", f"the server has no record of it, yet the client's {call} "
                      f"ended {outcome}")]  # fmt: skip
    findings = []
    for server_line, record in received:
        if record.get("message_sha256") != sent.get("message_sha256"):
            findings.append(
                found(
                    "hash",
                    f"hash differs: the client sent {sent.get('message_sha256')}, the server "
                    f"recorded {record.get('message_sha256')} (server line {server_line})",
                )
            )
    answered = {record.get("outcome") for _, record in received}
    if sent.get("method") in STREAMS and answered & QUIET_ENDS:
        answered |= QUIET_ENDS
    if not sent.get("resumed") and outcome not in answered:
        lines = ", ".join(str(server_line) for server_line, _ in received)
        findings.append(
            found(
                "outcome",
                f"outcome differs: the client's {call} ended {outcome}, the server answered "
                f"{', '.join(sorted(str(o) for o in answered))} (server line {lines})",
            )
        )
    tasks = {record.get("task_id") for _, record in received} - {"", None}
    task_id = sent.get("task_id") or ""
    if task_id and tasks and task_id not in tasks:
        findings.append(
            found(
                "task",
                f"task differs: the client got task {task_id}, the server recorded "
                f"{', '.join(sorted(str(t) for t in tasks))}",
            )
        )
    state = sent.get("state") or ""
    ended = {record.get("outcome") for _, record in outcomes}
    if state in SETTLED_STATES and ended and state not in ended:
        lines = ", ".join(str(server_line) for server_line, _ in outcomes)
        findings.append(
            found(
                "state",
                f"state differs: the client saw {state}, the server recorded "
                f"{', '.join(sorted(str(e) for e in ended))} (server line {lines})",
            )
        )
    return findings
