"""The card a server serves, byte for byte, for each way callers may be authenticated.

Each case starts a real server (127.0.0.1:0, advertising fixed addresses so the card names no
bound port) with one authentication setup (none, static tokens, client certificates, SPIFFE
trust domains, XFCC from a trusted sidecar, JWTs from a JWKS or an OpenID Connect issuer, and
their combinations), fetches `/.well-known/agent-card.json` over HTTP(S), and compares the
body with `data/served_cards/<case>.json`: its security schemes and requirements, and all the
rest, down to the bytes a card signature covers. Card signing keys are fixed, and EdDSA
signatures deterministic, so a signed card is compared byte for byte too. The extended card
(GetExtendedAgentCard over gRPC) is compared with `<case>.extended.json` where one is served.

The files change only when a card is meant to change: write them anew with
`A2A_GRPC_WRITE_CARDS=1` and review the diff.
"""

from __future__ import annotations

import json
import os
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519
from google.protobuf import json_format

from a2a_grpc.core.jose import KeySet
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.server.app import RunningServer, ServerPlan, start_server
from a2a_grpc.server.card import demo_card, to_json
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.demo_agent import DemoAgent
from a2a_grpc.server.trust.tls import TlsFiles
from tests.integration.certs import Authority
from tests.integration.test_jwt_auth import AUDIENCE, Issuer
from tests.integration.test_mesh_identity import load_pem

CARDS = Path(__file__).parent / "data" / "served_cards"
WRITE = os.environ.get("A2A_GRPC_WRITE_CARDS") == "1"
TOKENS = {"alice-token": "alice"}
ADVERTISED = {"advertise": "agent.example:443", "advertise_http": "https://agent.example/a2a"}


def _key(seed: int) -> ed25519.Ed25519PrivateKey:
    return ed25519.Ed25519PrivateKey.from_private_bytes(bytes([seed]) * 32)


CARD_KEY = _key(1)
MESSAGE_KEYS = KeySet.of_private_keys({"callers-1": _key(2)})
OWN_KEYS = KeySet.of_private_keys({"own-1": _key(3)})


@dataclass(frozen=True)
class Case:
    """One server's setup: its settings, and what it is given beside them."""

    settings: dict[str, Any] = field(default_factory=dict)
    tokens: bool = False
    tls: str = ""
    """"": none; "server": TLS without a client CA; "mtls": with one."""
    jwt: str = ""
    """"": none; "jwks": a JWKS file; "oidc": an OpenID Connect issuer."""
    card: dict[str, Any] | None = None
    """Card fields over the demo card's (ProtoJSON, merged), or None: the demo card."""
    extended: bool = False
    signed: bool = False
    signed_messages: bool = False


CASES = {
    "none": Case(),
    "tls-without-client-ca": Case(tls="server"),
    "tokens": Case(tokens=True),
    "mtls": Case(tls="mtls"),
    "mtls-trust-domain": Case(tls="mtls", settings={"trust_domain": ("prod.example",)}),
    "tokens-mtls": Case(tokens=True, tls="mtls"),
    "jwks": Case(jwt="jwks"),
    "jwks-tokens": Case(jwt="jwks", tokens=True),
    "oidc": Case(jwt="oidc"),
    "oidc-tokens-mtls": Case(jwt="oidc", tokens=True, tls="mtls"),
    "xfcc": Case(settings={"trust_xfcc": True}),
    "xfcc-trust-domain": Case(settings={"trust_xfcc": True, "trust_domain": ("prod.example",)}),
    "xfcc-tokens": Case(tokens=True, settings={"trust_xfcc": True}),
    "xfcc-mtls": Case(tls="mtls", settings={"trust_xfcc": True}),
    "xfcc-tokens-mtls": Case(tokens=True, tls="mtls", settings={"trust_xfcc": True}),
    "xfcc-jwks": Case(jwt="jwks", settings={"trust_xfcc": True}),
    "own-requirements": Case(
        tokens=True,
        card={
            "securitySchemes": {"apiKey": {"apiKeySecurityScheme": {"location": "header"}}},
            "securityRequirements": [{"schemes": {"apiKey": {}}}],
        },
    ),
    "own-bearer-scheme": Case(
        tokens=True,
        tls="mtls",
        card={
            "securitySchemes": {
                "bearer": {"httpAuthSecurityScheme": {"description": "from the ops team"}},
                "mtls": {"mtlsSecurityScheme": {"description": "a mesh certificate"}},
            }
        },
    ),
    "no-03-jsonrpc-only": Case(
        tokens=True, settings={"compat_03": False, "bindings": ("grpc", "jsonrpc")}
    ),
    "signed-messages": Case(
        tokens=True, signed_messages=True, settings={"require_signed_messages": True}
    ),
    "signed-card": Case(tokens=True, tls="mtls", signed=True),
    "signed-card-v03-fields": Case(tokens=True, signed=True, settings={"card_v03_fields": True}),
    "extended": Case(
        tokens=True,
        extended=True,
        signed=True,
        card={"capabilities": {"extendedAgentCard": True}},
    ),
}


