"""Assembles and runs the server: A2A service, health, reflection, auth, TLS, the HTTP card."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2_grpc

from a2a_grpc.core.jose import KeySet, PrivateKey
from a2a_grpc.core.service import SERVICE_NAME, V03_SERVICE, V03_SERVICE_NAME
from a2a_grpc.core.signing import (
    card_publishes_signing_keys,
    card_signing_keys,
    publish_signing_keys,
    sign_card,
)
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.addresses import (
    PublicAddresses,
    bare_host,
    bind_problem,
    host_port,
    listen_problem,
    public_addresses,
)
from a2a_grpc.server.agent import AgentExecutor
from a2a_grpc.server.agent_loader import executor_problem
from a2a_grpc.server.card import Serving, complete_extended_card, demo_card, finalize_card
from a2a_grpc.server.compose import ServerRoot
from a2a_grpc.server.compose import StartupError as StartupError
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.ops.metrics import RpcMetrics, ServerMetrics
from a2a_grpc.server.protocol.fairness import ShareLimits, Shares
from a2a_grpc.server.protocol.gate import CallGate
from a2a_grpc.server.protocol.handler import RequestHandler
from a2a_grpc.server.protocol.housekeeping import CANCEL_SETTLE_S
from a2a_grpc.server.push.delivery import WebhookDispatcher
from a2a_grpc.server.tasks.base import StoreFactory, TaskStore
from a2a_grpc.server.tasks.sealing import CredentialKeys
from a2a_grpc.server.transports.grpc.auth import AuthInterceptor
from a2a_grpc.server.transports.grpc.health import EndingHealthServicer
from a2a_grpc.server.transports.grpc.limits import connection_limits
from a2a_grpc.server.transports.grpc.servicer import A2AServicer, add_to_server
from a2a_grpc.server.transports.grpc.servicer_v03 import V03Servicer
from a2a_grpc.server.transports.grpc.tls import grpc_credentials
from a2a_grpc.server.transports.http.bindings import HttpBindings
from a2a_grpc.server.transports.http.server import HttpServer
from a2a_grpc.server.trust.audit import AuditLog
from a2a_grpc.server.trust.auth import (
    AllOf,
    AnyOf,
    Authenticator,
    BearerTokens,
    CardSecurity,
    ClientCertificates,
    ForwardedClientCert,
)
from a2a_grpc.server.trust.mesh import XFCC_HEADER, trusted_networks
from a2a_grpc.server.trust.oidc import JwtBearer
from a2a_grpc.server.trust.tls import ServerCertificates, TlsFiles

log = logging.getLogger(__name__)

A2A_SERVICE = SERVICE_NAME
A2A_V03_SERVICE = V03_SERVICE_NAME


AUDIT_HEALTH_SERVICE = "a2a_grpc.audit"
STORE_HEALTH_SERVICE = "a2a_grpc.store"
"""Health service of the task store: NOT_SERVING while a shared store (Redis) does not answer;
the server and the A2A service are NOT_SERVING with it."""
"""Health service name that is NOT_SERVING while audit records cannot be written."""


class PortInUseError(StartupError):
    """A port could not be bound: in use, not a local address, or not permitted (the message
    says which)."""


@dataclass
class RunningServer:
    """A started server. `port` is the bound gRPC port (useful with port 0)."""

    server: grpc.aio.Server
    """The gRPC server (the A2A services, Health, reflection); stop it with `stop`, which
    drains it first."""
    port: int
    """The bound gRPC port: `config.port`, or the free port picked when that is 0."""
    handler: RequestHandler
    """The request handler every binding calls (`handler.config` is the ServerConfig served,
    `handler.card` the card); the server's inside, whose interface may change."""
    health: EndingHealthServicer
    """The gRPC Health servicer; `stop` makes it answer NOT_SERVING."""
    gate: CallGate
    """The call gate every call of every binding passes (admission, capacity, metrics, audit);
    `stop` closes it once the grace is over."""
    root: ServerRoot
    """What built and opened the handler, the store, the webhooks, the verifier, the audit
    trail and the JWT keys (server/compose.py); `stop` drains the runs through it and then
    asks it to close them, in reverse order of opening."""
    http_server: HttpServer | None = None
    """The HTTP server on `config.http_port` (card, JSON-RPC, HTTP+JSON, probes, /metrics; its
    `port` is the bound one); None without an HTTP port."""
    public: PublicAddresses | None = None
    """What the card lists (the advertised addresses); None only for a hand-made instance."""
    metrics: ServerMetrics | None = None
    """The server's metrics registry (None with `config.metrics` off)."""
    bearer_tokens: BearerTokens | None = None
    """The static bearer tokens `reload_tokens` replaces; None when started without
    `ServerPlan.tokens`."""
    jwt: JwtBearer | None = None
    """What checks bearer JWTs (its keys: `jwt.start`), closed by `stop` (through `root`)."""
    certificates: ServerCertificates | None = None
    """The TLS files both ports serve, which `reload_tls` replaces; None without TLS."""
    card_signer: tuple[PrivateKey, str] | None = None
    """The key and kid the cards are signed with (`--card-signing-key`), for a reload."""
    board: HealthBoard | None = None
    """What Health and /readyz say (None only for a hand-made instance)."""
    _hurry: asyncio.Event = field(default_factory=asyncio.Event)

    def reload_tokens(self, tokens: Mapping[str, str]) -> None:
        """Makes `tokens` (token -> principal) the valid bearer tokens for new calls, over every
        transport; ValueError (nothing changes) when empty or when the server started without
        bearer tokens (authentication is not added while it runs)."""
        if self.bearer_tokens is None:
            raise ValueError("the server started without bearer tokens; restart it to add them")
        self.bearer_tokens.replace(tokens)

    def reload_tls(self, files: TlsFiles) -> None:
        """New TLS handshakes (gRPC and HTTP) use `files`; ValueError (nothing changes) when they
        cannot serve TLS or the server started without TLS."""
        if self.certificates is None:
            raise ValueError("the server started without TLS; restart it to add TLS")
        self.certificates.replace(files)

    def reload_signing_keys(self, keys: KeySet) -> None:
        """Publishes `keys` as the keys this agent signs its own messages with (`params.jwks`
        of the signed-messages extension entry) on the public and the extended card, signed
        again when the server signs its cards, served from now on (gRPC and HTTP); ValueError
        (nothing changes) when the server started without published keys."""
        handler = self.handler
        if not card_publishes_signing_keys(handler.card):
            raise ValueError(
                "the server started without --publish-signing-keys; restart it to add them"
            )
        if card_signing_keys(handler.card).to_jwks() == keys.to_jwks():
            return  # unchanged: the cards (and their signatures and ETag) stay as they are
        card = self._with_signing_keys(handler.card, keys)
        extended = handler.extended_card
        if extended is not None and card_publishes_signing_keys(extended):
            extended = self._with_signing_keys(extended, keys)
        handler.card, handler.extended_card = card, extended
        if self.http_server is not None:
            self.http_server.set_card(
                card, v03=_card_v03_fields(handler.config), signer=self.card_signer
            )

    def _with_signing_keys(self, card: a2a_pb2.AgentCard, keys: KeySet) -> a2a_pb2.AgentCard:
        updated = a2a_pb2.AgentCard()
        updated.CopyFrom(card)
        del updated.signatures[:]  # they signed the card with the old keys on it
        publish_signing_keys(updated, keys, verifies=False)  # the entry exists: only its keys
        return updated if self.card_signer is None else sign_card(updated, *self.card_signer)

    @property
    def address(self) -> str:
        """The listen address, `host:port` (IPv6 bracketed)."""
        return host_port(self.handler.config.host, self.port)

    @property
    def card_server(self) -> HttpServer | None:
        """The name `http_server` had before; kept so code written against it still runs."""
        return self.http_server

    @property
    def card_url(self) -> str | None:
        """`http(s)://HOST:PORT/.well-known/agent-card.json` on the listen host and the bound
        HTTP port (not the advertised address); None without an HTTP port."""
        if self.http_server is None:
            return None
        return f"{self.http_server.base_url}/.well-known/agent-card.json"

    def skip_drain_delay(self) -> None:
        """Ends a running stop's drain delay now (a second SIGTERM / SIGINT), or skips the next
        stop's."""
        self._hurry.set()

    @property
    def drain_delay_skipped(self) -> bool:
        """Whether `skip_drain_delay` was called (a second SIGTERM / SIGINT)."""
        return self._hurry.is_set()

    async def stop(
        self,
        grace: float | None = None,
        *,
        drain_delay: float | None = None,
        on_drain: Callable[[], None] | None = None,
    ) -> None:
        """Shuts down in two phases (defaults: the config's `drain_delay` and `shutdown_grace`).

        1. At once Health (gRPC, every service) and /readyz say NOT_SERVING, and HTTP responses
           close their connections; A2A calls are still served as usual for `drain_delay`
           seconds (ended early by `skip_drain_delay`), so that balancers and sidecars that
           read Health stop sending calls here before anything is refused.
        2. Then the gRPC server sends GOAWAY on every connection and its port closes (clients
           and proxies reconnect elsewhere); the HTTP port closes and so do its idle keep-alive
           connections. Calls, streams and running agents go on for `grace` seconds; calls
           that still arrive on a connection the GOAWAY had not reached yet are served, and
           the runs they start are waited for too. When the grace runs out, agents still
           running are cancelled (their tasks end CANCELED, or FAILED saying the replica
           stopped on a shared store), the calls that wait on them end with them, new A2A
           calls get UNAVAILABLE (the drain gate), and what is still open is cancelled.
           Pending webhook POSTs get what is left of the grace; what they could not send is
           logged as undelivered.

        `on_drain` is called as phase 2 starts.
        """
        config = self.handler.config
        grace = config.shutdown_grace if grace is None else grace
        delay = config.drain_delay if drain_delay is None else drain_delay
        if self.board is not None:
            await self.board.drain()
        else:
            await self.health.enter_graceful_shutdown()
        if delay > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._hurry.wait(), delay)
        if on_drain is not None:
            on_drain()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace

        def left() -> float:
            return max(0.0, deadline - loop.time())

        # GOAWAY now; past the grace the calls still waiting on cancelled agents get as long as
        # those take to end, as `drain` allows, and the second `stop` below cuts the rest.
        self.health.end_watches()  # else each open Watch would hold the stop for the grace
        goaway = asyncio.ensure_future(self.server.stop(grace + CANCEL_SETTLE_S))
        if self.http_server is not None:
            await self.http_server.close()
        await self.root.drain(left())
        if left() == 0:
            self.gate.close()  # the grace is over: what still arrives is refused
        # Calls still open get the rest of the grace; one that arrived just before its
        # connection's GOAWAY is served, and the run it starts is waited for below.
        closing = [self.server.stop(left()), goaway]
        if self.http_server is not None:
            closing.append(self.http_server.stop(left()))  # HTTP calls end with the gRPC ones
        await asyncio.gather(*closing)
        self.gate.close()
        await self.root.drain(left())
        # The webhooks' pending POSTs get what is left of the grace, then the store, the
        # verifier, the audit trail and the JWT keys close: the reverse of their opening.
        await self.root.close(left())


