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

import asyncio
import ipaddress
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from a2a_grpc.client.credentials import FileSignature, file_signature, racy
from a2a_grpc.core.service import SERVICE_NAME

_log = logging.getLogger(__name__)

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
class TlsPaths:
    """The PEM files a `TlsConfig` was read from, so that it can be read again when they
    change (`TlsConfig.current`)."""

    ca: Path | None = None
    """The CA certificates the server is checked against; None: the system trust store."""
    cert: Path | None = None
    """The client certificate (chain) for mutual TLS; None: none presented."""
    key: Path | None = None
    """The client certificate's private key (unencrypted PEM); None with no `cert`."""

    def signature(self) -> tuple[FileSignature | None, ...]:
        """Each file's (device, inode, size, mtime): any change means a rewrite or a swap;
        OSError when one cannot be stat'ed."""
        return tuple(
            None if path is None else file_signature(path)
            for path in (self.ca, self.cert, self.key)
        )


@dataclass(frozen=True)
class TlsConfig:
    """TLS settings: PEM bytes; None root certificates means the system trust store.

    Set both `client_certificate` and `client_key` for mutual TLS.

    A config made by `from_files` remembers its files (`paths`) and their `signature`, and the
    channels and HTTP clients made from it follow them: before each call they ask `current()`,
    which reads the files again once they changed (SPIRE's agent and cert-manager rewrite a
    SPIFFE certificate and key in place, or swap a Kubernetes volume's `..data` link), and
    the next connection presents the new certificate. See `ReloadingChannel` for the gRPC side
    and client/transports/http.py for the HTTP side.
    """

    root_certificates: bytes | None = None
    """PEM CA certificates the server's certificate must chain to; None: the system trust
    store."""
    client_certificate: bytes | None = None
    """PEM client certificate (chain) presented for mutual TLS; None: none."""
    client_key: bytes | None = None
    """PEM private key of `client_certificate` (unencrypted); needed with it, None without."""
    server_name_override: str | None = None
    """The name the server's certificate is checked against (and sent as SNI) instead of the
    target's host; needed for a list of addresses. None: the target's host."""
    paths: TlsPaths | None = field(default=None, compare=False)
    """The files this config was read from, followed by `current()`; None: fixed bytes."""
    signature: tuple[FileSignature | None, ...] = field(default=(), compare=False, repr=False)
    """The files' signature when they were read."""

    @classmethod
    def from_files(
        cls,
        ca: str | Path | None = None,
        cert: str | Path | None = None,
        key: str | Path | None = None,
        server_name_override: str | None = None,
        *,
        watch: bool = True,
    ) -> TlsConfig:
        """Reads PEM files; raises OSError when one cannot be read. With `watch` (the default)
        the config follows the files (`current()`); without, it keeps what was read now."""

        def path(value: str | Path | None) -> Path | None:
            return Path(value) if value is not None else None

        paths = TlsPaths(path(ca), path(cert), path(key))
        for _ in range(2):
            try:
                config = _read(paths, server_name_override)
                break
            except ValueError:  # being rewritten right now: read again
                continue
        else:
            config = _read(paths, server_name_override, settled=False)
        return config if watch else replace(config, paths=None, signature=())

    def current(self) -> TlsConfig:
        """This config, or, when its files changed since they were read, a new one read from
        them (equal to this one when only their signature changed, not their bytes). A change
        caught half made (a file changed while being read, a certificate and a key that do not
        match, a file missing for a moment or not PEM) keeps this config: the next call looks
        again. Cheap when nothing changed: one `os.stat` per file (and a read
        while a file is less than 2 s old: see `credentials.racy`)."""
        if self.paths is None:
            return self
        try:
            signature = self.paths.signature()
            if signature == self.signature and not any(map(racy, signature)):
                return self
            fresh = _read(self.paths, self.server_name_override)
            if fresh == self:  # the same bytes: only the signature is new
                return fresh
            _check_pair(fresh)
        except (OSError, ValueError) as error:
            seen = _signature_or_none(self.paths)
            if _warned.get(self.paths) != seen:  # once per state of the files, not per call
                _warned[self.paths] = seen
                _log.warning("the TLS files changed but cannot be used yet: %s", error)
            return self
        return fresh


_warned: dict[TlsPaths, object] = {}


def _signature_or_none(paths: TlsPaths) -> object:
    try:
        return paths.signature()
    except OSError:
        return None


