"""Token tables from a file and the environment, the bearer authenticator, and what the
authenticators and their combinations state on the card and read from a call."""

from __future__ import annotations

from pathlib import Path

import pytest

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.trust.auth import (
    AllOf,
    AnyOf,
    AuthenticationError,
    BearerTokens,
    CardSecurity,
    ClientCertificates,
    ForwardedClientCert,
    Presented,
    load_tokens,
)
from a2a_grpc.server.trust.mesh import trusted_networks


def test_tokens_from_environment_and_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text('{"t-file": "carol", "t-both": "from-file"}')
    tokens = load_tokens(str(path), {"A2A_GRPC_TOKENS": "t-env=alice, t-both=from-env"})
    assert tokens == {"t-env": "alice", "t-both": "from-file", "t-file": "carol"}
    assert load_tokens(None, {}) == {}


@pytest.mark.parametrize(
    ("content", "env", "message"),
    [
        ('["not", "a", "map"]', "", "expected"),
        ('{"token": 5}', "", "expected"),
        ("{broken", "", "--auth-tokens"),
        (None, "no-equals-sign", "A2A_GRPC_TOKENS"),
    ],
)
def test_bad_token_tables(tmp_path: Path, content: str | None, env: str, message: str) -> None:
    path = None
    if content is not None:
        file = tmp_path / "tokens.json"
        file.write_text(content)
        path = str(file)
    with pytest.raises(ValueError, match=message):
        load_tokens(path, {"A2A_GRPC_TOKENS": env})


def test_bearer_authentication() -> None:
    auth = AnyOf((BearerTokens({"s3cret": "alice"}),))
    assert auth.authenticate(Presented((("authorization", "Bearer s3cret"),))) == "alice"
    assert auth.authenticate(Presented((("authorization", "bearer  s3cret "),))) == "alice"
    for metadata in ((), (("authorization", "Bearer nope"),), (("authorization", "Basic x"),)):
        with pytest.raises(AuthenticationError):
            auth.authenticate(Presented(metadata))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{}", "names no token"),
        ("", "not JSON"),
        ("  \n", "not JSON"),
    ],
)
def test_a_token_file_without_tokens_fails_closed(
    tmp_path: Path, content: str, message: str
) -> None:
    file = tmp_path / "tokens.json"
    file.write_text(content)
    with pytest.raises(ValueError, match=message):
        load_tokens(str(file), {})


def test_unreadable_token_file_and_empty_environment_entries(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--auth-tokens"):
        load_tokens(str(tmp_path / "missing.json"), {})
    with pytest.raises(ValueError, match="names no token"):
        load_tokens(None, {"A2A_GRPC_TOKENS": " , "})
    assert load_tokens(None, {"A2A_GRPC_TOKENS": "  "}) == {}  # blank counts as unset


def test_all_of_needs_every_credential() -> None:
    auth = AllOf((BearerTokens({"s3cret": "alice"}), ClientCertificates()))
    certificate = {"x509_common_name": [b"svc"]}
    token = (("authorization", "Bearer s3cret"),)
    assert auth.authenticate(Presented(token, certificate)) == "alice"
    with pytest.raises(AuthenticationError, match="both"):
        auth.authenticate(Presented((), certificate))
    with pytest.raises(AuthenticationError, match="both"):
        auth.authenticate(Presented(token))


def _scheme(description: str) -> a2a_pb2.SecurityScheme:
    scheme = a2a_pb2.SecurityScheme()
    scheme.api_key_security_scheme.description = description
    return scheme


def test_card_security_combines_as_the_checks_do() -> None:
    a, b, c = (CardSecurity.of(name, _scheme(name)) for name in "abc")
    either = CardSecurity.any_of((a, b))
    assert list(either.schemes) == ["a", "b"] and either.requirements == (("a",), ("b",))
    both = CardSecurity.all_of((either, c, CardSecurity()))  # one that asks nothing: left out
    assert list(both.schemes) == ["a", "b", "c"]
    assert both.requirements == (("a", "c"), ("b", "c"))
    assert CardSecurity.all_of((CardSecurity(), CardSecurity())) == CardSecurity()
    assert CardSecurity.any_of((a, a)).schemes == a.schemes  # the same scheme twice is one
    with pytest.raises(ValueError, match="different security schemes 'a'"):
        CardSecurity.any_of((a, CardSecurity.of("a", _scheme("another"))))


def test_the_configured_authenticators_state_their_schemes() -> None:
    tokens, certificates = BearerTokens({"s3cret": "alice"}), ClientCertificates()
    assert AllOf((tokens, certificates)).card_security().requirements == (("bearer", "mtls"),)
    assert AnyOf((tokens, certificates)).card_security().requirements == (("bearer",), ("mtls",))
    forwarded_only = ClientCertificates(on_card=False)
    sidecar = ForwardedClientCert(AnyOf((tokens, forwarded_only)), trusted_networks(()))
    assert sidecar.card_security() == tokens.card_security()
    assert list(sidecar.headers) == ["authorization", "x-forwarded-client-cert"]
    assert list(AllOf((tokens, certificates)).headers) == ["authorization"]
