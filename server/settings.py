"""`serve`'s settings, each declared once: `SETTINGS`, one record per option in the order of
`serve --help`. From it come the parser (`parser`), its help, the environment's variables
(server/environment.py) and both tables of docs/server.md (`make doc-tables`).

A new setting is a ServerConfig field (server/config.py: its type, default, docstring and
check) and its `Setting` here (server/options.py says what a record holds); an option that is
no field says what it is read into (`into`). `NOT_OPTIONS` names the fields with no option.
"""

from __future__ import annotations

import argparse

from a2a_grpc.core import exit_codes
from a2a_grpc.core.cards import card_url
from a2a_grpc.server import environment
from a2a_grpc.server.addresses import bare_host
from a2a_grpc.server.config import BINDINGS
from a2a_grpc.server.ops import logs
from a2a_grpc.server.options import SAME_ROW, Kind, Setting, add_options
from a2a_grpc.server.trust.auth import TOKENS_ENV
from a2a_grpc.server.trust.mesh import DEFAULT_TRUSTED_PROXIES
from a2a_grpc.server.trust.oidc import ALGORITHMS

HTTP_PORT_OFF = -1
"""`--http-port -1`: no HTTP port (no card over HTTP, no JSON-RPC, no HTTP+JSON)."""
OPERATIONS = "operations.md#metrics-reload-and-logs"
"""The docs' section on metrics, SIGHUP and logs, which several rows link to."""


def _card_urls(value: str) -> tuple[str, ...]:
    urls = []
    for entry in value.split(","):
        if entry.strip():
            try:
                urls.append(card_url(entry))
            except ValueError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None
    return tuple(dict.fromkeys(urls))


def _algorithms(value: str) -> tuple[str, ...]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    return tuple(dict.fromkeys(names))