def _read(paths: TlsPaths, server_name_override: str | None, *, settled: bool = True) -> TlsConfig:
    """The config the files hold now; ValueError when they changed while being read (unless
    not `settled`: then the signature is left empty, so the next `current()` reads again)."""
    before = paths.signature()

    def read(path: Path | None) -> bytes | None:
        return path.read_bytes() if path is not None else None

    config = TlsConfig(
        read(paths.ca),
        read(paths.cert),
        read(paths.key),
        server_name_override,
        paths=paths,
        signature=before,
    )
    if paths.signature() != before:
        if settled:
            raise ValueError("the TLS files changed while they were being read")
        return replace(config, signature=())
    return config


def _check_pair(tls: TlsConfig) -> None:
    """ValueError unless the client certificate (if any) parses and its key matches it: a
    certificate rewritten before its key (or the other way round) is not used."""
    if tls.client_certificate is None or tls.client_key is None:
        if (tls.client_certificate is None) != (tls.client_key is None):
            raise ValueError("a client certificate needs its key, and a key its certificate")
        return
    certificate = x509.load_pem_x509_certificate(tls.client_certificate)
    key = serialization.load_pem_private_key(tls.client_key, password=None)
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    der = serialization.Encoding.DER
    if certificate.public_key().public_bytes(der, spki) != key.public_key().public_bytes(der, spki):
        raise ValueError("the client certificate and key do not match")
    if tls.root_certificates is not None:
        x509.load_pem_x509_certificates(tls.root_certificates)


@dataclass(frozen=True)
class ChannelOptions:
    """Channel tuning. Keepalive defaults to 5 minutes: gRPC servers by default treat more
    frequent pings on an idle connection as abuse (GOAWAY too_many_pings); lower it only for
    servers that permit it.

    `max_send_message_bytes` and `max_receive_message_bytes` are the largest gRPC message the
    client sends and takes (16 MiB each by default; a larger one fails with the client's own
    RESOURCE_EXHAUSTED); the command line's `--max-message-size` sets both.

    `lb_policy` is `pick_first`, `round_robin` or None: the target's default (`round_robin` for
    several addresses or a `dns:` name, `pick_first` otherwise). ValueError for any other name.
    """

    keepalive_time_s: float = 300.0
    """Seconds between keepalive pings while calls are in flight (an idle connection is not
    pinged)."""
    keepalive_timeout_s: float = 20.0
    """Seconds a ping may go unanswered before the connection is closed as dead (its calls
    fail with UnavailableError)."""
    max_send_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    """Largest message the client sends, in bytes (16 MiB); a larger one fails unsent."""
    max_receive_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    """Largest response the client takes, in bytes (16 MiB); a larger one fails the call."""
    transport_retry_attempts: int = 4
    """Attempts, the first included, gRPC makes of a call that meets UNAVAILABLE, for the
    idempotent RPCs only (`IDEMPOTENT_RPCS`); gRPC makes at most 5. 0 or 1 turns transport
    retries off."""
    transport_retry_initial_backoff_s: float = 0.2
    """Seconds: the upper bound of gRPC's random wait before the first transport retry; it
    doubles with each retry."""
    transport_retry_max_backoff_s: float = 5.0
    """Seconds: the most the wait between transport retries grows to."""
    lb_policy: str | None = None
    """`pick_first`, `round_robin`, or None for the target's default (see above)."""

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
    if tls.paths is not None:
        return ReloadingChannel(target, tls, args)
    return grpc.aio.secure_channel(target, _channel_credentials(tls), options=args)


def _channel_credentials(tls: TlsConfig) -> grpc.ChannelCredentials:
    return grpc.ssl_channel_credentials(
        root_certificates=tls.root_certificates,
        private_key=tls.client_key,
        certificate_chain=tls.client_certificate,
    )


