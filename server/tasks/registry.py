"""Which store a store URL names: its scheme, looked up among the built-in stores and those that
installed packages add through the `a2a_grpc.stores` entry point group (docs/stores.md).

- Built in: `memory://` (and the empty URL: this process's memory), `redis://`, `rediss://`,
  `unix://` (a Redis, shared by replicas; a Cluster node is found by itself),
  `redis+cluster://`, `rediss+cluster://` (a node of a Redis Cluster, required to be one), and
  `postgresql://`, `postgres://` (a PostgreSQL database, shared by replicas; its driver comes
  with the `postgresql` extra).
- Added: an entry point of the group `a2a_grpc.stores` whose name is the scheme and whose
  object is a `StoreKind` (tasks/base.py), e.g. in a package's pyproject.toml:
  `[project.entry-points."a2a_grpc.stores"]` `example = "a2a_store_example:EXAMPLE"`.
  A package cannot take over a built-in scheme: the built-in one is used, and the package's
  entry is left out of `registered_schemes`. Two packages that register one scheme make it
  unusable until one is removed (the error names both).

Schemes are matched without regard to case. Looking a scheme up is for start-up and the
settings' check: the server resolves its store once, never per call.
"""

from __future__ import annotations

import importlib
import re
from importlib.metadata import EntryPoint, entry_points

from a2a_grpc.server.tasks.base import (
    StoreKind,
    StoreListener,
    StoreSettings,
    TaskStore,
    Webhooks,
)

__all__ = [
    "BUILT_IN",
    "ENTRY_POINT_GROUP",
    "StoreRegistryError",
    "UnknownStoreError",
    "open_store",
    "redacted_url",
    "registered_schemes",
    "scheme_of",
    "store_kind",
    "store_problem",
]

ENTRY_POINT_GROUP = "a2a_grpc.stores"
"""The entry point group a package adds a store scheme through (name: the scheme; object: a
`StoreKind`)."""

BUILT_IN: dict[str, str] = {
    "memory": "a2a_grpc.server.tasks.memory:MEMORY",
    "redis": "a2a_grpc.server.tasks.redis.urls:REDIS",
    "rediss": "a2a_grpc.server.tasks.redis.urls:REDIS",
    "unix": "a2a_grpc.server.tasks.redis.urls:REDIS",
    "redis+cluster": "a2a_grpc.server.tasks.redis.urls:REDIS_CLUSTER",
    "rediss+cluster": "a2a_grpc.server.tasks.redis.urls:REDIS_CLUSTER",
    "postgresql": "a2a_grpc.server.tasks.postgres.urls:POSTGRES",
    "postgres": "a2a_grpc.server.tasks.postgres.urls:POSTGRES",
}
"""The schemes this package serves, each with its `StoreKind` as `module:name` (imported only
when a URL names it: a server in memory never imports the Redis client)."""

MEMORY_SCHEME = "memory"
"""The scheme of the empty store URL."""


class StoreRegistryError(ValueError):
    """A scheme's registration cannot be used: its package fails to load, gives no
    `StoreKind`, or shares the scheme with another package (the message says which)."""


class UnknownStoreError(StoreRegistryError):
    """No store is registered under the URL's scheme (the message lists those that are)."""


def scheme_of(url: str) -> str:
    """The URL's scheme, lower-cased: "memory" for the empty URL, "" for a value without
    `scheme://`."""
    if not url:
        return MEMORY_SCHEME
    scheme, sep, _ = url.partition("://")
    return scheme.lower() if sep else ""


def _added() -> dict[str, list[EntryPoint]]:
    """The entry points packages register, by scheme (built-in schemes left out)."""
    added: dict[str, list[EntryPoint]] = {}
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        scheme = entry.name.lower()
        if scheme not in BUILT_IN:
            added.setdefault(scheme, []).append(entry)
    return added


def registered_schemes() -> list[str]:
    """Every scheme a store URL may have: the built-in ones, then those packages add
    (sorted)."""
    return [*BUILT_IN, *sorted(_added())]


def _listing() -> str:
    return ", ".join(f"{scheme}://" for scheme in registered_schemes())


def _package(entry: EntryPoint) -> str:
    dist = entry.dist
    return "a package" if dist is None else f"{dist.name} {dist.version}"


def store_kind(url: str) -> StoreKind:
    """The `StoreKind` the URL's scheme names; UnknownStoreError (listing the registered
    schemes) when none does, StoreRegistryError when its registration cannot be used."""
    scheme = scheme_of(url)
    built_in = BUILT_IN.get(scheme)
    if built_in is not None:
        module, _, name = built_in.partition(":")
        kind = getattr(importlib.import_module(module), name)
        assert isinstance(kind, StoreKind)
        return kind
    entries = _added().get(scheme, []) if scheme else []
    if not entries:
        given = f"a {url.partition('://')[0]}:// URL" if scheme else "a value without scheme://"
        raise UnknownStoreError(
            f"no store is registered for {given}: the registered schemes are {_listing()} "
            f"(an installed package adds one through the {ENTRY_POINT_GROUP} entry points; "
            "an empty store keeps tasks in memory)"
        )
    if len(entries) > 1:
        packages = " and ".join(f"{_package(entry)} ({entry.value})" for entry in entries)
        raise StoreRegistryError(
            f"{scheme}:// is registered by {packages}: uninstall all but one of them"
        )
    (entry,) = entries
    try:
        kind = entry.load()
    except Exception as exc:
        raise StoreRegistryError(
            f"the store of {scheme}:// ({entry.value}, from {_package(entry)}) fails to "
            f"load: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(kind, StoreKind):
        raise StoreRegistryError(
            f"the entry point {scheme} = {entry.value} (from {_package(entry)}) gives a "
            f"{type(kind).__name__}, not the a2a_grpc.server.tasks.base.StoreKind a store "
            "scheme must name"
        )
    return kind


def store_problem(url: str) -> str | None:
    """Why `url` names no store that can serve, in one line without its password, or None
    (the empty URL: memory)."""
    if not url:
        return None
    try:
        kind = store_kind(url)
    except StoreRegistryError as exc:
        return f"store: {exc}"
    return kind.check(url)


def open_store(
    url: str, settings: StoreSettings, listener: StoreListener, webhooks: Webhooks | None
) -> TaskStore:
    """A store (not started) of the kind the URL's scheme names (`store_kind`'s errors)."""
    return store_kind(url).open(url, settings, listener, webhooks)


_PASSWORD_PARAMETER = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


def redacted_url(url: str) -> str:
    """`url` fit to print or log: every password in it replaced by `***`, the rest as given.

    Hidden: the password of the userinfo (`redis://user:***@host:6379/0`), a userinfo without a
    colon as a whole (`redis://***@host`: it may be a password written where the user goes),
    and the value of a `password` query parameter (`unix:///run/redis.sock?password=***`). The
    userinfo ends at the URL's last `@`, so an unescaped `@`, `/` or `?` in a password cannot
    leak its tail; when in doubt more is hidden, never less. Never raises.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    userinfo, at, location = rest.rpartition("@")
    if at:
        user, colon, _ = userinfo.partition(":")
        rest = f"{user}:***@{location}" if colon else f"***@{location}"
    return scheme + sep + _PASSWORD_PARAMETER.sub(r"\1***", rest)