@dataclass(frozen=True)
class ServerPlan:
    """What `start_server` serves: the settings, the agent and its cards, who may call, the keys
    and the webhook sender. Only `config` and `agent` are needed; the rest defaults to none."""

    config: ServerConfig
    """The settings served."""
    agent: AgentExecutor
    """The agent; `start_server` raises StartupError when its `execute` is no coroutine
    function (`async def`)."""
    card: a2a_pb2.AgentCard | None = None
    """The agent's card, finalized at start (None: the demo card)."""
    extended_card: a2a_pb2.AgentCard | None = None
    """The card for authenticated callers; the card must offer it."""
    tokens: Mapping[str, str] | None = None
    """Bearer tokens, token -> principal: every call must bring one."""
    tls: TlsFiles | None = None
    """TLS on both ports; with a `client_ca`, every call must bring a client certificate."""
    signature_keys: KeySet | None = None
    """Public keys that verify signed messages: the card offers the signed-messages extension."""
    signer_card_keys: KeySet | None = None
    """With `config.trusted_signer_cards`: the keys every signer card must be signed with."""
    signing_keys: KeySet | None = None
    """Public keys this agent's own messages are signed with, published on the card."""
    card_signer: tuple[PrivateKey, str] | None = None
    """(private key, key id) the cards are served signed with."""
    webhooks: WebhookDispatcher | None = None
    """The push notification sender (None: one made from `config.delivery_policy`); the
    server's once it started: `stop` closes it."""
    authenticators: Sequence[Authenticator] = ()
    """Other kinds of credentials, each an alternative to `tokens` (with the certificate when `tls`
    has a `client_ca`); the card states their schemes. CONTRIBUTING.md shows one."""
    store: TaskStore | StoreFactory | None = None
    """Where tasks are kept, instead of the store `config.store` names (which must then be
    empty): a `StoreFactory` (tasks/base.py), called with the server's store settings, its
    listener and `webhooks`, or a store as built (whose listener and webhooks are the ones it
    was built with: give a factory for the server's). Either way the store is the server's:
    `start_server` starts it (and closes it when the start fails after that), `stop` closes
    it. None: `config.store`, opened by its scheme (docs/stores.md)."""
    push_credentials: CredentialKeys | None = None
    """The keys that seal push configs' token and credentials in a store that keeps them
    where others can read them (`--push-credentials-keys[-file]`; tasks/sealing.py); handed to
    the store with its settings (`StoreSettings.push_credentials`). None: stored as written."""


