"""Credentials sent as gRPC metadata on every call (bearer tokens, API keys, your own)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol


class Credentials(Protocol):
    """Supplies metadata entries for one call; awaited before every call, so it may refresh.

    Keys must be lowercase (gRPC refuses uppercase metadata keys).
    """

    async def metadata(self) -> Sequence[tuple[str, str]]: ...


@dataclass(frozen=True)
class BearerToken:
    """`authorization: Bearer <token>` (the HTTP auth scheme a card declares as `bearer`)."""

    token: str = field(repr=False)

    async def metadata(self) -> Sequence[tuple[str, str]]:
        return (("authorization", f"Bearer {self.token}"),)


@dataclass(frozen=True)
class ApiKey:
    """An API key in the metadata entry a card's APIKeySecurityScheme names (location header)."""

    name: str
    value: str = field(repr=False)

    async def metadata(self) -> Sequence[tuple[str, str]]:
        return ((self.name.lower(), self.value),)
