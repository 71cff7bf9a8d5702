"""The gRPC channel factory: TLS or insecure, keepalive, message sizes and transport retries.

Transport retries (gRPC's own service-config retry policy, on UNAVAILABLE only) are enabled for
the RPCs whose repetition cannot change anything on the server:

- GetTask, ListTasks, GetTaskPushNotificationConfig, ListTaskPushNotificationConfigs,
  GetExtendedAgentCard: reads.
- DeleteTaskPushNotificationConfig: the spec requires Delete to be idempotent (§3.1.10).
- SubscribeToTask: a read; gRPC only retries a stream before its first response arrives, so a
  retry never replays events.

Not retried by the channel: SendMessage and SendStreamingMessage (each would start agent work;
SendMessage is retried in client code with the same message_id, see `retry.py`, and a stream is
resumed with SubscribeToTask, never re-sent), CancelTask (a second cancel of a now-CANCELED task
is TaskNotCancelable, so a retry can turn a success into an error) and
CreateTaskPushNotificationConfig (each call registers a new config).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from a2a_grpc.core.service import SERVICE_NAME

IDEMPOTENT_RPCS: tuple[str, ...] = (
    "GetTask",
    "ListTasks",
    "SubscribeToTask",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "GetExtendedAgentCard",
    "DeleteTaskPushNotificationConfig",
)
"""RPCs the channel retries on UNAVAILABLE (see the module docstring for why these)."""

DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class TlsConfig:
    """TLS settings: PEM bytes; None root certificates means the system trust store.

    Set both `client_certificate` and `client_key` for mutual TLS.
    """

    root_certificates: bytes | None = None
    client_certificate: bytes | None = None
    client_key: bytes | None = None
    server_name_override: str | None = None

    @classmethod
    def from_files(
        cls,
        ca: str | Path | None = None,
        cert: str | Path | None = None,
        key: str | Path | None = None,
        server_name_override: str | None = None,
    ) -> TlsConfig:
        """Reads PEM files; raises OSError when one cannot be read."""

        def read(path: str | Path | None) -> bytes | None:
            return Path(path).read_bytes() if path is not None else None

        return cls(read(ca), read(cert), read(key), server_name_override)


@dataclass(frozen=True)
class ChannelOptions:
    """Channel tuning. Keepalive defaults to 5 minutes: gRPC servers by default treat more
    frequent pings on an idle connection as abuse (GOAWAY too_many_pings); lower it only for
    servers that permit it.
    """

    keepalive_time_s: float = 300.0
    keepalive_timeout_s: float = 20.0
    max_send_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_receive_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    transport_retry_attempts: int = 4  # 0 or 1 turns transport retries off
    transport_retry_initial_backoff_s: float = 0.2
    transport_retry_max_backoff_s: float = 5.0


def service_config(options: ChannelOptions = ChannelOptions()) -> dict[str, Any]:
    """The gRPC service config with a retry policy for `IDEMPOTENT_RPCS` on UNAVAILABLE."""
    if options.transport_retry_attempts < 2:
        return {}
    return {
        "methodConfig": [
            {
                "name": [{"service": SERVICE_NAME, "method": rpc} for rpc in IDEMPOTENT_RPCS],
                "retryPolicy": {
                    "maxAttempts": options.transport_retry_attempts,
                    "initialBackoff": f"{options.transport_retry_initial_backoff_s}s",
                    "maxBackoff": f"{options.transport_retry_max_backoff_s}s",
                    "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            }
        ]
    }


def channel_arguments(
    options: ChannelOptions = ChannelOptions(),
    tls: TlsConfig | None = None,
) -> list[tuple[str, Any]]:
    """The raw gRPC channel arguments `create_channel` uses."""
    args: list[tuple[str, Any]] = [
        ("grpc.keepalive_time_ms", int(options.keepalive_time_s * 1000)),
        ("grpc.keepalive_timeout_ms", int(options.keepalive_timeout_s * 1000)),
        ("grpc.keepalive_permit_without_calls", 0),
        ("grpc.max_send_message_length", options.max_send_message_bytes),
        ("grpc.max_receive_message_length", options.max_receive_message_bytes),
    ]
    config = service_config(options)
    if config:
        args += [("grpc.enable_retries", 1), ("grpc.service_config", json.dumps(config))]
    else:
        args.append(("grpc.enable_retries", 0))
    if tls is not None and tls.server_name_override:
        args.append(("grpc.ssl_target_name_override", tls.server_name_override))
    return args


def create_channel(
    target: str,
    *,
    tls: TlsConfig | None = None,
    options: ChannelOptions = ChannelOptions(),
    extra_arguments: Sequence[tuple[str, Any]] = (),
) -> Any:
    """A new `grpc.aio.Channel` to `target` (`host:port`); insecure when `tls` is None.

    The caller owns the channel and must close it (`A2AClient` does when it created it).
    """
    args = channel_arguments(options, tls) + list(extra_arguments)
    if tls is None:
        return grpc.aio.insecure_channel(target, options=args)
    if (tls.client_certificate is None) != (tls.client_key is None):
        raise ValueError("a client certificate needs its key, and a key its certificate")
    credentials = grpc.ssl_channel_credentials(
        root_certificates=tls.root_certificates,
        private_key=tls.client_key,
        certificate_chain=tls.client_certificate,
    )
    return grpc.aio.secure_channel(target, credentials, options=args)
