"""Server settings with their defaults, in one place (the CLI prints them at start)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path

from a2a_grpc.server.addresses import parse_advertise, parse_http_url
from a2a_grpc.server.push.delivery import DeliveryPolicy
from a2a_grpc.server.tasks.registry import redacted_url, store_kind, store_problem
from a2a_grpc.server.trust.mesh import (
    DEFAULT_TRUSTED_PROXIES,
    trust_domain_problem,
    trusted_networks,
)
from a2a_grpc.server.trust.oidc import (
    ALGORITHMS,
    DEFAULT_LEEWAY_S,
    DEFAULT_REFRESH_INTERVAL_S,
    DEFAULT_TIMEOUT_S,
    check_http_url,
)

MiB = 1024 * 1024

STORE_ENV = "A2A_GRPC_STORE"
"""Environment variable `serve --store` defaults to (keeps the URL's password out of `ps`)."""
BINDINGS = ("grpc", "jsonrpc", "http+json")
"""The protocol bindings a server can serve (`serve --bindings`). gRPC is always served: the
server's Health and reflection are gRPC services, and it is the binding the others adapt."""
HTTP_BINDINGS = {"jsonrpc": "JSONRPC", "http+json": "HTTP+JSON"}
"""The HTTP bindings, by their `--bindings` name, with the card's `protocolBinding` for each."""
MAX_TASK_LEASE = 3600.0
"""Longest task lease accepted, in seconds."""
DEFAULT_DRAIN_DELAY = 5.0
"""Seconds a stopping server keeps serving while Health says NOT_SERVING: longer than the
health-check interval of common balancers and sidecars at their usual settings (Kubernetes'
readiness probe: 10 s by default, often set to 2-5 s; Envoy's active health checks: 1-5 s)."""
MAX_DRAIN_DELAY = 3600.0
"""Longest drain delay accepted, in seconds."""


def _jwt_problems(config: ServerConfig) -> list[str]:
    """What keeps the JWT settings from checking tokens (none when JWTs are off)."""
    if not (config.oidc_issuer or config.jwks):
        given = [name for name in ("jwt_issuer", "jwt_audience") if getattr(config, name)]
        return [f"{name} is for JWTs: set oidc_issuer or jwks too" for name in given]
    problems = []
    if config.oidc_issuer and config.jwks:
        problems.append("oidc_issuer and jwks: choose one (the issuer's discovery names its keys)")
    if config.oidc_issuer:
        try:
            check_http_url(config.oidc_issuer, "oidc_issuer")
        except ValueError as exc:
            problems.append(str(exc))
        if config.jwt_issuer:
            problems.append("jwt_issuer is for jwks: with oidc_issuer, that URL is the issuer")
    elif not config.jwt_issuer:
        problems.append("jwks needs jwt_issuer: the iss every JWT must carry")
    if not config.jwt_audience:
        problems.append("JWTs need jwt_audience: the aud every JWT must hold")
    if not config.jwt_principal_claim:
        problems.append("jwt_principal_claim must name a claim")
    unknown = [a for a in config.jwt_algorithms if a not in ALGORITHMS]
    if unknown or not config.jwt_algorithms:
        problems.append(
            f"jwt_algorithms must be among {', '.join(ALGORITHMS)} (asymmetric only), got "
            f"{', '.join(config.jwt_algorithms) or 'none'}"
        )
    return problems


def memory_limit() -> int:
    """The memory this process may use: physical memory, or the cgroup's limit when lower."""
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
    except OSError:
        return int(physical)
    return int(min(physical, int(limit))) if limit.isdigit() else int(physical)


def default_store_bytes() -> int:
    """A quarter of `memory_limit()`. A counted byte costs about one byte of memory for large
    payloads (0.99, `python -m tests.load.store_memory`), and small tasks are bounded by
    `max_tasks` as well, so this leaves room for the rest of the server and its peaks."""
    return memory_limit() // 4


@dataclass(frozen=True)
class ServerConfig:
    """Every setting of a server. Each field is the `a2a-grpc serve` option of the same name
    (`max_tasks` is `--max-tasks`; docs/server.md has the table), except a few tuning
    constants and `reuse_port` (`a2a_grpc.server.settings.NOT_OPTIONS` says why). Durations are
    seconds, sizes bytes. The defaults are `serve`'s when no environment variable sets an
    option, except `http_port`: None here (no HTTP port), the gRPC port + 1 for `serve`.

    Frozen; an invalid combination raises ValueError at construction, naming every problem.
    """

    host: str = "127.0.0.1"
    """Address the gRPC and HTTP ports listen on: an IPv4 or IPv6 address (`::1`) or a host
    name; `0.0.0.0` or `::` for every interface. Default: loopback only."""
    port: int = 50051
    """TCP port the gRPC server listens on; 0 picks a free one, the bound port is
    `RunningServer.port`. Never shared with another process (except this server's `workers`)."""
    max_tasks: int = 100_000
    """Tasks kept in memory; when full, the oldest terminal tasks are evicted first."""
    task_ttl: float = 3600.0
    """Seconds a terminal task stays readable before it is evicted."""
    max_inline_bytes: int = 1 * MiB
    """Largest `raw` part accepted inline; bigger content must come as a url part."""
    strict_version: bool = False
    """Refuse requests without `a2a-version` (the spec reads that as 0.3)."""
    strict_parsing: bool = False
    """Refuse JSON-RPC and HTTP+JSON requests with members A2A 1.0 does not have
    (INVALID_PARAMS / 400), instead of ignoring them as spec §5.7 says implementations SHOULD
    (`core/protojson.py`). gRPC's binary protobuf ignores unknown fields either way."""
    compat_03: bool = True
    """Also serve A2A 0.3's `a2a.v1.A2AService` (and list it on the card); `--no-compat-03`."""
    card_v03_fields: bool = False
    """With `compat_03`: the card served over HTTP also carries A2A 0.3's fields (`url`,
    `preferredTransport`, ...), for 0.3 clients that discover the server over HTTP;
    `--card-v03-fields`. Off, the HTTP card is a strict A2A 1.0 card (a 1.0 reader that
    refuses unknown fields, such as the TCK's schema, accepts it); 0.3 gRPC callers get their
    card from GetAgentCard either way."""
    subscriber_queue_size: int = 1024
    """Events a stream may fall behind before it is cut off (it can resubscribe)."""
    replay_events: int = 1000
    """Events kept per task for streams that resume after an event id (core/event_ids.py),
    exactly, on every store: in memory a ring per task a stream followed, on Redis and
    PostgreSQL the task's stream of events, trimmed. A stream resumed after the last event let
    go of gets them all at once, so keep it within `subscriber_queue_size`."""
    dedup_window: float = 3600.0
    """Seconds a message id is remembered for idempotent repeats (also bounded by max_tasks)."""
    shutdown_grace: float = 10.0
    """Seconds running tasks and open streams get on SIGTERM/SIGINT, after the drain delay,
    before they are cancelled."""
    drain_delay: float = DEFAULT_DRAIN_DELAY
    """Seconds between a stop's start and its drain: Health (gRPC and `/readyz`) says
    NOT_SERVING at once, and A2A calls are still served as usual, so that load balancers and
    sidecars take the server out of rotation before its connections go away (GOAWAY) and its
    ports close. A second SIGTERM / SIGINT ends the delay. 0: drain at once."""
    http_port: int | None = None
    """The HTTP port (`serve --http-port`): the JSON-RPC and HTTP+JSON bindings and
    /.well-known/agent-card.json (0 = any free port, None = no HTTP port)."""
    card_max_age: int = 300
    """Cache-Control max-age of the served card, in seconds."""
    webhook_timeout: float = 10.0
    """Seconds one webhook POST may take."""
    webhook_max_attempts: int = 6
    """Tries per event before a webhook is given up."""
    allow_private_webhooks: bool = False
    """Let webhooks target loopback / private / link-local addresses (off: SSRF guard)."""
    audit_log: str | None = None
    """Path of the hash-chained JSON Lines audit trail (None: no audit trail)."""
    require_signed_messages: bool = False
    """With signature keys or trusted signer cards: refuse messages without a valid signature
    (the extension required)."""
    trusted_signer_cards: tuple[str, ...] = ()
    """Card URLs (or origins, for their well-known card) whose published keys verify the
    messages that name them (`serve --trusted-signer-cards`)."""
    signer_card_timeout: float = 5.0
    """Seconds one fetch of a trusted signer's card may take."""
    oidc_issuer: str = ""
    """An OpenID Connect issuer's URL: bearer JWTs it signs are accepted (its discovery document
    names the keys); the card declares its OpenID Connect scheme. Needs `jwt_audience`."""
    jwks: str = ""
    """A JWKS (`https://...` URL or file) whose keys sign the bearer JWTs accepted, when there is
    no discovery document to name them; needs `jwt_issuer` and `jwt_audience`."""
    jwt_issuer: str = ""
    """With `jwks`: the `iss` every JWT must carry (with `oidc_issuer`, that URL is the issuer)."""
    jwt_audience: str = ""
    """The `aud` every JWT must hold: this agent's identifier at the issuer."""
    jwt_algorithms: tuple[str, ...] = ALGORITHMS
    """The algorithms a JWT may be signed with, among RS256, PS256, ES256, EdDSA."""
    jwt_principal_claim: str = "sub"
    """The claim naming the caller (its principal is `jwt:<value>`): `sub`, or `azp` /
    `client_id` for service tokens."""
    jwt_leeway: float = DEFAULT_LEEWAY_S
    """Seconds of clock skew allowed when checking `exp`, `nbf` and `iat`."""
    jwks_timeout: float = DEFAULT_TIMEOUT_S
    """Seconds one fetch of the discovery document or of the JWKS may take."""
    jwks_refresh_interval: float = DEFAULT_REFRESH_INTERVAL_S
    """Least seconds between two fetches of the JWKS (an unknown key id, or stale keys)."""
    max_message_bytes: int = 2 * MiB
    """Largest message accepted (its serialized size: every part and its metadata count)."""
    max_store_bytes: int = field(default_factory=default_store_bytes)
    """Bytes of tasks the store may hold (serialized sizes); when unfinished tasks fill it, new
    ones are refused with RESOURCE_EXHAUSTED. Default: a quarter of the memory limit."""
    max_live_tasks_per_principal: int | None = None
    """Unfinished tasks one caller may hold across tenants (None: a tenth of max_tasks)."""
    max_live_tasks_per_tenant: int | None = None
    """Unfinished tasks one tenant may hold across callers (None: half of max_tasks)."""
    interrupted_ttl: float = 3600.0
    """Seconds a task may wait in INPUT_REQUIRED / AUTH_REQUIRED before it is CANCELED."""
    agent_inactivity_timeout: float = 3600.0
    """Seconds a run of the agent may go without reporting anything (a status, an artifact, a
    charge); then its task ends FAILED saying so and the run is cancelled. 0: never. An hour,
    as long as a task may wait for its caller (`interrupted_ttl`): see docs/server.md."""
    audit_fail_closed: bool = False
    """With an audit log: refuse requests (UNAVAILABLE, retryable) while records cannot be written
    instead of serving them with the records held in memory."""
    max_push_configs: int = 16
    """Push notification configs one task may have; more are refused with INVALID_PARAMS."""
    max_streams_per_connection: int = 8192
    """HTTP/2 streams one connection may hold (gRPC's MAX_CONCURRENT_STREAMS): what bounds a
    rapid-reset flood. Above any one client's burst: a client waits for a free stream rather
    than go past it, but at the edge gRPC refuses streams (the caller sees UNAVAILABLE)."""
    max_connection_age: float = 300.0
    """Seconds a connection is served before gRPC sends it GOAWAY (grpc.max_connection_age_ms,
    ±10 % jitter); its open streams go on to their end, and gRPC clients reconnect for new
    calls by themselves. What ends a rapid-reset flood's connection (docs/server.md, Limits),
    and spreads long-lived clients over replicas. 0: never."""
    max_concurrent_calls: int = 1000
    """A2A unary calls handled at once; past it a call is refused with RESOURCE_EXHAUSTED and
    RetryInfo. Streams are not counted here (see max_open_streams)."""
    max_open_streams: int = 10_000
    """A2A streams (SendStreamingMessage, SubscribeToTask) open at once; past it a new one is
    refused like a call. Counted apart so that idle subscriptions never lock out calls."""
    max_open_streams_per_principal: int = 1000
    """Streams one caller may hold open at once, across tenants (protocol/fairness.py); past
    it a new one is refused with RESOURCE_EXHAUSTED and RetryInfo."""
    max_open_streams_per_tenant: int = 5000
    """Streams one tenant may hold open at once, across callers."""
    max_replays_per_principal: int = 16
    """Resumed SubscribeToTask streams (a Last-Event-ID) of one caller that may replay kept
    events at once; a stream's replay ends when it has caught up with its task."""
    max_replays_per_tenant: int = 64
    """Resumed streams of one tenant that may replay kept events at once."""
    store: str = ""
    """Where tasks are kept: the URL of a store, whose scheme names its kind among the
    registered ones (tasks/registry.py, docs/stores.md): "" or `memory://` for this process's
    memory, `redis://[[user]:password@]host[:port][/db]` for a Redis shared by replicas
    (`rediss://` for TLS, `unix:///path.sock`, `redis+cluster://` for a Cluster node), or a
    scheme an installed package adds. It may hold a password: show it only through
    `redacted_url` (`repr` does)."""
    task_lease: float = 10.0
    """With a shared store: seconds a replica's lease on the tasks it runs lasts (renewed while
    it runs them); a task whose replica stopped without finishing it (crashed, killed) is FAILED
    within this time. More than 0, at most 3600."""
    workers: int = 1
    """Server processes sharing `port` (see server/ops/workers.py). More than one needs a shared
    `store` (in memory, each would see only its own tasks), a fixed `port` and `http_port` (with
    0 each would listen on a port of its own) and no `audit_log` (one hash chain per file)."""
    stream_write_timeout: float = 30.0
    """Seconds one event of a Server-Sent Events stream (JSON-RPC, HTTP+JSON) may wait for the
    client to take it in (TCP backpressure); then the stream is ended and its connection closed,
    so a client that stops reading gives its stream slot back. The task goes on."""
    bindings: tuple[str, ...] = BINDINGS
    """The protocol bindings served (names from BINDINGS); "grpc" must be one. The HTTP ones are
    served only with an HTTP port (`http_port`); the card lists exactly the served ones, and an
    HTTP binding not served answers 404 on its routes."""
    metrics: bool = True
    """Serve Prometheus metrics at /metrics on the HTTP port and count every call for them
    (about 0.2 µs per call)."""
    advertise: str = ""
    """`HOST[:PORT]` the card lists for gRPC instead of the listen address (the port defaults
    to the bound one); also the host of the HTTP bindings' URL unless `advertise_http` is set.
    Empty: the listen host, or the machine's host name for a wildcard
    (server/addresses.py)."""
    advertise_http: str = ""
    """`http(s)://host[:port][/path]`: the base URL the card lists for the HTTP bindings (JSON-RPC
    at `URL/`, HTTP+JSON under `URL`). Empty: derived as `advertise` says."""
    trust_domain: tuple[str, ...] = ()
    """SPIFFE trust domains (`example.org`) whose callers are accepted, by the SPIFFE ID of
    their client certificate or of `x-forwarded-client-cert`; a SPIFFE ID of another trust
    domain, or a client certificate without one, is refused. Empty: any trust domain. Needs
    client certificates (a client CA) or `trust_xfcc`."""
    trust_xfcc: bool = False
    """Read the caller's SPIFFE ID from `x-forwarded-client-cert` (Envoy's format, the last
    element: the one the local sidecar added) on connections from `trusted_proxy`; that header
    from any other address, or malformed, is refused. Off: the header is ignored."""
    trusted_proxy: tuple[str, ...] = DEFAULT_TRUSTED_PROXIES
    """With `trust_xfcc`: the networks (CIDRs, or single addresses) whose connections may carry
    `x-forwarded-client-cert`: where the sidecar connects from. Default: loopback."""
    reuse_port: bool = False
    """Bind the gRPC and HTTP ports with SO_REUSEPORT, sharing them with the other workers: set
    in each worker process by the supervisor. Off, the port is never shared (another process on
    it is a start-up error)."""

    def __post_init__(self) -> None:
        checks = [
            (self.max_tasks >= 1, "max_tasks must be at least 1"),
            (self.task_ttl > 0, "task_ttl must be positive"),
            (self.max_inline_bytes >= 0, "max_inline_bytes must not be negative"),
            (self.subscriber_queue_size >= 1, "subscriber_queue_size must be at least 1"),
            (self.replay_events >= 1, "replay_events must be at least 1"),
            (self.shutdown_grace >= 0, "shutdown_grace must not be negative"),
            (
                0 <= self.drain_delay <= MAX_DRAIN_DELAY,
                f"drain_delay must be between 0 and {MAX_DRAIN_DELAY:g} seconds",
            ),
            (0 <= self.port <= 65535, "port must be between 0 and 65535"),
            (self.webhook_timeout > 0, "webhook_timeout must be positive"),
            (self.stream_write_timeout > 0, "stream_write_timeout must be positive"),
            (self.webhook_max_attempts >= 1, "webhook_max_attempts must be at least 1"),
            (self.max_message_bytes >= 1, "max_message_bytes must be at least 1"),
            (
                self.max_inline_bytes <= self.max_message_bytes,
                "max_inline_bytes must not exceed max_message_bytes",
            ),
            (self.max_store_bytes >= 1, "max_store_bytes must be at least 1"),
            (
                self.max_live_tasks_per_principal is None or self.max_live_tasks_per_principal >= 1,
                "max_live_tasks_per_principal must be at least 1",
            ),
            (
                self.max_live_tasks_per_tenant is None or self.max_live_tasks_per_tenant >= 1,
                "max_live_tasks_per_tenant must be at least 1",
            ),
            (self.interrupted_ttl > 0, "interrupted_ttl must be positive"),
            (
                self.agent_inactivity_timeout >= 0,
                "agent_inactivity_timeout must not be negative (0 turns it off)",
            ),
            (self.max_push_configs >= 1, "max_push_configs must be at least 1"),
            (self.max_streams_per_connection >= 1, "max_streams_per_connection must be at least 1"),
            (
                self.max_connection_age >= 0,
                "max_connection_age must not be negative (0 turns it off)",
            ),
            (self.max_concurrent_calls >= 1, "max_concurrent_calls must be at least 1"),
            (self.max_open_streams >= 1, "max_open_streams must be at least 1"),
            (
                self.max_open_streams_per_principal >= 1,
                "max_open_streams_per_principal must be at least 1",
            ),
            (
                self.max_open_streams_per_tenant >= 1,
                "max_open_streams_per_tenant must be at least 1",
            ),
            (self.max_replays_per_principal >= 1, "max_replays_per_principal must be at least 1"),
            (self.max_replays_per_tenant >= 1, "max_replays_per_tenant must be at least 1"),
            (
                0 < self.task_lease <= MAX_TASK_LEASE,
                f"task_lease must be more than 0 and at most {MAX_TASK_LEASE:g} seconds",
            ),
            (self.workers >= 1, "workers must be at least 1"),
            (self.signer_card_timeout > 0, "signer_card_timeout must be positive"),
            (self.jwks_timeout > 0, "jwks_timeout must be positive"),
            (self.jwks_refresh_interval >= 0, "jwks_refresh_interval must not be negative"),
            (0 <= self.jwt_leeway <= 300, "jwt_leeway must be between 0 and 300 seconds"),
        ]
        problems = [message for ok, message in checks if not ok]
        problems.extend(_jwt_problems(self))
        unknown = [name for name in self.bindings if name not in BINDINGS]
        if unknown:
            problems.append(
                f"unknown binding(s) {', '.join(map(repr, unknown))}: choose among "
                f"{', '.join(BINDINGS)}"
            )
        if "grpc" not in self.bindings:
            problems.append(
                "bindings must include grpc: it is always served (Health, reflection and the "
                "service the HTTP bindings adapt); list the HTTP ones to serve beside it"
            )
        for check, value in (
            (parse_advertise, self.advertise),
            (parse_http_url, self.advertise_http),
        ):
            try:
                if value:
                    check(value)
            except ValueError as exc:
                problems.append(str(exc))
        problems += [
            f"trust_domain: {problem}"
            for problem in map(trust_domain_problem, self.trust_domain)
            if problem is not None
        ]
        try:
            if not trusted_networks(self.trusted_proxy):
                problems.append("trusted_proxy must name at least one network")
        except ValueError as exc:
            problems.append(str(exc))
        problem = store_problem(self.store)
        if problem is not None:
            problems.append(problem)
        if self.workers > 1:
            problems += self._workers_problems()
        if problems:
            raise ValueError("; ".join(problems))

    def _workers_problems(self) -> list[str]:
        """What keeps `workers` processes from sharing one port and one store's tasks."""
        problems = []
        if store_problem(self.store) is None and not store_kind(self.store).shared:
            problems.append(
                f"workers={self.workers} needs a shared store (--store / ${STORE_ENV}, e.g. a "
                "redis:// URL): workers keeping tasks in "
                f"{'memory' if not self.store else self.store.partition('://')[0] + '://'} "
                "would each see only their own; or run one worker"
            )
        if self.port == 0:
            problems.append(
                f"workers={self.workers} needs a fixed port, not 0: each worker would listen "
                "on a port of its own"
            )
        elif self.http_port == 0:
            problems.append(
                f"workers={self.workers} needs a fixed http_port, not 0 (or none: -1): each "
                "worker would serve the card on a port of its own"
            )
        if self.audit_log is not None:
            problems.append(
                f"workers={self.workers} cannot share one audit_log: each worker would chain "
                "its own records into the same file; run one worker, or no audit log"
            )
        return problems

    def __repr__(self) -> str:
        """Every field as the dataclass shows it, but the store URL's password hidden."""
        shown = (
            f"{f.name}={redacted_url(self.store) if f.name == 'store' else getattr(self, f.name)!r}"
            for f in fields(self)
        )
        return f"ServerConfig({', '.join(shown)})"

    @property
    def http_bindings(self) -> tuple[str, ...]:
        """The HTTP bindings served, by their card names (JSONRPC, HTTP+JSON); none without an
        HTTP port."""
        if self.http_port is None:
            return ()
        return tuple(card for name, card in HTTP_BINDINGS.items() if name in self.bindings)

    @property
    def delivery_policy(self) -> DeliveryPolicy:
        """How webhooks are sent: `webhook_timeout`, `webhook_max_attempts` and
        `allow_private_webhooks`, as the push sender takes them."""
        return DeliveryPolicy(
            timeout=self.webhook_timeout,
            max_attempts=self.webhook_max_attempts,
            allow_private_targets=self.allow_private_webhooks,
        )

    @property
    def live_tasks_per_principal(self) -> int:
        """`max_live_tasks_per_principal`, or a tenth of `max_tasks` when unset."""
        return self.max_live_tasks_per_principal or max(1, self.max_tasks // 10)

    @property
    def live_tasks_per_tenant(self) -> int:
        """`max_live_tasks_per_tenant`, or half of `max_tasks` when unset."""
        return self.max_live_tasks_per_tenant or max(1, self.max_tasks // 2)

    @property
    def max_receive_bytes(self) -> int:
        """gRPC's inbound message limit: the largest message plus room for the envelope (our own
        check then answers an oversized message with a clear INVALID_PARAMS)."""
        return max(4 * MiB, self.max_message_bytes + MiB)