@dataclass(frozen=True)
class _Auth:
    """Who may call, as `start_server` enforces it."""

    certificates: ServerCertificates | None
    bearer_tokens: BearerTokens | None
    authenticator: Authenticator | None
    jwt: JwtBearer | None = None
    """Bearer JWTs (`--oidc-issuer` / `--jwks`): it holds static `bearer_tokens` as its table."""


@dataclass(frozen=True)
class _Listeners:
    """The server's ports, bound and not serving yet, and what Health says on them."""

    server: grpc.aio.Server
    port: int
    http_server: HttpServer | None
    board: HealthBoard
    """What Health says; it knows the A2A services served."""


async def start_server(plan: ServerPlan) -> RunningServer:
    """Binds `plan.config.host:plan.config.port` exclusively and starts serving.

    With `plan.tokens` (token → principal) or a `plan.tls.client_ca`, every A2A call must
    authenticate; with neither, every caller is the anonymous principal. The card is finalized
    to state the interface, capabilities and security schemes actually in force. With
    `signature_keys` the card offers the signed-messages extension (required with
    `config.require_signed_messages`), and so it does with `config.trusted_signer_cards`, whose
    cards' keys verify the messages naming them (their cards signed by one of
    `signer_card_keys`, when given); `signing_keys` (public) are published on the card as the
    keys this agent's own messages are signed with; with `card_signer` (private key, key id)
    the card is served signed.
    """
    config, agent = plan.config, plan.agent
    problem = executor_problem(agent)
    if problem is not None:
        raise StartupError(f"the agent cannot serve: {problem}")
    if plan.store is not None and config.store:
        raise StartupError(
            "the plan gives a store and config.store names one too: give the store once"
        )
    auth = _auth(plan, config)
    root = ServerRoot(config)
    try:
        if auth.jwt is not None:
            await root.start_jwt(auth.jwt)
        return await _start(plan, auth, root)
    except BaseException:
        await root.close()
        raise


