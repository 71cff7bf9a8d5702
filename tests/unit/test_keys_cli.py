"""`a2a-grpc keys new`: a key pair written without hand-work, never over an existing key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from a2a_grpc.cli.keys import main as keys_main
from a2a_grpc.cli.keys import new_key
from a2a_grpc.core.jose import KeySet, load_jwks, load_private_key


def test_keys_new_writes_a_pair_and_adds_to_an_existing_jwks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert new_key("k1", "EdDSA", None, None) == (Path("k1.pem"), Path("k1.jwks.json"))
    assert (tmp_path / "k1.pem").stat().st_mode & 0o777 == 0o600
    jwks = tmp_path / "k1.jwks.json"
    new_key("k2", "ES256", "two.pem", str(jwks))
    assert sorted(load_jwks(jwks)) == ["k1", "k2"]
    for kid, pem in (("k1", "k1.pem"), ("k2", "two.pem")):
        private = load_private_key((tmp_path / pem).read_bytes())
        published = [k for k in json.loads(jwks.read_text())["keys"] if k["kid"] == kid]
        assert KeySet.of_private_keys({kid: private}).to_jwks()["keys"] == published


def test_keys_new_refuses_to_overwrite_or_duplicate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jwks = str(tmp_path / "a.jwks.json")
    assert keys_main(["new", "--kid", "k1", "--key", str(tmp_path / "k1.pem"), "--jwks", jwks]) == 0
    assert keys_main(["new", "--kid", "k9", "--key", str(tmp_path / "k1.pem"), "--jwks", jwks]) == 2
    assert "exists" in capsys.readouterr().err
    assert keys_main(["new", "--kid", "k1", "--key", str(tmp_path / "k2.pem"), "--jwks", jwks]) == 2
    assert "already holds a key with kid 'k1'" in capsys.readouterr().err
    assert not (tmp_path / "k2.pem").exists()
    (tmp_path / "bad.json").write_text("[]")
    bad = ["new", "--kid", "k3", "--key", str(tmp_path / "k3.pem"), "--jwks"]
    assert keys_main([*bad, str(tmp_path / "bad.json")]) == 2
    assert "JWKS" in capsys.readouterr().err
