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