async def _start(plan: ServerPlan, auth: _Auth, root: ServerRoot) -> RunningServer:
    """`start_server` once the authenticator is ready: the root opens the rest, around the
    ports this binds (given back when the start fails)."""
    config = plan.config
    health_servicer = EndingHealthServicer()
    a2a_services = (A2A_SERVICE, A2A_V03_SERVICE) if config.compat_03 else (A2A_SERVICE,)
    board = HealthBoard(health_servicer, a2a_services)
    security = _card_security(auth)  # before any port is bound: it may stop the start
    audit = root.open_audit(board.reporter(AUDIT_HEALTH_SERVICE, needed=config.audit_fail_closed))
    listeners = _listen(config, auth, board)
    try:
        return await _serve(plan, auth, security, root, listeners, audit)
    except BaseException:
        await _unbind(listeners)
        raise


async def _serve(
    plan: ServerPlan,
    auth: _Auth,
    security: CardSecurity,
    root: ServerRoot,
    listeners: _Listeners,
    audit: AuditLog | None,
) -> RunningServer:
    """`_start` once the ports are bound: the card names them, the root opens the handler over
    it, and the transports serve it."""
    config, board = plan.config, listeners.board
    public = public_addresses(
        config.host,
        listeners.port,
        None if listeners.http_server is None else listeners.http_server.port,
        advertise=config.advertise,
        advertise_http=config.advertise_http,
        tls=auth.certificates is not None,
    )
    final_card, extended_card = _cards(plan, public, security)
    handler = await root.open_handler(
        plan.agent,
        final_card,
        store=plan.store,
        audit=audit,
        on_store_health=board.reporter(STORE_HEALTH_SERVICE, needed=True),
        extended_card=extended_card,
        webhooks=plan.webhooks,
        signature_keys=plan.signature_keys,
        signer_card_keys=plan.signer_card_keys,
        push_credentials=plan.push_credentials,
    )
    gate, metrics = _gate_and_metrics(config, handler, audit, board)
    await _start_serving(listeners, handler, gate, metrics, auth, plan.card_signer)
    if audit is not None:
        board.reporter(AUDIT_HEALTH_SERVICE, needed=audit.fail_closed)(not audit.failing)
    return RunningServer(
        listeners.server,
        listeners.port,
        handler,
        board.servicer,
        gate,
        root,
        http_server=listeners.http_server,
        public=public,
        metrics=metrics,
        bearer_tokens=auth.bearer_tokens,
        certificates=auth.certificates,
        card_signer=plan.card_signer,
        board=board,
        jwt=auth.jwt,
    )


