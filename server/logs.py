"""How `a2a-grpc serve` logs: level and format (text, or one JSON object per line)."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (RFC 3339 UTC), level, logger, message, the exception
    when there is one, and any `extra=` fields a caller passed (e.g. task_id)."""

    _standard = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
        "message",
        "asctime",
    }

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
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


def configure(level: str = "info", form: str = "text") -> None:
    """Sets the root logger's level and format, like logging.basicConfig: only when nothing
    configured logging before (an embedding program, or a test runner, keeps its own)."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if form == "json" else logging.Formatter(TEXT_FORMAT))
    root.addHandler(handler)
    root.setLevel(level.upper())
