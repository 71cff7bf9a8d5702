"""Bearer JWTs from an OpenID Connect issuer served by a real HTTP server in the test.

The issuer (aiohttp) serves its discovery document and its JWKS, counting the JWKS fetches;
its keys are made with `cryptography` and change mid-run. The tokens it signs authenticate
over gRPC, JSON-RPC and HTTP+JSON, their principal (`jwt:<azp>`) scopes the tasks, and every
token that must not pass is refused with UNAUTHENTICATED saying which check failed.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import grpc
import jwt
import pytest
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.app import StartupError
from tests.integration.conftest import Factory, Harness, send_request

AUDIENCE = "https://agents.example/billing"


class Issuer:
    """An OpenID Connect issuer: discovery, a JWKS (whose keys a test may change) and tokens."""

    def __init__(self) -> None:
        self.keys: dict[str, tuple[Any, str]] = {}  # kid -> (private key, alg)
        self.published: list[str] = []  # the kids the JWKS lists
        self.jwks_hits = 0
        self.fetched = asyncio.Event()
        self.url = ""
        self.claimed = ""  # the issuer the discovery document names ("": the right one)
        self.cache_control = "max-age=300"
        self.jwks_status = 200
        self._runner: web.AppRunner | None = None

    def add_key(self, kid: str, alg: str = "RS256", *, publish: bool = True) -> None:
        key: Any
        if alg in ("RS256", "PS256"):
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        elif alg == "ES256":
            key = ec.generate_private_key(ec.SECP256R1())
        else:
            key = ed25519.Ed25519PrivateKey.generate()
        self.keys[kid] = (key, alg)
        if publish:
            self.published.append(kid)

    def jwk(self, kid: str) -> dict[str, Any]:
        key, alg = self.keys[kid]
        algorithm = {"RS256": RSAAlgorithm, "PS256": RSAAlgorithm, "ES256": ECAlgorithm}.get(
            alg, OKPAlgorithm
        )
        jwk: dict[str, Any] = algorithm.to_jwk(key.public_key(), as_dict=True)
        return {**jwk, "kid": kid, "use": "sig", "alg": alg}

    def token(self, kid: str = "k1", *, alg: str | None = None, **claims: Any) -> str:
        key, key_alg = self.keys[kid]
        now = int(time.time())
        payload = {"iss": self.url, "aud": AUDIENCE, "iat": now, "exp": now + 300, **claims}
        payload = {name: value for name, value in payload.items() if value is not None}
        return jwt.encode(payload, key, algorithm=alg or key_alg, headers={"kid": kid})

    def public_pem(self, kid: str) -> bytes:
        key = self.keys[kid][0]
        return key.public_key().public_bytes(  # type: ignore[no-any-return]
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/.well-known/openid-configuration", self._discovery)
        app.router.add_get("/jwks", self._jwks)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"

    async def _discovery(self, request: web.Request) -> web.Response:
        issuer = self.claimed or self.url
        return web.json_response({"issuer": issuer, "jwks_uri": self.url + "/jwks"})

    async def _jwks(self, request: web.Request) -> web.Response:
        self.jwks_hits += 1
        self.fetched.set()
        if self.jwks_status != 200:
            return web.Response(status=self.jwks_status)
        body = {"keys": [self.jwk(kid) for kid in self.published] + [{"kty": "oct", "k": "c2"}]}
        return web.json_response(body, headers={"Cache-Control": self.cache_control})

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture
async def issuer() -> AsyncIterator[Issuer]:
    made = Issuer()
    made.add_key("k1")
    await made.start()
    yield made
    await made.stop()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def oidc_server(make_server: Factory, issuer: Issuer, **config: Any) -> Harness:
    config.setdefault("http_port", 0)
    return await make_server(
        oidc_issuer=issuer.url, jwt_audience=AUDIENCE, jwt_principal_claim="azp", **config
    )


def base64url(data: bytes) -> bytes:
    return jwt.utils.base64url_encode(data)


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


async def refusal(harness: Harness, token: str) -> str:
    """The UNAUTHENTICATED message a GetTask with `token` gets over gRPC."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id="t"), metadata=bearer(token))
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    details = caught.value.details() or ""
    assert token not in details
    return details


# -- tasks are scoped by the token's principal, over every binding ----------------------------