@pytest.fixture
async def issuer() -> AsyncIterator[Issuer]:
    made = Issuer()
    made.add_key("k1")
    await made.start()
    yield made
    await made.stop()


def _card(case: Case) -> a2a_pb2.AgentCard:
    card = demo_card(ADVERTISED["advertise"])
    del card.supported_interfaces[:]  # the server lists the ones it serves
    if case.card is not None:
        json_format.ParseDict(case.card, card)
    return card


async def _start(case: Case, tmp_path: Path, issuer: Issuer, ca: Authority) -> RunningServer:
    settings: dict[str, Any] = {**ADVERTISED, **case.settings}
    if case.jwt == "jwks":
        keys = tmp_path / "jwks.json"
        keys.write_text(json.dumps({"keys": [issuer.jwk("k1")]}))
        settings.update(jwks=str(keys), jwt_issuer="https://idp.example", jwt_audience=AUDIENCE)
    elif case.jwt == "oidc":
        settings.update(oidc_issuer=issuer.url, jwt_audience=AUDIENCE)
    tls = None
    if case.tls:
        server = ca.issue("localhost", server=True)
        client_ca = ca.certificate if case.tls == "mtls" else None
        tls = TlsFiles(server.certificate, server.key, client_ca=client_ca)
    config = ServerConfig(
        host="127.0.0.1", port=0, http_port=0, shutdown_grace=0.1, drain_delay=0, **settings
    )
    extended = None
    if case.extended:
        extended = a2a_pb2.AgentCard()
        extended.CopyFrom(_card(case))
        extended.skills.add(id="audit", name="Audit", description="for callers we know")
    return await start_server(
        ServerPlan(
            config,
            DemoAgent(),
            _card(case),
            extended_card=extended,
            tokens=TOKENS if case.tokens else None,
            tls=tls,
            signature_keys=MESSAGE_KEYS if case.signed_messages else None,
            signing_keys=OWN_KEYS if case.signed_messages else None,
            card_signer=(CARD_KEY, "card-1") if case.signed else None,
        )
    )


async def _served_card(running: RunningServer, case: Case, ca: Authority) -> str:
    url = running.card_url
    assert url is not None
    verify: ssl.SSLContext | bool = True
    if case.tls:
        verify = ssl.create_default_context(cadata=ca.certificate.decode())
        if case.tls == "mtls":
            load_pem(verify, ca.issue("reader"))
    async with httpx.AsyncClient(verify=verify) as http:
        response = await http.get(url)
    assert response.status_code == 200, response.text
    return response.text


async def _extended_card(running: RunningServer, case: Case) -> str:
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    try:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        metadata = (("a2a-version", "1.0"), ("authorization", "Bearer alice-token"))
        card = await stub.GetExtendedAgentCard(
            a2a_pb2.GetExtendedAgentCardRequest(), metadata=metadata
        )
    finally:
        await channel.close()
    return to_json(card)


def _compare(name: str, served: str, issuer: Issuer) -> None:
    text = served.replace(issuer.url, "{issuer}") + "\n"
    path = CARDS / name
    if WRITE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no {path}: write it with A2A_GRPC_WRITE_CARDS=1"
    assert text == path.read_text(), f"the card served changed: {name}"


@pytest.mark.parametrize("name", list(CASES))
async def test_the_served_card_is_the_one_recorded(
    name: str, tmp_path: Path, issuer: Issuer
) -> None:
    case = CASES[name]
    ca = Authority()
    running = await _start(case, tmp_path, issuer, ca)
    try:
        _compare(f"{name}.json", await _served_card(running, case, ca), issuer)
        if case.extended:
            _compare(f"{name}.extended.json", await _extended_card(running, case), issuer)
    finally:
        await running.stop(0)
