"""Push notifications: webhook registrations per task, and their at-least-once delivery.

Delivery contract:
- Every status and artifact update of a task is POSTed to each of its webhooks, in the version
  the webhook was registered in: to a 1.0 webhook as a ProtoJSON StreamResponse,
  `Content-Type: application/a2a+json`; to a 0.3 one (registered through the 0.3 service) as
  the task as it stands after the update, in A2A 0.3's JSON (`core.v03.task_json`),
  `Content-Type: application/json`, which is what the 0.3 SDKs' own senders POST and their
  receivers read. Both carry `Authorization: <scheme> <credentials>` from the config and
  `X-A2A-Notification-Token` when a token is set.
- In order per webhook: one worker per webhook sends one event at a time.
- At least once: a failed POST (connection error, timeout, non-2xx) is retried with exponential
  backoff; after `max_attempts` the webhook is given up (logged) and gets nothing more.
- Traced: each POST carries the W3C trace context the event was published in.
- Never blocking: events are queued (bounded; overflow gives the webhook up) and sent by
  background tasks, so a slow webhook never slows the task or its streams. Queuing an event costs
  one serialization plus one queue entry per webhook of the task (their number is capped, see
  `PushConfigService`), and at most `max_connections` POSTs are in flight at once.
- SSRF guard: URLs whose host is, or resolves to, a loopback, private, link-local, reserved or
  multicast address, or an IPv6 form of one (see `forbidden_address`), are refused unless
  `allow_private_targets` is set. It runs before every attempt, and the POST connects to the
  addresses it checked, never to a fresh DNS answer (DNS rebinding); TLS still verifies the name.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import re
import socket
import ssl
from collections.abc import Awaitable, Callable, Container, Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpcore
import httpx
from google.protobuf import json_format

from a2a_grpc.core.failure_log import FailureLog
from a2a_grpc.core.ids import new_id
from a2a_grpc.core.states import TERMINAL_STATES
from a2a_grpc.core.tracing import outgoing_headers
from a2a_grpc.core.v03 import PROTOCOL_VERSION as V03
from a2a_grpc.core.v03 import task_json
from a2a_grpc.generated import a2a_pb2

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/a2a+json"
CONTENT_TYPE_V03 = "application/json"
"""What the 0.3 SDKs' senders (a2a-sdk 0.3 over httpx, a2a-go v0.3.3) send their task JSON as."""
V10 = "1.0"
"""The protocol version of a webhook registered through the 1.0 service (the default)."""
TOKEN_HEADER = "X-A2A-Notification-Token"
MAX_URL_CHARS = 2048
MAX_RECEIVER_LOGS = 2048
"""Quiet logs of receivers (two per origin: attempts and give-ups) kept at once."""
"""Longest webhook URL accepted (the common limit of browsers, proxies and CDNs)."""


class WebhookRefusedError(ValueError):
    """The webhook URL is not acceptable (scheme, host, or an address the guard refuses)."""


@dataclass(frozen=True)
class DeliveryPolicy:
    timeout: float = 10.0
    """Seconds for one POST, connection included."""
    max_attempts: int = 6
    """Tries per event before the webhook is given up."""
    backoff: float = 0.5
    """First retry delay in seconds; doubles each attempt, capped at `max_backoff`."""
    max_backoff: float = 30.0
    queue_size: int = 1000
    """Undelivered events a webhook may accumulate before it is given up."""
    allow_private_targets: bool = False
    """Allow loopback / private / link-local targets (tests, trusted meshes)."""
    max_connections: int = 64
    """POSTs in flight at once over all webhooks (also the connection pool's size)."""


Resolver = Callable[[str], Awaitable[list[str]]]
SocketOption = (
    tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]
)


async def _resolve(host: str) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


