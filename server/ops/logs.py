"""How `a2a-grpc serve` logs: level and format (text, or one JSON object per line)."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from a2a_grpc.server.protocol import log_context
from a2a_grpc.server.protocol.spans import ids_of

LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def rfc3339(seconds: float) -> str:
    """`2026-12-01T12:00:00.123Z` for a time.time() reading (UTC, milliseconds)."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{stamp}.{int(seconds % 1 * 1000):03d}Z"


STARTUP_LOGGER = "a2a_grpc.serve"
"""The `logger` of the start-up and shutdown lines, in `--log-format json`."""


def startup_line(text: str, program: str, form: str = "text") -> str:
    """One start-up or shutdown line of `serve` (stdout): `PROGRAM: TEXT`, or with `form`
    "json" one JSON object as JsonFormatter writes records, with `program` as a field."""
    if form != "json":
        return f"{program}: {text}"
    entry = {
        "time": rfc3339(time.time()),
        "level": "INFO",
        "logger": STARTUP_LOGGER,
        "message": text,
        "program": program,
    }
    return json.dumps(entry, ensure_ascii=False)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (RFC 3339 UTC), level, logger, message, the exception
    when there is one, and any `extra=` fields a caller passed (e.g. task_id)."""

    _standard = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
        "message",
        "asctime",
    }

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": rfc3339(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        for key, value in record.__dict__.items():
            if key not in self._standard and not key.startswith("_"):
                entry[key] = value if isinstance(value, str | int | float | bool) else str(value)
        return json.dumps(entry, ensure_ascii=False)


class CallFields(logging.Filter):
    """Adds to each record what is known of the call or task run it was logged in: `method`,
    `principal` ("" when anonymous), `task_id`, `context_id` (see log_context.py). A field the
    caller passed with `extra=` is kept; an unknown one is left out. JSON lines show them."""

    def filter(self, record: logging.LogRecord) -> bool:
        fields = record.__dict__
        call, run = log_context.CALL.get(), log_context.RUN.get()
        task_id, context_id = run if run is not None else ("", "")
        if call is not None:
            rpc, principal, request = call
            fields.setdefault("method", rpc)
            fields.setdefault("principal", principal)
            if not (task_id and context_id):  # no run here: what the request names
                asked_task, asked_context = ids_of(request)
                task_id, context_id = task_id or asked_task, context_id or asked_context
        if task_id:
            fields.setdefault("task_id", task_id)
        if context_id:
            fields.setdefault("context_id", context_id)
        return True


def configure(level: str = "info", form: str = "text") -> None:
    """Sets the root logger's level and format, like logging.basicConfig: only when nothing
    configured logging before (an embedding program, or a test runner, keeps its own)."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if form == "json" else logging.Formatter(TEXT_FORMAT))
    handler.addFilter(CallFields())
    root.addHandler(handler)
    root.setLevel(level.upper())
