"""The A2A client: typed calls over gRPC, JSON-RPC or HTTP+JSON (picked from the agent's card),
safe retries, a stream reducer, resumption, a card resolver, and the sender's own audit trail."""

from a2a_grpc.client import card as _card
from a2a_grpc.client.audit import ClientAuditLog
from a2a_grpc.client.card import (
    CardResolver,
    grpc_interface,
    pick_grpc_interface,
    select_interface,
)
from a2a_grpc.client.channel import (
    ChannelOptions,
    ChannelTarget,
    ReloadingChannel,
    TlsConfig,
    TlsPaths,
    channel_target,
    create_channel,
)
from a2a_grpc.client.client import A2AClient
from a2a_grpc.client.credentials import (
    ApiKey,
    BearerToken,
    ClientCredentialsToken,
    Credentials,
    TokenFile,
)
from a2a_grpc.client.errors import (
    A2AClientError,
    A2ATransportError,
    AgentCardError,
    CallCancelledError,
    CredentialsError,
    DeadlineExceededError,
    RpcFailedError,
    StreamLostError,
    StreamResumeError,
    UnavailableError,
)
from a2a_grpc.client.reducer import TaskView, fold
from a2a_grpc.client.retry import Backoff, RetryPolicy
from a2a_grpc.client.signing import MessageSigner
from a2a_grpc.client.transports.base import EventStream, Transport
from a2a_grpc.client.transports.grpc import GrpcTransport
from a2a_grpc.client.transports.grpc_v03 import GrpcV03Transport
from a2a_grpc.client.transports.http import create_http_client
from a2a_grpc.client.transports.jsonrpc import JsonRpcTransport
from a2a_grpc.client.transports.jsonrpc_v03 import JsonRpcV03Transport
from a2a_grpc.client.transports.opening import open_transport
from a2a_grpc.client.transports.rest import RestTransport
from a2a_grpc.client.transports.rest_v03 import RestV03Transport

DEFAULT_TRANSPORTS: tuple[str, ...] = _card.DEFAULT_TRANSPORTS
"""Every binding this client speaks, `("grpc", "jsonrpc", "http+json")`, in its own order of
preference: the default `transports` of `A2AClient.connect` and `A2AClient.for_card`."""

__all__ = [
    "DEFAULT_TRANSPORTS",
    "A2AClient",
    "A2AClientError",
    "A2ATransportError",
    "AgentCardError",
    "ApiKey",
    "Backoff",
    "BearerToken",
    "CallCancelledError",
    "CardResolver",
    "ChannelOptions",
    "ChannelTarget",
    "ClientAuditLog",
    "ClientCredentialsToken",
    "Credentials",
    "CredentialsError",
    "DeadlineExceededError",
    "EventStream",
    "GrpcTransport",
    "GrpcV03Transport",
    "JsonRpcTransport",
    "JsonRpcV03Transport",
    "MessageSigner",
    "ReloadingChannel",
    "RestTransport",
    "RestV03Transport",
    "RetryPolicy",
    "RpcFailedError",
    "StreamLostError",
    "StreamResumeError",
    "TaskView",
    "TlsConfig",
    "TlsPaths",
    "TokenFile",
    "Transport",
    "UnavailableError",
    "channel_target",
    "create_channel",
    "create_http_client",
    "fold",
    "grpc_interface",
    "open_transport",
    "pick_grpc_interface",
    "select_interface",
]
