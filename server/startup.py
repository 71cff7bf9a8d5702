"""What `a2a-grpc serve` says as it starts: the start-up lines, from plain data.

`summarize` takes a StartupSummary from a running server; `startup_report` turns one into the
lines, so that a test writes a summary by hand and checks the lines without a server.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from a2a_grpc.core.metadata import PROTOCOL_VERSION
from a2a_grpc.server.addresses import is_wildcard
from a2a_grpc.server.app import RunningServer, ServerPlan
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.tasks.registry import redacted_url


@dataclass(frozen=True)
class StartupSummary:
    """What the start-up lines report about a started server, as plain data."""

    config: ServerConfig
    address: str
    """The gRPC listen address, `host:port` as bound."""
    tls: bool
    http_base: str | None
    """The HTTP port's base URL as bound, `http(s)://host:port` (None: no HTTP port)."""
    interfaces: tuple[tuple[str, str, str], ...]
    """The card's interfaces: (protocol binding, protocol version, URL) each."""
    advertised_grpc: str
    """The gRPC address the card lists."""
    agent: str
    """The agent's class, `module.QualifiedName`."""
    card_source: str
    """Where the card comes from: a file, "derived from SPEC", "demo"."""
    bearer_tokens: bool = False
    """Bearer tokens are checked: static ones, JWTs or both."""
    client_certificates: bool = False
    telemetry: str | None = None
    """The line telemetry set-up reports (None: nothing to say)."""
    from_environment: tuple[str, ...] = ()
    """The environment variables that set options (`A2A_GRPC_MAX_TASKS`, ...)."""
    push_configs_stored: bool = False
    """Push configs are kept in the task store, where others can read them (a shared store,
    with push notifications offered), rather than in this process's memory."""
    push_credential_keys: int = 0
    """How many keys `--push-credentials-keys[-file]` gave (0: none)."""


@dataclass(frozen=True)
class StartupLine:
    text: str
    warning: bool = False
    """Logged as a warning (stderr) rather than printed as a start-up line (stdout)."""


def summarize(
    running: RunningServer,
    plan: ServerPlan,
    card_source: str,
    telemetry: str | None = None,
    *,
    from_environment: tuple[str, ...] = (),
) -> StartupSummary:
    """The summary of `running`, started from `plan` (`from_environment`: the variables that
    set options)."""
    assert running.public is not None
    http_server = running.http_server
    return StartupSummary(
        config=running.handler.config,
        address=running.address,
        tls=plan.tls is not None,
        http_base=None if http_server is None else http_server.base_url,
        interfaces=tuple(
            (interface.protocol_binding, interface.protocol_version, interface.url)
            for interface in running.handler.card.supported_interfaces
        ),
        advertised_grpc=running.public.grpc,
        agent=f"{type(plan.agent).__module__}.{type(plan.agent).__qualname__}",
        card_source=card_source,
        bearer_tokens=bool(plan.tokens) or running.jwt is not None,  # static tokens or JWTs
        client_certificates=bool(plan.tls and plan.tls.client_ca),
        telemetry=telemetry,
        from_environment=from_environment,
        push_configs_stored=(
            running.handler.push is not None and running.handler.store.push_configs is not None
        ),
        push_credential_keys=0 if plan.push_credentials is None else plan.push_credentials.count,
    )


def startup_lines(summary: StartupSummary) -> list[str]:
    """The lines `serve` prints on stdout as it starts, in order."""
    return [line.text for line in startup_report(summary) if not line.warning]


