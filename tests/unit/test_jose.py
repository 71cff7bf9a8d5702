"""JWS with detached payload (EdDSA, ES256) on PyJWT, key sets, JWKS and PEM loading."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from a2a_grpc.core.jose import (
    _JWS,
    DEFAULT_LEEWAY_S,
    KeyFormatError,
    KeySet,
    PrivateKey,
    SignatureError,
    b64url_decode,
    b64url_encode,
    load_jwks,
    load_private_key,
    public_jwk,
    sign_detached,
    verify_detached,
)

NOW = 1_700_000_000.0
PAYLOAD = b'{"hello":"w\xc3\xb6rld"}'


def ed25519() -> PrivateKey:
    return Ed25519PrivateKey.generate()


def p256() -> PrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


KEYS = pytest.mark.parametrize(("make_key", "alg"), [(ed25519, "EdDSA"), (p256, "ES256")])


def _token(header: dict[str, Any], signature: bytes = b"\x00" * 64) -> str:
    return f"{b64url_encode(json.dumps(header).encode())}..{b64url_encode(signature)}"


@KEYS
def test_round_trip(make_key: Callable[[], PrivateKey], alg: str) -> None:
    key = make_key()
    token = sign_detached(PAYLOAD, key, "k1", {"iat": int(NOW), "x-extra": "yes"})
    header_part, payload_part, signature_part = token.split(".")
    assert payload_part == ""
    assert len(b64url_decode(signature_part)) == 64  # ES256: raw r || s, not DER
    header = verify_detached(token, PAYLOAD, KeySet({"k1": key.public_key()}), now=NOW)
    assert header == {"alg": alg, "kid": "k1", "typ": "JOSE", "iat": int(NOW), "x-extra": "yes"}
    assert json.loads(b64url_decode(header_part)) == header


@KEYS
def test_other_payload_is_a_bad_signature(make_key: Callable[[], PrivateKey], alg: str) -> None:
    key = make_key()
    token = sign_detached(PAYLOAD, key, "k1")
    with pytest.raises(SignatureError, match="bad signature"):
        verify_detached(token, PAYLOAD + b" ", KeySet.of_private_keys({"k1": key}), now=NOW)


def test_another_key_with_the_same_kid_is_a_bad_signature() -> None:
    token = sign_detached(PAYLOAD, ed25519(), "k1")
    with pytest.raises(SignatureError, match="bad signature"):
        verify_detached(token, PAYLOAD, KeySet.of_private_keys({"k1": ed25519()}), now=NOW)


def test_unknown_kid() -> None:
    token = sign_detached(PAYLOAD, ed25519(), "who")
    with pytest.raises(SignatureError, match="unknown key id 'who'"):
        verify_detached(token, PAYLOAD, KeySet.of_private_keys({"k1": ed25519()}), now=NOW)


def test_alg_must_fit_the_key() -> None:
    keyset = KeySet.of_private_keys({"ec": p256(), "ed": ed25519()})
    token = sign_detached(PAYLOAD, ed25519(), "ec")
    with pytest.raises(SignatureError, match="alg 'EdDSA' is not allowed for key 'ec'"):
        verify_detached(token, PAYLOAD, keyset, now=NOW)
    for alg in ("none", "HS256", "ES256"):
        with pytest.raises(SignatureError, match=f"alg '{alg}' is not allowed for key 'ed'"):
            verify_detached(_token({"alg": alg, "kid": "ed"}), PAYLOAD, keyset, now=NOW)


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        ("abc", "three dot-separated parts"),
        ("a.b.c.d", "three dot-separated parts"),
        (f"{b64url_encode(b'{}')}.{b64url_encode(PAYLOAD)}.AAAA", "must be detached"),
        ("!!..AAAA", "header is not base64url JSON"),
        (f"{b64url_encode(b'not json')}..AAAA", "header is not base64url JSON"),
        (f"{b64url_encode(b'[1]')}..AAAA", "not a JSON object"),
        (_token({"alg": "EdDSA"}), 'needs string "alg" and "kid"'),
        (_token({"alg": "EdDSA", "kid": 7}), 'needs string "alg" and "kid"'),
        (_token({"alg": "EdDSA", "kid": "k1", "crit": ["b64"]}), "critical header"),
        (_token({"alg": "EdDSA", "kid": "k1", "b64": False}), "unencoded payload"),
        (f"{b64url_encode(b'[' * 100_000)}..AAAA", "header is not base64url JSON"),
        # Base64url whose last character carries non-zero unused bits: refused, not re-read.
        (_token({"alg": "EdDSA", "kid": "k1"})[:-1] + "B", "malformed JWS"),
        (_token({"alg": "EdDSA", "kid": "k1"}).replace("..", "..=="), "signature is not base64"),
    ],
)
def test_malformed_tokens(token: str, reason: str) -> None:
    keyset = KeySet.of_private_keys({"k1": ed25519()})
    with pytest.raises(SignatureError, match=reason):
        verify_detached(token, PAYLOAD, keyset, now=NOW)


def test_es256_signature_of_the_wrong_length_is_bad() -> None:
    key = p256()
    header_part = sign_detached(PAYLOAD, key, "k1").split(".")[0]
    token = f"{header_part}..{b64url_encode(b'x' * 70)}"
    with pytest.raises(SignatureError, match="bad signature"):
        verify_detached(token, PAYLOAD, KeySet.of_private_keys({"k1": key}), now=NOW)


def test_validity_window_with_leeway() -> None:
    key = ed25519()
    keyset = KeySet.of_private_keys({"k1": key})
    token = sign_detached(PAYLOAD, key, "k1", {"iat": NOW, "exp": NOW + 60})
    verify_detached(token, PAYLOAD, keyset, now=NOW + 60 + DEFAULT_LEEWAY_S)
    with pytest.raises(SignatureError, match="expired"):
        verify_detached(token, PAYLOAD, keyset, now=NOW + 61 + DEFAULT_LEEWAY_S)
    with pytest.raises(SignatureError, match="expired"):
        verify_detached(token, PAYLOAD, keyset, now=NOW + 61, leeway=0)
    verify_detached(token, PAYLOAD, keyset, now=NOW - DEFAULT_LEEWAY_S)
    with pytest.raises(SignatureError, match="not yet valid: iat"):
        verify_detached(token, PAYLOAD, keyset, now=NOW - DEFAULT_LEEWAY_S - 1)
    later = sign_detached(PAYLOAD, key, "k1", {"nbf": NOW + 100})
    with pytest.raises(SignatureError, match="not yet valid: nbf"):
        verify_detached(later, PAYLOAD, keyset, now=NOW)
    odd = sign_detached(PAYLOAD, key, "k1", {"exp": "tomorrow"})
    with pytest.raises(SignatureError, match="'exp' is not a number"):
        verify_detached(odd, PAYLOAD, keyset, now=NOW)


def test_only_eddsa_and_es256_are_known_to_the_jws_library() -> None:
    # alg confusion needs the library to know the header's alg: `none`, HS256 (a public key's
    # bytes as an HMAC secret) and RS256 are not registered at all.
    assert sorted(_JWS.get_algorithms()) == ["ES256", "EdDSA"]
    key = ed25519()
    secret = key.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    forged = jwt.api_jws.encode(PAYLOAD, secret, algorithm="HS256", headers={"kid": "k1"})
    header_part, _, signature_part = forged.split(".")
    with pytest.raises(SignatureError, match="alg 'HS256' is not allowed"):
        verify_detached(
            f"{header_part}..{signature_part}",
            PAYLOAD,
            KeySet.of_private_keys({"k1": key}),
            now=NOW,
        )


def test_the_header_is_canonical_json() -> None:
    token = sign_detached(
        PAYLOAD, ed25519(), "k1", {"x-\u00e9": "\u20ac", "x-n": 1e21, "\U0001f600": 1}
    )
    header = b64url_decode(token.split(".")[0])
    assert (
        header
        == (
            '{"alg":"EdDSA","kid":"k1","typ":"JOSE","x-n":1e+21,"x-\u00e9":"\u20ac","\U0001f600":1}'
        ).encode()
    )


def test_time_is_checked_only_once_the_signature_holds() -> None:
    key = ed25519()
    token = sign_detached(PAYLOAD, key, "k1", {"exp": NOW - 3600})
    with pytest.raises(SignatureError, match="bad signature"):
        verify_detached(token, b"other", KeySet.of_private_keys({"k1": key}), now=NOW)


def test_reserved_header_members_cannot_be_overridden() -> None:
    for name in ("alg", "kid", "typ", "crit", "b64"):
        with pytest.raises(ValueError, match=name):
            sign_detached(PAYLOAD, ed25519(), "k1", {name: "x"})


def test_unsupported_signing_keys() -> None:
    with pytest.raises(KeyFormatError, match="P-256"):
        sign_detached(PAYLOAD, ec.generate_private_key(ec.SECP384R1()), "k1")


def test_rfc8037_ed25519_public_key_encoding() -> None:
    # RFC 8037 Appendix A.1/A.2: the private key's "d" and its public "x".
    d = b64url_decode("nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A")
    jwk = public_jwk(Ed25519PrivateKey.from_private_bytes(d), "rfc")
    assert jwk == {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
        "kid": "rfc",
        "use": "sig",
        "alg": "EdDSA",
    }


def test_jwks_round_trip_through_a_file(tmp_path: Path) -> None:
    keys = {"ed": ed25519(), "ec": p256()}
    keyset = KeySet.of_private_keys(keys)
    jwks = keyset.to_jwks()
    assert [(k["kid"], k["kty"], k["alg"]) for k in jwks["keys"]] == [
        ("ed", "OKP", "EdDSA"),
        ("ec", "EC", "ES256"),
    ]
    assert all("d" not in k for k in jwks["keys"])
    path = tmp_path / "keys.jwks"
    path.write_text(json.dumps(jwks))
    loaded = load_jwks(path)
    assert loaded.to_jwks() == jwks
    assert load_jwks(str(path)).to_jwks() == jwks
    assert load_jwks(jwks).to_jwks() == jwks
    for kid, key in keys.items():
        token = sign_detached(PAYLOAD, key, kid)
        assert verify_detached(token, PAYLOAD, loaded, now=NOW)["kid"] == kid


def _ec_jwk(**changes: Any) -> dict[str, Any]:
    return {**public_jwk(p256(), "ec"), **changes}


def _ed_jwk(**changes: Any) -> dict[str, Any]:
    return {**public_jwk(ed25519(), "ed"), **changes}


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        ({"keys": {}}, '"keys" array'),
        ({"keys": ["x"]}, "#0 is not a JSON object"),
        ({"keys": [_ed_jwk(kid=None)]}, '#0 has no "kid"'),
        ({"keys": [_ed_jwk(), _ed_jwk()]}, "two keys with kid 'ed'"),
        ({"keys": [{"kty": "RSA", "kid": "r", "n": "AQAB", "e": "AQAB"}]}, "kty 'RSA'"),
        ({"keys": [{"kty": "oct", "kid": "h", "k": "c2VjcmV0"}]}, "private key material"),
        ({"keys": [_ed_jwk(crv="X25519")]}, "OKP curve 'X25519'"),
        ({"keys": [_ec_jwk(crv="P-384")]}, "EC curve 'P-384'"),
        ({"keys": [_ed_jwk(x="AAAA")]}, '"x" is 3 bytes, not 32'),
        ({"keys": [_ed_jwk(x="***")]}, '"x" is not base64url'),
        ({"keys": [_ec_jwk(y=None)]}, '"y" is missing'),
        ({"keys": [_ec_jwk(y=b64url_encode(b"\x01" * 32))]}, "not on P-256"),
        ({"keys": [_ed_jwk(d="AAAA")]}, "private key material"),
        ({"keys": [_ed_jwk(use="enc")]}, "use 'enc'"),
        ({"keys": [_ed_jwk(alg="ES256")]}, "alg 'ES256' does not fit"),
    ],
)
def test_bad_jwks(document: Any, reason: str) -> None:
    with pytest.raises(KeyFormatError, match=reason):
        load_jwks(document)


def test_unreadable_jwks_files(tmp_path: Path) -> None:
    with pytest.raises(KeyFormatError, match="cannot read JWKS"):
        load_jwks(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(KeyFormatError, match="cannot read JWKS"):
        load_jwks(tmp_path / "bad.json")
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(KeyFormatError, match='"keys" array'):
        load_jwks(tmp_path / "list.json")


def test_key_sets_hold_supported_public_keys_only() -> None:
    private = ed25519()
    with pytest.raises(KeyFormatError, match="private key"):
        KeySet({"k": private})  # type: ignore[dict-item]
    with pytest.raises(KeyFormatError, match="secp384r1"):
        KeySet({"k": ec.generate_private_key(ec.SECP384R1()).public_key()})
    with pytest.raises(KeyFormatError, match="non-empty string"):
        KeySet({"": private.public_key()})
    keyset = KeySet({"k": private.public_key()})
    assert list(keyset) == ["k"] and len(keyset) == 1 and "k" in keyset


@KEYS
def test_private_keys_from_pem(make_key: Callable[[], PrivateKey], alg: str) -> None:
    key = make_key()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    loaded = load_private_key(pem)
    token = sign_detached(PAYLOAD, loaded, "k1")
    verify_detached(token, PAYLOAD, KeySet.of_private_keys({"k1": key}), now=NOW)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pw"),
    )
    assert public_jwk(load_private_key(encrypted, b"pw"), "k") == public_jwk(key, "k")
    with pytest.raises(KeyFormatError, match="cannot load"):
        load_private_key(encrypted)


def test_bad_private_key_pems() -> None:
    with pytest.raises(KeyFormatError, match="cannot load"):
        load_private_key(b"-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n")
    p384 = ec.generate_private_key(ec.SECP384R1()).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    with pytest.raises(KeyFormatError, match="secp384r1"):
        load_private_key(p384)
