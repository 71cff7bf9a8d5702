"""Opening the transport for a card's interface: its binding picks the class."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx

from a2a_grpc.client.card import GRPC_BINDING, HTTP_JSON_BINDING, JSONRPC_BINDING
from a2a_grpc.client.channel import ChannelOptions, TlsConfig, create_channel
from a2a_grpc.client.errors import AgentCardError
from a2a_grpc.client.transports.base import Transport
from a2a_grpc.client.transports.grpc import GrpcTransport
from a2a_grpc.client.transports.grpc_v03 import GrpcV03Transport
from a2a_grpc.client.transports.jsonrpc import JsonRpcTransport
from a2a_grpc.client.transports.jsonrpc_v03 import JsonRpcV03Transport
from a2a_grpc.client.transports.rest import RestTransport
from a2a_grpc.client.transports.rest_v03 import RestV03Transport
from a2a_grpc.core.v03 import is_v03
from a2a_grpc.generated import a2a_pb2

_DEFAULT_OPTIONS = ChannelOptions()


def open_transport(
    interface: a2a_pb2.AgentInterface,
    *,
    tls: TlsConfig | None = None,
    channel_options: ChannelOptions = _DEFAULT_OPTIONS,
    http: httpx.AsyncClient | None = None,
) -> Transport:
    """A new transport to `interface`, which the transport owns and closes (a passed-in `http`
    client excepted: its owner closes it).

    GRPC: a channel to the interface's `host:port` (A2A 0.3's service for a 0.3 interface; a
    `grpc://`, `grpcs://`, `http://` or
    `https://` prefix some cards carry is dropped; `grpcs`/`https` without `tls` means TLS with
    the system roots). JSONRPC and HTTP+JSON: httpx on `http`, or on a pooled client of its own
    made from `tls`. AgentCardError for another binding.
    """
    binding = interface.protocol_binding.upper()
    if binding == GRPC_BINDING:
        target, secure = _grpc_target(interface.url)
        if tls is None and secure:
            tls = TlsConfig()
        channel = create_channel(target, tls=tls, options=channel_options)
        if is_v03(interface.protocol_version):
            return GrpcV03Transport(channel, owns_channel=True, interface=interface)
        return GrpcTransport(channel, owns_channel=True, interface=interface)
    if binding == JSONRPC_BINDING:
        if is_v03(interface.protocol_version):
            return JsonRpcV03Transport(interface, http=http, tls=tls)
        return JsonRpcTransport(interface, http=http, tls=tls)
    if binding == HTTP_JSON_BINDING:
        if is_v03(interface.protocol_version):
            return RestV03Transport(interface, http=http, tls=tls)
        return RestTransport(interface, http=http, tls=tls)
    raise AgentCardError(f"this client does not speak the {interface.protocol_binding} binding")


def _grpc_target(url: str) -> tuple[str, bool]:
    """(gRPC target, whether the url's scheme asks for TLS)."""
    if "://" not in url:
        return url, False
    parts = urlsplit(url)
    if parts.scheme.lower() in ("grpc", "grpcs", "http", "https"):
        return parts.netloc, parts.scheme.lower() in ("grpcs", "https")
    return url, False  # dns:///name:port and other gRPC targets