async def test_the_principal_scopes_tasks_over_grpc_jsonrpc_and_http_json(
    make_server: Factory, issuer: Issuer, http: aiohttp.ClientSession
) -> None:
    harness = await oidc_server(make_server, issuer)
    service_a, service_b = issuer.token(azp="service-a"), issuer.token(azp="service-b")
    sent = await harness.stub.SendMessage(send_request("hello"), metadata=bearer(service_a))
    task_id = sent.task.id
    got = await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=bearer(service_a))
    assert got.id == task_id
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=bearer(service_b))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND

    assert harness.running.http_server is not None
    base = harness.running.http_server.base_url
    for token, found in ((service_a, True), (service_b, False)):
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {token}"}
        async with http.get(f"{base}/tasks/{task_id}", headers=headers) as response:
            assert response.status == (200 if found else 404), await response.text()
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
        headers["Content-Type"] = "application/json"
        async with http.post(base + "/", data=json.dumps(body), headers=headers) as response:
            answer = await response.json()
        assert ("result" in answer) is found, answer

    # A task made over HTTP+JSON by B is B's alone.
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {service_b}"}
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    async with http.post(base + "/message:send", json={"message": message}, headers=headers) as r:
        assert r.status == 200, await r.text()
        b_task = (await r.json())["task"]["id"]
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id=b_task), metadata=bearer(service_a))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


async def test_refusals_over_http_say_which_check_failed(
    make_server: Factory, issuer: Issuer, http: aiohttp.ClientSession
) -> None:
    harness = await oidc_server(make_server, issuer)
    assert harness.running.http_server is not None
    base = harness.running.http_server.base_url
    expired = issuer.token(azp="a", exp=int(time.time()) - 3600)
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {expired}"}
    async with http.get(base + "/tasks/t", headers=headers) as response:
        text = await response.text()
        assert response.status == 401
    assert "expired" in text and expired not in text
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}}
    headers["Content-Type"] = "application/json"
    async with http.post(base + "/", data=json.dumps(body), headers=headers) as response:
        text = await response.text()
    assert "expired" in text and expired not in text


# -- what is refused, and why ------------------------------------------------------------------


async def test_each_refused_token_names_the_check_it_failed(
    make_server: Factory, issuer: Issuer
) -> None:
    issuer.add_key("unpublished", publish=False)
    harness = await oidc_server(make_server, issuer)
    now = int(time.time())
    public_pem = issuer.public_pem("k1")
    # HS256 keyed with the issuer's public key (which a JWKS publishes): the classic confusion.
    signing_input = b".".join(
        base64url(json.dumps(part).encode())
        for part in (
            {"alg": "HS256", "typ": "JWT", "kid": "k1"},
            {"iss": issuer.url, "aud": AUDIENCE, "exp": now + 60, "azp": "x"},
        )
    )
    mac = hmac.new(public_pem, signing_input, hashlib.sha256).digest()
    confused = (signing_input + b"." + base64url(mac)).decode()
    unsigned = jwt.encode(
        {"iss": issuer.url, "aud": AUDIENCE, "exp": now + 60, "azp": "x"},
        None,
        algorithm="none",
        headers={"kid": "k1"},
    )
    good = issuer.token(azp="a")
    header, _, signature = good.split(".")
    tampered = ".".join((header, base64url(b'{"azp":"b"}').decode(), signature))
    cases = {
        issuer.token(azp="a", exp=now - 3600): "expired",
        issuer.token(azp="a", aud="https://agents.example/other"): "wrong audience",
        issuer.token(azp="a", iss="https://evil.example"): "wrong issuer",
        issuer.token(azp="a", nbf=now + 3600): "not valid yet",
        # NumericDate only (RFC 7519 §2): PyJWT alone takes a numeric string or a boolean.
        issuer.token(azp="a", exp=str(now + 300)): "'exp' claim is not a number",
        issuer.token(azp="a", nbf=str(now - 60)): "'nbf' claim is not a number",
        issuer.token(azp="a", iat=str(now)): "'iat' claim is not a number",
        issuer.token(azp="a", iat=True): "'iat' claim is not a number",
        issuer.token(azp="a", exp=float("inf")): "the JWT is malformed",
        issuer.token(azp="a", exp=None): "no 'exp' claim",
        issuer.token(azp="a", aud=None): "no 'aud' claim",
        issuer.token(): "no 'azp' claim",
        issuer.token("unpublished", azp="a"): "unknown key id 'unpublished'",
        confused: "algorithm 'HS256' is not allowed",
        unsigned: "algorithm 'none' is not allowed",
        issuer.token(azp="a", alg="PS256"): "key 'k1' is for RS256, not PS256",
        tampered: "does not verify",
        "not-a-jwt": "not a JWT",
    }
    for token, check in cases.items():
        details = await refusal(harness, token)
        assert check in details, (check, details)
    sent = await harness.stub.SendMessage(send_request("hi"), metadata=bearer(good))
    assert sent.task.id


