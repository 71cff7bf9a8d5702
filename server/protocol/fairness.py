"""Fair shares of streams: how many streams, and how many replays, one principal and one
tenant may have at once (the call gate takes a share for every stream it admits).

A replay is the part of a resumed SubscribeToTask (a Last-Event-ID) that sends the task's kept
events; it ends when the stream has caught up with the task (`Share.replayed`), or with the
stream. Streams and replays past a cap are refused at once with RESOURCE_EXHAUSTED and
RetryInfo, before anything is looked up: one caller resuming a thousand streams at once gets
its share served and the rest refused, instead of a thousand streams that starve everyone,
itself included. The counts of a principal or tenant with nothing open are dropped, so they
never grow with the callers seen.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from a2a_grpc.core.errors import ResourceExhaustedError
from a2a_grpc.server.config import ServerConfig

SHARE_RETRY_DELAY = 1.0
"""Seconds a stream refused over its principal's or tenant's share is told to wait, on average:
replays are paced to finish in about that (a thousand kept events, in batches). Each refusal
says a delay drawn evenly from half of it to one and a half times it, so that a thousand
streams refused together do not all come back in the same instant (measured: with one fixed
delay, the retries of a 1,000-stream storm came in waves that held another caller's call up
for seconds)."""


@dataclass(frozen=True, slots=True)
class ShareLimits:
    """The caps (`serve`'s `--max-open-streams-per-principal` and the three others)."""

    streams_per_principal: int = 1000
    streams_per_tenant: int = 5000
    replays_per_principal: int = 16
    replays_per_tenant: int = 64

    @classmethod
    def of(cls, config: ServerConfig) -> ShareLimits:
        """The caps `config` sets."""
        return cls(
            streams_per_principal=config.max_open_streams_per_principal,
            streams_per_tenant=config.max_open_streams_per_tenant,
            replays_per_principal=config.max_replays_per_principal,
            replays_per_tenant=config.max_replays_per_tenant,
        )


class Shares:
    """Open streams and replays by principal and by tenant, against `ShareLimits`. Runs on the
    server's event loop only."""

    def __init__(self, limits: ShareLimits) -> None:
        self.limits = limits
        self._streams: dict[str, int] = {}  # "p:<principal>" and "t:<tenant>"
        self._replays: dict[str, int] = {}

    def take(self, principal: str, tenant: str, *, replay: bool) -> Share:
        """A share for one stream (and its replay, with `replay`); ResourceExhaustedError,
        saying which cap, when it would pass one."""
        limits = self.limits
        by_principal, by_tenant = "p:" + principal, "t:" + tenant
        streams = self._streams
        if streams.get(by_principal, 0) >= limits.streams_per_principal:
            raise _refusal(f"streams open for this caller ({limits.streams_per_principal})")
        if streams.get(by_tenant, 0) >= limits.streams_per_tenant:
            raise _refusal(f"streams open in tenant {tenant!r} ({limits.streams_per_tenant})")
        if replay:
            replays = self._replays
            if replays.get(by_principal, 0) >= limits.replays_per_principal:
                raise _refusal(
                    f"resumed streams replaying at once for this caller "
                    f"({limits.replays_per_principal})"
                )
            if replays.get(by_tenant, 0) >= limits.replays_per_tenant:
                raise _refusal(
                    f"resumed streams replaying at once in tenant {tenant!r} "
                    f"({limits.replays_per_tenant})"
                )
            _add(replays, by_principal, by_tenant, 1)
        _add(streams, by_principal, by_tenant, 1)
        return Share(self, by_principal, by_tenant, replay)

    def open_streams(self, *, principal: str | None = None, tenant: str | None = None) -> int:
        """Streams open now for `principal` or in `tenant`."""
        return self._streams.get(_key(principal, tenant), 0)

    def replays(self, *, principal: str | None = None, tenant: str | None = None) -> int:
        """Replays under way now for `principal` or in `tenant`."""
        return self._replays.get(_key(principal, tenant), 0)


class Share:
    """One stream's place in `Shares`; give it back with `release` (once is enough)."""

    __slots__ = ("_by_principal", "_by_tenant", "_replaying", "_shares", "_streaming")

    def __init__(self, shares: Shares, by_principal: str, by_tenant: str, replay: bool) -> None:
        self._shares = shares
        self._by_principal = by_principal
        self._by_tenant = by_tenant
        self._replaying = replay
        self._streaming = True

    def replayed(self) -> None:
        """The stream's replay caught up with the task: its replay slot is free again."""
        if self._replaying:
            self._replaying = False
            _add(self._shares._replays, self._by_principal, self._by_tenant, -1)

    def release(self) -> None:
        """The stream ended: its slots are free again."""
        self.replayed()
        if self._streaming:
            self._streaming = False
            _add(self._shares._streams, self._by_principal, self._by_tenant, -1)


def _add(counts: dict[str, int], first: str, second: str, delta: int) -> None:
    for key in (first, second):
        count = counts.get(key, 0) + delta
        if count:
            counts[key] = count
        else:
            del counts[key]


def _key(principal: str | None, tenant: str | None) -> str:
    return "p:" + principal if principal is not None else "t:" + (tenant or "")


def _refusal(what: str) -> ResourceExhaustedError:
    return ResourceExhaustedError(
        f"too many {what}: this stream is refused; retry after the delay in RetryInfo, or end "
        "a stream first",
        retry_delay=SHARE_RETRY_DELAY * random.uniform(0.5, 1.5),
    )