def _bindings(value: str) -> tuple[str, ...]:
    names = [name.strip().lower() for name in value.split(",") if name.strip()]
    return tuple(dict.fromkeys(names))


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "host",
        convert=bare_host,
        help="address to listen on; 0.0.0.0 or :: for every interface (default: %(default)s)",
        doc="where to listen (IPv4 or IPv6: `::1`, `[::1]`; `0.0.0.0` or `::` for every "
        "interface); port 0 is any free port; the port is never shared with another process "
        "(except this server's own `--workers`). The HTTP port listens on the same host",
    ),
    Setting(
        "port",
        help="gRPC port, 0 for any (default: %(default)s)",
        doc=SAME_ROW,
    ),
    Setting(
        "advertise",
        metavar="HOST[:PORT]",
        help="the address the card lists for gRPC, and the host of its HTTP URLs (default: the "
        "--host, or this machine's host name when --host is a wildcard; the bound port)",
        doc="the addresses the card lists, when clients reach the server by another name than "
        "`--host` (a load balancer, NAT, a container): `--advertise` for gRPC [the listen "
        "host, or this machine's host name for a wildcard; the bound port], `--advertise-http` "
        "for the JSON-RPC and HTTP+JSON bindings (an `http(s)://host[:port][/path]` base) [the "
        "advertised host with the HTTP port]. See Addresses below",
    ),
    Setting(
        "advertise_http",
        metavar="URL",
        help="the http(s):// base URL the card lists for the JSON-RPC and HTTP+JSON bindings "
        "(default: the advertised host and the HTTP port)",
        doc=SAME_ROW,
    ),
    Setting(
        "agent",
        into="loaded into the agent run (--agent)",
        metavar="MODULE:ATTR|FILE.py:ATTR",
        help="agent to run: a module (the current directory is searched first) or a .py file, "
        "and in it an agent instance or a class/factory taking no arguments (default: the "
        "built-in demo agent)",
        doc_default="the demo agent",
        doc="your agent: an instance, or a class / zero-argument factory, from a module (the "
        "current directory first on `sys.path`) or a file; see [Writing an agent](agents.md)",
    ),
    Setting(
        "card",
        into="loaded into the card (--card)",
        metavar="FILE",
        help="agent card as ProtoJSON (default: made from the --agent's class, see docs/agents.md; "
        "the demo agent's without --agent)",
        doc="the agent card (ProtoJSON) [made from the `--agent`'s class, see [Writing an "
        "agent](agents.md); the demo agent's without `--agent`]; the richer card for "
        "authenticated callers [none]; the card must offer it "
        "(`capabilities.extendedAgentCard: true`), or the start stops saying so",
    ),
    Setting(
        "extended_card",
        into="loaded into the extended card",
        metavar="FILE",
        help="extended card for authenticated callers (default: none)",
        doc=SAME_ROW,
    ),
    Setting(
        "http_port",
        default=None,  # the gRPC port + 1 (server/cli.py), -1 for none
        doc_default=f"gRPC port + 1; {HTTP_PORT_OFF} = off",
        help="HTTP port of the JSON-RPC (POST /) and HTTP+JSON bindings and of "
        "/.well-known/agent-card.json: default gRPC port + 1 (any free port when --port is 0), "
        f"{HTTP_PORT_OFF} to not serve HTTP",
        doc="the HTTP port: the JSON-RPC and HTTP+JSON bindings (see [JSON-RPC and "
        "HTTP+JSON](http.md)) and `/.well-known/agent-card.json`",
    ),
    Setting(
        "bindings",
        convert=_bindings,
        metavar="LIST",
        help="protocol bindings to serve, comma-separated among "
        f"{','.join(BINDINGS)} (default: all); grpc is always served and must be listed; "
        "an HTTP binding left out is not on the card and its routes answer 404",
        doc="the protocol bindings served, comma-separated. gRPC is always served (Health and "
        "reflection are gRPC, and the HTTP bindings adapt its service), so `grpc` must be "
        "listed; an HTTP binding left out is not on the card (an interface the `--card` file "
        "lists for it is dropped too) and its routes answer 404 (AIP-193 `METHOD_NOT_FOUND`). "
        "The HTTP bindings need the HTTP port",
    ),
    Setting(
        "card_max_age",
        help="the card's Cache-Control max-age, in seconds (default: %(default)s)",
        doc="seconds of the served card's `Cache-Control: max-age`",
    ),
    Setting(
        "metrics",
        kind=Kind.SWITCH,
        help="serve Prometheus metrics at /metrics on the HTTP port, without authentication "
        "(default: on; --no-metrics turns it off)",
        doc="Prometheus metrics at `/metrics` on the HTTP port (see [Metrics, reload and "
        f"logs]({OPERATIONS})); no authentication, so keep the HTTP port off the public "
        "internet or turn this off",
    ),
    Setting(
        "auth_tokens",
        into="loaded into the bearer tokens (and read again on SIGHUP)",
        metavar="FILE",
        help=f'JSON {{"<token>": "<principal>"}} for bearer auth; also read from ${TOKENS_ENV} '
        "as token=principal,... (default: none, no bearer auth)",
        doc='bearer tokens, JSON `{"<token>": "<principal>"}`; also '
        f"`${TOKENS_ENV}=token=principal,...`; a file that is unreadable, malformed or names "
        "no token stops the start; SIGHUP reads it again (see [Metrics, reload and "
        f"logs]({OPERATIONS}))",
    ),
    Setting(
        "tls_cert",
        into="loaded into the TLS files (and read again on SIGHUP)",
        metavar="PEM",
        help="server certificate chain; enables TLS on both ports (default: none, plaintext)",
        doc="TLS, on the gRPC port and the HTTP port alike (a key that does not match the "
        "certificate, a chain with a certificate that is not PEM, or files ssl refuses, such "
        "as a key too small for its security level, stop the start); with `--client-ca`, "
        "clients authenticate with certificates on both ports (principal: the certificate's "
        "SPIFFE ID, its URI SAN `spiffe://td/ns/x/sa/y`; `cert:<CN>` only when it has none); "
        "with `--client-ca` and bearer tokens, every call needs both, and the token names the "
        "principal; SIGHUP reads the three files again (see [Metrics, reload and "
        f"logs]({OPERATIONS}))",
    ),
    Setting(
        "tls_key",
        into="loaded into the TLS files",
        metavar="PEM",
        help="server private key (default: none)",
        doc=SAME_ROW,
    ),
    Setting(
        "client_ca",
        into="loaded into the TLS files",
        metavar="PEM",
        help="CA for client certificates; enables mTLS auth: the principal is the "
        "certificate's SPIFFE ID (URI SAN spiffe://...), else cert:<CN> (default: none)",
        doc=SAME_ROW,
    ),
    Setting(
        "trust_domain",
        kind=Kind.ITEMS,
        metavar="TD",
        doc_default="any trust domain",
        help="accept only SPIFFE IDs of this trust domain (repeatable, or comma-separated), "
        "from client certificates and --trust-xfcc; a certificate without a SPIFFE ID is "
        "refused (default: any trust domain)",
        doc="accept only SPIFFE IDs of this trust domain (repeatable, or comma-separated), "
        "from client certificates and from `--trust-xfcc`; a SPIFFE ID of another trust "
        "domain, or a certificate without one, is refused; needs `--client-ca` or "
        "`--trust-xfcc` (see [Mesh identity](trust.md#mesh-identity-spiffe-and-sidecars))",
    ),
    Setting(
        "trust_xfcc",
        kind=Kind.FLAG,
        help="read the caller's SPIFFE ID from x-forwarded-client-cert (Envoy's format; the "
        "last element, the local sidecar's) on connections from --trusted-proxy; that header "
        "from elsewhere, or malformed, is refused (off: the header is ignored)",
        doc="read the caller's SPIFFE ID from `x-forwarded-client-cert` (gRPC metadata and "
        "HTTP header, Envoy's format: the last element, the one the local sidecar added) on "
        "connections from `--trusted-proxy`; that header from any other address, or "
        "malformed, is refused with UNAUTHENTICATED; off, the header is ignored (see [Mesh "
        "identity](trust.md#mesh-identity-spiffe-and-sidecars))",
    ),
    Setting(
        "trusted_proxy",
        kind=Kind.ITEMS,
        metavar="CIDR",
        default=None,  # unset: ServerConfig's default (server/cli.py)
        doc_default=f"loopback, {' and '.join(f'`{net}`' for net in DEFAULT_TRUSTED_PROXIES)}",
        help="with --trust-xfcc: where the sidecar connects from (repeatable, or "
        f"comma-separated) (default: loopback, {' and '.join(DEFAULT_TRUSTED_PROXIES)})",
        doc="with `--trust-xfcc`: the networks the sidecar connects from (repeatable, or "
        "comma-separated; a bare address is a network of one)",
    ),
    Setting(
        "oidc_issuer",
        metavar="URL",
        help="accept bearer JWTs from this OpenID Connect issuer (its "
        "/.well-known/openid-configuration names the keys); needs --jwt-audience "
        "(default: none)",
        doc="accept bearer JWTs: from an OpenID Connect issuer, whose "
        "`/.well-known/openid-configuration` names its keys (the card declares its "
        "`openIdConnectSecurityScheme`), or signed by the keys of a JWKS named directly (the "
        "card declares an HTTP bearer scheme of format JWT); the principal is `jwt:<claim>`; "
        "with static tokens too, a bearer value shaped as a JWT is checked as one and any "
        "other is looked up in the table. The keys are fetched at start (a failure stops the "
        "start), then as the JWKS's `Cache-Control` says and on an unknown key id. See [Bearer "
        "JWTs (OIDC)](trust.md#bearer-jwts-oidc)",
    ),
    Setting(
        "jwks",
        metavar="URL|FILE",
        help="accept bearer JWTs signed by the keys of this JWKS (instead of --oidc-issuer); "
        "needs --jwt-issuer and --jwt-audience (default: none)",
        doc=SAME_ROW,
    ),
    Setting(
        "jwt_issuer",
        metavar="ISS",
        help="with --jwks: the iss every JWT must carry (default: none)",
        doc="the `iss` every JWT must carry (with `--jwks`; with `--oidc-issuer` the issuer is "
        "that URL), and the `aud` every JWT must hold (required with JWTs)",
    ),
    Setting(
        "jwt_audience",
        metavar="AUD",
        help="the aud every JWT must hold; required with JWTs (default: none)",
        doc=SAME_ROW,
    ),
    Setting(
        "jwt_algorithms",
        convert=_algorithms,
        metavar="LIST",
        help=f"comma-separated algorithms a JWT may be signed with, among {','.join(ALGORITHMS)} "
        "(default: all of them)",
        doc="the algorithms a JWT may be signed with, comma-separated; asymmetric only, so "
        "`none` and HS256 are always refused",
    ),
    Setting(
        "jwt_principal_claim",
        metavar="CLAIM",
        help="the JWT claim naming the caller, whose principal is jwt:<value>; azp or client_id "
        "for service tokens (default: %(default)s)",
        doc="the claim naming the caller (`azp` or `client_id` for service tokens); seconds of "
        "clock skew allowed on `exp`, `nbf` and `iat` (at most 300)",
    ),
    Setting(
        "jwt_leeway",
        metavar="SECONDS",
        help="clock skew allowed when checking exp, nbf and iat (default: %(default)s)",
        doc=SAME_ROW,
    ),
    Setting(
        "jwks_timeout",
        metavar="SECONDS",
        help="seconds one fetch of the discovery document or the JWKS may take at most "
        "(default: %(default)s)",
        doc="seconds one fetch of the discovery document or the JWKS may take in all; least "
        "seconds between two fetches of the JWKS, for stale keys or for unknown key ids (a "
        "flood of made-up key ids costs one fetch)",
    ),
    Setting(
        "jwks_refresh_interval",
        metavar="SECONDS",
        help="least seconds between two fetches of the JWKS, for an unknown key id or stale "
        "keys (default: %(default)s)",
        doc=SAME_ROW,
    ),
    Setting(
        "signature_keys",
        into="loaded into the key set that verifies signed messages",
        metavar="JWKS",
        help="public keys (JWKS file) for the signed-messages extension; offers the extension "
        "(default: none)",
        doc="verify signed messages against these public keys (the offline way: messages that "
        "name no signer card)",
    ),
    Setting(
        "trusted_signer_cards",
        convert=_card_urls,
        metavar="URLS",
        help="comma-separated agent card URLs (an origin means its "
        "/.well-known/agent-card.json) whose published keys verify the signed messages that "
        "name them; no other card is ever fetched; offers the extension (default: none)",
        doc="comma-separated agent card URLs (an origin stands for its "
        "`/.well-known/agent-card.json`) whose published keys verify the signed messages that "
        "name them; no other card is ever fetched. See [Signed messages between "
        "agents](trust.md#signed-messages-between-agents)",
    ),
    Setting(
        "signer_card_keys",
        into="loaded into the key set that verifies signer cards",
        metavar="JWKS",
        help="with --trusted-signer-cards: every signer card must be signed by one of these keys "
        "(default: card signatures are not checked)",
        doc="with `--trusted-signer-cards`: every signer card must carry a card signature that "
        "verifies with one of these keys",
    ),
    Setting(
        "signer_card_timeout",
        metavar="SECONDS",
        help="seconds one fetch of a signer's card may take at most (default: %(default)s)",
        doc="seconds one fetch of a signer's card may take in all (connect, headers, body)",
    ),
    Setting(
        "publish_signing_keys",
        into="loaded into the keys published on the card (read again on SIGHUP)",
        metavar="JWKS",
        help="public keys (JWKS file, e.g. from `a2a-grpc keys new`) this agent's own messages "
        "are signed with: put on the served card for the agents it calls; SIGHUP reads the "
        "file again (default: none)",
        doc="public keys (e.g. from `a2a-grpc keys new`) this agent's own outgoing messages "
        "are signed with, put on the served card for the agents it calls; SIGHUP reads the "
        f"file again (key rotation; see [Metrics, reload and logs]({OPERATIONS}))",
    ),
    Setting(
        "require_signed_messages",
        kind=Kind.FLAG,
        help="with --signature-keys or --trusted-signer-cards: refuse messages without a valid "
        "signature",
        doc="with `--signature-keys` or `--trusted-signer-cards`: refuse messages without a "
        "valid signature",
    ),
    Setting(
        "card_signing_key",
        into="loaded into the card signer",
        metavar="PEM",
        help="private key that signs the served card (default: none, unsigned)",
        doc="serve the card with a JWS signature, over the card as served (see [Discovery and "
        "identity](trust.md#discovery-and-identity)); the two go together",
    ),
    Setting(
        "card_signing_kid",
        into="the card signer's key id",
        metavar="KID",
        help="key id for --card-signing-key (default: none)",
        doc=SAME_ROW,
    ),
    Setting(
        "audit_log",
        metavar="FILE",
        help="append a hash-chained JSON Lines audit trail here (default: none)",
        doc="append the hash-chained audit trail here (`a2a-grpc audit verify FILE` checks "
        "it); a path that cannot be opened for appending, or a non-empty file that is not an "
        "audit trail, stops the start",
    ),
    Setting(
        "audit_fail_closed",
        kind=Kind.FLAG,
        help="with --audit-log: refuse requests (UNAVAILABLE) while records cannot be written",
        doc="refuse requests (UNAVAILABLE, retryable, 1 s RetryInfo) while audit records "
        "cannot be written, instead of serving them with the records held in memory",
    ),
    Setting(
        "max_tasks",
        help="tasks kept; when full the oldest finished ones go first (default: %(default)s)",
        doc="tasks kept in memory; when full, the oldest finished tasks go first (up to 1/64 "
        "of the store, at most 64, at a time), and if every task is still running new ones "
        "are refused with RESOURCE_EXHAUSTED",
    ),
    Setting(
        "task_ttl",
        help="seconds a finished task is kept (default: %(default)s)",
        doc="seconds a finished task stays readable (a timer drops it, also on an idle server)",
    ),
    Setting(
        "interrupted_ttl",
        help="seconds a task may wait for input or auth before it is canceled "
        "(default: %(default)s)",
        doc="seconds a task may wait in INPUT_REQUIRED / AUTH_REQUIRED; then it is CANCELED "
        "with a status message saying so (streams and webhooks see it)",
    ),
    Setting(
        "agent_inactivity_timeout",
        doc_default="3600; 0 = never",
        help="seconds a run of the agent may report nothing (no status, artifact or charge) "
        "before its task is FAILED and the run cancelled; 0 = never (default: %(default)s)",
        doc="seconds a run of the agent may report nothing (no status update, artifact or "
        "charge, counted from its start and from each event; the runs are looked at every "
        "quarter of it, at most every second, so a silent one is stopped within that much "
        "after); then its task is FAILED with a status message saying so (streams and webhooks "
        "see it), the agent's `execute` gets `asyncio.CancelledError`, and the server logs a "
        'warning naming the task. See "Hung agents" below for why an hour',
    ),
    Setting(
        "max_inline_bytes",
        help="largest raw part accepted inline, in bytes (default: %(default)s)",
        doc="largest inline `raw` part; larger content must be sent as a `url` part",
    ),
    Setting(
        "max_message_bytes",
        help="largest message accepted, every part counted (default: %(default)s)",
        doc="largest message, serialized (text, data, raw, url parts and metadata all count); "
        "larger is INVALID_PARAMS naming `message`",
    ),
    Setting(
        "max_store_bytes",
        doc_default="a quarter of the memory limit",
        help="bytes of tasks kept in memory (default: a quarter of the memory limit, here "
        "%(default)s)",
        doc="bytes of tasks kept (serialized sizes, counted when each write lands: a new task, "
        "an answer to a waiting task, every artifact and status message; measured exactly "
        "whenever a task settles); finished tasks are evicted to make room, and when "
        "unfinished ones fill it new messages and answers get RESOURCE_EXHAUSTED with a 1 s "
        "RetryInfo, and an agent's write that does not fit ends its task FAILED, saying so "
        '(see "The byte budget" under Limits)',
    ),
    Setting(
        "max_live_tasks_per_principal",
        doc_default="max-tasks / 10",
        help="unfinished tasks one caller may hold (default: a tenth of --max-tasks)",
        doc="unfinished tasks (working or waiting for input) one caller, across tenants, or "
        "one tenant, across callers, may hold; over that, RESOURCE_EXHAUSTED with a 1 s "
        "RetryInfo. Without authentication every caller is the same principal, so the first "
        "is a cap on all unfinished tasks",
    ),
    Setting(
        "max_live_tasks_per_tenant",
        doc_default="max-tasks / 2",
        help="unfinished tasks one tenant may hold (default: half of --max-tasks)",
        doc=SAME_ROW,
    ),
    Setting(
        "strict_version",
        kind=Kind.FLAG,
        help="refuse requests without a2a-version metadata (the spec treats them as 0.3)",
        doc="refuse requests without `a2a-version` metadata (the spec reads them as A2A 0.3) "
        "on the 1.0 service; the 0.3 service serves them, and the refusal "
        "(VERSION_NOT_SUPPORTED) says so: over gRPC it points at `a2a.v1.A2AService` on the "
        "same port, over HTTP at the gRPC port, the only place 0.3 is served (with "
        "`--no-compat-03`, that 0.3 is not served)",
    ),
    Setting(
        "strict_parsing",
        kind=Kind.FLAG,
        help="refuse JSON-RPC and HTTP+JSON requests with fields A2A 1.0 does not have "
        "(INVALID_PARAMS / 400) instead of ignoring them (spec 5.7)",
        doc="refuse JSON-RPC and HTTP+JSON requests with members A2A 1.0 does not have "
        "(INVALID_PARAMS / 400, naming the member), instead of ignoring them as the spec says "
        'implementations SHOULD (§5.7; see "Unknown fields" below); gRPC\'s binary protobuf '
        "ignores unknown fields either way",
    ),
    Setting(
        "compat_03",
        kind=Kind.OFF,
        help="do not serve A2A 0.3 callers (a2a.v1.A2AService) nor list them on the card "
        "(default: served)",
        doc="do not serve A2A 0.3 callers: `a2a.v1.A2AService` is not registered (its calls get "
        "UNIMPLEMENTED) and the card does not list it (see [A2A 0.3 callers](a2a-0.3.md))",
    ),
    Setting(
        "card_v03_fields",
        kind=Kind.FLAG,
        help="also put A2A 0.3's fields (url, preferredTransport, ...) on the card served over "
        "HTTP, for 0.3 clients that read it there; the card is then no longer a strict 1.0 card",
        doc="also put A2A 0.3's fields (`url`, `preferredTransport`, `protocolVersion`, "
        "`additionalInterfaces`, ...) on the card served over HTTP: what 0.3 clients that "
        "discover the server by reading `/.well-known/agent-card.json` need. Off by default, "
        "because a strict A2A 1.0 reader (the TCK's schema, protobuf's `json_format.Parse`) "
        "refuses a card with them; 0.3 gRPC callers get their card from `GetAgentCard` either "
        "way (see [A2A 0.3 callers](a2a-0.3.md))",
    ),
    Setting(
        "drain_delay",
        help="seconds a stopping server keeps serving as usual after Health turns NOT_SERVING, "
        "so balancers move first; a second SIGTERM/SIGINT ends it; 0: drain at once "
        "(default: %(default)s)",
        doc="seconds a stopping server keeps serving as usual after Health (gRPC and "
        "`/readyz`) turns NOT_SERVING, so that balancers and sidecars take it out of rotation "
        "before it refuses anything; a second SIGTERM / SIGINT ends the delay; 0 drains at "
        "once. See [Process model and shutdown](operations.md#process-model-and-shutdown)",
    ),
    Setting(
        "shutdown_grace",
        help="seconds running tasks and open streams get after the drain delay before they "
        "are cancelled (default: %(default)s)",
        doc="seconds the drain may take after the delay: running tasks and open streams first, "
        "pending webhook POSTs in what is left (the rest is logged as undelivered)",
    ),
    Setting(
        "log_level",
        into="configures logging, not the server",
        choices=logs.LEVELS,
        default="info",
        help="least severe level logged (default: %(default)s)",
        doc="the least severe level logged (`debug`, `info`, `warning`, `error`), and text "
        "lines or `json` (the start-up and shutdown lines on stdout too, with `logger` "
        "`a2a_grpc.serve`): one JSON object per line with `time`, `level`, `logger`, "
        "`message`, `exception` when there is one, and the fields a record carries: a record "
        "logged during a call or a task's run has `method`, `principal`, `task_id`, "
        f"`context_id` where known (see [Metrics, reload and logs]({OPERATIONS}))",
    ),
    Setting(
        "log_format",
        into="configures logging and the start-up lines, not the server",
        choices=logs.FORMATS,
        default="text",
        help="text lines, or one JSON object per line (time, level, logger, message, ...) "
        "(default: %(default)s)",
        doc=SAME_ROW,
    ),
    Setting(
        "webhook_timeout",
        help="seconds one webhook POST may take (default: %(default)s)",
        doc="seconds one webhook POST may take",
    ),
    Setting(
        "stream_write_timeout",
        metavar="SECONDS",
        help="how long one event of an HTTP (SSE) stream may wait for a client that stopped "
        "reading before the stream is ended and its connection closed (default: %(default)s)",
        doc="seconds one event of an HTTP stream (Server-Sent Events, JSON-RPC or HTTP+JSON) "
        "may wait for a client that stopped reading (TCP backpressure); then the stream ends, "
        "its connection is reset and its `--max-open-streams` slot is free again; the task "
        "goes on",
    ),
    Setting(
        "webhook_max_attempts",
        help="tries per event before a webhook is given up (default: %(default)s)",
        doc="tries per event before a webhook is given up",
    ),
    Setting(
        "allow_private_webhooks",
        kind=Kind.FLAG,
        help="let webhooks target loopback/private/link-local addresses (disables the SSRF guard)",
        doc="let webhooks target loopback / private / link-local addresses (turns the SSRF "
        "guard off)",
    ),
    Setting(
        "max_push_configs",
        help="push notification configs (webhooks) one task may have (default: %(default)s)",
        doc="push notification configs (webhooks) one task may have; one more is refused with "
        "INVALID_PARAMS",
    ),
    Setting(
        "max_streams_per_connection",
        help="HTTP/2 streams one connection may hold (default: %(default)s)",
        doc="HTTP/2 streams one connection may hold; what bounds a rapid-reset flood (see Limits)",
    ),
    Setting(
        "max_connection_age",
        help="seconds a connection is served before GOAWAY asks its client to reconnect; "
        "0: never (default: %(default)s)",
        doc="seconds a connection is served before GOAWAY asks its client to reconnect (open "
        "streams go on); what ends a rapid-reset flood's connection (see Limits). 0: never",
    ),
    Setting(
        "max_concurrent_calls",
        help="A2A unary calls handled at once; more get RESOURCE_EXHAUSTED + RetryInfo "
        "(default: %(default)s)",
        doc="A2A unary calls handled at once, and streams open at once (counted apart); past "
        "either: RESOURCE_EXHAUSTED with RetryInfo (see Limits)",
    ),
    Setting(
        "max_open_streams",
        help="A2A streams open at once, counted apart from calls (default: %(default)s)",
        doc=SAME_ROW,
    ),
    Setting(
        "max_open_streams_per_principal",
        help="A2A streams one caller may hold open at once (default: %(default)s)",
        doc="streams one caller (across tenants), or one tenant (across callers), may hold "
        "open at once; past either, a new stream gets RESOURCE_EXHAUSTED with a RetryInfo "
        "of 0.5-1.5 s at once (see Limits). Without authentication every caller is the "
        "same principal, so the first is a cap on all streams",
    ),
    Setting(
        "max_open_streams_per_tenant",
        help="A2A streams one tenant may hold open at once (default: %(default)s)",
        doc=SAME_ROW,
    ),
    Setting(
        "max_replays_per_principal",
        help="resumed SubscribeToTask streams (Last-Event-ID) of one caller replaying kept "
        "events at once (default: %(default)s)",
        doc="resumed `SubscribeToTask` streams (a Last-Event-ID) of one caller, or of one "
        "tenant, that may replay the task's kept events at once; a replay ends when its stream "
        "has caught up with the task, and past either cap a resumed stream gets "
        "RESOURCE_EXHAUSTED with a RetryInfo of 0.5-1.5 s at once (see Limits)",
    ),
    Setting(
        "max_replays_per_tenant",
        help="resumed streams of one tenant replaying kept events at once (default: %(default)s)",
        doc=SAME_ROW,
    ),
    Setting(
        "store",
        metavar="URL",
        doc_default="memory",
        help="keep tasks in the store this URL names by its scheme: memory:// (this "
        "process), a store shared by several workers or servers: a Redis, "
        "redis://[[user]:password@]host[:port][/db], rediss://... (TLS), "
        "unix:///path/redis.sock or redis+cluster://... (a Cluster node), a PostgreSQL "
        "database, postgresql://[user[:password]@]host[:port]/db, or a scheme an installed "
        "package adds; the password is never printed (default: this process's memory)",
        doc="keep tasks in the store this URL names by its scheme: `memory://` (this process), "
        "a store shared by several workers or servers: a Redis, "
        "`redis://[[user]:password@]host[:port][/db]`, `rediss://...` (TLS), "
        "`unix:///path/redis.sock` or `redis+cluster://...` (a Cluster node), a PostgreSQL "
        "database, `postgresql://[user[:password]@]host[:port]/database[?sslmode=...]` (with "
        "the `postgresql` extra), or a scheme an installed package adds ([Stores](stores.md)); "
        "a scheme nobody registered stops the start, naming those that are. The password is "
        "never printed (start-up lines, errors and logs show `redis://:***@host`). `--store-file` "
        "reads the URL from a file (a mounted Secret; surrounding whitespace stripped), and "
        "`$A2A_GRPC_STORE` / `$A2A_GRPC_STORE_FILE` give either in the environment: all keep "
        "the password out of `ps`. See [Replicas](replicas.md)",
    ),
    Setting(
        "store_file",
        into="read into the store URL (the store field)",
        metavar="FILE",
        help="read the --store URL from this file (surrounding whitespace stripped), e.g. a "
        "mounted Secret, so that its password is in neither the command line nor the "
        "environment (default: none)",
        doc=SAME_ROW,
    ),
    Setting(
        "push_credentials_keys",
        into="read into the keys push configs' secrets are sealed with (ServerPlan)",
        metavar="KEYS",
        help="with a shared --store: seal push configs' token and credentials at rest with "
        "these Fernet keys, comma-separated, as --push-credentials-keys=KEYS (a key may "
        "begin with '-'): the first seals, every one opens (default: none; a shared store "
        "then keeps them in plain text, and says so at start)",
        doc="with a shared `--store`: seal each push config's `token` and "
        "`authentication.credentials` at rest with these Fernet keys (comma-separated, "
        "given as `--push-credentials-keys=KEYS`: a key may begin with `-`, which would "
        "otherwise be read as an option; in the file, one a line, `#` comments); the first "
        "seals, every one opens, so keys rotate without losing a config (see [Push "
        "notifications](push.md#secrets-at-rest)). A bad key or a file that cannot be read "
        "stops the start. Without them a shared "
        "store keeps them in plain text, and the start logs a warning saying so. "
        "`--push-credentials-keys-file` (or `$A2A_GRPC_PUSH_CREDENTIALS_KEYS_FILE`, a "
        "mounted Secret) keeps the keys out of `ps`",
    ),
    Setting(
        "push_credentials_keys_file",
        into="read into the keys push configs' secrets are sealed with (ServerPlan)",
        metavar="FILE",
        help="read the --push-credentials-keys from this file, one a line, e.g. a mounted "
        "Secret (default: none)",
        doc=SAME_ROW,
    ),
    Setting(
        "task_lease",
        metavar="SECONDS",
        help="with --store: how long a server's lease on the tasks it runs lasts; a task whose "
        "server stopped (crashed, killed) is FAILED within this time, at most 3600 "
        "(default: %(default)s)",
        doc="with `--store`: seconds a server's lease on the tasks it runs lasts (renewed "
        "while it runs them); a task whose server stopped without finishing it (crash, kill) "
        "is FAILED within this time; more than 0, at most 3600",
    ),
    Setting(
        "workers",
        metavar="N",
        help="run N server processes sharing --port (and the HTTP port); N > 1 needs a shared "
        "--store and a fixed --port; the first process supervises them, forwards SIGTERM/SIGINT "
        "and stops them all when one exits (default: %(default)s)",
        doc="run N server processes on one port (SO_REUSEPORT: the kernel spreads connections, "
        "not calls, over them; the HTTP port is shared too). N > 1 needs `--store` (in memory, "
        "each worker would see only its own tasks), a fixed `--port` and `--http-port` (not "
        "0) and no `--audit-log`; otherwise, or when a port is taken, the start stops (exit "
        "2, or 8 when a port cannot be bound). The first process supervises: it forwards "
        "SIGTERM / SIGINT to every worker and waits for them, and forwards SIGHUP (each "
        "worker reloads its files) (each drains as one server does, then is killed "
        "`--drain-delay` + `--shutdown-grace` + 10 s later; a second signal is forwarded too "
        "and ends the workers' drain delay); when a worker exits on its own, it logs that and "
        "stops the others rather than restart it (the process manager above restarts the "
        "service); it exits 0 only if every worker did, else with the first failing worker's "
        "status. Workers stop by themselves if the supervisor dies. `server/ops/workers.py` "
        "has the contract",
    ),
    # Set by the supervisor of --workers N in each worker it starts (server/ops/workers.py).
    Setting(
        "worker_index",
        into="the worker's identity under --workers N (sets reuse_port)",
        convert=int,
        hidden=True,
        help="",
        doc="",
    ),
    Setting(
        "worker_lifeline",
        into="the worker's pipe to its supervisor",
        convert=int,
        hidden=True,
        help="",
        doc="",
    ),
)
"""Every option of `serve`, in the order of its help."""

