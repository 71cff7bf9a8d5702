"""A2A service parameters carried in gRPC metadata: keys, version negotiation, extension lists."""

from __future__ import annotations

from collections.abc import Iterable

VERSION_KEY = "a2a-version"
EXTENSIONS_KEY = "a2a-extensions"
PROTOCOL_VERSION = "1.0"
SUPPORTED_VERSIONS: frozenset[str] = frozenset({PROTOCOL_VERSION})


def major_minor(version: str) -> str | None:
    """`"1.0.3"` → `"1.0"`; None when the value is not a dotted version (patch is ignored, §3.6)."""
    parts = version.strip().split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:3]) or len(parts) > 3:
        return None
    return f"{int(parts[0])}.{int(parts[1])}"


def parse_extensions(values: Iterable[str]) -> tuple[str, ...]:
    """Extension URIs from every `a2a-extensions` entry, comma-separated, deduplicated, in order."""
    seen: dict[str, None] = {}
    for value in values:
        for uri in value.split(","):
            uri = uri.strip()
            if uri:
                seen.setdefault(uri, None)
    return tuple(seen)
