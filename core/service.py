"""The A2A gRPC service's full name, read from the generated descriptor so it cannot drift."""

from __future__ import annotations

from a2a_grpc.generated import a2a_pb2

SERVICE_NAME: str = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"].full_name
"""`lf.a2a.v1.A2AService`."""


def method_path(rpc: str) -> str:
    """The gRPC path of one of the service's RPCs: `/lf.a2a.v1.A2AService/GetTask`."""
    return f"/{SERVICE_NAME}/{rpc}"
