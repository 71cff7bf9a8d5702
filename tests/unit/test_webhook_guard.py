"""The SSRF guard's address rule, IPv6 forms that carry an IPv4 address included."""

from __future__ import annotations

import pytest

from a2a_grpc.server.push.guard import WebhookGuard, WebhookRefusedError

REFUSED = [
    # IPv4
    "127.0.0.1",
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",  # shared address space (CGNAT)
    "0.0.0.0",
    "192.0.2.1",  # documentation
    "224.0.0.1",  # multicast
    "255.255.255.255",
    # plain IPv6
    "::",
    "::1",
    "fe80::1",
    "fc00::1",
    "ff02::1",
    "2001:db8::1",
    # IPv4-mapped ::ffff:a.b.c.d
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    "::ffff:169.254.169.254",
    # IPv4-compatible ::a.b.c.d
    "::127.0.0.1",
    "::10.0.0.1",
    "::a9fe:a9fe",
    # SIIT ::ffff:0:a.b.c.d
    "::ffff:0:127.0.0.1",
    "::ffff:0:192.168.0.1",
    # NAT64, well-known prefix 64:ff9b::/96
    "64:ff9b::127.0.0.1",
    "64:ff9b::10.0.0.1",
    "64:ff9b::a9fe:a9fe",
    "64:ff9b::224.0.0.1",
    # local-use NAT64 64:ff9b:1::/48: refused whatever it carries
    "64:ff9b:1::808:808",
    "64:ff9b:1:7f00:1::",
    # 6to4 2002::/16 (IPv4 in bits 16-47): refused whatever it carries
    "2002:7f00:1::1",
    "2002:a00:1::1",
    "2002:808:808::1",
    # Teredo 2001::/32 (server in bits 32-63, client XOR-ed in the last 32): refused outright
    "2001:0:7f00:1:0:ffff:80ff:fffe",  # server and client 127.0.0.1
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # public server and client
]

ALLOWED = [
    "8.8.8.8",
    "93.184.216.34",
    "2606:4700:4700::1111",
    "::ffff:8.8.8.8",
    "::ffff:0:8.8.8.8",
    "64:ff9b::8.8.8.8",  # a NAT64 gateway reaching a public IPv4 host
    "::808:808",
]


def _guard(*answers: str) -> WebhookGuard:
    async def resolve(host: str) -> list[str]:
        assert host == "hooks.example"
        return list(answers)

    return WebhookGuard(allow_private_targets=False, resolver=resolve)


def _literal(address: str) -> str:
    return f"https://[{address}]/hook" if ":" in address else f"https://{address}/hook"


@pytest.mark.parametrize("address", REFUSED)
async def test_refused_as_a_literal_and_as_a_dns_answer(address: str) -> None:
    with pytest.raises(WebhookRefusedError, match="only calls public hosts"):
        await _guard().check(_literal(address))
    with pytest.raises(WebhookRefusedError, match="only calls public hosts"):
        await _guard("8.8.8.8", address).check("https://hooks.example/hook")


@pytest.mark.parametrize("address", ALLOWED)
async def test_allowed_as_a_literal_and_as_a_dns_answer(address: str) -> None:
    await _guard().check(_literal(address))
    await _guard(address).check("https://hooks.example:8443/hook")


async def test_the_embedded_address_is_named() -> None:
    with pytest.raises(WebhookRefusedError, match=r"carries a non-public address \(127\.0\.0\.1\)"):
        await _guard().check("http://[64:ff9b::7f00:1]/")


async def test_private_targets_can_be_allowed() -> None:
    guard = WebhookGuard(allow_private_targets=True)
    await guard.check("http://[::ffff:127.0.0.1]:8080/hook")
    with pytest.raises(WebhookRefusedError, match="port"):
        await guard.check("http://127.0.0.1:99999/hook")  # the URL's form is checked regardless
