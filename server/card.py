"""The agent card this server describes itself with (the demo agent's by default)."""

from __future__ import annotations

from a2a_grpc.core.metadata import PROTOCOL_VERSION
from a2a_grpc.generated import a2a_pb2


def demo_card(address: str) -> a2a_pb2.AgentCard:
    """The card of the built-in demo agent, reachable over gRPC at `address` (host:port)."""
    return a2a_pb2.AgentCard(
        name="a2a-grpc demo agent",
        description=(
            "Echoes every part it receives back as an artifact. Keywords as the first word: "
            "ask, chunks, reply, fail, slow, crash."
        ),
        version="0.1.0",
        supported_interfaces=[
            a2a_pb2.AgentInterface(
                url=address, protocol_binding="GRPC", protocol_version=PROTOCOL_VERSION
            )
        ],
        capabilities=a2a_pb2.AgentCapabilities(
            streaming=True, push_notifications=False, extended_agent_card=False
        ),
        default_input_modes=["text/plain", "application/json", "*/*"],
        default_output_modes=["text/plain", "application/json", "*/*"],
        skills=[
            a2a_pb2.AgentSkill(
                id="echo",
                name="Echo",
                description="Returns each part of the message as an artifact.",
                tags=["demo", "echo"],
                examples=["hello", "ask", "chunks 5", "reply hi", "slow 30"],
            )
        ],
    )