class WebhookGuard:
    """Decides whether a webhook URL may be called (the SSRF guard)."""

    def __init__(self, *, allow_private_targets: bool, resolver: Resolver = _resolve) -> None:
        self.allow_private_targets = allow_private_targets
        self._resolver = resolver

    async def check(self, url: str) -> tuple[str, ...]:
        """The addresses the URL's host resolved to, all allowed; () when targets are not checked.

        Raises WebhookRefusedError with a reason the caller can act on. A POST must connect to
        these addresses only (see `pinned_addresses`): resolving the name again could answer
        with another one (DNS rebinding).
        """
        parsed = parse_webhook_url(url)
        if self.allow_private_targets:
            return ()
        host = parsed.raw_host.decode("ascii")
        try:
            addresses = [host] if _is_ip(host) else (await self._resolver(host))
        except OSError as exc:
            raise WebhookRefusedError(f"webhook host {host!r} does not resolve") from exc
        if not addresses:
            raise WebhookRefusedError(f"webhook host {host!r} does not resolve")
        for address in addresses:
            why = self.forbidden(ipaddress.ip_address(address))
            if why is not None:
                raise WebhookRefusedError(
                    f"webhook url {url!r} points at {why}; this server only calls public hosts"
                )
        return tuple(dict.fromkeys(addresses))

    def forbidden(self, ip: IPAddress) -> str | None:
        """Why `ip` must not be called (see `forbidden_address`), or None when it may be."""
        return forbidden_address(ip)


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# IPv6 forms whose last 32 bits are an IPv4 address that the packets end up at.
_EMBEDDING_IPV4 = tuple(
    ipaddress.IPv6Network(network)
    for network in (
        "::ffff:0:0/96",  # IPv4-mapped
        "::ffff:0:0:0/96",  # SIIT (RFC 7915)
        "::/96",  # IPv4-compatible (deprecated); :: and ::1 embed 0.0.0.0 and 0.0.0.1
        "64:ff9b::/96",  # NAT64, well-known prefix (RFC 6052)
    )
)
# Tunnels and local translation, refused whatever they embed.
_TRANSITION = tuple(
    (ipaddress.IPv6Network(network), name)
    for network, name in (
        ("2002::/16", "6to4"),
        ("2001::/32", "Teredo"),
        ("64:ff9b:1::/48", "local-use NAT64"),
    )
)


def forbidden_address(ip: IPAddress) -> str | None:
    """Why the SSRF guard refuses `ip`, or None when a webhook may be called there.

    An IPv4 address must be globally reachable and not multicast: loopback, private, shared
    (CGNAT), link-local, reserved, documentation and broadcast ranges are refused. An IPv6
    address must be too, and a form that carries an IPv4 address is judged by that address:
    IPv4-mapped (::ffff:a.b.c.d), SIIT (::ffff:0:a.b.c.d), IPv4-compatible (::a.b.c.d) and NAT64
    (64:ff9b::a.b.c.d), so a NAT64 gateway may take a POST to a public IPv4 host but never to
    127.0.0.1 or 10.0.0.0/8. 6to4 (2002::/16) and Teredo (2001::/32) are refused outright: both
    are deprecated tunnels that deliver to an IPv4 relay or host, and no webhook needs them. So
    is local-use NAT64 (64:ff9b:1::/48, RFC 8215): it reaches into one operator's own network,
    and where its IPv4 address sits depends on that operator's prefix length.
    """
    if isinstance(ip, ipaddress.IPv6Address):
        for network, name in _TRANSITION:
            if ip in network:
                return f"a {name} address ({ip})"
        if any(ip in network for network in _EMBEDDING_IPV4):
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFF_FFFF)
            why = forbidden_address(embedded)
            return None if why is None else f"{ip}, which carries {why}"
    if not ip.is_global or ip.is_multicast:
        return f"a non-public address ({ip})"
    return None


def parse_webhook_url(url: str) -> httpx.URL:
    """The URL as httpx will call it; WebhookRefusedError if it cannot be called as given.

    Everything a POST would trip over later is checked here, so that a bad URL is refused when it
    is registered: length, spaces and control characters, syntax and IDNA (httpx's own parser, so
    the host checked is the host called), scheme, host and port.
    """
    if len(url) > MAX_URL_CHARS:
        raise WebhookRefusedError(f"webhook url is longer than {MAX_URL_CHARS} characters")
    if not url.isprintable() or any(char.isspace() for char in url):
        raise WebhookRefusedError("webhook url must not contain spaces or control characters")
    try:
        parsed = httpx.URL(url)
        parsed.host  # noqa: B018 (decodes the IDNA labels, which can fail)
    except (httpx.InvalidURL, ValueError) as exc:  # IDNA errors are ValueErrors
        raise WebhookRefusedError(f"webhook url {url!r} is malformed: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.raw_host:
        raise WebhookRefusedError(f"webhook url {url!r} must be an absolute http(s) URL")
    host = parsed.raw_host.decode("ascii")
    if not _is_ip(host) and not _HOSTNAME.fullmatch(host):
        raise WebhookRefusedError(f"webhook url {url!r} has an invalid host {host!r}")
    if parsed.port is not None and not 1 <= parsed.port <= 65535:
        raise WebhookRefusedError(f"webhook url {url!r} has port {parsed.port}: use 1 to 65535")
    return parsed


_HOSTNAME = re.compile(r"[A-Za-z0-9._-]+")
"""What a DNS name may hold once httpx has IDNA-encoded it (underscores occur in practice)."""


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)  # an IPv6 zone ("%25eth0" in a URL) is part of the address
    except ValueError:
        return False
    return True


