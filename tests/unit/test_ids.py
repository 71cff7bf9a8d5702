"""Ids minted by core.ids have the UUID version 4 form and do not repeat."""

from __future__ import annotations

import uuid

from a2a_grpc.core.ids import new_id


def test_ids_are_uuid4_and_unique() -> None:
    ids = [new_id() for _ in range(5000)]  # crosses several refills of the pool
    assert len(set(ids)) == len(ids)
    for text in ids[:50]:
        parsed = uuid.UUID(text)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
        assert str(parsed) == text


def test_every_variant_digit_and_the_version_digit_are_right() -> None:
    ids = [new_id() for _ in range(3000)]
    assert {text[14] for text in ids} == {"4"}
    assert {text[19] for text in ids} == set("89ab")  # all four variant digits occur
    assert all(len(text) == 36 and text.count("-") == 4 for text in ids)


def test_every_random_position_takes_every_hex_digit() -> None:
    ids = [new_id() for _ in range(3000)]
    fixed = {8, 13, 14, 18, 19, 23}  # the four dashes, the version and the variant digit
    for at in set(range(36)) - fixed:
        assert {text[at] for text in ids} == set("0123456789abcdef"), at
