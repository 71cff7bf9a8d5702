"""Request members the HTTP bindings ignored because no A2A 1.0 message has them (spec §5.7):
counted per name for `/metrics`, and each name logged the first time it is counted.

A name is the message type and the member as sent (`Task.generation`, from
`core/protojson.py`). Callers choose the members, so what is kept is bounded: at most
`MAX_NAMES` names are counted one by one, and a name past that, or one that is not shaped as a
proto field's (letters, digits and `_`, at most 64 characters: nothing a log line or a label
could be bent by), counts under `other`. A server logs a name once (a process serves one
server; `--workers` processes each log their own), so the log says at most `MAX_NAMES` + 1
such lines, however many names callers make up.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

log = logging.getLogger(__name__)

MAX_NAMES = 64
"""Distinct names counted, and logged, one by one."""
OTHER = "other"
"""The label of every name past `MAX_NAMES`, or not shaped as a field name."""
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}\.[A-Za-z_][A-Za-z0-9_]{0,63}\Z")


class IgnoredFields:
    """One server's count of ignored request members, by name (not thread-safe: the server's
    event loop calls it)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def note(self, names: Iterable[str]) -> None:
        """Counts each of `names` (a request's ignored members), and logs each new label."""
        counts = self.counts
        for name in names:
            label = name if _NAME.match(name) else OTHER
            if label not in counts:
                if label != OTHER and len(counts) - (OTHER in counts) >= MAX_NAMES:
                    label = OTHER
                if label not in counts:
                    _log_first(label)
            counts[label] = counts.get(label, 0) + 1


def _log_first(label: str) -> None:
    if label == OTHER:
        log.warning(
            "ignored request fields this server does not know, under other names than the "
            "first %d or not shaped as field names (A2A 1.0.1 §5.7); "
            'a2a_ignored_request_fields_total{field="%s"} counts them',
            MAX_NAMES,
            OTHER,
        )
        return
    log.warning(
        "ignored the request field %s: A2A 1.0 has no such field (a newer version's, or a "
        "misspelling); unknown fields are ignored (A2A 1.0.1 §5.7), --strict-parsing refuses "
        "them. Logged once; a2a_ignored_request_fields_total counts them",
        label,
    )
