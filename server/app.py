"""Assembles and runs the server: A2A service, health, reflection, auth, TLS, the HTTP card."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2_grpc

from a2a_grpc.core.jws import KeySet, PrivateKey
from a2a_grpc.core.signing import sign_card
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import AgentExecutor
from a2a_grpc.server.audit import AuditLog
from a2a_grpc.server.auth import AnyOf, AuthInterceptor, BearerTokens, ClientCertificates
from a2a_grpc.server.card import demo_card, finalize_card
from a2a_grpc.server.card_http import CardServer
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.handler import RequestHandler
from a2a_grpc.server.push import WebhookDispatcher
from a2a_grpc.server.servicer import A2AServicer, add_to_server

log = logging.getLogger(__name__)

A2A_SERVICE = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"].full_name


class PortInUseError(RuntimeError):
    """The address could not be bound (another process holds it, or it is not local)."""


@dataclass(frozen=True)
class TlsFiles:
    """PEM contents for TLS; with `client_ca`, clients must present a certificate it signed."""

    certificate_chain: bytes
    private_key: bytes
    client_ca: bytes | None = None


@dataclass
class RunningServer:
    """A started server. `port` is the bound gRPC port (useful with port 0)."""

    server: grpc.aio.Server
    port: int
    handler: RequestHandler
    health: health.aio.HealthServicer
    card_server: CardServer | None = None

    @property
    def address(self) -> str:
        return f"{self.handler.config.host}:{self.port}"

    @property
    def card_url(self) -> str | None:
        if self.card_server is None:
            return None
        return f"http://{self.card_server.host}:{self.card_server.port}/.well-known/agent-card.json"

    async def stop(self, grace: float | None = None) -> None:
        """Health turns NOT_SERVING, new calls are refused, running work gets `grace` seconds."""
        grace = self.handler.config.shutdown_grace if grace is None else grace
        await self.health.enter_graceful_shutdown()
        # server.stop refuses new calls at once and cancels open ones after `grace`; agent runs
        # are not calls, so the handler drains them over the same period.
        await asyncio.gather(self.handler.drain(grace), self.server.stop(grace))
        if self.handler.webhooks is not None:
            await self.handler.webhooks.close(grace)
        if self.card_server is not None:
            await self.card_server.stop()
        if self.handler.audit is not None:
            await asyncio.to_thread(self.handler.audit.close)


async def start_server(
    config: ServerConfig,
    agent: AgentExecutor,
    card: a2a_pb2.AgentCard | None = None,
    *,
    extended_card: a2a_pb2.AgentCard | None = None,
    tokens: Mapping[str, str] | None = None,
    tls: TlsFiles | None = None,
    webhooks: WebhookDispatcher | None = None,
    signature_keys: KeySet | None = None,
    card_signer: tuple[PrivateKey, str] | None = None,
) -> RunningServer:
    """Binds `config.host:config.port` exclusively and starts serving.

    With `tokens` (token → principal) or a `tls.client_ca`, every A2A call must authenticate;
    with neither, every caller is the anonymous principal. The card is finalized to state the
    interface, capabilities and security schemes actually in force. With `signature_keys` the
    card offers the signed-messages extension (required with `config.require_signed_messages`);
    with `card_signer` (private key, key id) the card is served signed.
    """
    authenticators: list[BearerTokens | ClientCertificates] = []
    if tokens:
        authenticators.append(BearerTokens(tokens))
    if tls is not None and tls.client_ca is not None:
        authenticators.append(ClientCertificates())
    interceptors = [AuthInterceptor(AnyOf(tuple(authenticators)))] if authenticators else []
    server = grpc.aio.server(
        interceptors=interceptors,
        options=[
            # Never share the port with another process (grpc enables SO_REUSEPORT by default).
            ("grpc.so_reuseport", 0),
            ("grpc.max_receive_message_length", config.max_receive_bytes),
            *connection_limits(config),
        ],
    )
    port = _bind(server, config, tls)
    address = f"{config.host}:{port}"
    final_card = finalize_card(
        card or demo_card(address),
        address,
        bearer_tokens=bool(tokens),
        client_certificates=tls is not None and tls.client_ca is not None,
        signed_messages=None if signature_keys is None else config.require_signed_messages,
    )
    if card_signer is not None:
        final_card = sign_card(final_card, *card_signer)
    handler = RequestHandler(
        agent,
        final_card,
        config,
        extended_card=extended_card,
        webhooks=webhooks,
        signature_keys=signature_keys,
    )
    if config.audit_log:
        handler.audit = AuditLog(config.audit_log)
    add_to_server(A2AServicer(handler, strict_version=config.strict_version), server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(
        MethodAwareReflection((A2A_SERVICE, health.SERVICE_NAME, reflection.SERVICE_NAME)),
        server,
    )
    card_server = None
    if config.card_port is not None:
        card_server = CardServer(
            final_card, host=config.host, port=config.card_port, max_age=config.card_max_age
        )
        try:
            await card_server.start()
        except OSError as exc:
            raise PortInUseError(
                f"cannot serve the agent card on {config.host}:{config.card_port}: {exc.strerror}"
            ) from exc
    await server.start()
    for service in ("", A2A_SERVICE):
        await health_servicer.set(service, health_pb2.HealthCheckResponse.SERVING)
    return RunningServer(server, port, handler, health_servicer, card_server)


PENDING_CONNECTIONS = 4
"""grpc's queue of calls not yet picked up holds this many connections at their stream limit."""
KEEPALIVE_MS = 60_000
"""Keepalive ping interval on connections with streams open."""
PING_TIMEOUT_MS = 20_000
"""How long a keepalive ping may go unanswered before the connection is closed."""


def connection_limits(config: ServerConfig) -> list[tuple[str, int]]:
    """gRPC core's limits on connections and on calls not yet served (README: Limits)."""
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
    ]


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


def _bind(server: grpc.aio.Server, config: ServerConfig, tls: TlsFiles | None) -> int:
    target = f"{config.host}:{config.port}"
    try:
        if tls is None:
            port = server.add_insecure_port(target)
        else:
            credentials = grpc.ssl_server_credentials(
                [(tls.private_key, tls.certificate_chain)],
                root_certificates=tls.client_ca,
                require_client_auth=tls.client_ca is not None,
            )
            port = server.add_secure_port(target, credentials)
    except RuntimeError as exc:
        raise PortInUseError(
            f"cannot listen on {target}: the port is in use or the address is not local"
        ) from exc
    if port == 0:
        raise PortInUseError(f"cannot listen on {target}")
    return int(port)