NOT_OPTIONS = {
    "subscriber_queue_size": "how far a stream may fall behind: a tuning constant for Python "
    "callers and tests, not a deployment setting",
    "replay_events": "how many events a resumed stream can be replayed: a tuning constant for "
    "Python callers and tests (1000, as the Redis stream's trim length always was)",
    "dedup_window": "how long a message id is remembered: bounded by --max-tasks already; a "
    "tuning constant for Python callers and tests",
    "reuse_port": "set in each worker by the supervisor of --workers N (the hidden "
    "--worker-index), never by hand: a shared port is the supervisor's to arrange",
}
"""ServerConfig fields `serve` has no option for, each with the reason (they keep their
defaults, but reuse_port, which config_from_args derives)."""

NOT_CONFIG = {setting.name: setting.into for setting in SETTINGS if setting.into}
"""`serve` options (by dest) that are no ServerConfig field: what they name is read from files
or the environment into the Setup, or configures this process rather than the server."""


def parser() -> argparse.ArgumentParser:
    """The `serve` command line (every option with its default)."""
    command = argparse.ArgumentParser(
        prog="a2a-grpc serve",
        description="Run an A2A 1.0 gRPC server.\n\nEvery option can also be set in the "
        f"environment, as {environment.PREFIX}<OPTION>\n(--max-tasks: "
        f"{environment.variable_name('--max-tasks')}); the command line wins. See "
        "docs/server.md.",
        epilog=exit_codes.help_text(("serve",)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_options(command, SETTINGS)
    return command
