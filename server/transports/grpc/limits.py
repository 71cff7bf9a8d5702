"""gRPC core's channel arguments that bound a server's connections and the calls it has not
picked up yet (docs/server.md, Limits)."""

from __future__ import annotations

from a2a_grpc.server.config import ServerConfig

PENDING_CONNECTIONS = 4
"""grpc's queue of calls not yet picked up holds this many connections at their stream limit."""
KEEPALIVE_MS = 60_000
"""Keepalive ping interval on connections with streams open."""
PING_TIMEOUT_MS = 20_000
"""How long a keepalive ping may go unanswered before the connection is closed."""


def connection_limits(config: ServerConfig) -> list[tuple[str, int]]:
    """gRPC core's limits on connections and on calls not yet served (docs/server.md, Limits)."""
    pending = PENDING_CONNECTIONS * config.max_streams_per_connection
    return [
        # HTTP/2 MAX_CONCURRENT_STREAMS (unlimited by default). grpc's overload protection (on
        # by default) counts a stream until the server has released it, not only until the
        # peer resets it, so a rapid-reset flood holds at most this many and gets REFUSED_STREAM
        # past it. A client waits for a free stream rather than go past the limit, but one that
        # keeps this many busy can meet the same refusal (its finished streams are not released
        # yet), so the default sits above any one client's burst.
        ("grpc.max_concurrent_streams", config.max_streams_per_connection),
        # Calls grpc has accepted that the Python server has not picked up yet. Past the soft
        # limit grpc drops new calls at random, past the hard one always, and the caller sees
        # CANCELLED without details: the defaults (1000 / 3000) did that to a burst of a few
        # thousand calls. Equal limits, so nothing is dropped at random, with room for four
        # connections at their stream limit; the servicer's own admission answers the excess
        # with RESOURCE_EXHAUSTED and RetryInfo as soon as it picks a call up.
        ("grpc.server.max_pending_requests", pending),
        ("grpc.server.max_pending_requests_hard_limit", pending),
        # Ping a connection that has streams open after a minute of silence (grpc's server
        # default: two hours) and close it when 20 s pass without an answer (grpc: one minute),
        # so a peer that vanished without closing its socket gives its streams back after
        # ~80 s instead of hours; and keep pinging a quiet subscription's connection (grpc
        # stops after 2 pings without data). Clients do not hold a server's pings against it
        # (the ping-strike policy is the server's, for clients' pings).
        ("grpc.keepalive_time_ms", KEEPALIVE_MS),
        ("grpc.keepalive_timeout_ms", PING_TIMEOUT_MS),
        ("grpc.http2.ping_timeout_ms", PING_TIMEOUT_MS),
        ("grpc.http2.max_pings_without_data", 0),
        # GOAWAY at --max-connection-age: what ends a rapid-reset flood (docs/server.md, Limits)
        *[("grpc.max_connection_age_ms", max(1, round(config.max_connection_age * 1000)))]
        * (config.max_connection_age > 0),
    ]