async def test_an_es256_key_verifies_no_rs256_token_and_no_ec_token_an_rsa_key(
    make_server: Factory, issuer: Issuer
) -> None:
    issuer.add_key("ec", "ES256")
    issuer.add_key("ed", "EdDSA")
    harness = await oidc_server(make_server, issuer, jwt_algorithms=("RS256", "ES256"))
    for kid in ("k1", "ec"):
        sent = await harness.stub.SendMessage(
            send_request("hi"), metadata=bearer(issuer.token(kid, azp="a"))
        )
        assert sent.task.id
    rsa_as_ec = jwt.encode(
        {"iss": issuer.url, "aud": AUDIENCE, "exp": int(time.time()) + 60, "azp": "a"},
        issuer.keys["ec"][0],
        algorithm="ES256",
        headers={"kid": "k1"},
    )
    assert "not a key for the JWT's algorithm ES256" in await refusal(harness, rsa_as_ec)
    assert "algorithm 'EdDSA' is not allowed" in await refusal(harness, issuer.token("ed", azp="a"))


# -- keys: rotation, floods, the cache -----------------------------------------------------------


async def test_a_rotated_key_is_accepted_after_one_fetch_and_a_flood_costs_one(
    make_server: Factory, issuer: Issuer
) -> None:
    harness = await oidc_server(make_server, issuer, jwks_refresh_interval=3600)
    assert issuer.jwks_hits == 1  # at start
    await harness.stub.SendMessage(send_request("hi"), metadata=bearer(issuer.token(azp="a")))
    assert issuer.jwks_hits == 1  # cached (max-age=300)

    issuer.add_key("k2")  # the issuer rotates: k2 is published and signs from now on
    issuer.published.remove("k1")
    sent = await harness.stub.SendMessage(
        send_request("hi"), metadata=bearer(issuer.token("k2", azp="a"))
    )
    assert sent.task.id and issuer.jwks_hits == 2

    # Made-up key ids now: the next fetch is an hour away, so none is fetched for them.
    issuer.add_key("made-up", publish=False)
    details = await refusal(harness, issuer.token("made-up", azp="a"))
    assert "unknown key id 'made-up'" in details and "at most every 3600 s" in details
    assert issuer.jwks_hits == 2


async def test_a_flood_of_made_up_key_ids_costs_one_fetch(
    make_server: Factory, issuer: Issuer
) -> None:
    harness = await oidc_server(make_server, issuer, jwks_refresh_interval=3600)
    for n in range(20):
        issuer.add_key(f"made-up-{n}", publish=False)
    tokens = [issuer.token(f"made-up-{n}", azp="a") for n in range(20)]
    issuer.fetched.clear()
    results = await asyncio.gather(*(refusal(harness, token) for token in tokens))
    assert all("unknown key id 'made-up-" in details for details in results)
    assert issuer.jwks_hits == 2  # the one at start, one for the whole flood
    assert "unknown key id" in await refusal(harness, tokens[0])
    assert issuer.jwks_hits == 2


async def test_keys_dropped_by_the_issuer_stop_verifying_once_fetched_again(
    make_server: Factory, issuer: Issuer
) -> None:
    issuer.add_key("k2")
    harness = await oidc_server(make_server, issuer, jwks_refresh_interval=0)
    old = issuer.token("k1", azp="a")
    await harness.stub.SendMessage(send_request("hi"), metadata=bearer(old))
    issuer.published.remove("k1")
    issuer.add_key("k3")
    await harness.stub.SendMessage(send_request("hi"), metadata=bearer(issuer.token("k3", azp="a")))
    assert "unknown key id 'k1'" in await refusal(harness, old)