async def _unbind(listeners: _Listeners) -> None:
    """Gives back the ports of a start that failed. grpc lets go of a bound port only when a
    started server stops (a stop before the start, or dropping the server, keeps it bound for
    the life of the process), so the gRPC server starts and stops at once, with no grace: a
    call that reached it in between is cancelled."""
    await listeners.server.start()  # a no-op when it had started
    await listeners.server.stop(None)
    if listeners.http_server is not None:
        await listeners.http_server.stop(0)


def _auth(plan: ServerPlan, config: ServerConfig) -> _Auth:
    """Credentials (bearer tokens: static, JWTs or both; `plan.authenticators`' kinds; any one
    of them), client certificates, both (both required: see AllOf) or neither; with
    `config.trust_xfcc`, a trusted sidecar's `x-forwarded-client-cert` stands in for the client
    certificate (ForwardedClientCert). The card states what the result enforces
    (`Authenticator.card_security`)."""
    tls = plan.tls
    certificates = None if tls is None else ServerCertificates(tls)
    client_certificates = tls is not None and tls.client_ca is not None
    if config.trust_domain and not (client_certificates or config.trust_xfcc):
        raise StartupError("--trust-domain needs client certificates (--client-ca) or --trust-xfcc")
    bearer_tokens = BearerTokens(plan.tokens) if plan.tokens else None
    jwt = _jwt_bearer(config, bearer_tokens)
    # A bearer value that is no JWT goes from the JWT authenticator to the static table.
    bearer = jwt if jwt is not None else bearer_tokens
    credentials = [*([] if bearer is None else [bearer]), *plan.authenticators]
    certificate = None
    if client_certificates:
        certificate = ClientCertificates(config.trust_domain)
    elif config.trust_xfcc:
        # Beside a credential, the card states that credential only: a caller reading it
        # cannot present what only its sidecar can.
        wants = f"{XFCC_HEADER} from a trusted proxy"
        certificate = ClientCertificates(config.trust_domain, wants=wants, on_card=not credentials)
    authenticator: Authenticator | None = None
    if client_certificates and certificate is not None and credentials:
        # Both configured: both required (see AllOf).
        credential = credentials[0] if len(credentials) == 1 else AnyOf(tuple(credentials))
        authenticator = AllOf((credential, certificate))
    elif credentials or certificate is not None:
        # One kind: that one. Credentials and XFCC without a client CA: either (a direct
        # caller has no certificate to present).
        authenticator = AnyOf((*credentials, *([] if certificate is None else [certificate])))
    if authenticator is not None and config.trust_xfcc:
        networks = trusted_networks(config.trusted_proxy)
        authenticator = ForwardedClientCert(authenticator, networks, config.trust_domain)
    return _Auth(certificates, bearer_tokens, authenticator, jwt)


