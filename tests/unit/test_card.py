"""The agent-card resolver: URL, ProtoJSON parsing, GRPC interface choice, ETag and max-age;
and the card as the server serves it, with signatures over what it serves."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from google.protobuf import json_format

from a2a_grpc.client.card import (
    CardResolver,
    card_url,
    max_age,
    parse_card,
    pick_grpc_interface,
    select_interface,
)
from a2a_grpc.client.errors import AgentCardError, UnavailableError
from a2a_grpc.core import v03
from a2a_grpc.core.canonical import canonicalize
from a2a_grpc.core.errors import InvalidAgentResponseError
from a2a_grpc.core.jose import KeySet, SignatureError, verify_detached
from a2a_grpc.core.signing import sign_card, verify_card
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.card import Serving, demo_card, finalize_card, to_json
from a2a_grpc.server.trust.auth import BearerTokens

CARD = {
    "name": "echo",
    "description": "echoes",
    "version": "1",
    "supportedInterfaces": [
        {"url": "http://x/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": "old:1", "protocolBinding": "GRPC", "protocolVersion": "0.3"},
        {"url": "h:50051", "protocolBinding": "GRPC", "protocolVersion": "1.0", "tenant": "t-9"},
        {"url": "h:50052", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
    ],
    "capabilities": {"streaming": True},
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain"],
    "skills": [],
    "aFieldFromTheFuture": {"x": 1},
}


def test_card_url() -> None:
    assert card_url("https://a.example") == "https://a.example/.well-known/agent-card.json"
    assert card_url("http://a:8080/") == "http://a:8080/.well-known/agent-card.json"
    assert card_url("https://a.example/cards/x.json") == "https://a.example/cards/x.json"
    for bad in ("a.example:443", "ftp://a", "https://"):
        with pytest.raises(ValueError):
            card_url(bad)


def test_first_grpc_interface_for_version_1_0_with_its_tenant() -> None:
    interface = pick_grpc_interface(parse_card(json.dumps(CARD)))
    assert (interface.url, interface.tenant) == ("h:50051", "t-9")


def test_cards_without_a_usable_grpc_interface() -> None:
    card = dict(CARD, supportedInterfaces=CARD["supportedInterfaces"][:2])
    with pytest.raises(AgentCardError, match="only for protocol version"):
        pick_grpc_interface(parse_card(json.dumps(card)))
    card = dict(CARD, supportedInterfaces=CARD["supportedInterfaces"][:1])
    with pytest.raises(AgentCardError, match="no GRPC interface"):
        pick_grpc_interface(parse_card(json.dumps(card)))


def test_malformed_card() -> None:
    with pytest.raises(InvalidAgentResponseError):
        parse_card("<html>")
    with pytest.raises(InvalidAgentResponseError):
        parse_card('{"name": 5, "skills": "no"}')


CARD_V03 = {
    # An A2A 0.3 card as the official SDK 0.3 serves it (pydantic, by alias, no None fields).
    "name": "old-echo",
    "description": "an A2A 0.3 agent",
    "version": "1",
    "protocolVersion": "0.3.0",
    "url": "http://h/rpc",
    "preferredTransport": "JSONRPC",
    "additionalInterfaces": [
        {"transport": "JSONRPC", "url": "http://h/rpc"},
        {"transport": "HTTP+JSON", "url": "http://h"},
    ],
    "capabilities": {"streaming": True, "stateTransitionHistory": False},
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain"],
    "securitySchemes": {
        "bearer": {"type": "http", "scheme": "bearer"},
        "key": {"type": "apiKey", "in": "header", "name": "X-Key"},
        "oauth": {
            "type": "oauth2",
            "flows": {
                "clientCredentials": {"tokenUrl": "https://t", "scopes": {"a": "b"}},
                "password": {"tokenUrl": "https://p", "scopes": {}},
            },
        },
    },
    "security": [{"bearer": [], "key": []}, {"oauth": ["a"]}],
    "skills": [
        {"id": "s", "name": "S", "description": "d", "tags": [], "security": [{"bearer": []}]}
    ],
    "supportsAuthenticatedExtendedCard": True,
}


def test_a_0_3_card_is_read_as_0_3_interfaces() -> None:
    card = parse_card(json.dumps(CARD_V03))
    listed = [(i.protocol_binding, i.url, i.protocol_version) for i in card.supported_interfaces]
    assert listed == [("JSONRPC", "http://h/rpc", "0.3.0"), ("HTTP+JSON", "http://h", "0.3.0")]
    assert card.capabilities.streaming and card.capabilities.extended_agent_card
    schemes = card.security_schemes
    assert schemes["bearer"].http_auth_security_scheme.scheme == "bearer"
    assert schemes["key"].api_key_security_scheme.location == "header"
    flows = schemes["oauth"].oauth2_security_scheme.flows
    assert flows.WhichOneof("flow") == "client_credentials"  # the first of the two listed
    assert [dict(r.schemes) for r in card.security_requirements][1]["oauth"].list == ["a"]
    assert list(card.skills[0].security_requirements[0].schemes) == ["bearer"]
    assert select_interface(card).url == "http://h/rpc"  # the preferred one


def test_a_0_3_card_without_interfaces_list_uses_url_and_preferred_transport() -> None:
    card = parse_card(
        json.dumps({"name": "x", "url": "http://h/api", "preferredTransport": "HTTP+JSON"})
    )
    assert [(i.protocol_binding, i.url, i.protocol_version) for i in card.supported_interfaces] == [
        ("HTTP+JSON", "http://h/api", "0.3")
    ]


def test_a_card_for_both_versions_is_read_as_1_0() -> None:
    both = dict(CARD, url="http://old/rpc", preferredTransport="JSONRPC", protocolVersion="0.3.0")
    card = parse_card(json.dumps(both))
    assert [i.url for i in card.supported_interfaces] == [
        i["url"] for i in CARD["supportedInterfaces"]
    ]


def test_our_0_3_card_json_reads_back() -> None:
    address = "127.0.0.1:50051"
    bearer = BearerTokens({"t": "alice"}).card_security()
    served = finalize_card(demo_card(address), Serving(address, v03=True, security=bearer))
    document = v03.agent_card_json(served)
    card = parse_card(json.dumps(document))
    assert [(i.protocol_binding, i.url) for i in card.supported_interfaces] == [
        (i.protocol_binding, i.url)
        for i in served.supported_interfaces
        if i.protocol_version == v03.PROTOCOL_VERSION
    ]
    assert card.name == served.name and card.skills == served.skills
    assert card.security_schemes == served.security_schemes
    assert card.security_requirements == served.security_requirements


def test_malformed_0_3_card() -> None:
    with pytest.raises(InvalidAgentResponseError, match="malformed agent card"):
        parse_card(json.dumps(dict(CARD_V03, additionalInterfaces="none")))
    with pytest.raises(InvalidAgentResponseError, match="JSON object"):
        parse_card("[]")


def test_max_age() -> None:
    assert max_age("public, max-age=300") == 300
    assert max_age("max-age=60, must-revalidate") == 60
    assert max_age("no-cache, max-age=60") == 0
    assert max_age("no-store") == -1
    assert max_age(None) == 0
    assert max_age("s-maxage=5") == 0


class Server:
    """A scripted card endpoint: counts requests and honours If-None-Match."""

    def __init__(self, cache_control: str | None = "max-age=60", etag: str | None = '"v1"') -> None:
        self.cache_control = cache_control
        self.etag = etag
        self.requests: list[httpx.Request] = []
        self.body = json.dumps(CARD)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        headers = {}
        if self.cache_control:
            headers["cache-control"] = self.cache_control
        if self.etag:
            headers["etag"] = self.etag
            if request.headers.get("if-none-match") == self.etag:
                return httpx.Response(304, headers=headers)
        return httpx.Response(200, headers=headers, text=self.body)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_max_age_then_etag_revalidation() -> None:
    server, clock = Server(), Clock()
    async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as http:
        resolver = CardResolver(http, clock=clock)
        first = await resolver.get("https://agent.example")
        assert first.name == "echo"
        assert str(server.requests[0].url) == "https://agent.example/.well-known/agent-card.json"
        clock.now = 59
        first.name = "mutated by the caller"
        assert (await resolver.get("https://agent.example")).name == "echo"
        assert len(server.requests) == 1  # fresh: served from memory
        clock.now = 61
        again = await resolver.get("https://agent.example")
        assert len(server.requests) == 2  # stale: revalidated
        assert server.requests[1].headers["if-none-match"] == '"v1"'
        assert again.name == "echo"  # the 304 reused the cached card
        clock.now = 100
        await resolver.get("https://agent.example")
        assert len(server.requests) == 2  # the 304's max-age refreshed the entry


async def test_no_cache_and_no_store() -> None:
    server, clock = Server(cache_control="no-cache"), Clock()
    async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as http:
        resolver = CardResolver(http, clock=clock)
        await resolver.get("https://a.example")
        await resolver.get("https://a.example")
        assert server.requests[1].headers["if-none-match"] == '"v1"'
    server = Server(cache_control="no-store")
    async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as http:
        resolver = CardResolver(http, clock=clock)
        await resolver.get("https://a.example")
        await resolver.get("https://a.example")
        assert "if-none-match" not in server.requests[1].headers


async def test_http_failures() -> None:
    def not_found(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404)

    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    async with httpx.AsyncClient(transport=httpx.MockTransport(not_found)) as http:
        with pytest.raises(AgentCardError, match="HTTP 404"):
            await CardResolver(http).get("https://a.example")
    async with httpx.AsyncClient(transport=httpx.MockTransport(refused)) as http:
        with pytest.raises(UnavailableError):
            await CardResolver(http).get("https://a.example")


def test_the_demo_card_has_a_skill_per_keyword_and_says_which_makes_no_task() -> None:
    card = demo_card("127.0.0.1:50051")
    skills = {skill.id: skill for skill in card.skills}
    assert set(skills) == {"echo", "ask", "chunks", "reply", "fail", "slow", "crash", "spend"}
    for keyword, skill in skills.items():
        if keyword != "echo":
            assert skill.examples[0].split()[0] == keyword
    assert "no task" in skills["reply"].description and "no task" in card.description


CARD_KEY = Ed25519PrivateKey.generate()
CARD_KEYS = KeySet.of_private_keys({"card-1": CARD_KEY})


@pytest.mark.parametrize("v03", [False, True], ids=["1.0", "with 0.3 fields"])
def test_the_served_card_carries_signatures_over_what_it_serves(v03: bool) -> None:
    serving = Serving(
        "127.0.0.1:1",
        http_url="http://127.0.0.1:2",
        v03=True,
        security=BearerTokens({"t": "alice"}).card_security(),
    )
    card = finalize_card(demo_card("127.0.0.1:1"), serving)
    card.skills.add(id="bare", name="Bare", description="no tags")  # tags: REQUIRED, empty
    signed = sign_card(card, CARD_KEY, "card-1")
    body = to_json(signed, v03=v03, signer=(CARD_KEY, "card-1"))
    document = json.loads(body)
    if v03:
        with pytest.raises(json_format.ParseError):
            json_format.Parse(body, a2a_pb2.AgentCard())
    else:
        json_format.Parse(body, a2a_pb2.AgentCard())  # strict 1.0
    # A verifier that checks the JCS of the document it received, without `signatures`.
    served = canonicalize({k: v for k, v in document.items() if k != "signatures"})
    tokens = [f"{s['protected']}..{s['signature']}" for s in document["signatures"]]
    assert any(_verifies(token, served) for token in tokens)
    # A verifier that parses the card into 1.0's AgentCard first (dropping what 1.0 lacks).
    parsed = json_format.Parse(body, a2a_pb2.AgentCard(), ignore_unknown_fields=True)
    assert verify_card(parsed, CARD_KEYS) == "card-1"
    assert len(tokens) == (2 if v03 else 1)  # with 0.3 fields: one signature for each reading


def _verifies(token: str, payload: bytes) -> bool:
    try:
        verify_detached(token, payload, CARD_KEYS, now=time.time())
    except SignatureError:
        return False
    return True
