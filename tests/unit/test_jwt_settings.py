"""Bearer JWTs without a network: the settings, the card's schemes, the shapes of tokens and key
sets, and how `caller_of` waits for an authenticator that must fetch first."""

from __future__ import annotations

import json

import pytest

from a2a_grpc.server.card import Serving, demo_card, finalize_card
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.trust.auth import (
    AllOf,
    AuthenticationError,
    AuthenticationPending,
    BearerTokens,
    ClientCertificates,
    Presented,
    caller_of,
)
from a2a_grpc.server.trust.oidc import JwtBearer, looks_like_jwt, parse_jwks

RSA_JWK = {
    "kty": "RSA",
    "kid": "r",
    "n": "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboI"
    "RROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7sv"
    "lJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQ"
    "hrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw",
    "e": "AQAB",
}


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"jwt_audience": "a"}, "jwt_audience is for JWTs"),
        ({"oidc_issuer": "https://idp"}, "JWTs need jwt_audience"),
        ({"jwks": "keys.json", "jwt_audience": "a"}, "jwks needs jwt_issuer"),
        (
            {"oidc_issuer": "https://idp", "jwks": "k.json", "jwt_audience": "a"},
            "choose one",
        ),
        ({"oidc_issuer": "idp.example", "jwt_audience": "a"}, "must be an http(s) URL"),
        (
            {"oidc_issuer": "https://idp", "jwt_issuer": "x", "jwt_audience": "a"},
            "jwt_issuer is for jwks",
        ),
        (
            {"oidc_issuer": "https://idp", "jwt_audience": "a", "jwt_algorithms": ("HS256",)},
            "asymmetric only",
        ),
        (
            {"oidc_issuer": "https://idp", "jwt_audience": "a", "jwt_principal_claim": ""},
            "must name a claim",
        ),
        ({"jwks_timeout": 0}, "jwks_timeout must be positive"),
        ({"jwt_leeway": 3600}, "jwt_leeway must be between"),
    ],
)
def test_jwt_settings_that_cannot_check_tokens(settings: dict[str, object], problem: str) -> None:
    with pytest.raises(ValueError) as caught:
        ServerConfig(**settings)  # type: ignore[arg-type]
    assert problem in str(caught.value)


def test_static_tokens_cannot_take_the_principals_of_certificates_or_jwts() -> None:
    for principal in ("jwt:alice", "cert:alice"):
        with pytest.raises(ValueError, match="may not start with cert: or jwt:"):
            BearerTokens({"t": principal})


def test_the_card_declares_oidc_or_bearer_jwt_each_with_the_certificate() -> None:
    jwts = JwtBearer(
        issuer="https://idp", audience="me", oidc=True, static=BearerTokens({"t": "alice"})
    )
    both = AllOf((jwts, ClientCertificates()))
    card = finalize_card(
        demo_card("127.0.0.1:1"), Serving("127.0.0.1:1", security=both.card_security())
    )
    oidc = card.security_schemes["oidc"].open_id_connect_security_scheme
    assert oidc.open_id_connect_url == "https://idp/.well-known/openid-configuration"
    assert [sorted(r.schemes) for r in card.security_requirements] == [
        ["bearer", "mtls"],
        ["mtls", "oidc"],
    ]
    jwks = JwtBearer(issuer="https://idp", audience="me", oidc=False, jwks="keys.json")
    card = finalize_card(
        demo_card("127.0.0.1:1"), Serving("127.0.0.1:1", security=jwks.card_security())
    )
    assert card.security_schemes["jwt"].http_auth_security_scheme.bearer_format == "JWT"
    assert [sorted(r.schemes) for r in card.security_requirements] == [["jwt"]]


def test_what_counts_as_a_jwt() -> None:
    assert looks_like_jwt("eyJhbGciOiJSUzI1NiJ9.e30.c2ln")  # {"alg":"RS256"}.{}.sig
    for token in ("s3cret", "a.b.c", "e30.e30.c2ln", "eyJhbGciOiJSUzI1NiJ9.e30"):
        assert not looks_like_jwt(token), token


def test_a_jwks_keeps_only_asymmetric_signing_keys() -> None:
    keys = parse_jwks(
        '{"keys": [{"kty": "oct", "kid": "h", "k": "c2VjcmV0"}, '
        + f"{json.dumps(RSA_JWK)}, "
        + '{"kty": "RSA", "kid": "enc", "use": "enc", "n": "AQ", "e": "AQAB"}]}',
        "test",
    )
    assert list(keys) == ["r"]
    with pytest.raises(ValueError, match="no usable key"):
        parse_jwks('{"keys": [{"kty": "oct", "kid": "h", "k": "c2VjcmV0"}]}', "test")
    with pytest.raises(ValueError, match="expected a JWKS"):
        parse_jwks("[]", "test")


class Fetching:
    """An authenticator that is pending `pending` times, then answers `principal`."""

    def __init__(self, pending: int, principal: str = "jwt:a") -> None:
        self.pending, self.principal, self.waits = pending, principal, 0

    async def wait(self) -> None:
        self.waits += 1

    def authenticate(self, presented: Presented) -> str | None:
        if self.pending:
            self.pending -= 1
            raise AuthenticationPending("unknown key id 'x'", self.wait)
        return self.principal


async def test_caller_of_waits_once_for_a_pending_authenticator() -> None:
    once = Fetching(1)
    assert await caller_of(once, Presented()) == "jwt:a" and once.waits == 1
    twice = Fetching(2)
    refused = await caller_of(twice, Presented())
    assert isinstance(refused, AuthenticationError) and str(refused) == "unknown key id 'x'"
    assert twice.waits == 1