class ReloadingChannel:
    """A `grpc.aio` secure channel whose TLS files are followed: `create_channel` makes one for
    a `TlsConfig` read by `from_files`.

    gRPC's channel credentials are fixed when a channel is made, and a client certificate is
    presented only in a connection's handshake. So before each call this asks
    `TlsConfig.current()` (one `os.stat` per file); once the files changed and hold a usable
    certificate and key, a new channel is made from them and every later call goes on it: its
    first connection presents the new certificate. The old channel is drained, not cut: the
    calls in flight on it (streams included) finish there, and it is closed when the last ends.
    Each channel keeps its own connections (`grpc.use_local_subchannel_pool`), so a new one
    never reuses a connection made with the old certificate.

    It offers what the transports use of a `grpc.aio.Channel`: the four multi-callable
    factories (each multi-callable picks the current channel per call), `close`,
    `channel_ready`, `get_state`, `wait_for_state_change`, and `async with`.
    """

    def __init__(self, target: str, tls: TlsConfig, arguments: Sequence[tuple[str, Any]]) -> None:
        self._target = target
        self._arguments = [*arguments, ("grpc.use_local_subchannel_pool", 1)]
        self._tls = tls
        self._channel = self._open(tls)
        self._in_flight: dict[Any, int] = {self._channel: 0}
        self._closing: set[asyncio.Task[None]] = set()
        self._drained = asyncio.Event()
        self._drained.set()
        self._closed = False
        self.generation = 0
        """How many times the channel was replaced after its files changed."""

    @property
    def tls(self) -> TlsConfig:
        """The TLS config the current channel was made from."""
        return self._tls

    def _open(self, tls: TlsConfig) -> Any:
        return grpc.aio.secure_channel(
            self._target, _channel_credentials(tls), options=self._arguments
        )

    def current(self) -> Any:
        """The channel for the next call: a new one if the TLS files changed."""
        if self._closed:
            return self._channel  # a call on it fails as on any closed channel
        tls = self._tls.current()
        if tls == self._tls:
            self._tls = tls  # perhaps with a newer signature
        else:
            old = self._channel
            self._channel = self._open(tls)
            self._tls = tls
            self._in_flight[self._channel] = 0
            self.generation += 1
            self._drained.clear()
            if self._in_flight[old] == 0:
                self._retire(old)
        return self._channel

    def _started(self, channel: Any, call: Any) -> None:
        self._in_flight[channel] += 1
        call.add_done_callback(lambda _: self._finished(channel))

    def _finished(self, channel: Any) -> None:
        if self._closed:
            return
        self._in_flight[channel] -= 1
        if self._in_flight[channel] == 0 and channel is not self._channel:
            self._retire(channel)

    def _retire(self, channel: Any) -> None:
        """Closes a replaced channel that has no call left in flight."""
        del self._in_flight[channel]
        task = asyncio.get_running_loop().create_task(channel.close())
        self._closing.add(task)
        task.add_done_callback(self._closed_one)

    def _closed_one(self, task: asyncio.Task[None]) -> None:
        self._closing.discard(task)
        if not self._closing and len(self._in_flight) == 1:
            self._drained.set()

    async def drained(self) -> None:
        """Returns once every channel replaced after a rotation is closed (at once if none)."""
        await self._drained.wait()

    def unary_unary(self, method: str, **kwargs: Any) -> _MultiCallable:
        """As `grpc.aio.Channel.unary_unary`; each call goes on the channel current then."""
        return _MultiCallable(self, "unary_unary", method, kwargs)

    def unary_stream(self, method: str, **kwargs: Any) -> _MultiCallable:
        """As `grpc.aio.Channel.unary_stream`; each call goes on the channel current then."""
        return _MultiCallable(self, "unary_stream", method, kwargs)

    def stream_unary(self, method: str, **kwargs: Any) -> _MultiCallable:
        """As `grpc.aio.Channel.stream_unary`; each call goes on the channel current then."""
        return _MultiCallable(self, "stream_unary", method, kwargs)

    def stream_stream(self, method: str, **kwargs: Any) -> _MultiCallable:
        """As `grpc.aio.Channel.stream_stream`; each call goes on the channel current then."""
        return _MultiCallable(self, "stream_stream", method, kwargs)

    async def close(self, grace: float | None = None) -> None:
        """Closes every channel, the draining ones too (their calls are cancelled)."""
        self._closed = True
        channels = [self._channel, *(c for c in self._in_flight if c is not self._channel)]
        for channel in channels:
            await channel.close(grace)
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    def get_state(self, try_to_connect: bool = False) -> grpc.ChannelConnectivity:
        """The current channel's connectivity, as `grpc.aio.Channel.get_state`."""
        state: grpc.ChannelConnectivity = self._channel.get_state(try_to_connect)
        return state

    async def wait_for_state_change(self, last_observed_state: grpc.ChannelConnectivity) -> None:
        """Returns once the current channel's state differs from `last_observed_state`."""
        await self._channel.wait_for_state_change(last_observed_state)

    async def channel_ready(self) -> None:
        """Returns once the channel for the next call (new files first) is READY."""
        await self.current().channel_ready()

    async def __aenter__(self) -> ReloadingChannel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close(None)


class _MultiCallable:
    """A multi-callable of `ReloadingChannel`: each call goes on the channel current then."""

    def __init__(
        self, owner: ReloadingChannel, kind: str, method: str, kwargs: dict[str, Any]
    ) -> None:
        self._owner = owner
        self._kind = kind
        self._method = method
        self._kwargs = kwargs
        self._made: tuple[Any, Any] | None = None  # (channel, its multi-callable)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        channel = self._owner.current()
        if self._made is None or self._made[0] is not channel:
            self._made = (channel, getattr(channel, self._kind)(self._method, **self._kwargs))
        call = self._made[1](*args, **kwargs)
        if channel in self._owner._in_flight:
            self._owner._started(channel, call)
        return call
