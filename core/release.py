"""This release of a2a-grpc: its version and the A2A protocol versions it speaks.

The version has one source, the installed package's metadata (pyproject.toml's `version`);
nothing else in the code spells it."""

from __future__ import annotations

import importlib.metadata

from a2a_grpc.core import v03
from a2a_grpc.core.metadata import PROTOCOL_VERSION

DISTRIBUTION = "a2a-grpc"
PROTOCOLS_SERVED = (PROTOCOL_VERSION, v03.PROTOCOL_VERSION)
"""The A2A versions a server of this release serves, newest first."""


def version() -> str:
    """The installed version (PEP 440, e.g. `0.2.0`); "unknown" when the code runs from a
    source tree that was never installed."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def version_line() -> str:
    """What `a2a-grpc --version` prints: `a2a-grpc 0.2.0 (A2A 1.0, 0.3)`."""
    return f"{DISTRIBUTION} {version()} (A2A {', '.join(PROTOCOLS_SERVED)})"
