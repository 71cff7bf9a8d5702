"""The strict parsers of the ids a stream resumes after (server/tasks/replay_ids.py): over
the seeded odd texts and every text an id can be, only the exact text the server issues
parses, to the number it names."""

from __future__ import annotations

import pytest

from a2a_grpc.server.tasks.contract.odd_ids import odd_ids
from a2a_grpc.server.tasks.replay_ids import (
    SEQUENCE_MAX,
    STREAM_PART_MAX,
    not_an_id,
    parse_entry_id,
    parse_sequence,
    shown,
)


@pytest.mark.parametrize("text", ["0", "1", "42", str(SEQUENCE_MAX)])
def test_a_sequence_the_server_issues_parses(text: str) -> None:
    assert parse_sequence(text) == int(text)


@pytest.mark.parametrize(
    "text", ["1-0", "0-0", "1733112345678-0", f"{STREAM_PART_MAX}-{STREAM_PART_MAX}"]
)
def test_an_entry_id_the_server_issues_parses(text: str) -> None:
    head, _, tail = text.partition("-")
    assert parse_entry_id(text) == (int(head), int(tail))


def test_no_odd_text_parses_unless_it_is_exactly_an_issued_id() -> None:
    """Property: a text parses only when it is the canonical text of the number it names, in
    range (`int` reads `٣` as 3 and `+1` as 1; neither parses)."""
    texts = odd_ids("unit", 5000)
    for text in texts:
        sequence = parse_sequence(text)
        if sequence is not None:
            assert str(sequence) == text and 0 <= sequence <= SEQUENCE_MAX, text
        entry = parse_entry_id(text)
        if entry is not None:
            assert f"{entry[0]}-{entry[1]}" == text and max(entry) <= STREAM_PART_MAX, text
    for text in ("\u00b2", "\u0663", "\uff11", "9" * 5000, str(SEQUENCE_MAX + 1), "+1", "01"):
        assert parse_sequence(text) is None, text
    for text in ("0-100000000000000",):
        assert parse_entry_id(text) == (0, 100000000000000)
    for text in (f"{STREAM_PART_MAX + 1}-0", "1", "1-", "\uff11-0", "1-0\n"):
        assert parse_entry_id(text) is None, text


def test_a_refused_id_is_repeated_short_and_escaped() -> None:
    assert shown("42") == "'42'"
    long = shown("9" * 5000)
    assert long.startswith("'" + "9" * 40 + "'") and "5000 characters" in long
    assert len(not_an_id("t1", "9" * 5000).message) < 120
    assert "\\x00" in shown("1\x00")
