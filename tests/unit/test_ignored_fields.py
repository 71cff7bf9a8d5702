"""The count of ignored request members: per name, bounded against callers who make names up,
and each name logged once per process."""

from __future__ import annotations

import logging
import uuid

import pytest

from a2a_grpc.server.ops.ignored_fields import MAX_NAMES, OTHER, IgnoredFields


def fresh(prefix: str = "Task") -> str:
    """A name no other test has noted (the log remembers names for the whole process)."""
    return f"{prefix}.f{uuid.uuid4().hex[:12]}"


def test_each_name_is_counted_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    fields = IgnoredFields()
    name = fresh()
    with caplog.at_level(logging.WARNING):
        fields.note([name, name])
        fields.note([name])
    assert fields.counts == {name: 3}
    said = [record.getMessage() for record in caplog.records if name in record.getMessage()]
    assert len(said) == 1
    assert "--strict-parsing" in said[0]


def test_names_are_bounded_and_odd_ones_count_as_other() -> None:
    fields = IgnoredFields()
    fields.note(["Message.evil\nINFO forged line", "Message." + "x" * 200, "Message.a b"])
    assert fields.counts == {OTHER: 3}
    fields.note(fresh() for _ in range(MAX_NAMES + 10))
    assert len(fields.counts) == MAX_NAMES + 1  # MAX_NAMES names and `other`
    assert fields.counts[OTHER] == 3 + 10
