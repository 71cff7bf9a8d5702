"""Mesh identity: SPIFFE IDs, and the `x-forwarded-client-cert` header a sidecar adds.

A SPIFFE ID (https://github.com/spiffe/spiffe/blob/main/standards/SPIFFE-ID.md) is
`spiffe://<trust domain>/<path>`: the scheme `spiffe` in lowercase; a trust domain of lowercase
letters, digits, `.`, `-` and `_` (no port, no userinfo); a path of `/`-separated segments of
letters, digits, `.`, `-` and `_`, none empty, none `.` or `..`, no trailing `/`; no query, no
fragment, no percent-encoding; 2048 bytes at most. `spiffe_id` checks exactly that.

`x-forwarded-client-cert` (XFCC) is Envoy's header
(https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_conn_man/headers#x-forwarded-client-cert):
elements separated by `,`, one per proxy the request passed through; each element is `key=value`
pairs separated by `;`, keys case-insensitive (`By`, `Hash`, `Cert`, `Chain`, `Subject`, `URI`,
`DNS`), a value double-quoted when it holds `,`, `;` or `=`, with `"` inside it written `\\"`.
A proxy appends its element at the end (`APPEND_FORWARD`) or replaces the header with its own
(`SANITIZE_SET`): either way the last element is the one the proxy next to the server added,
the one that saw the caller's certificate, so `forwarded_spiffe_id` reads the SPIFFE ID (its
`URI`) from the last element only. `parse_xfcc` is strict: anything it cannot read unambiguously
is an IdentityProblem saying what is malformed, never a guess. Unknown keys are allowed (and
ignored), so that a newer proxy's additions do not lock callers out.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence


class IdentityProblem(ValueError):
    """A certificate or header that names no acceptable identity: the message says why (the
    authenticators of trust/auth.py refuse the call with it)."""


XFCC_HEADER = "x-forwarded-client-cert"
"""The header (gRPC metadata key, HTTP header name) a sidecar forwards the caller's
certificate in."""

DEFAULT_TRUSTED_PROXIES = ("127.0.0.0/8", "::1/128")
"""Where `--trust-xfcc` believes the header from by default: loopback, where a sidecar runs."""

MAX_SPIFFE_ID = 2048
MAX_TRUST_DOMAIN = 255
_TRUST_DOMAIN = re.compile(r"[a-z0-9._-]+")
_SEGMENT = re.compile(r"[a-zA-Z0-9._-]+")
_REPEATABLE = frozenset({"uri", "dns"})
"""XFCC keys that may appear more than once in an element (one per SAN of the certificate)."""


def trust_domain_problem(domain: str) -> str | None:
    """Why `domain` is no SPIFFE trust domain name, or None."""
    if not domain:
        return "a trust domain must not be empty"
    if len(domain) > MAX_TRUST_DOMAIN:
        return f"a trust domain has at most {MAX_TRUST_DOMAIN} characters"
    if not _TRUST_DOMAIN.fullmatch(domain):
        return (
            f"trust domain {domain!r} may hold only lowercase letters, digits, '.', '-' and '_' "
            "(no scheme, port or path)"
        )
    return None


def spiffe_id_problem(uri: str) -> str | None:
    """Why `uri` is no valid SPIFFE ID (the SPIFFE ID standard, §2), or None."""
    if len(uri.encode()) > MAX_SPIFFE_ID:
        return f"a SPIFFE ID has at most {MAX_SPIFFE_ID} bytes"
    if not uri.startswith("spiffe://"):
        return "a SPIFFE ID starts with 'spiffe://' (lowercase)"
    rest = uri.removeprefix("spiffe://")
    domain, slash, path = rest.partition("/")
    if "?" in uri or "#" in uri:
        return "a SPIFFE ID has no query or fragment"
    if "@" in domain:
        return "a SPIFFE ID has no userinfo"
    if ":" in domain:
        return "a SPIFFE ID's trust domain has no port"
    problem = trust_domain_problem(domain)
    if problem is not None:
        return problem
    if slash:
        for segment in path.split("/"):
            if not segment:
                return "a SPIFFE ID's path has no empty segment (nor a trailing '/')"
            if segment in (".", ".."):
                return "a SPIFFE ID's path has no '.' or '..' segment"
            if not _SEGMENT.fullmatch(segment):
                return (
                    "a SPIFFE ID's path may hold only letters, digits, '.', '-' and '_' "
                    "(no percent-encoding)"
                )
    return None


def trust_domain_of(spiffe_id: str) -> str:
    """The trust domain of a valid SPIFFE ID."""
    return spiffe_id.removeprefix("spiffe://").partition("/")[0]


def spiffe_id(uris: Sequence[str], where: str, trust_domains: Sequence[str] = ()) -> str | None:
    """The one SPIFFE ID among `uris` (URI SANs), or None when there is none; an
    IdentityProblem (naming `where` they come from) when there are several, when another URI
    comes with it, when it is not valid, or when `trust_domains` are given and its trust domain
    is none of them."""
    ids = [uri for uri in uris if uri[:7].lower() == "spiffe:"]
    if not ids:
        return None
    # An X509-SVID has exactly one URI SAN (X509-SVID standard, §2): two SPIFFE IDs would be two
    # names, and a SPIFFE ID beside another URI is no SVID either.
    if len(ids) > 1:
        raise IdentityProblem(f"{where} names {len(ids)} SPIFFE IDs; it must name one")
    if len(uris) > 1:
        raise IdentityProblem(
            f"{where} has {len(uris)} URI SANs, one a SPIFFE ID: an X509-SVID has exactly one "
            "URI SAN, its SPIFFE ID"
        )
    (found,) = ids
    problem = spiffe_id_problem(found)
    if problem is not None:
        raise IdentityProblem(f"{where}: {found!r} is not a valid SPIFFE ID: {problem}")
    domain = trust_domain_of(found)
    if trust_domains and domain not in trust_domains:
        raise IdentityProblem(
            f"{where}: trust domain {domain!r} is not accepted here (--trust-domain: "
            f"{', '.join(trust_domains)})"
        )
    return found


# -- x-forwarded-client-cert ---------------------------------------------------------------


class MalformedXfcc(IdentityProblem):
    """An `x-forwarded-client-cert` header that cannot be read unambiguously."""

    def __init__(self, problem: str) -> None:
        super().__init__(f"malformed {XFCC_HEADER}: {problem}")


def parse_xfcc(header: str) -> list[list[tuple[str, str]]]:
    """The elements of an XFCC header, each as its (lowercased key, unquoted value) pairs, in
    order; MalformedXfcc saying what is wrong. Spaces are allowed around the `,` between
    elements (where joined header lines put them), nowhere else outside quotes."""
    elements: list[list[tuple[str, str]]] = []
    pairs: list[tuple[str, str]] = []
    position, end = 0, len(header)
    while True:
        if not pairs:
            while position < end and header[position] in " \t":
                position += 1
        key_end = position
        while key_end < end and header[key_end] not in '=;,"':
            key_end += 1
        key = header[position:key_end]
        element_number = len(elements) + 1
        if key_end >= end or header[key_end] != "=":
            if not key:
                raise MalformedXfcc(
                    f"element {element_number} is empty"
                    if not pairs
                    else f"element {element_number} has an empty pair (';;' or a trailing ';')"
                )
            raise MalformedXfcc(f"element {element_number}: {key!r} is not key=value")
        if not key or not key.isascii() or not key.replace("_", "").replace("-", "").isalnum():
            raise MalformedXfcc(f"element {element_number}: {key!r} is not a key")
        value, position = _value(header, key_end + 1, element_number, key)
        lowered = key.lower()
        if lowered not in _REPEATABLE and any(k == lowered for k, _ in pairs):
            raise MalformedXfcc(f"element {element_number} has {key} twice")
        pairs.append((lowered, value))
        if position >= end:
            elements.append(pairs)
            return elements
        if header[position] == ";":
            position += 1
            continue
        # header[position] == "," (_value stops only at , ; or the end)
        elements.append(pairs)
        pairs = []
        position += 1
        while position < end and header[position] in " \t":
            position += 1
        if position >= end:
            raise MalformedXfcc("it ends with ','")


def _value(header: str, position: int, element_number: int, key: str) -> tuple[str, int]:
    """The value starting at `position` and where it ends (at `,`, `;` or the end)."""
    end = len(header)
    if position < end and header[position] == '"':
        chars: list[str] = []
        position += 1
        while True:
            if position >= end:
                raise MalformedXfcc(f"element {element_number}: {key}'s quoted value is not closed")
            char = header[position]
            if char == "\\" and position + 1 < end and header[position + 1] in '"\\':
                chars.append(header[position + 1])
                position += 2
                continue
            if char == '"':
                position += 1
                break
            chars.append(char)
            position += 1
        if position < end and header[position] not in ",;":
            raise MalformedXfcc(
                f"element {element_number}: {key}'s quoted value is followed by "
                f"{header[position]!r}, not ';' or ','"
            )
        value = "".join(chars)
    else:
        start = position
        while position < end and header[position] not in ",;":
            if header[position] in '="':
                raise MalformedXfcc(
                    f"element {element_number}: {key}'s value holds {header[position]!r} unquoted"
                )
            position += 1
        value = header[start:position]
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in value):
        raise MalformedXfcc(f"element {element_number}: {key}'s value holds a control character")
    return value, position


def forwarded_spiffe_id(values: Sequence[str], trust_domains: Sequence[str] = ()) -> str:
    """The caller's SPIFFE ID from XFCC header values (several lines read as one, joined by
    `,`): the `URI` of the last element, the one the sidecar next to this server added;
    IdentityProblem when the header is malformed or that element names no valid SPIFFE ID
    (of `trust_domains`, when given)."""
    elements = parse_xfcc(",".join(values))
    last = elements[-1]
    uris = [value for key, value in last if key == "uri"]
    where = f"{XFCC_HEADER} (its last element, the one the sidecar added)"
    found = spiffe_id(uris, where, trust_domains)
    if found is None:
        raise IdentityProblem(f"{where} names no SPIFFE ID (URI=spiffe://...)")
    return found


# -- where a connection comes from ---------------------------------------------------------


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def trusted_networks(cidrs: Sequence[str]) -> tuple[Network, ...]:
    """`cidrs` as networks (a bare address is a network of one); ValueError naming a bad one."""
    networks = []
    for cidr in cidrs:
        try:
            networks.append(ipaddress.ip_network(cidr.strip()))
        except ValueError as exc:
            raise ValueError(f"trusted_proxy {cidr!r} is not a CIDR ({exc})") from None
    return tuple(networks)


def grpc_peer_address(peer: str | None) -> str | None:
    """The IP address in gRPC's `context.peer()` (`ipv4:127.0.0.1:5555`, `ipv6:[::1]:5555`),
    or None for anything else (a Unix socket)."""
    if not peer:
        return None
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0] or None
    if kind == "ipv6":
        host = rest.rpartition(":")[0]
        return host.removeprefix("[").removesuffix("]").partition("%")[0] or None
    return None


def is_trusted(address: str | None, networks: Sequence[Network]) -> bool:
    """Whether the connection from `address` (an IP address, None when unknown) comes from one
    of `networks`; an IPv4-mapped IPv6 address counts as its IPv4 address."""
    if address is None:
        return False
    try:
        ip = ipaddress.ip_address(address.partition("%")[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip.version == network.version and ip in network for network in networks)
