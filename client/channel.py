"""The gRPC channel factory: targets, load balancing, TLS, keepalive, sizes, transport retries.

Targets (`channel_target`): one `host:port` as before; several IP addresses as a comma-separated
list (`10.0.0.1:50051,10.0.0.2:50051`, or `[fd00::1]:50051,[fd00::2]:50051`), which becomes one
gRPC `ipv4:`/`ipv6:` target; or a DNS name whose records list several servers,
`dns:///agents.internal:50051`. A list must hold IP addresses of one family: gRPC's `ipv4:` and
`ipv6:` targets cannot resolve names, so a list with a host name is refused (ValueError naming it)
rather than resolved once here and frozen; give such a name as `dns:///name:port`, whose records
gRPC re-resolves. Other gRPC targets (`ipv4:...`, `unix:...`) are passed through unchanged.

Load balancing (`ChannelOptions.lb_policy`, set in the service config's `loadBalancingConfig`):
by default `pick_first` for one address (every call on the first address that connects) and
`round_robin` for a list or a `dns:` name (each call on the next ready address; an address that
cannot be reached is skipped until it can, and a call that meets a server as it goes gets
UNAVAILABLE, which the retries below and `A2AClient.send_message` handle). Balancing is per call:
a stream stays on the server it opened on.

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

import ipaddress
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

PICK_FIRST = "pick_first"
ROUND_ROBIN = "round_robin"
LB_POLICIES: tuple[str, ...] = (PICK_FIRST, ROUND_ROBIN)
"""The load-balancing policies `ChannelOptions.lb_policy` accepts (gRPC's names)."""


@dataclass(frozen=True)
class ChannelTarget:
    """A target as `create_channel` hands it to gRPC (see `channel_target`)."""

    uri: str
    """The gRPC target: `host:port`, `ipv4:a:p,b:p`, `ipv6:[a]:p,[b]:p`, `dns:///name:port`..."""
    addresses: tuple[str, ...] = ()
    """The addresses an `ipv4:`/`ipv6:` target lists (`ip:port`); empty for any other target."""
    dns: bool = False
    """A `dns:` target: a name whose records may list several servers."""

    @property
    def default_lb_policy(self) -> str:
        """`round_robin` for several addresses or a `dns:` name, else `pick_first`."""
        return ROUND_ROBIN if self.dns or len(self.addresses) > 1 else PICK_FIRST


def channel_target(target: str) -> ChannelTarget:
    """What `target` names, as gRPC reads it; ValueError (one line, naming the item) if unusable.

    - `host:port` (no comma): passed through; gRPC resolves a host name.
    - `ip:port,ip:port,...`: IPv4 addresses (`10.0.0.1:50051`) or bracketed IPv6 addresses
      (`[fd00::1]:50051`), each with its port, all of one family → `ipv4:...` or `ipv6:...`.
      Refused: an empty item, a missing or out-of-range port, a host name (use
      `dns:///name:port`), or IPv4 and IPv6 mixed (one gRPC target holds one family).
    - `dns:[//authority/]name[:port]`: passed through, marked `dns`; a comma is refused.
    - `ipv4:...`, `ipv6:...`: passed through, their addresses counted.
    - any other gRPC target (`unix:/path`...): passed through.
    """
    if target.startswith("dns:"):
        if "," in target:
            raise ValueError(
                f"{target!r}: a dns: target names one host; list IP addresses instead, or "
                "give one name whose records list every server"
            )
        return ChannelTarget(target, dns=True)
    for scheme in ("ipv4:", "ipv6:"):
        if target.startswith(scheme):
            return ChannelTarget(target, tuple(target.removeprefix(scheme).split(",")))
    if "," not in target:
        return ChannelTarget(target)
    addresses = tuple(_list_item(item.strip()) for item in target.split(","))
    families = {":" if address.startswith("[") else "." for address in addresses}
    if len(families) > 1:
        raise ValueError(f"{target!r} mixes IPv4 and IPv6 addresses: one target holds one family")
    scheme = "ipv6:" if families == {":"} else "ipv4:"
    return ChannelTarget(scheme + ",".join(addresses), addresses)


def _list_item(item: str) -> str:
    """One `ip:port` of a target list, normalised; ValueError saying what is wrong with it."""
    if not item:
        raise ValueError("a list of targets has an empty item (two commas, or one at an end)")
    host, colon, port = item.rpartition(":")
    if not colon or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{item!r} in a list of targets needs a port from 1 to 65535 (ip:port)")
    bracketed = host.startswith("[") and host.endswith("]")
    try:
        address = ipaddress.ip_address(host[1:-1] if bracketed else host)
    except ValueError:
        raise ValueError(
            f"{item!r} in a list of targets is not an IP address: a list holds IPv4 or "
            f"[IPv6] addresses; give a host name with several addresses as dns:///{item}"
        ) from None
    if address.version == 6 and not bracketed:
        raise ValueError(f"{item!r}: write an IPv6 address in brackets, [address]:port")
    if address.version == 4 and bracketed:
        raise ValueError(f"{item!r}: brackets are for IPv6 addresses")
    return f"[{address}]:{port}" if address.version == 6 else f"{address}:{port}"


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

    `lb_policy` is `pick_first`, `round_robin` or None: the target's default (`round_robin` for
    several addresses or a `dns:` name, `pick_first` otherwise). ValueError for any other name.
    """

    keepalive_time_s: float = 300.0
    keepalive_timeout_s: float = 20.0
    max_send_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_receive_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    transport_retry_attempts: int = 4  # 0 or 1 turns transport retries off
    transport_retry_initial_backoff_s: float = 0.2
    transport_retry_max_backoff_s: float = 5.0
    lb_policy: str | None = None

    def __post_init__(self) -> None:
        if self.lb_policy is not None and self.lb_policy not in LB_POLICIES:
            raise ValueError(
                f"lb_policy {self.lb_policy!r} is not one of {', '.join(LB_POLICIES)} "
                "(or None for the target's default)"
            )


def service_config(
    options: ChannelOptions = ChannelOptions(), *, lb_policy: str = PICK_FIRST
) -> dict[str, Any]:
    """The gRPC service config: `loadBalancingConfig` naming `lb_policy` (`options.lb_policy`
    when set), and, unless transport retries are off, a retry policy for `IDEMPOTENT_RPCS` on
    UNAVAILABLE."""
    config: dict[str, Any] = {"loadBalancingConfig": [{options.lb_policy or lb_policy: {}}]}
    if options.transport_retry_attempts < 2:
        return config
    return {
        **config,
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
        ],
    }


def channel_arguments(
    options: ChannelOptions = ChannelOptions(),
    tls: TlsConfig | None = None,
    *,
    lb_policy: str = PICK_FIRST,
) -> list[tuple[str, Any]]:
    """The raw gRPC channel arguments `create_channel` uses (`lb_policy`: the target's default,
    which `options.lb_policy` overrides)."""
    config = service_config(options, lb_policy=lb_policy)
    retries = "methodConfig" in config
    args: list[tuple[str, Any]] = [
        ("grpc.keepalive_time_ms", int(options.keepalive_time_s * 1000)),
        ("grpc.keepalive_timeout_ms", int(options.keepalive_timeout_s * 1000)),
        ("grpc.keepalive_permit_without_calls", 0),
        ("grpc.max_send_message_length", options.max_send_message_bytes),
        ("grpc.max_receive_message_length", options.max_receive_message_bytes),
        ("grpc.enable_retries", 1 if retries else 0),
        ("grpc.service_config", json.dumps(config)),
    ]
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
    """A new `grpc.aio.Channel` to `target`; insecure when `tls` is None.

    `target` is one `host:port`, a comma-separated list of IP `address:port`s, a
    `dns:///name:port` or any other gRPC target (see `channel_target`; ValueError when it is
    unusable). The load-balancing policy is `options.lb_policy`, else `round_robin` for several
    addresses or a `dns:` name and `pick_first` otherwise. With TLS, a list of addresses needs
    `tls.server_name_override`, the name the servers' certificates are checked against (the
    list itself is no host name); ValueError without it.

    The caller owns the channel and must close it (`A2AClient` does when it created it).
    """
    parsed = channel_target(target)
    if tls is not None and len(parsed.addresses) > 1 and not tls.server_name_override:
        raise ValueError(
            "TLS to several addresses needs TlsConfig(server_name_override=NAME): the name the "
            "servers' certificates are checked against"
        )
    args = channel_arguments(options, tls, lb_policy=parsed.default_lb_policy)
    args += list(extra_arguments)
    target = parsed.uri
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