def _jwt_bearer(config: ServerConfig, static: BearerTokens | None) -> JwtBearer | None:
    """The JWT authenticator the config asks for (None: JWTs are not accepted); its keys are
    fetched by `JwtBearer.start`."""
    if not (config.oidc_issuer or config.jwks):
        return None
    return JwtBearer(
        issuer=config.oidc_issuer or config.jwt_issuer,
        audience=config.jwt_audience,
        oidc=bool(config.oidc_issuer),
        jwks=config.jwks,
        algorithms=config.jwt_algorithms,
        principal_claim=config.jwt_principal_claim,
        leeway=config.jwt_leeway,
        timeout_s=config.jwks_timeout,
        refresh_interval=config.jwks_refresh_interval,
        static=static,
    )


def _listen(config: ServerConfig, auth: _Auth, board: HealthBoard) -> _Listeners:
    """The gRPC server bound to its port, and the HTTP server to its own (when there is one);
    PortInUseError when one cannot be bound."""
    interceptors = [AuthInterceptor(auth.authenticator)] if auth.authenticator is not None else []
    server = grpc.aio.server(
        interceptors=interceptors,
        options=[
            # Never share the port with another process (grpc enables SO_REUSEPORT by default),
            # but with the other workers of one `serve --workers N` (config.reuse_port).
            ("grpc.so_reuseport", 1 if config.reuse_port else 0),
            ("grpc.max_receive_message_length", config.max_receive_bytes),
            *connection_limits(config),
        ],
    )
    port = _bind(server, config, auth.certificates)
    http_server = None
    if config.http_port is not None:
        http_server = HttpServer(
            None,
            host=bare_host(config.host),
            port=config.http_port,
            max_age=config.card_max_age,
            reuse_port=config.reuse_port,
            max_body=config.max_receive_bytes,
            shutdown_timeout=config.shutdown_grace,
            ssl_context=None if auth.certificates is None else auth.certificates.ssl_context,
            readiness=board,
        )
        try:
            http_server.bind()
        except OSError as exc:
            problem = listen_problem(config.host, config.http_port, exc.errno, exc.strerror or "")
            raise PortInUseError(f"{problem} (the HTTP port)") from exc
    return _Listeners(server, port, http_server, board)


def _card_security(auth: _Auth) -> CardSecurity:
    """What the card states of who may call: what the authenticator enforces."""
    try:
        return CardSecurity() if auth.authenticator is None else auth.authenticator.card_security()
    except ValueError as exc:
        raise StartupError(f"cannot state the security schemes on the card: {exc}") from exc


