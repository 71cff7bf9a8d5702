"""The A2A gRPC services' descriptors and full names: the one place that reads them from the
generated code, so they cannot drift."""

from __future__ import annotations

from google.protobuf.descriptor import ServiceDescriptor

from a2a_grpc.generated import a2a_pb2, a2a_v03_pb2

SERVICE: ServiceDescriptor = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"]
"""A2A 1.0's `lf.a2a.v1.A2AService`."""
V03_SERVICE: ServiceDescriptor = a2a_v03_pb2.DESCRIPTOR.services_by_name["A2AService"]
"""A2A 0.3's `a2a.v1.A2AService`, served next to the 1.0 one."""
SERVICE_NAME: str = SERVICE.full_name
"""`lf.a2a.v1.A2AService`."""
V03_SERVICE_NAME: str = V03_SERVICE.full_name
"""`a2a.v1.A2AService`."""


def method_path(rpc: str) -> str:
    """The gRPC path of one of the service's RPCs: `/lf.a2a.v1.A2AService/GetTask`."""
    return f"/{SERVICE_NAME}/{rpc}"
