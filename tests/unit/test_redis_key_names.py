"""The Redis store's key names: built once per scope, the same bytes as before, bounded."""

from __future__ import annotations

from a2a_grpc.server.tasks.base import Scope
from a2a_grpc.server.tasks.redis.keys import SCOPE_NAMES_MAX_CHARS, Keys


def test_scope_names_are_the_documented_keys_and_long_scopes_are_not_kept() -> None:
    keys = Keys("a2a")
    scope = Scope("acme", "alice")
    names = keys.scope(scope)
    # The key layout every replica shares (old and new during a rolling deploy).
    assert names.index_prefix == "a2a:{t:61636d65}:o:616c696365:"
    assert names.live_owner == "a2a:{room}:o:616c696365"
    assert names.live_tenant == "a2a:{room}:t:61636d65"
    assert names.text == '["acme", "alice"]'
    assert keys.index(scope, "all") == "a2a:{t:61636d65}:o:616c696365:all"
    assert keys.indexes(scope, 3, "c1") == [
        "a2a:{t:61636d65}:o:616c696365:all",
        "a2a:{t:61636d65}:o:616c696365:s:3",
        "a2a:{t:61636d65}:o:616c696365:c:6331",
    ]
    assert keys.scope(scope) is names  # kept
    # A caller chooses its tenant, up to a request's size: such names are built, never kept.
    huge = Scope("t" * (SCOPE_NAMES_MAX_CHARS + 1), "bob")
    built = keys.scope(huge)
    assert built.live_tenant == "a2a:{room}:t:" + "74" * (SCOPE_NAMES_MAX_CHARS + 1)
    assert keys.scope(huge) is not built
    assert huge not in keys._scopes and len(keys._scopes) == 1
