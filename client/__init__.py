"""The A2A gRPC client: typed calls, safe retries, a stream reducer, resumption, a card resolver,
and the sender's own audit trail."""

from a2a_grpc.client.audit import ClientAuditLog
from a2a_grpc.client.card import CardResolver, grpc_interface
from a2a_grpc.client.channel import (
    ChannelOptions,
    ChannelTarget,
    TlsConfig,
    channel_target,
    create_channel,
)
from a2a_grpc.client.client import A2AClient
from a2a_grpc.client.credentials import ApiKey, BearerToken, Credentials
from a2a_grpc.client.errors import (
    A2AClientError,
    A2ATransportError,
    AgentCardError,
    CallCancelledError,
    DeadlineExceededError,
    RpcFailedError,
    StreamResumeError,
    UnavailableError,
)
from a2a_grpc.client.reducer import TaskView, fold
from a2a_grpc.client.retry import Backoff, RetryPolicy
from a2a_grpc.client.signing import MessageSigner

__all__ = [
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
    "Credentials",
    "DeadlineExceededError",
    "MessageSigner",
    "RetryPolicy",
    "RpcFailedError",
    "StreamResumeError",
    "TaskView",
    "TlsConfig",
    "UnavailableError",
    "channel_target",
    "create_channel",
    "fold",
    "grpc_interface",
]
