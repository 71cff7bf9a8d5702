"""Addresses: where the server listens, what its card tells clients, and why a bind failed.

- `host:port` text brackets an IPv6 literal (`[::1]:50051`), in listen targets and on the card.
- The card lists the public address: `--advertise HOST[:PORT]` when given; else the listen
  host, except a wildcard (`0.0.0.0`, `::`), which no client can dial: the machine's host name
  stands for it (and `serve` warns). The HTTP bindings' URL is `--advertise-http URL` when
  given, else the public host with the bound HTTP port.
- A failed bind is explained by its errno: in use, not a local address, not permitted.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
from typing import NamedTuple
from urllib.parse import urlsplit

WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})
"""Listen hosts meaning every interface: no client can reach the server at these."""


def bare_host(host: str) -> str:
    """`host` without the brackets of an IPv6 literal (`[::1]` → `::1`)."""
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def host_port(host: str, port: int) -> str:
    """`host:port`, an IPv6 literal bracketed (`[::1]:50051`)."""
    host = bare_host(host)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def is_wildcard(host: str) -> bool:
    return bare_host(host) in WILDCARD_HOSTS


def parse_advertise(value: str) -> tuple[str, int | None]:
    """`HOST`, `HOST:PORT`, `[V6]` or `[V6]:PORT` → (host, port or None); ValueError if not."""
    text = value.strip()
    port_text: str | None = None
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError(f"--advertise {value!r}: expected HOST:PORT or [IPV6]:PORT")
        port_text = rest[1:] if rest else None
    elif text.count(":") > 1:  # a bare IPv6 literal, no port
        host = text
    else:
        host, colon, port_text_or_empty = text.partition(":")
        port_text = port_text_or_empty if colon else None
    if not host or "/" in host or any(c.isspace() for c in host):
        raise ValueError(
            f"--advertise {value!r}: expected HOST:PORT (a host name or IP, no scheme or path)"
        )
    if ":" in host or text.startswith("["):
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"--advertise {value!r}: {host!r} is not an IPv6 address") from None
    if port_text is None:
        return host, None
    if not (port_text.isascii() and port_text.isdigit()) or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"--advertise {value!r}: the port must be a number from 1 to 65535")
    return host, int(port_text)


def parse_http_url(value: str) -> str:
    """An `http(s)://host[:port][/path]` base URL without its trailing slash; ValueError if not."""
    try:
        url = urlsplit(value.strip())
        url.port  # noqa: B018 -- raises ValueError for a port that is no number or out of range
    except ValueError as exc:
        raise ValueError(f"--advertise-http {value!r}: {exc}") from None
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ValueError(
            f"--advertise-http {value!r}: expected an http:// or https:// URL with a host"
        )
    if url.query or url.fragment:
        raise ValueError(f"--advertise-http {value!r}: a base URL has no query or fragment")
    return url.geturl().rstrip("/")


class PublicAddresses(NamedTuple):
    """What the card lists: the gRPC `host:port` and the HTTP bindings' base URL."""

    grpc: str
    http: str | None


def public_addresses(
    listen_host: str,
    grpc_port: int,
    http_port: int | None,
    *,
    advertise: str = "",
    advertise_http: str = "",
    tls: bool = False,
) -> PublicAddresses:
    """The addresses clients are told (module docstring); `http_port` None: no HTTP port."""
    host, port = parse_advertise(advertise) if advertise else (bare_host(listen_host), None)
    if is_wildcard(host):
        host = socket.gethostname()
    http = None
    if http_port is not None:
        scheme = "https" if tls else "http"
        http = parse_http_url(advertise_http) if advertise_http else None
        http = http or f"{scheme}://{host_port(host, http_port)}"
    return PublicAddresses(grpc=host_port(host, grpc_port if port is None else port), http=http)


def listen_problem(host: str, port: int, code: int | None, detail: str = "") -> str:
    """One line saying why `host:port` could not be bound, from the bind's errno `code`."""
    where = f"cannot listen on {host_port(host, port)}"
    if code == errno.EADDRINUSE:
        return f"{where}: the port is in use (another process listens on it)"
    if code == errno.EADDRNOTAVAIL:
        return (
            f"{where}: the address is not local (no interface of this machine has it); "
            "listen on a local address or 0.0.0.0 and set --advertise"
        )
    if code in (errno.EACCES, errno.EPERM):
        low = " (ports below 1024 need root or CAP_NET_BIND_SERVICE)" if 0 < port < 1024 else ""
        return f"{where}: permission denied{low}"
    return f"{where}: {detail or (errno.errorcode.get(code, 'error') if code else 'error')}"


def bind_problem(host: str, port: int) -> str | None:
    """None when a listener could bind `host:port` now, else why not (one line).

    Every address `host` resolves to is tried, without SO_REUSEPORT, so a port held by any
    listener (one that shares it with SO_REUSEPORT included) is reported as in use.
    """
    try:
        addresses = socket.getaddrinfo(
            bare_host(host) or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        return f"cannot listen on {host_port(host, port)}: {exc.strerror}"
    for family, kind, protocol, _, address in addresses:
        with socket.socket(family, kind, protocol) as probe:
            # As grpc and aiohttp bind: connections in TIME_WAIT do not make the port busy.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                return listen_problem(host, port, exc.errno, exc.strerror or "")
    return None
