"""The A2A gRPC services' full names, read from the generated descriptor so they cannot drift."""

from __future__ import annotations

from a2a_grpc.generated import a2a_pb2, a2a_v03_pb2

SERVICE_NAME: str = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"].full_name
"""`lf.a2a.v1.A2AService`."""
V03_SERVICE_NAME: str = a2a_v03_pb2.DESCRIPTOR.services_by_name["A2AService"].full_name
"""`a2a.v1.A2AService`: A2A 0.3's service, served next to the 1.0 one."""


def method_path(rpc: str) -> str:
    """The gRPC path of one of the service's RPCs: `/lf.a2a.v1.A2AService/GetTask`."""
    return f"/{SERVICE_NAME}/{rpc}"
