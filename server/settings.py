"""`serve`'s command line: every option, its help and its default (the ServerConfig field's).

server/cli.py parses it and builds the server's configuration from it.
"""

from __future__ import annotations

import argparse

from a2a_grpc.core import exit_codes
from a2a_grpc.core.cards import card_url
from a2a_grpc.server import environment
from a2a_grpc.server.config import BINDINGS, ServerConfig
from a2a_grpc.server.ops import logs
from a2a_grpc.server.transports.addresses import bare_host
from a2a_grpc.server.trust.auth import TOKENS_ENV
from a2a_grpc.server.trust.oidc import ALGORITHMS

HTTP_PORT_OFF = -1
"""`--http-port -1`: no HTTP port (no card over HTTP, no JSON-RPC, no HTTP+JSON)."""


def parser() -> argparse.ArgumentParser:
    """The `serve` command line (every option with its default)."""
    d = ServerConfig()
    command = argparse.ArgumentParser(
        prog="a2a-grpc serve",
        description="Run an A2A 1.0 gRPC server.\n\nEvery option can also be set in the "
        f"environment, as {environment.PREFIX}<OPTION>\n(--max-tasks: "
        f"{environment.variable_name('--max-tasks')}); the command line wins. See "
        "docs/server.md.",
        epilog=exit_codes.help_text(("serve",)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = command.add_argument
    add(
        "--host",
        type=bare_host,
        default=d.host,
        help="address to listen on; 0.0.0.0 or :: for every interface (default: %(default)s)",
    )
    add("--port", type=int, default=d.port, help="gRPC port, 0 for any (default: %(default)s)")
    add(
        "--advertise",
        metavar="HOST[:PORT]",
        default=d.advertise,
        help="the address the card lists for gRPC, and the host of its HTTP URLs (default: the "
        "--host, or this machine's host name when --host is a wildcard; the bound port)",
    )
    add(
        "--advertise-http",
        metavar="URL",
        default=d.advertise_http,
        help="the http(s):// base URL the card lists for the JSON-RPC and HTTP+JSON bindings "
        "(default: the advertised host and the HTTP port)",
    )
    add(
        "--agent",
        metavar="MODULE:ATTR|FILE.py:ATTR",
        help="agent to run: a module (the current directory is searched first) or a .py file, "
        "and in it an agent instance or a class/factory taking no arguments (default: the "
        "built-in demo agent)",
    )
    add(
        "--card",
        metavar="FILE",
        help="agent card as ProtoJSON (default: made from the --agent's class, see docs/agents.md; "
        "the demo agent's without --agent)",
    )
    add(
        "--extended-card",
        metavar="FILE",
        help="extended card for authenticated callers (default: none)",
    )
    add(
        "--http-port",
        dest="http_port",
        type=int,
        default=None,
        help="HTTP port of the JSON-RPC (POST /) and HTTP+JSON bindings and of "
        "/.well-known/agent-card.json: default gRPC port + 1 (any free port when --port is 0), "
        f"{HTTP_PORT_OFF} to not serve HTTP",
    )
    add(
        "--bindings",
        type=_bindings,
        default=d.bindings,
        metavar="LIST",
        help="protocol bindings to serve, comma-separated among "
        f"{','.join(BINDINGS)} (default: all); grpc is always served and must be listed; "
        "an HTTP binding left out is not on the card and its routes answer 404",
    )
    add(
        "--card-max-age",
        type=int,
        default=d.card_max_age,
        help="the card's Cache-Control max-age, in seconds (default: %(default)s)",
    )
    add(
        "--metrics",
        action=argparse.BooleanOptionalAction,
        default=d.metrics,
        help="serve Prometheus metrics at /metrics on the HTTP port, without authentication "
        "(default: on; --no-metrics turns it off)",
    )
    add(
        "--auth-tokens",
        metavar="FILE",
        help=f'JSON {{"<token>": "<principal>"}} for bearer auth; also read from ${TOKENS_ENV} '
        "as token=principal,... (default: none, no bearer auth)",
    )
    add(
        "--tls-cert",
        metavar="PEM",
        help="server certificate chain; enables TLS on both ports (default: none, plaintext)",
    )
    add("--tls-key", metavar="PEM", help="server private key (default: none)")
    add(
        "--client-ca",
        metavar="PEM",
        help="CA for client certificates; enables mTLS auth: the principal is the "
        "certificate's SPIFFE ID (URI SAN spiffe://...), else cert:<CN> (default: none)",
    )
    add(
        "--trust-domain",
        metavar="TD",
        action=_AppendItems,
        default=d.trust_domain,
        help="accept only SPIFFE IDs of this trust domain (repeatable, or comma-separated), "
        "from client certificates and --trust-xfcc; a certificate without a SPIFFE ID is "
        "refused (default: any trust domain)",
    )
    add(
        "--trust-xfcc",
        action="store_true",
        help="read the caller's SPIFFE ID from x-forwarded-client-cert (Envoy's format; the "
        "last element, the local sidecar's) on connections from --trusted-proxy; that header "
        "from elsewhere, or malformed, is refused (off: the header is ignored)",
    )
    add(
        "--trusted-proxy",
        metavar="CIDR",
        action=_AppendItems,
        default=None,
        help="with --trust-xfcc: where the sidecar connects from (repeatable, or "
        f"comma-separated) (default: loopback, {' and '.join(d.trusted_proxy)})",
    )
    add(
        "--oidc-issuer",
        metavar="URL",
        default=d.oidc_issuer,
        help="accept bearer JWTs from this OpenID Connect issuer (its "
        "/.well-known/openid-configuration names the keys); needs --jwt-audience "
        "(default: none)",
    )
    add(
        "--jwks",
        metavar="URL|FILE",
        default=d.jwks,
        help="accept bearer JWTs signed by the keys of this JWKS (instead of --oidc-issuer); "
        "needs --jwt-issuer and --jwt-audience (default: none)",
    )
    add(
        "--jwt-issuer",
        metavar="ISS",
        default=d.jwt_issuer,
        help="with --jwks: the iss every JWT must carry (default: none)",
    )
    add(
        "--jwt-audience",
        metavar="AUD",
        default=d.jwt_audience,
        help="the aud every JWT must hold; required with JWTs (default: none)",
    )
    add(
        "--jwt-algorithms",
        type=_algorithms,
        metavar="LIST",
        default=d.jwt_algorithms,
        help=f"comma-separated algorithms a JWT may be signed with, among {','.join(ALGORITHMS)} "
        "(default: all of them)",
    )
    add(
        "--jwt-principal-claim",
        metavar="CLAIM",
        default=d.jwt_principal_claim,
        help="the JWT claim naming the caller, whose principal is jwt:<value>; azp or client_id "
        "for service tokens (default: %(default)s)",
    )
    add(
        "--jwt-leeway",
        type=float,
        metavar="SECONDS",
        default=d.jwt_leeway,
        help="clock skew allowed when checking exp, nbf and iat (default: %(default)s)",
    )
    add(
        "--jwks-timeout",
        type=float,
        metavar="SECONDS",
        default=d.jwks_timeout,
        help="seconds one fetch of the discovery document or the JWKS may take at most "
        "(default: %(default)s)",
    )
    add(
        "--jwks-refresh-interval",
        type=float,
        metavar="SECONDS",
        default=d.jwks_refresh_interval,
        help="least seconds between two fetches of the JWKS, for an unknown key id or stale "
        "keys (default: %(default)s)",
    )
    add(
        "--signature-keys",
        metavar="JWKS",
        help="public keys (JWKS file) for the signed-messages extension; offers the extension "
        "(default: none)",
    )
    add(
        "--trusted-signer-cards",
        metavar="URLS",
        type=_card_urls,
        default=(),
        help="comma-separated agent card URLs (an origin means its "
        "/.well-known/agent-card.json) whose published keys verify the signed messages that "
        "name them; no other card is ever fetched; offers the extension (default: none)",
    )
    add(
        "--signer-card-keys",
        metavar="JWKS",
        help="with --trusted-signer-cards: every signer card must be signed by one of these keys "
        "(default: card signatures are not checked)",
    )
    add(
        "--signer-card-timeout",
        type=float,
        metavar="SECONDS",
        default=d.signer_card_timeout,
        help="seconds one fetch of a signer's card may take at most (default: %(default)s)",
    )
    add(
        "--publish-signing-keys",
        metavar="JWKS",
        help="public keys (JWKS file, e.g. from `a2a-grpc keys new`) this agent's own messages "
        "are signed with: put on the served card for the agents it calls; SIGHUP reads the "
        "file again (default: none)",
    )
    add(
        "--require-signed-messages",
        action="store_true",
        help="with --signature-keys or --trusted-signer-cards: refuse messages without a valid "
        "signature",
    )
    add(
        "--card-signing-key",
        metavar="PEM",
        help="private key that signs the served card (default: none, unsigned)",
    )
    add("--card-signing-kid", metavar="KID", help="key id for --card-signing-key (default: none)")
    add(
        "--audit-log",
        metavar="FILE",
        help="append a hash-chained JSON Lines audit trail here (default: none)",
    )
    add(
        "--audit-fail-closed",
        action="store_true",
        help="with --audit-log: refuse requests (UNAVAILABLE) while records cannot be written",
    )
    add(
        "--max-tasks",
        type=int,
        default=d.max_tasks,
        help="tasks kept; when full the oldest finished ones go first (default: %(default)s)",
    )
    add(
        "--task-ttl",
        type=float,
        default=d.task_ttl,
        help="seconds a finished task is kept (default: %(default)s)",
    )
    add(
        "--interrupted-ttl",
        type=float,
        default=d.interrupted_ttl,
        help="seconds a task may wait for input or auth before it is canceled "
        "(default: %(default)s)",
    )
    add(
        "--max-inline-bytes",
        type=int,
        default=d.max_inline_bytes,
        help="largest raw part accepted inline, in bytes (default: %(default)s)",
    )
    add(
        "--max-message-bytes",
        type=int,
        default=d.max_message_bytes,
        help="largest message accepted, every part counted (default: %(default)s)",
    )
    add(
        "--max-store-bytes",
        type=int,
        default=d.max_store_bytes,
        help="bytes of tasks kept in memory (default: a quarter of the memory limit, here "
        "%(default)s)",
    )
    add(
        "--max-live-tasks-per-principal",
        type=int,
        default=None,
        help="unfinished tasks one caller may hold (default: a tenth of --max-tasks)",
    )
    add(
        "--max-live-tasks-per-tenant",
        type=int,
        default=None,
        help="unfinished tasks one tenant may hold (default: half of --max-tasks)",
    )
    add(
        "--strict-version",
        action="store_true",
        help="refuse requests without a2a-version metadata (the spec treats them as 0.3)",
    )
    add(
        "--strict-parsing",
        action="store_true",
        help="refuse JSON-RPC and HTTP+JSON requests with fields A2A 1.0 does not have "
        "(INVALID_PARAMS / 400) instead of ignoring them (spec 5.7)",
    )
    add(
        "--no-compat-03",
        dest="compat_03",
        action="store_false",
        help="do not serve A2A 0.3 callers (a2a.v1.A2AService) nor list them on the card "
        "(default: served)",
    )
    add(
        "--card-v03-fields",
        action="store_true",
        help="also put A2A 0.3's fields (url, preferredTransport, ...) on the card served over "
        "HTTP, for 0.3 clients that read it there; the card is then no longer a strict 1.0 card",
    )
    add(
        "--drain-delay",
        type=float,
        default=d.drain_delay,
        help="seconds a stopping server keeps serving as usual after Health turns NOT_SERVING, "
        "so balancers move first; a second SIGTERM/SIGINT ends it; 0: drain at once "
        "(default: %(default)s)",
    )
    add(
        "--shutdown-grace",
        type=float,
        default=d.shutdown_grace,
        help="seconds running tasks and open streams get after the drain delay before they "
        "are cancelled (default: %(default)s)",
    )
    add(
        "--log-level",
        choices=logs.LEVELS,
        default="info",
        help="least severe level logged (default: %(default)s)",
    )
    add(
        "--log-format",
        choices=logs.FORMATS,
        default="text",
        help="text lines, or one JSON object per line (time, level, logger, message, ...) "
        "(default: %(default)s)",
    )
    add(
        "--webhook-timeout",
        type=float,
        default=d.webhook_timeout,
        help="seconds one webhook POST may take (default: %(default)s)",
    )
    add(
        "--stream-write-timeout",
        type=float,
        default=d.stream_write_timeout,
        metavar="SECONDS",
        help="how long one event of an HTTP (SSE) stream may wait for a client that stopped "
        "reading before the stream is ended and its connection closed (default: %(default)s)",
    )
    add(
        "--webhook-max-attempts",
        type=int,
        default=d.webhook_max_attempts,
        help="tries per event before a webhook is given up (default: %(default)s)",
    )
    add(
        "--allow-private-webhooks",
        action="store_true",
        help="let webhooks target loopback/private/link-local addresses (disables the SSRF guard)",
    )
    add(
        "--max-push-configs",
        type=int,
        default=d.max_push_configs,
        help="push notification configs (webhooks) one task may have (default: %(default)s)",
    )
    add(
        "--max-streams-per-connection",
        type=int,
        default=d.max_streams_per_connection,
        help="HTTP/2 streams one connection may hold (default: %(default)s)",
    )
    add(
        "--max-concurrent-calls",
        type=int,
        default=d.max_concurrent_calls,
        help="A2A unary calls handled at once; more get RESOURCE_EXHAUSTED + RetryInfo "
        "(default: %(default)s)",
    )
    add(
        "--max-open-streams",
        type=int,
        default=d.max_open_streams,
        help="A2A streams open at once, counted apart from calls (default: %(default)s)",
    )
    add(
        "--store",
        metavar="URL",
        default=d.store,
        help="keep tasks in this shared store, for several workers or servers: "
        "redis://[[user]:password@]host[:port][/db], rediss://... (TLS) or "
        "unix:///path/redis.sock; the password is never printed (default: this process's "
        "memory)",
    )
    add(
        "--store-file",
        metavar="FILE",
        help="read the --store URL from this file (surrounding whitespace stripped), e.g. a "
        "mounted Secret, so that its password is in neither the command line nor the "
        "environment (default: none)",
    )
    add(
        "--task-lease",
        type=float,
        metavar="SECONDS",
        default=d.task_lease,
        help="with --store: how long a server's lease on the tasks it runs lasts; a task whose "
        "server stopped (crashed, killed) is FAILED within this time, at most 3600 "
        "(default: %(default)s)",
    )
    add(
        "--workers",
        type=int,
        metavar="N",
        default=d.workers,
        help="run N server processes sharing --port (and the HTTP port); N > 1 needs a shared "
        "--store and a fixed --port; the first process supervises them, forwards SIGTERM/SIGINT "
        "and stops them all when one exits (default: %(default)s)",
    )
    # Set by the supervisor of --workers N in each worker it starts (server/ops/workers.py).
    add("--worker-index", type=int, default=None, help=argparse.SUPPRESS)
    add("--worker-lifeline", type=int, default=None, help=argparse.SUPPRESS)
    return command


class _AppendItems(argparse.Action):
    """A repeatable option whose values may each be comma-separated: a tuple of them all, in
    order, without repeats. The default is replaced, not extended, by the first use."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        seen = getattr(namespace, self.dest, None)
        # Anything but a tuple of earlier uses (the default, or a marker) starts afresh.
        earlier = seen if isinstance(seen, tuple) and seen is not self.default else ()
        items = [item.strip() for item in str(values).split(",") if item.strip()]
        setattr(namespace, self.dest, tuple(dict.fromkeys((*earlier, *items))))


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
