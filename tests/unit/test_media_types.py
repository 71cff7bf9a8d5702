"""Which media types an HTTP `Accept` header admits (the HTTP+JSON answers' media type)."""

from __future__ import annotations

import pytest

from a2a_grpc.core.media_types import accept_ranges, matches


@pytest.mark.parametrize(
    ("header", "ranges"),
    [
        (None, []),
        ("", []),
        ("application/json", ["application/json"]),
        (
            "Application/JSON; charset=utf-8, text/event-stream",
            ["application/json", "text/event-stream"],
        ),
        ("application/a2a+json;q=0, application/json;q=0.5", ["application/json"]),
        ("*/*;q=0.0", []),
        ("text/event-stream;q=oops", ["text/event-stream"]),
    ],
)
def test_accept_ranges(header: str | None, ranges: list[str]) -> None:
    assert accept_ranges(header) == ranges


def test_a_wildcard_range_admits_both_json_types() -> None:
    for accept in ("*/*", "application/*"):
        assert matches("application/json", accept_ranges(accept))
        assert matches("application/a2a+json", accept_ranges(accept))
    assert not matches("application/a2a+json", accept_ranges("application/json"))
