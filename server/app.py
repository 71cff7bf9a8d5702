"""Assembles and runs the gRPC server: A2A service, health, reflection, graceful shutdown."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.server.agent import AgentExecutor
from a2a_grpc.server.card import demo_card
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.handler import RequestHandler
from a2a_grpc.server.servicer import A2AServicer

log = logging.getLogger(__name__)

A2A_SERVICE = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"].full_name


class PortInUseError(RuntimeError):
    """The address could not be bound (another process holds it, or it is not local)."""


@dataclass
class RunningServer:
    """A started server. `port` is the bound port (useful with port 0)."""

    server: grpc.aio.Server
    port: int
    handler: RequestHandler
    health: health.aio.HealthServicer

    @property
    def address(self) -> str:
        return f"{self.handler.config.host}:{self.port}"

    async def stop(self, grace: float | None = None) -> None:
        """Health turns NOT_SERVING, new calls are refused, running work gets `grace` seconds."""
        grace = self.handler.config.shutdown_grace if grace is None else grace
        await self.health.enter_graceful_shutdown()
        # server.stop refuses new calls at once and cancels open ones after `grace`; agent runs
        # are not calls, so the handler drains them over the same period.
        await asyncio.gather(self.handler.drain(grace), self.server.stop(grace))


async def start_server(
    config: ServerConfig,
    agent: AgentExecutor,
    card: a2a_pb2.AgentCard | None = None,
) -> RunningServer:
    """Binds `config.host:config.port` exclusively and starts serving."""
    server = grpc.aio.server(
        options=[
            # Never share the port with another process (grpc enables SO_REUSEPORT by default).
            ("grpc.so_reuseport", 0),
            ("grpc.max_receive_message_length", config.max_receive_bytes),
        ]
    )
    try:
        port = server.add_insecure_port(f"{config.host}:{config.port}")
    except RuntimeError as exc:
        raise PortInUseError(
            f"cannot listen on {config.host}:{config.port}: the port is in use or the address "
            "is not local"
        ) from exc
    if port == 0:
        raise PortInUseError(f"cannot listen on {config.host}:{config.port}")
    card = card or demo_card(f"{config.host}:{port}")
    handler = RequestHandler(agent, card, config)
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(
        A2AServicer(handler, strict_version=config.strict_version), server
    )
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (A2A_SERVICE, health.SERVICE_NAME, reflection.SERVICE_NAME), server
    )
    await server.start()
    for service in ("", A2A_SERVICE):
        await health_servicer.set(service, health_pb2.HealthCheckResponse.SERVING)
    return RunningServer(server, port, handler, health_servicer)