pinned_addresses: ContextVar[tuple[str, ...]] = ContextVar("pinned_addresses", default=())
"""Where the current task's next new connection must go, whatever its host name resolves to."""


class _PinnedBackend(httpcore.AsyncNetworkBackend):
    """Opens connections to the `pinned_addresses` in order (by name when none are pinned).

    The connection pool still keys connections by host name, and TLS still sends and verifies
    the name: only the address the socket connects to is fixed.
    """

    def __init__(self) -> None:
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = pinned_addresses.get() or (host,)
        for address in addresses[:-1]:
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout):
                continue  # the next checked address
        return await self._inner.connect_tcp(
            addresses[-1], port, timeout, local_address, socket_options
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("webhooks are never called over a unix socket")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _PinnedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport over a pool that connects through `_PinnedBackend`."""

    def __init__(self, limits: httpx.Limits, ssl_context: ssl.SSLContext | None) -> None:
        ssl_context = ssl_context or httpx.create_ssl_context(trust_env=False)
        super().__init__(verify=ssl_context, limits=limits, trust_env=False)
        if not isinstance(getattr(self, "_pool", None), httpcore.AsyncConnectionPool):
            raise RuntimeError("this httpx version keeps its pool elsewhere: pinning would fail")
        # httpx takes no network backend, so its pool is replaced by one with the same settings.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_PinnedBackend(),
        )


class PushConfigStore:
    """Webhook registrations by task id. Synchronous; runs on the event loop."""

    def __init__(self) -> None:
        self._configs: dict[str, dict[str, a2a_pb2.TaskPushNotificationConfig]] = {}
        # The protocol version of every config not registered in 1.0, by task id then config
        # id: kept beside the config, which stays the 1.0 message every reader sees.
        self._protocols: dict[str, dict[str, str]] = {}
        self.watched: Container[str] = self._configs.keys()
        """The ids of the tasks that have configs (a live view)."""

    def put(
        self, config: a2a_pb2.TaskPushNotificationConfig, protocol: str = V10
    ) -> a2a_pb2.TaskPushNotificationConfig:
        """Stores a copy (minting an id when it has none), registered in `protocol` (the
        version its webhook is sent in), and returns a copy as stored."""
        stored = a2a_pb2.TaskPushNotificationConfig()
        stored.CopyFrom(config)
        if not stored.id:
            stored.id = new_id()
        self._configs.setdefault(stored.task_id, {})[stored.id] = stored
        self._set_protocol(stored.task_id, stored.id, protocol)
        return _copy(stored)

    def protocol(self, task_id: str, config_id: str) -> str:
        """The protocol version the config was registered in (V10 for an unknown one)."""
        protocols = self._protocols.get(task_id)
        return V10 if protocols is None else protocols.get(config_id, V10)

    def protocols(self, task_id: str) -> dict[str, str]:
        """The protocol version of each of the task's configs not registered in 1.0."""
        return dict(self._protocols.get(task_id, {}))

    def _set_protocol(self, task_id: str, config_id: str, protocol: str) -> None:
        if protocol != V10:
            self._protocols.setdefault(task_id, {})[config_id] = protocol
            return
        protocols = self._protocols.get(task_id)
        if protocols is not None:
            protocols.pop(config_id, None)
            if not protocols:
                del self._protocols[task_id]

    def count(self, task_id: str) -> int:
        return len(self._configs.get(task_id, ()))

    def has(self, task_id: str, config_id: str) -> bool:
        return config_id in self._configs.get(task_id, ())

    def get(self, task_id: str, config_id: str) -> a2a_pb2.TaskPushNotificationConfig | None:
        config = self._configs.get(task_id, {}).get(config_id)
        return None if config is None else _copy(config)

    def for_task(self, task_id: str) -> list[a2a_pb2.TaskPushNotificationConfig]:
        """Copies of the task's configs, in creation order."""
        return [_copy(c) for c in self._configs.get(task_id, {}).values()]

    def delete(self, task_id: str, config_id: str) -> None:
        configs = self._configs.get(task_id)
        if configs is not None:
            configs.pop(config_id, None)
            if not configs:
                del self._configs[task_id]
        self._set_protocol(task_id, config_id, V10)

    def drop_task(self, task_id: str) -> None:
        self._configs.pop(task_id, None)
        self._protocols.pop(task_id, None)

    def mirror(
        self,
        task_id: str,
        configs: list[a2a_pb2.TaskPushNotificationConfig],
        protocols: dict[str, str] | None = None,
    ) -> None:
        """Makes the task's configs `configs` (read from a shared store, with the `protocols`
        of those not registered in 1.0), keeping the stored object of every config that did
        not change, so its delivery goes on undisturbed."""
        protocols = protocols or {}
        current = self._configs.get(task_id, {})
        mirrored: dict[str, a2a_pb2.TaskPushNotificationConfig] = {}
        for config in configs:
            kept = current.get(config.id)
            same = kept is not None and kept == config
            same = same and self.protocol(task_id, config.id) == protocols.get(config.id, V10)
            mirrored[config.id] = kept if same and kept is not None else config
        if mirrored:
            self._configs[task_id] = mirrored
        else:
            self._configs.pop(task_id, None)
        kept_protocols = {
            config_id: protocol
            for config_id, protocol in protocols.items()
            if config_id in mirrored and protocol != V10
        }
        if kept_protocols:
            self._protocols[task_id] = kept_protocols
        else:
            self._protocols.pop(task_id, None)

    def stored_for(self, task_id: str) -> list[a2a_pb2.TaskPushNotificationConfig]:
        """The stored objects themselves (read-only use by the dispatcher)."""
        return list(self._configs.get(task_id, {}).values())


def _delivered_kind(event: a2a_pb2.StreamResponse) -> bool:
    """Webhooks get status and artifact updates (not the task snapshot or a direct reply)."""
    return event.WhichOneof("payload") in ("status_update", "artifact_update")


def _is_terminal(event: a2a_pb2.StreamResponse) -> bool:
    return (
        event.WhichOneof("payload") == "status_update"
        and event.status_update.status.state in TERMINAL_STATES
    )


def _copy(config: a2a_pb2.TaskPushNotificationConfig) -> a2a_pb2.TaskPushNotificationConfig:
    copy = a2a_pb2.TaskPushNotificationConfig()
    copy.CopyFrom(config)
    return copy


@dataclass
class _Webhook:
    config: a2a_pb2.TaskPushNotificationConfig
    protocol: str = V10  # the version it was registered in, which its bodies are in
    # Each event with the trace context it was published in (W3C headers to send along), its
    # position in a shared store's event log and who records its delivery (None in one
    # process).
    queue: asyncio.Queue[tuple[bytes, list[tuple[str, str]], str | None, Delivered | None]] = field(
        default_factory=asyncio.Queue
    )
    worker: asyncio.Task[None] | None = None
    dead: bool = False
    finished: bool = False  # the task reached a terminal state: forget this webhook when drained


Delivered = Callable[[str, str, str], Awaitable[None]]
"""Awaited with (task id, config id, position) after an event with a position was delivered."""

Snapshot = Callable[[str], a2a_pb2.Task | None]
"""The task as it stands now, by id."""


class SnapshotObserver:
    """A broker's observer: `WebhookDispatcher.observe` with a `snapshot` of the task."""

    __slots__ = ("_dispatcher", "_snapshot")

    def __init__(self, dispatcher: WebhookDispatcher, snapshot: Snapshot) -> None:
        self._dispatcher = dispatcher
        self._snapshot = snapshot

    @property
    def watched(self) -> Container[str]:
        return self._dispatcher.watched

    def observe(self, task_id: str, event: a2a_pb2.StreamResponse) -> None:
        self._dispatcher.observe(task_id, event, snapshot=self._snapshot)


class WebhookDispatcher:
    """Observes a task's events (see `Broker`) and delivers them to the task's webhooks."""

    def __init__(
        self,
        configs: PushConfigStore,
        policy: DeliveryPolicy,
        *,
        guard: WebhookGuard | None = None,
        ssl_context: ssl.SSLContext | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """`ssl_context` verifies https webhooks (default: the system's CAs)."""
        self.configs = configs
        self.policy = policy
        self.guard = guard or WebhookGuard(allow_private_targets=policy.allow_private_targets)
        self._ssl_context = ssl_context
        self._client: httpx.AsyncClient | None = None
        self._sleep = sleep
        self._slots = asyncio.Semaphore(policy.max_connections)
        # By task id, then config id: a task leaving the store drops its webhooks in one step.
        self._webhooks: dict[str, dict[str, _Webhook]] = {}
        self.delivered = 0
        """Events delivered (a 2xx answer), since start; `retries` and `given_up` likewise:
        POSTs tried again after a failed attempt, and webhooks given up."""
        self.retries = 0
        self.given_up = 0
        self.failures = 0
        """Failed POST attempts and refused targets, since start (each receiver's repeats are
        logged at most once a minute: `_receiver_log`)."""
        self._receivers: dict[tuple[str, bool], FailureLog] = {}

    @property
    def watched(self) -> Container[str]:
        """The tasks with webhooks (a live view, for the broker)."""
        return self.configs.watched

    def with_snapshot(self, snapshot: Snapshot) -> SnapshotObserver:
        """This dispatcher as a broker's observer that asks `snapshot` for the task as it
        stands (the memory store's table), the body of a 0.3 webhook."""
        return SnapshotObserver(self, snapshot)

    def observe(
        self,
        task_id: str,
        event: a2a_pb2.StreamResponse,
        position: str | None = None,
        task: a2a_pb2.Task | None = None,
        *,
        on_delivered: Delivered | None = None,
        snapshot: Snapshot | None = None,
    ) -> None:
        """Queues a status or artifact update for every webhook of the task. Never waits.

        Costs one serialization per protocol version among the task's webhooks, plus a queue
        entry per webhook of the task (a capped number). `position`: the event's place in a
        shared store's log, awaited with `on_delivered` once the event reached a webhook (the
        store keeps the cursor, so another replica can go on from it). `task`: the task as the
        event left it, what a 0.3 webhook is sent (else `snapshot` is asked for it).
        """
        if not _delivered_kind(event):
            return
        body: bytes | None = None
        body_v03: bytes | None = None
        trace_headers: list[tuple[str, str]] | None = None
        configs = self.configs
        for config in configs.stored_for(task_id):
            if trace_headers is None:
                trace_headers = outgoing_headers()
            if configs.protocol(task_id, config.id) == V03:
                if body_v03 is None:
                    body_v03 = self._task_body(task_id, event, task, snapshot)
                terminal = _is_terminal(event)
                self._enqueue(config, body_v03, trace_headers, position, terminal, on_delivered)
                continue
            if body is None:
                body = json_format.MessageToJson(event, indent=None).encode()
            self._enqueue(config, body, trace_headers, position, _is_terminal(event), on_delivered)

    def replay(
        self,
        config: a2a_pb2.TaskPushNotificationConfig,
        events: list[tuple[str, bytes]],
        task: a2a_pb2.Task | None = None,
        *,
        on_delivered: Delivered | None = None,
    ) -> None:
        """Queues `events` ((position, serialized StreamResponse), oldest first) for one
        webhook: what another replica recorded but had not delivered when it stopped (each
        delivery awaits `on_delivered`, as in `observe`).

        A 0.3 webhook is sent the task, not the events, so it gets one POST of `task` (the task
        as it stands now) at the last event's position: every body the missed events would have
        made is an older state of the same task."""
        delivered = [
            (position, event)
            for position, event in (
                (position, a2a_pb2.StreamResponse.FromString(raw)) for position, raw in events
            )
            if _delivered_kind(event)
        ]
        if not delivered:
            return
        if self.configs.protocol(config.task_id, config.id) == V03:
            position, last = delivered[-1]
            terminal = any(_is_terminal(event) for _, event in delivered)
            body = self._task_body(config.task_id, last, task, None)
            self._enqueue(config, body, [], position, terminal, on_delivered)
            return
        for position, event in delivered:
            body = json_format.MessageToJson(event, indent=None).encode()
            self._enqueue(config, body, [], position, _is_terminal(event), on_delivered)

    def _task_body(
        self,
        task_id: str,
        event: a2a_pb2.StreamResponse,
        task: a2a_pb2.Task | None,
        snapshot: Snapshot | None,
    ) -> bytes:
        """The body of a 0.3 webhook: the task in A2A 0.3's JSON. Without the task (it left
        the store meanwhile), the one the event describes: its ids and its status."""
        if task is None and snapshot is not None:
            task = snapshot(task_id)
        if task is None:
            task = a2a_pb2.Task(id=task_id)
            if event.HasField("status_update"):
                task.context_id = event.status_update.context_id
                task.status.CopyFrom(event.status_update.status)
            else:
                task.context_id = event.artifact_update.context_id
                task.artifacts.append(event.artifact_update.artifact)
        return json.dumps(task_json(task), separators=(",", ":"), ensure_ascii=False).encode()

    def _enqueue(
        self,
        config: a2a_pb2.TaskPushNotificationConfig,
        body: bytes,
        trace_headers: list[tuple[str, str]],
        position: str | None,
        terminal: bool,
        on_delivered: Delivered | None,
    ) -> None:
        hooks = self._webhooks.setdefault(config.task_id, {})
        webhook = hooks.get(config.id)
        if webhook is None or webhook.config is not config:  # new, or replaced by Create
            if webhook is not None:
                webhook.dead = True  # the old URL gets nothing more
            protocol = self.configs.protocol(config.task_id, config.id)
            webhook = hooks[config.id] = _Webhook(config, protocol)
        if webhook.dead:
            return
        if webhook.queue.qsize() >= self.policy.queue_size:
            self._give_up(webhook, f"more than {self.policy.queue_size} events undelivered")
            return
        webhook.queue.put_nowait((body, trace_headers, position, on_delivered))
        webhook.finished = webhook.finished or terminal
        if webhook.worker is None or webhook.worker.done():
            webhook.worker = asyncio.get_running_loop().create_task(self._work(webhook))

    async def _work(self, webhook: _Webhook) -> None:
        while not webhook.queue.empty() and not webhook.dead:
            body, trace_headers, position, on_delivered = webhook.queue.get_nowait()
            try:
                delivered = await self._deliver(webhook, body, trace_headers)
            except Exception as exc:  # never let a delivery die silently
                log.exception("webhook %s: unexpected error while delivering", webhook.config.id)
                self._give_up(webhook, f"unexpected {type(exc).__name__}")
                break
            if not delivered:
                self._give_up(webhook, f"{self.policy.max_attempts} attempts failed")
            elif position is not None and on_delivered is not None:
                config = webhook.config
                try:
                    await on_delivered(config.task_id, config.id, position)
                except Exception:  # the cursor lags: a takeover re-sends (at least once)
                    log.warning("webhook %s: could not record the delivery", config.id)
        # A dead webhook stays listed, so later events do not revive it, until its task goes.
        if webhook.finished and not webhook.dead:
            self._drop(webhook.config.task_id, webhook.config.id, webhook)

    async def _deliver(
        self, webhook: _Webhook, body: bytes, trace_headers: list[tuple[str, str]]
    ) -> bool:
        config = webhook.config
        content_type = CONTENT_TYPE_V03 if webhook.protocol == V03 else CONTENT_TYPE
        headers = {"Content-Type": content_type, **dict(trace_headers)}
        if config.HasField("authentication") and config.authentication.scheme:
            credentials = config.authentication.credentials
            headers["Authorization"] = f"{config.authentication.scheme} {credentials}".strip()
        if config.token:
            headers[TOKEN_HEADER] = config.token
        delay = self.policy.backoff
        for attempt in range(1, self.policy.max_attempts + 1):
            try:
                async with self._slots:
                    # Checked again on every attempt (DNS changes); connects where it checked.
                    pinned = pinned_addresses.set(await self.guard.check(config.url))
                    try:
                        response = await self._http().post(
                            config.url, content=body, headers=headers, timeout=self.policy.timeout
                        )
                    finally:
                        pinned_addresses.reset(pinned)
                if 200 <= response.status_code < 300:
                    self.delivered += 1
                    self._receiver_log(config.url).recovered("answers again")
                    self._receiver_log(config.url, gave_up=True).recovered(None)
                    return True
                problem = f"HTTP {response.status_code}"
            except WebhookRefusedError as exc:
                self.failures += 1
                self._receiver_log(config.url).failed(f"refused webhook {config.id}: {exc}")
                return False
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            self.failures += 1
            self._receiver_log(config.url).failed(
                f"webhook {config.id} for task {config.task_id}: attempt {attempt} failed "
                f"({problem})"
            )
            if attempt < self.policy.max_attempts:
                self.retries += 1
                await self._sleep(delay)
                delay = min(delay * 2, self.policy.max_backoff)
        return False

    def _give_up(self, webhook: _Webhook, why: str) -> None:
        webhook.dead = True
        self.given_up += 1
        while not webhook.queue.empty():
            webhook.queue.get_nowait()
        config = webhook.config
        self._receiver_log(config.url, gave_up=True).failed(
            f"gave up webhook {config.id} for task {config.task_id}: {why}"
        )

    def _receiver_log(self, url: str, *, gave_up: bool = False) -> FailureLog:
        """The quiet log of one receiver (scheme, host and port of `url`), for its failed
        attempts or (`gave_up`) its webhooks given up: a receiver that is down for every task
        is one WARNING of each, then at most a line a minute of each, then one INFO line when
        it answers again. At most MAX_RECEIVER_LOGS are kept (the oldest goes)."""
        parts = urlsplit(url)
        key = (f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}", gave_up)
        receiver = self._receivers.get(key)
        if receiver is None:
            if len(self._receivers) >= MAX_RECEIVER_LOGS:
                del self._receivers[next(iter(self._receivers))]
            receiver = self._receivers[key] = FailureLog(log, f"webhook receiver {key[0]}")
        return receiver

    def forget_task(self, task_id: str) -> None:
        """The task left the store: drop its registrations and delivery state."""
        self.configs.drop_task(task_id)
        for webhook in self._webhooks.pop(task_id, {}).values():
            webhook.dead = True

    def forget(self, task_id: str, config_id: str) -> None:
        """A deleted config: stop delivering to it (its worker ends after the current POST)."""
        webhook = self._drop(task_id, config_id, None)
        if webhook is not None:
            webhook.dead = True

    def _drop(self, task_id: str, config_id: str, only: _Webhook | None) -> _Webhook | None:
        """Unlists a task's webhook (only if it is `only`, when given); returns what went."""
        hooks = self._webhooks.get(task_id)
        webhook = None if hooks is None else hooks.get(config_id)
        if webhook is None or (only is not None and webhook is not only):
            return None
        assert hooks is not None
        del hooks[config_id]
        if not hooks:
            del self._webhooks[task_id]
        return webhook

    def _busy(self) -> list[_Webhook]:
        """The webhooks whose worker is still running."""
        return [
            webhook
            for hooks in self._webhooks.values()
            for webhook in hooks.values()
            if webhook.worker is not None and not webhook.worker.done()
        ]

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            # As many connections as POSTs may be in flight, so none waits for the pool.
            limits = httpx.Limits(max_connections=self.policy.max_connections)
            transport = _PinnedTransport(limits, self._ssl_context)
            self._client = httpx.AsyncClient(transport=transport, follow_redirects=False)
        return self._client

    async def idle(self) -> None:
        """Waits until every queued event has been delivered or given up (tests, shutdown)."""
        while busy := self._busy():
            await asyncio.wait([webhook.worker for webhook in busy if webhook.worker])

    async def close(self, grace: float = 0.0) -> None:
        """Gives pending deliveries `grace` seconds, then stops them and closes the client.

        What a stopped worker had not delivered (the event it was sending and those queued
        behind it) is logged as undelivered.
        """
        busy = {webhook.worker: webhook for webhook in self._busy() if webhook.worker}
        if busy:
            _, pending = await asyncio.wait(busy, timeout=grace)
            for worker in pending:
                worker.cancel()
                webhook = busy[worker]
                log.warning(
                    "webhook %s (%s) for task %s: %d event(s) undelivered at shutdown",
                    webhook.config.id,
                    webhook.config.url,
                    webhook.config.task_id,
                    webhook.queue.qsize() + 1,
                )
            if pending:
                await asyncio.wait(pending)
        if self._client is not None:
            await self._client.aclose()
            self._client = None
