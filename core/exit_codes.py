"""The exit codes of every `a2a-grpc` command (client commands, `serve`, `audit`).

One table: a code means the same thing whichever command returns it, so a script can test `$?`
without knowing which command ran. The table under "Exit codes" in docs/cli.md is this one
(`tests/unit/test_exit_codes.py` compares them).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ExitCode:
    """One exit code: its number, who returns it, and what it means."""

    code: int
    commands: str
    meaning: str


OK = 0
INTERNAL = 1
USAGE = 2
TASK_FAILED = 3
TASK_WAITING = 4
AGENT_ERROR = 5
COULD_NOT_TALK = 6
INVALID_RESPONSE = 7
CANNOT_LISTEN = 8
AUDIT_BROKEN = 9
AUDIT_TORN = 10
AUDIT_INCOMPLETE = 11
AUDIT_DISAGREE = 12
AGENT_BUSY = 13
INTERRUPTED = 130
BROKEN_PIPE = 141

TABLE: tuple[ExitCode, ...] = (
    ExitCode(
        OK,
        "all",
        "success: the task completed, the agent answered directly, the command succeeded; "
        "`serve` stopped cleanly; `audit` found the chains intact (and, for `match`, agreeing)",
    ),
    ExitCode(INTERNAL, "all", "an unexpected internal error (still reported in one line)"),
    ExitCode(
        USAGE,
        "all",
        "usage or configuration error: bad arguments, bad TARGET, an unreadable or invalid "
        "file, an `--agent` that cannot be loaded, a task store that cannot be reached",
    ),
    ExitCode(TASK_FAILED, "client", "the task ended failed, rejected or canceled"),
    ExitCode(TASK_WAITING, "client", "the task waits for you: input-required or auth-required"),
    ExitCode(
        AGENT_ERROR,
        "client",
        "the agent returned an error: an A2A error, or another failed status; trying again "
        "will not help (see 13)",
    ),
    ExitCode(
        COULD_NOT_TALK,
        "client",
        "could not talk: unreachable, deadline exceeded, cancelled, a stream removed or reset "
        "on the way (UNKNOWN or INTERNAL with no A2A error), stream lost and not resumable, "
        "agent card not fetchable or without an interface the client can use",
    ),
    ExitCode(
        INVALID_RESPONSE,
        "client",
        "the agent's response broke the A2A protocol, including a blocking send that returned "
        "an unsettled task",
    ),
    ExitCode(
        CANNOT_LISTEN,
        "serve",
        "cannot listen: the port is in use, the address is not local, or binding it is not "
        "permitted",
    ),
    ExitCode(
        AUDIT_BROKEN, "audit", "the audit chain is broken: a record changed, inserted or removed"
    ),
    ExitCode(
        AUDIT_TORN,
        "audit",
        "the audit chain is intact but ends in a torn line (a write cut short by a crash, not "
        "yet fenced by a restart; a fenced one passes)",
    ),
    ExitCode(
        AUDIT_INCOMPLETE,
        "client",
        "`--audit-log` could not be written (a full disk, an I/O error): the command succeeded, "
        "its record is missing (a command that failed keeps its own code, and its one line is "
        "followed by one about the audit log)",
    ),
    ExitCode(
        AUDIT_DISAGREE,
        "audit",
        "`audit match`: the chains are intact but the client's and the servers' records "
        "disagree (a message the servers never saw, another hash, another outcome)",
    ),
    ExitCode(
        AGENT_BUSY,
        "client",
        "the agent answered, and said to try again later: an error it marked retryable "
        "(UNAVAILABLE when the agent cannot work on the message now or its task store is "
        "down, RESOURCE_EXHAUSTED at a limit), after the command's own retries",
    ),
    ExitCode(INTERRUPTED, "client", "interrupted (Ctrl-C)"),
    ExitCode(BROKEN_PIPE, "client", "stdout was closed early (e.g. piped into `head`)"),
)
"""Every exit code, in order."""


def help_text(commands: tuple[str, ...]) -> str:
    """The `exit codes:` epilog of --help, for the codes `commands` (or "all") return."""
    wanted = {"all", *commands}
    lines = [
        textwrap.fill(
            entry.meaning.replace("`", ""),
            width=79,
            initial_indent=f"  {entry.code:<4}",
            subsequent_indent=" " * 6,
        )
        for entry in TABLE
        if entry.commands in wanted
    ]
    return "exit codes:\n" + "\n".join(lines) + "\n"
