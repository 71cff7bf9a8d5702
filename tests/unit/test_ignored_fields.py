"""The count of ignored request members: per name, bounded against callers who make names up,
and each name logged once."""

from __future__ import annotations

import logging

import pytest

from a2a_grpc.server.protocol.ignored_fields import MAX_NAMES, OTHER, IgnoredFields


def test_each_name_is_counted_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    fields = IgnoredFields()
    with caplog.at_level(logging.WARNING):
        fields.note(["Task.generation", "Task.generation"])
        fields.note(["Task.generation"])
    assert fields.counts == {"Task.generation": 3}
    (said,) = [record.getMessage() for record in caplog.records]
    assert "Task.generation" in said and "--strict-parsing" in said


def test_names_are_bounded_and_odd_ones_count_as_other(caplog: pytest.LogCaptureFixture) -> None:
    fields = IgnoredFields()
    with caplog.at_level(logging.WARNING):
        fields.note(["Message.evil\nINFO forged line", "Message." + "x" * 200, "Message.a b"])
        assert fields.counts == {OTHER: 3}
        fields.note(f"Task.f{n}" for n in range(MAX_NAMES + 10))
        fields.note(f"Part.p{n}" for n in range(1000))
    assert len(fields.counts) == MAX_NAMES + 1  # MAX_NAMES names and `other`
    assert fields.counts[OTHER] == 3 + 10 + 1000
    assert len(caplog.records) == MAX_NAMES + 1, "each label logged once, however many names"
    assert not any("forged" in record.getMessage() for record in caplog.records)