def _cards(
    plan: ServerPlan, public: PublicAddresses, security: CardSecurity
) -> tuple[a2a_pb2.AgentCard, a2a_pb2.AgentCard | None]:
    """The card and the extended card as served: finalized (stating `security`), completed,
    signed."""
    config = plan.config
    serving = Serving(
        public.grpc,
        http_url=public.http,
        http_bindings=config.http_bindings,
        v03=config.compat_03,
        security=security,
        signed_messages=(
            config.require_signed_messages
            if plan.signature_keys is not None or config.trusted_signer_cards
            else None
        ),
        signing_keys=plan.signing_keys,
    )
    final_card = finalize_card(plan.card or demo_card(public.grpc), serving)
    extended_card = plan.extended_card
    if extended_card is not None:
        if not final_card.capabilities.extended_agent_card:
            raise StartupError(
                "an extended card is given (--extended-card), but the card does not offer it: "
                "set capabilities.extendedAgentCard to true in the card (--card)"
            )
        extended_card = complete_extended_card(extended_card, final_card)
    if plan.card_signer is not None:
        final_card = sign_card(final_card, *plan.card_signer)
        if extended_card is not None:
            extended_card = sign_card(extended_card, *plan.card_signer)
    return final_card, extended_card


def _gate_and_metrics(
    config: ServerConfig, handler: RequestHandler, audit: AuditLog | None, board: HealthBoard
) -> tuple[CallGate, ServerMetrics | None]:
    """The call gate every transport admits calls through, and the metrics that count them
    (and report what `board` says of readiness)."""
    rpc_metrics = RpcMetrics() if config.metrics else None
    gate = CallGate(
        max_calls=config.max_concurrent_calls,
        max_streams=config.max_open_streams,
        declared_extensions=[ext.uri for ext in handler.card.capabilities.extensions],
        strict_version=config.strict_version,
        v03_over_grpc=config.compat_03,
        audit=audit,
        metrics=rpc_metrics,
        shares=Shares(ShareLimits.of(config)),
    )
    if rpc_metrics is None:
        return gate, None
    return gate, ServerMetrics(gate, handler, rpc_metrics, board)


async def _start_serving(
    listeners: _Listeners,
    handler: RequestHandler,
    gate: CallGate,
    metrics: ServerMetrics | None,
    auth: _Auth,
    card_signer: tuple[PrivateKey, str] | None,
) -> None:
    """Puts the services on the bound ports, starts serving and says SERVING."""
    config, server, http_server = handler.config, listeners.server, listeners.http_server
    health_servicer, a2a_services = listeners.board.servicer, listeners.board.a2a_services
    add_to_server(A2AServicer(handler, gate), server)
    if config.compat_03:
        add_to_server(V03Servicer(handler, gate), server, V03_SERVICE)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(
        MethodAwareReflection((*a2a_services, health.SERVICE_NAME, reflection.SERVICE_NAME)),
        server,
    )
    if http_server is not None:
        http_server.set_card(handler.card, v03=_card_v03_fields(config), signer=card_signer)
        await http_server.start(
            HttpBindings(
                handler,
                gate,
                auth.authenticator,
                served=config.http_bindings,
                write_timeout=config.stream_write_timeout,
            ),
            metrics,
        )
    await server.start()
    for service in ("", *a2a_services):
        await health_servicer.set(service, health_pb2.HealthCheckResponse.SERVING)


def _card_v03_fields(config: ServerConfig) -> bool:
    """Whether the HTTP card carries A2A 0.3's fields: asked for, and 0.3 served."""
    return config.compat_03 and config.card_v03_fields


def freeze_startup_objects() -> None:
    """Puts every object alive now (modules, classes, the agent, the card, the server) out of
    the garbage collector's sight, after one collection so that no garbage is kept with them.

    For a process that serves until it exits (`a2a-grpc serve`), which keeps those objects
    anyway: each full collection under load walked them all, ~78k objects and ~40 ms on a
    2-core VM. With finished tasks untracked too (tasks/table.py), a full collection over a
    store of 100,000 tasks takes ~6 ms instead of ~84 ms.
    """
    gc.collect()
    gc.freeze()


