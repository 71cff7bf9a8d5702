"""Token tables from a file and the environment, and the bearer authenticator."""

from __future__ import annotations

from pathlib import Path

import pytest

from a2a_grpc.server.trust.auth import (
    AllOf,
    AnyOf,
    AuthenticationError,
    BearerTokens,
    ClientCertificates,
    Presented,
    load_tokens,
)


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
