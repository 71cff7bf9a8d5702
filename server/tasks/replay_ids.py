"""The event ids a stream resumes after (`watch(after=...)`, core/event_ids.py): each store
family's one strict parser, and the two refusals every store gives.

An id comes from the caller (the gRPC metadata `a2a-last-event-id`, the SSE `Last-Event-ID`
header), so it may be anything. Only the exact text the server issues parses: ASCII decimal
digits without a sign, spaces or leading zeros (`str.isdigit` and `int` take superscript,
Arabic-Indic and fullwidth digits, `+1` and ` 1`; none of them is an id), within the store's
integer range. Anything else is
"not an event id of the task", EVENT_ID_EXPIRED (gRPC OUT_OF_RANGE, HTTP 410, JSON-RPC -32000)
like an id the store no longer keeps: never an INTERNAL error, and never a replay of the whole
stream.
"""

from __future__ import annotations

import re

from a2a_grpc.core.errors import EventIdExpiredError

_DECIMAL = re.compile(r"0|[1-9][0-9]{0,19}", re.ASCII)
"""A decimal without sign or leading zeros, at most 20 digits (2**64 - 1 has 20)."""
_STREAM_ID = re.compile(r"(0|[1-9][0-9]{0,19})-(0|[1-9][0-9]{0,19})", re.ASCII)

SEQUENCE_MAX = 2**63 - 1
"""The largest per-task sequence (in memory and PostgreSQL, whose column is a bigint)."""
STREAM_PART_MAX = 2**64 - 1
"""The largest part of a Redis stream entry id (`<ms>-<seq>`, two unsigned 64-bit numbers)."""
SHOWN = 40
"""Characters of a refused id that its error message repeats."""


def parse_sequence(text: str) -> int | None:
    """A per-task sequence id ("0", "1", ...: the in-memory and PostgreSQL stores), or None
    when `text` is no such id."""
    if _DECIMAL.fullmatch(text) is None:
        return None
    value = int(text)
    return value if value <= SEQUENCE_MAX else None


def parse_entry_id(text: str) -> tuple[int, int] | None:
    """A Redis stream entry id ("<ms>-<seq>", as Redis writes it), or None when `text` is no
    such id (the bare "<ms>" that Redis commands also take is not one the server issues)."""
    match = _STREAM_ID.fullmatch(text)
    if match is None:
        return None
    milliseconds, sequence = int(match[1]), int(match[2])
    if milliseconds > STREAM_PART_MAX or sequence > STREAM_PART_MAX:
        return None
    return milliseconds, sequence


def shown(event_id: str) -> str:
    """The id as an error message repeats it: quoted, escaped, and cut when long."""
    if len(event_id) <= SHOWN:
        return repr(event_id)
    return f"{event_id[:SHOWN]!r}... ({len(event_id)} characters)"


def not_an_id(task_id: str, event_id: str) -> EventIdExpiredError:
    """The refusal of an id that is not one of the task's stream (malformed, out of range,
    past its last event, or another task's)."""
    return EventIdExpiredError(f"{shown(event_id)} is not an event id of task {task_id}'s stream")


def no_longer_kept(task_id: str, event_id: str, kept: int) -> EventIdExpiredError:
    """The refusal of an id older than the task's `kept` last events (or its stream is gone)."""
    return EventIdExpiredError(
        f"the server no longer keeps the events of task {task_id} after {shown(event_id)} "
        f"(it keeps the last {kept})"
    )