class HealthBoard:
    """What Health and the HTTP readiness probe say, from what each component reports: a
    component's own service (e.g. `a2a_grpc.audit`) is NOT_SERVING while it fails; the server
    ("") and the A2A service are NOT_SERVING while any component they need fails (the task
    store; the audit trail when it fails closed), and SERVING again once none does. Once the
    server drains, everything is NOT_SERVING for good."""

    def __init__(
        self, servicer: health.aio.HealthServicer, a2a_services: tuple[str, ...] = (A2A_SERVICE,)
    ) -> None:
        self.servicer = servicer
        self.a2a_services = a2a_services
        """The A2A services served (1.0, and 0.3 unless it is off)."""
        self.draining = False
        """True once the server is stopping (`drain`)."""
        self._failing: set[str] = set()
        self._updates: set[asyncio.Task[None]] = set()  # referenced until done (weak refs)

    async def drain(self) -> None:
        """Every service NOT_SERVING from now on (later reports change nothing), and /readyz
        503: the server is stopping."""
        self.draining = True
        await self.servicer.enter_graceful_shutdown()

    def unready_reason(self) -> str | None:
        """Why the server takes no new work now, for /readyz; None while it does."""
        if self.draining:
            return "the server is shutting down"
        if STORE_HEALTH_SERVICE in self._failing:
            return "the task store does not answer"
        if AUDIT_HEALTH_SERVICE in self._failing:
            return "audit records cannot be written (--audit-fail-closed)"
        return None

    def reporter(self, service: str, *, needed: bool) -> Callable[[bool], None]:
        """A callback for the component behind `service`; `needed`: the server cannot serve
        while it fails."""

        def tell(healthy: bool) -> None:
            self._set(service, healthy)
            if needed:
                if healthy:
                    self._failing.discard(service)
                else:
                    self._failing.add(service)
                serving = not self._failing
                for name in ("", *self.a2a_services):
                    self._set(name, serving)

        return tell

    def _set(self, service: str, healthy: bool) -> None:
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if healthy
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        update = asyncio.ensure_future(self.servicer.set(service, status))
        self._updates.add(update)
        update.add_done_callback(self._updates.discard)


class MethodAwareReflection(reflection.aio.ReflectionServicer):  # type: ignore[misc]
    """Server reflection that also resolves a method's full name (`pkg.Service.Method`).

    grpcio-reflection only knows services and messages, while ghz and some grpcurl versions ask
    for the method's symbol; answering with the service's file lets them run without a proto.
    """

    def _file_containing_symbol(self, request: Any, name: str) -> Any:
        response = super()._file_containing_symbol(request, name)
        if response.HasField("error_response") and "." in name:
            response = super()._file_containing_symbol(request, name.rpartition(".")[0])
        return response


def _bind(
    server: grpc.aio.Server, config: ServerConfig, certificates: ServerCertificates | None
) -> int:
    target = host_port(config.host, config.port)
    if not config.reuse_port:
        # Checked first so that the error is our one line, without grpc's own log of it.
        problem = bind_problem(config.host, config.port)
        if problem is not None:
            raise PortInUseError(problem)
    try:
        if certificates is None:
            port = server.add_insecure_port(target)
        else:
            port = server.add_secure_port(target, grpc_credentials(certificates))
    except RuntimeError as exc:
        raise PortInUseError(_why_not(config)) from exc
    if port == 0:
        raise PortInUseError(_why_not(config))
    return int(port)


def _why_not(config: ServerConfig) -> str:
    """grpc says only that the bind failed; a probe bind of the same address gets the errno."""
    problem = bind_problem(config.host, config.port)
    return problem or f"cannot listen on {host_port(config.host, config.port)}"