def startup_report(summary: StartupSummary) -> list[StartupLine]:
    """Everything `serve` says as it starts, in order: the start-up lines, and the warnings
    logged between them."""
    config = summary.config
    scheme = "TLS" if summary.tls else "plaintext"
    lines = [StartupLine(f"serving A2A 1.0 over gRPC ({scheme}) on {summary.address}")]
    lines.append(StartupLine(_http_line(summary)))
    lines.append(
        StartupLine(
            f"agent {summary.agent}; card: {summary.card_source}, listing {_interfaces(summary)}"
        )
    )
    if is_wildcard(config.host) and not config.advertise:
        lines.append(
            StartupLine(
                f"listening on {config.host} (every interface) without --advertise: the card "
                f"lists {summary.advertised_grpc}, this machine's host name; set --advertise "
                "HOST:PORT to the address clients reach",
                warning=True,
            )
        )
    if summary.telemetry:
        lines.append(StartupLine(summary.telemetry))
    if summary.from_environment:
        names = ", ".join(sorted(summary.from_environment))
        lines.append(StartupLine(f"options set by the environment: {names}"))
    lines.append(StartupLine(settings_line(config)))
    lines.append(StartupLine(_authentication_line(summary)))
    if config.compat_03:
        lines.append(
            StartupLine(
                "A2A 0.3 callers are served on the same port (a2a.v1.A2AService; off: "
                "--no-compat-03)"
            )
        )
    if config.compat_03 and config.card_v03_fields and config.http_port is not None:
        lines.append(
            StartupLine(
                "the HTTP card also carries A2A 0.3's fields, for 0.3 clients that read it "
                "(--card-v03-fields); strict A2A 1.0 readers refuse such a card"
            )
        )
    push_line = _push_credentials_line(summary)
    if push_line is not None:
        lines.append(push_line)
    lines.append(StartupLine(shutdown_plan(config)))
    return lines


def _push_credentials_line(summary: StartupSummary) -> StartupLine | None:
    """Whether push configs' secrets are sealed at rest; a warning when a shared store keeps
    them in plain text (docs/push.md, "Secrets at rest")."""
    keys = summary.push_credential_keys
    if summary.push_configs_stored and keys:
        return StartupLine(
            f"push configs' token and credentials are sealed in the store with the first of "
            f"{keys} key{'s' if keys > 1 else ''} of --push-credentials-keys[-file]"
        )
    if summary.push_configs_stored:
        return StartupLine(
            "push configs' token and credentials are stored in plain text in the task store: "
            "whoever reads the store reads them; give --push-credentials-keys-file FILE to seal "
            "them (see docs/push.md, Secrets at rest)",
            warning=True,
        )
    if keys:
        return StartupLine(
            "--push-credentials-keys[-file] is not used: push configs are kept in this "
            "process's memory (or the agent offers no push notifications)"
        )
    return None


def _http_line(summary: StartupSummary) -> str:
    if summary.http_base is None:
        return "agent card (not served over HTTP)"
    base = summary.http_base
    served = {"JSONRPC": f"JSON-RPC at {base}/", "HTTP+JSON": f"HTTP+JSON at {base}"}
    return "; ".join(
        [f"agent card at {base}/.well-known/agent-card.json"]
        + [served[binding] for binding in summary.config.http_bindings]
    )


def _interfaces(summary: StartupSummary) -> str:
    """The card's interfaces, the protocol version named only where it is not 1.0's."""
    return ", ".join(
        f"{binding} {url}" if version == PROTOCOL_VERSION else f"{binding} {version} {url}"
        for binding, version, url in summary.interfaces
    )


def settings_line(config: ServerConfig) -> str:
    """Every setting in force (the store URL's password hidden)."""
    settings = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    settings["max_live_tasks_per_principal"] = config.live_tasks_per_principal
    settings["max_live_tasks_per_tenant"] = config.live_tasks_per_tenant
    settings["store"] = redacted_url(config.store) if config.store else "memory"
    return "settings " + ", ".join(f"{name}={value}" for name, value in settings.items())


def _authentication_line(summary: StartupSummary) -> str:
    forwarded = "the SPIFFE ID x-forwarded-client-cert names, from a --trusted-proxy"
    if summary.bearer_tokens and summary.client_certificates:
        return (
            "authentication required: a client certificate and a bearer token on every call "
            "(the token names the principal)"
            + (f"; {forwarded} stands in for the certificate" if summary.config.trust_xfcc else "")
        )
    kinds = ["bearer token"] if summary.bearer_tokens else []
    kinds += ["client certificate"] if summary.client_certificates else []
    kinds += [forwarded] if summary.config.trust_xfcc else []
    if kinds:
        return "authentication required: " + ", or ".join(kinds)
    return "no authentication configured: every caller is served as the same anonymous principal"


def shutdown_plan(config: ServerConfig) -> str:
    """The start-up line that says what SIGTERM / SIGINT will do."""
    drain = f"running work gets {config.shutdown_grace:g} s (--shutdown-grace)"
    if config.drain_delay <= 0:
        return f"on SIGTERM/SIGINT: NOT_SERVING and GOAWAY at once, then {drain}"
    return (
        f"on SIGTERM/SIGINT: NOT_SERVING, still serving for {config.drain_delay:g} s "
        f"(--drain-delay; a second signal skips it), then GOAWAY and {drain}"
    )