async def test_stale_keys_are_fetched_again_in_the_background(
    make_server: Factory, issuer: Issuer
) -> None:
    issuer.cache_control = "max-age=0"
    harness = await oidc_server(make_server, issuer, jwks_refresh_interval=0)
    assert issuer.jwks_hits == 1
    issuer.fetched.clear()
    # Served with the keys held; they are stale, so a fetch starts behind the call.
    await harness.stub.SendMessage(send_request("hi"), metadata=bearer(issuer.token(azp="a")))
    await asyncio.wait_for(issuer.fetched.wait(), 10)
    assert issuer.jwks_hits == 2


async def test_an_issuer_failing_later_keeps_the_keys_held(
    make_server: Factory, issuer: Issuer
) -> None:
    harness = await oidc_server(make_server, issuer)
    issuer.jwks_status = 503
    issuer.add_key("new", publish=False)
    details = await refusal(harness, issuer.token("new", azp="a"))
    assert "unknown key id 'new'" in details and "HTTP 503" in details
    sent = await harness.stub.SendMessage(
        send_request("hi"), metadata=bearer(issuer.token(azp="a"))
    )
    assert sent.task.id


# -- static tokens, the card, start-up ------------------------------------------------------------


async def test_static_tokens_and_jwts_share_the_header_with_distinct_principals(
    make_server: Factory, issuer: Issuer
) -> None:
    harness = await oidc_server(make_server, issuer, tokens={"s3cret": "service-a"})
    jwt_a = issuer.token(azp="service-a")
    sent = await harness.stub.SendMessage(send_request("hi"), metadata=bearer("s3cret"))
    with pytest.raises(grpc.aio.AioRpcError) as caught:  # jwt:service-a is not service-a
        await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id=sent.task.id), metadata=bearer(jwt_a))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert "not valid" in await refusal(harness, "wrong-static-token")


async def test_the_card_declares_the_openid_connect_scheme(
    make_server: Factory, issuer: Issuer, http: aiohttp.ClientSession
) -> None:
    harness = await oidc_server(make_server, issuer, tokens={"s3cret": "alice"})
    assert harness.running.http_server is not None
    url = harness.running.http_server.base_url + "/.well-known/agent-card.json"
    async with http.get(url) as response:
        card = await response.json()
    assert card["securitySchemes"]["oidc"] == {
        "openIdConnectSecurityScheme": {
            "openIdConnectUrl": issuer.url + "/.well-known/openid-configuration",
            "description": "bearer JWT from this OpenID Connect issuer",
        }
    }
    assert card["securityRequirements"] == [
        {"schemes": {"bearer": {}}},
        {"schemes": {"oidc": {}}},
    ]


async def test_a_jwks_file_takes_tokens_of_its_issuer_and_the_card_says_bearer_jwt(
    make_server: Factory, issuer: Issuer, tmp_path: Any, http: aiohttp.ClientSession
) -> None:
    keys = tmp_path / "jwks.json"
    keys.write_text(json.dumps({"keys": [issuer.jwk("k1")]}))
    harness = await make_server(
        jwks=str(keys), jwt_issuer=issuer.url, jwt_audience=AUDIENCE, http_port=0
    )
    sent = await harness.stub.SendMessage(
        send_request("hi"), metadata=bearer(issuer.token(sub="alice"))
    )
    assert sent.task.id
    assert issuer.jwks_hits == 0
    assert harness.running.http_server is not None
    url = harness.running.http_server.base_url + "/.well-known/agent-card.json"
    async with http.get(url) as response:
        card = await response.json()
    assert card["securitySchemes"] == {
        "jwt": {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}}
    }


async def test_an_issuer_that_cannot_be_reached_is_a_start_up_error(
    make_server: Factory, issuer: Issuer
) -> None:
    url = issuer.url
    await issuer.stop()
    with pytest.raises(StartupError, match="cannot check JWTs: --oidc-issuer: could not fetch"):
        await make_server(oidc_issuer=url, jwt_audience=AUDIENCE, jwks_timeout=2)


async def test_a_discovery_document_for_another_issuer_is_a_start_up_error(
    make_server: Factory, issuer: Issuer
) -> None:
    issuer.claimed = "https://idp.example"
    with pytest.raises(StartupError, match=r"names the issuer 'https://idp\.example'"):
        await make_server(oidc_issuer=issuer.url, jwt_audience=AUDIENCE)
