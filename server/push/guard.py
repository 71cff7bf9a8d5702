"""The SSRF guard: which webhook URLs may be called, and connecting only where it checked.

- `parse_webhook_url` checks a URL's form (length, characters, syntax and IDNA, http(s), host,
  port) as httpx will call it, so a config that passes never fails on its form at delivery.
- `WebhookGuard.check` checks the form, then refuses URLs whose host is, or resolves to, a
  loopback, private, link-local, reserved or multicast address, or an IPv6 form of one (see
  `forbidden_address`), unless `allow_private_targets` is set. It runs when a config is
  registered and before every attempt, and raises `WebhookRefusedError` saying why.
- `PinnedTransport` makes the POST connect to the addresses the check returned
  (`pinned_addresses`), never to a fresh DNS answer (DNS rebinding); Host, TLS SNI and the
  certificate check still use the URL's host name.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable
from contextvars import ContextVar

import httpcore
import httpx

MAX_URL_CHARS = 2048
"""Longest webhook URL accepted (the common limit of browsers, proxies and CDNs)."""


class WebhookRefusedError(ValueError):
    """The webhook URL is not acceptable (scheme, host, or an address the guard refuses)."""


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


class PinnedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport over a pool that connects through `_PinnedBackend`: a request sent
    with `pinned_addresses` set to what `WebhookGuard.check` allowed opens its connection there,
    never at a second DNS answer."""

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
