"""`serve --log-level/--log-format`: the JSON lines an operator's log pipeline reads."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from a2a_grpc.server import cli
from a2a_grpc.server.ops import logs


def test_json_lines_carry_time_level_logger_message_and_extras() -> None:
    record = logging.LogRecord(
        "a2a_grpc.server.protocol.run",
        logging.WARNING,
        __file__,
        1,
        "task %s failed",
        ("t1",),
        None,
    )
    record.task_id = "t1"
    entry = json.loads(logs.JsonFormatter().format(record))
    assert entry["level"] == "WARNING" and entry["logger"] == "a2a_grpc.server.protocol.run"
    assert entry["message"] == "task t1 failed" and entry["task_id"] == "t1"
    assert entry["time"].endswith("Z") and "T" in entry["time"]


def test_an_exception_is_one_json_field() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), None)
        record.exc_info = sys.exc_info()
    line = logs.JsonFormatter().format(record)
    assert "\n" not in line and "ValueError: boom" in json.loads(line)["exception"]


def test_serve_takes_the_options_and_refuses_others(capsys: pytest.CaptureFixture[str]) -> None:
    args = cli.parser().parse_args(["--log-level", "debug", "--log-format", "json"])
    assert (args.log_level, args.log_format) == ("debug", "json")
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["--log-format", "xml"])
    assert "invalid choice" in capsys.readouterr().err


def test_configure_sets_the_root_level_and_format() -> None:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        root.handlers[:] = []
        logs.configure("warning", "json")
        assert root.level == logging.WARNING
        assert isinstance(root.handlers[0].formatter, logs.JsonFormatter)
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


def _filtered(**extra: object) -> logging.LogRecord:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "m", (), None)
    record.__dict__.update(extra)
    logs.CallFields().filter(record)
    return record


def test_call_fields_come_from_the_call_then_the_run_and_extras_win() -> None:
    import contextvars

    from a2a_grpc.generated import a2a_pb2
    from a2a_grpc.server.protocol import log_context

    assert not {"method", "principal", "task_id", "context_id"} & set(_filtered().__dict__)

    def in_call() -> None:
        request = a2a_pb2.GetTaskRequest(id="t-asked")
        log_context.CALL.set(("GetTask", "alice", request))
        record = _filtered()
        assert (record.method, record.principal, record.task_id) == ("GetTask", "alice", "t-asked")  # type: ignore[attr-defined]
        assert not hasattr(record, "context_id")  # GetTask names no context
        log_context.RUN.set(("t-run", "c-run"))
        record = _filtered(task_id="t-extra")
        assert (record.task_id, record.context_id) == ("t-extra", "c-run")  # type: ignore[attr-defined]

    contextvars.copy_context().run(in_call)
