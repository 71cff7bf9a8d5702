"""Address text: IPv6 brackets, --advertise parsing, the card's public addresses, bind errors."""

from __future__ import annotations

import errno
import socket

import pytest

from a2a_grpc.server.addresses import (
    host_port,
    listen_problem,
    parse_advertise,
    parse_http_url,
    public_addresses,
)


def test_ipv6_literals_are_bracketed() -> None:
    assert host_port("::1", 50051) == "[::1]:50051"
    assert host_port("[::1]", 50051) == "[::1]:50051"
    assert host_port("10.0.0.1", 1) == "10.0.0.1:1"


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("agent.example.com", ("agent.example.com", None)),
        ("agent.example.com:443", ("agent.example.com", 443)),
        ("[2001:db8::1]:8443", ("2001:db8::1", 8443)),
        ("[2001:db8::1]", ("2001:db8::1", None)),
        ("2001:db8::1", ("2001:db8::1", None)),
    ],
)
def test_advertise_takes_a_host_and_an_optional_port(
    value: str, parsed: tuple[str, int | None]
) -> None:
    assert parse_advertise(value) == parsed


@pytest.mark.parametrize("value", ["", "http://x:1", "x:0", "x:port", "x:²", "[::1]x", "[nope]:1"])
def test_advertise_refuses_what_is_no_address(value: str) -> None:
    with pytest.raises(ValueError, match="--advertise"):
        parse_advertise(value)


def test_advertise_http_is_a_base_url() -> None:
    assert parse_http_url("https://a.example/x/") == "https://a.example/x"
    for bad in ("a.example", "ftp://a.example", "https://a.example/?q=1", "http://a:99999"):
        with pytest.raises(ValueError, match="--advertise-http"):
            parse_http_url(bad)


def test_public_addresses() -> None:
    assert public_addresses("127.0.0.1", 5, 6) == ("127.0.0.1:5", "http://127.0.0.1:6")
    assert public_addresses("::1", 5, None, tls=True) == ("[::1]:5", None)
    name = socket.gethostname()
    assert public_addresses("::", 5, 6, tls=True) == (f"{name}:5", f"https://{name}:6")
    assert public_addresses("0.0.0.0", 5, 6, advertise="a.example") == (
        "a.example:5",
        "http://a.example:6",
    )
    assert public_addresses("0.0.0.0", 5, 6, advertise="a:7", advertise_http="https://b/") == (
        "a:7",
        "https://b",
    )


def test_a_bind_error_says_what_failed() -> None:
    assert "the port is in use" in listen_problem("h", 1, errno.EADDRINUSE)
    assert "the address is not local" in listen_problem("h", 1, errno.EADDRNOTAVAIL)
    assert listen_problem("::1", 80, errno.EACCES) == (
        "cannot listen on [::1]:80: permission denied (ports below 1024 need root or "
        "CAP_NET_BIND_SERVICE)"
    )
    assert listen_problem("h", 1, errno.EINVAL, "Invalid argument").endswith(": Invalid argument")
