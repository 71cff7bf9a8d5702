"""JWS (RFC 7515) compact serialization with a detached payload, EdDSA (Ed25519) and ES256 keys,
on PyJWT (`jwt.api_jws`, `jwt.PyJWK`), as the official A2A SDK does.

A token is `BASE64URL(header) + ".." + BASE64URL(signature)` (RFC 7515 Appendix F): the payload is
not carried but is base64url-encoded into the signing input as usual, so the signing input is
`BASE64URL(header) + "." + BASE64URL(payload)` in ASCII. That is an ordinary attached JWS with its
middle part removed, not PyJWT's `is_payload_detached` (RFC 7797 `b64: false`, which signs the raw
payload and puts `b64` in `crit`): PyJWT signs and verifies the attached form, and this module
removes and restores the middle part. Base64url is unpadded. The protected header always holds
`alg`, `kid` and `typ: "JOSE"`; this module writes it as RFC 8785 canonical JSON (PyJWT's
`json_encoder` hook), and reads any JSON object. ES256 signatures are the 64-byte `r || s` of
RFC 7518 §3.4, never DER (PyJWT's form). `crit` and `b64` are refused (no extension header is
understood).

Verification checks, in order: token shape, header, key id in the key set, `alg` allowed for that
key (EdDSA for Ed25519, ES256 for P-256), the signature (PyJWT, whose algorithm registry here holds
EdDSA and ES256 only: `none`, HS* and RS* are not even known to it, so no header can pick them),
then time: `exp` (the token is expired once `now > exp + leeway`), `nbf` and `iat` (not yet valid
while `now + leeway` is before them). These are protected-header parameters of a detached JWS, not
the claims of a JWT payload that PyJWT's `jwt.decode` checks, so they are checked here. Every
failure is a `SignatureError` saying which check failed. Keys come from a JWKS (RFC 7517):
`{"keys": [{"kty": "OKP", "crv": "Ed25519", "x", "kid"}, {"kty": "EC", "crv": "P-256", "x", "y",
"kid"}]}`; `use` must be `sig` and `alg` must fit the key when present; a JWK holding
private members (`d`...) is refused. Each key is checked by these rules first and then built by
`jwt.PyJWK`; not `PyJWKSet`, which skips unusable keys silently where these rules refuse the set.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TypeAlias

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from jwt import PyJWK, api_jws
from jwt.algorithms import ECAlgorithm, OKPAlgorithm
from jwt.exceptions import DecodeError, InvalidSignatureError, PyJWTError

from a2a_grpc.core.canonical import canonicalize

__all__ = [
    "DEFAULT_LEEWAY_S",
    "KeyFormatError",
    "KeySet",
    "PrivateKey",
    "PublicKey",
    "SignatureError",
    "algorithm_for",
    "b64url_decode",
    "b64url_encode",
    "load_jwks",
    "load_private_key",
    "public_jwk",
    "read_header",
    "sign_detached",
    "verify_detached",
]

PrivateKey: TypeAlias = Ed25519PrivateKey | ec.EllipticCurvePrivateKey
PublicKey: TypeAlias = Ed25519PublicKey | ec.EllipticCurvePublicKey

DEFAULT_LEEWAY_S = 30.0
"""Clock skew tolerated on `exp`, `nbf` and `iat`, in seconds."""

ALGORITHMS = ("EdDSA", "ES256")
"""The only JWS algorithms signed or verified."""

_JWS = api_jws.PyJWS(algorithms=list(ALGORITHMS))
_P256_BYTES = 32
_ED25519_BYTES = 32
_RESERVED_HEADER = frozenset({"alg", "kid", "typ", "crit", "b64"})
_B64URL = re.compile(r"[A-Za-z0-9_-]*")
_PRIVATE_MEMBERS = ("d", "p", "q", "dp", "dq", "qi", "k")


class SignatureError(ValueError):
    """A signature is missing, malformed, from an unknown key, invalid, or outside its validity."""


class KeyFormatError(ValueError):
    """A key, JWKS or PEM document that cannot be used: wrong type, curve or encoding."""


def b64url_encode(data: bytes) -> str:
    """Unpadded base64url (RFC 7515 §2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Strict unpadded base64url; ValueError for padding, other characters or a bad length."""
    if not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError("not unpadded base64url")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error as error:
        raise ValueError("not unpadded base64url") from error


def algorithm_for(key: PrivateKey | PublicKey) -> str:
    """The JWS `alg` of a key: "EdDSA" for Ed25519, "ES256" for P-256; KeyFormatError else."""
    if isinstance(key, Ed25519PrivateKey | Ed25519PublicKey):
        return "EdDSA"
    if isinstance(key, ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey):
        if isinstance(key.curve, ec.SECP256R1):
            return "ES256"
        raise KeyFormatError(f"EC curve {key.curve.name} is not supported (only P-256, for ES256)")
    raise KeyFormatError(f"{type(key).__name__} is not supported (use Ed25519 or EC P-256)")


class KeySet(Mapping[str, PublicKey]):
    """An immutable map of key id → public key (Ed25519 or P-256), the trust anchor of
    `verify_detached`. Construction raises KeyFormatError for any other key type."""

    def __init__(self, keys: Mapping[str, PublicKey] | None = None) -> None:
        self._keys: dict[str, PublicKey] = {}
        for kid, key in (keys or {}).items():
            if not isinstance(kid, str) or not kid:
                raise KeyFormatError(f"key id {kid!r} is not a non-empty string")
            algorithm_for(key)
            if not isinstance(key, Ed25519PublicKey | ec.EllipticCurvePublicKey):
                raise KeyFormatError(f"key {kid!r} is a private key; a key set holds public keys")
            self._keys[kid] = key

    @classmethod
    def of_private_keys(cls, keys: Mapping[str, PrivateKey]) -> KeySet:
        """The key set that verifies what these private keys sign."""
        return cls({kid: key.public_key() for kid, key in keys.items()})

    def __getitem__(self, kid: str) -> PublicKey:
        return self._keys[kid]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        return f"KeySet({sorted(self._keys)!r})"

    def to_jwks(self) -> dict[str, Any]:
        """The public JWKS document of this key set."""
        return {"keys": [public_jwk(key, kid) for kid, key in self._keys.items()]}


def public_jwk(key: PrivateKey | PublicKey, kid: str) -> dict[str, Any]:
    """The public JWK of a key (a private key exports its public half) with `kid`, `use: "sig"`
    and `alg`, members in the order kty, crv, x[, y], kid, use, alg."""
    alg = algorithm_for(key)
    public = (
        key.public_key() if isinstance(key, Ed25519PrivateKey | ec.EllipticCurvePrivateKey) else key
    )
    if isinstance(public, Ed25519PublicKey):
        jwk = OKPAlgorithm.to_jwk(public, as_dict=True)
        members: tuple[str, ...] = ("kty", "crv", "x")
    else:
        jwk = ECAlgorithm.to_jwk(public, as_dict=True)
        members = ("kty", "crv", "x", "y")
    return {**{member: jwk[member] for member in members}, "kid": kid, "use": "sig", "alg": alg}


def load_jwks(source: str | os.PathLike[str] | Mapping[str, Any]) -> KeySet:
    """A KeySet from a JWKS document: a path to a JSON file or the parsed object.

    Raises KeyFormatError naming the offending key for unreadable files, a missing `keys` list,
    missing or duplicate `kid`, unsupported `kty`/`crv`, bad coordinates, `use` other than
    "sig", an `alg` that does not fit the key, or private key material.
    """
    if isinstance(source, Mapping):
        document: Any = source
    else:
        try:
            document = json.loads(Path(source).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise KeyFormatError(f"cannot read JWKS {os.fspath(source)!r}: {error}") from error
    keys = document.get("keys") if isinstance(document, Mapping) else None
    if not isinstance(keys, list):
        raise KeyFormatError('a JWKS is a JSON object with a "keys" array')
    parsed: dict[str, PublicKey] = {}
    for index, jwk in enumerate(keys):
        if not isinstance(jwk, Mapping):
            raise KeyFormatError(f"JWKS key #{index} is not a JSON object")
        kid = jwk.get("kid")
        if not isinstance(kid, str) or not kid:
            raise KeyFormatError(f'JWKS key #{index} has no "kid" (a non-empty string)')
        if kid in parsed:
            raise KeyFormatError(f"JWKS has two keys with kid {kid!r}")
        parsed[kid] = _parse_jwk(jwk, kid)
    return KeySet(parsed)


def _parse_jwk(jwk: Mapping[str, Any], kid: str) -> PublicKey:
    where = f"JWKS key {kid!r}"
    private = [member for member in _PRIVATE_MEMBERS if member in jwk]
    if private:
        raise KeyFormatError(f"{where} holds private key material ({', '.join(private)})")
    if jwk.get("use", "sig") != "sig":
        raise KeyFormatError(f'{where}: use {jwk.get("use")!r} is not "sig"')
    kty, crv = jwk.get("kty"), jwk.get("crv")
    if kty == "OKP":
        if crv != "Ed25519":
            raise KeyFormatError(f"{where}: OKP curve {crv!r} is not supported (only Ed25519)")
        members: dict[str, Any] = {"kty": kty, "crv": crv}
        members["x"] = _coordinate(jwk, "x", _ED25519_BYTES, where)
        alg = "EdDSA"
    elif kty == "EC":
        if crv != "P-256":
            raise KeyFormatError(f"{where}: EC curve {crv!r} is not supported (only P-256)")
        members = {"kty": kty, "crv": crv}
        members["x"] = _coordinate(jwk, "x", _P256_BYTES, where)
        members["y"] = _coordinate(jwk, "y", _P256_BYTES, where)
        alg = "ES256"
    else:
        raise KeyFormatError(f"{where}: kty {kty!r} is not supported (use OKP/Ed25519 or EC/P-256)")
    if jwk.get("alg") not in (None, alg):
        raise KeyFormatError(f"{where}: alg {jwk.get('alg')!r} does not fit a {crv} key")
    # Only the members checked above reach PyJWK, with the algorithm they imply.
    try:
        key = PyJWK(members, algorithm=alg).key
    except PyJWTError as error:
        if kty == "EC":
            raise KeyFormatError(f"{where}: the point (x, y) is not on P-256") from error
        raise KeyFormatError(f"{where}: {error}") from error
    if not isinstance(key, Ed25519PublicKey | ec.EllipticCurvePublicKey):
        raise KeyFormatError(f"{where}: {type(key).__name__} is not a supported public key")
    return key


def _coordinate(jwk: Mapping[str, Any], member: str, size: int, where: str) -> str:
    value = jwk.get(member)
    if not isinstance(value, str):
        raise KeyFormatError(f'{where}: "{member}" is missing')
    try:
        raw = b64url_decode(value)
    except ValueError as error:
        raise KeyFormatError(f'{where}: "{member}" is not base64url') from error
    if len(raw) != size:
        raise KeyFormatError(f'{where}: "{member}" is {len(raw)} bytes, not {size}')
    return value


def load_private_key(pem: bytes, password: bytes | None = None) -> PrivateKey:
    """An Ed25519 or P-256 private key from PEM (PKCS#8, or SEC1 for EC); KeyFormatError else."""
    try:
        key = serialization.load_pem_private_key(pem, password=password)
    except (ValueError, TypeError) as error:
        raise KeyFormatError(f"cannot load the private key PEM: {error}") from error
    if not isinstance(key, Ed25519PrivateKey | ec.EllipticCurvePrivateKey):
        raise KeyFormatError(f"{type(key).__name__} is not supported (use Ed25519 or EC P-256)")
    algorithm_for(key)
    return key


class _CanonicalHeader(json.JSONEncoder):
    """PyJWT's header serializer, made RFC 8785: PyJWT's own is `json.dumps` with sorted keys,
    which escapes non-ASCII and orders by code point, not by UTF-16 code unit."""

    def encode(self, o: Any) -> str:
        return canonicalize(o).decode("utf-8")


def sign_detached(
    payload: bytes, key: PrivateKey, kid: str, extra_header: Mapping[str, Any] | None = None
) -> str:
    """A compact JWS with detached payload over `payload`.

    The protected header is `extra_header` plus `alg` (from the key), `kid` and `typ: "JOSE"`;
    `extra_header` may not set those, `crit` or `b64` (ValueError). KeyFormatError for unsupported
    keys.
    """
    alg = algorithm_for(key)
    clash = _RESERVED_HEADER.intersection(extra_header or {})
    if clash:
        raise ValueError(f"extra_header may not set {', '.join(sorted(clash))}")
    header = {**(extra_header or {}), "alg": alg, "kid": kid, "typ": "JOSE"}
    token = _JWS.encode(payload, key, algorithm=alg, headers=header, json_encoder=_CanonicalHeader)
    encoded_header, _, encoded_signature = token.split(".")
    return f"{encoded_header}..{encoded_signature}"


def read_header(token: str) -> dict[str, Any]:
    """The protected header of a detached compact JWS, NOT verified: for choosing the key to
    verify it with. SignatureError for a malformed token (the first checks of verification).

    Stricter than PyJWT's `get_unverified_header`, which accepts padded base64url and a
    non-empty middle part."""
    parts = token.split(".") if isinstance(token, str) else []
    if len(parts) != 3:
        raise SignatureError("malformed JWS: compact serialization has three dot-separated parts")
    encoded_header, attached, _ = parts
    if attached:
        raise SignatureError("malformed JWS: the payload must be detached (empty middle part)")
    try:
        header = json.loads(b64url_decode(encoded_header))
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise SignatureError("malformed JWS: the header is not base64url JSON") from error
    if not isinstance(header, dict):
        raise SignatureError("malformed JWS: the header is not a JSON object")
    kid, alg = header.get("kid"), header.get("alg")
    if not isinstance(kid, str) or not isinstance(alg, str):
        raise SignatureError('malformed JWS: the header needs string "alg" and "kid"')
    if "crit" in header:
        raise SignatureError(f"unsupported JWS: critical header parameters {header['crit']!r}")
    if header.get("b64", True) is not True:
        raise SignatureError('unsupported JWS: an unencoded payload (RFC 7797 "b64": false)')
    return header


def verify_detached(
    token: str,
    payload: bytes,
    keyset: KeySet,
    *,
    now: float,
    leeway: float = DEFAULT_LEEWAY_S,
) -> dict[str, Any]:
    """The protected header of `token` once it verifies over `payload` with a key of `keyset`
    and is valid at `now` (seconds since the epoch). SignatureError says what failed."""
    header = read_header(token)
    kid, alg = header["kid"], header["alg"]
    encoded_header, _, encoded_signature = token.split(".")
    try:
        b64url_decode(encoded_signature)
    except ValueError as error:
        raise SignatureError("malformed JWS: the signature is not base64url") from error
    key = keyset.get(kid)
    if key is None:
        raise SignatureError(f"unknown key id {kid!r}")
    expected = algorithm_for(key)
    if alg != expected:
        raise SignatureError(f"alg {alg!r} is not allowed for key {kid!r} (it signs {expected})")
    attached = f"{encoded_header}.{b64url_encode(payload)}.{encoded_signature}"
    try:
        verified = _JWS.decode_complete(attached, key, algorithms=[expected])
    except InvalidSignatureError:
        raise SignatureError(
            f"bad signature: it does not verify with key {kid!r} over this content"
        ) from None
    except DecodeError as error:  # e.g. base64url with non-zero trailing bits
        raise SignatureError(f"malformed JWS: {error}") from error
    except PyJWTError as error:
        raise SignatureError(f"unsupported JWS: {error}") from error
    verified_header: dict[str, Any] = verified["header"]
    _check_times(verified_header, now, leeway)
    return verified_header


def _check_times(header: Mapping[str, Any], now: float, leeway: float) -> None:
    times: dict[str, float] = {}
    for claim in ("exp", "nbf", "iat"):
        value = header.get(claim)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SignatureError(f"malformed JWS: {claim!r} is not a number of seconds")
        times[claim] = float(value)
    if "exp" in times and now > times["exp"] + leeway:
        raise SignatureError(f"expired: valid until {times['exp']:.0f}, now {now:.0f}")
    for claim in ("nbf", "iat"):
        if claim in times and now + leeway < times[claim]:
            raise SignatureError(
                f"not yet valid: {claim} {times[claim]:.0f} is after now {now:.0f}"
            )
