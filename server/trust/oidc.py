"""JWT bearer tokens (OIDC): `authorization: Bearer <jwt>` → the principal `jwt:<claim>`.

The keys come from an OpenID Connect issuer (`serve --oidc-issuer`: its discovery document
`/.well-known/openid-configuration` names the `jwks_uri`) or from a JWKS named directly
(`serve --jwks URL|FILE`, with `--jwt-issuer`). Contract of `JwtBearer`:
- a token is accepted only when all of these hold, and each refusal says which one failed
  (never the token): its algorithm is one of the allowed ones (asymmetric only: RS256, PS256,
  ES256, EdDSA; so `none` and HS256 with the public key as secret are refused before any key is
  looked at), its `kid` names a key of the set whose type fits that algorithm (and whose `alg`,
  when it states one, is that algorithm), the signature verifies, `exp`, `iss` and `aud` are
  present, `iss` is the issuer and `aud` holds the audience, `exp`, `nbf` and `iat` are JSON
  numbers (NumericDate: never a numeric string) and hold with `leeway` seconds, and the
  principal claim is a non-empty string;
- the principal is `jwt:` + the principal claim (`sub` by default; `azp` or `client_id` for
  service tokens): no static token's principal may start with `jwt:` (nor `cert:`), so a JWT
  caller can never be taken for another kind;
- a bearer value that is not a JWS compact (three dot-separated parts, the first a JSON header)
  goes to the static token table, when there is one; so static tokens and JWTs share the header;
- symmetric keys (`kty` oct) in a JWKS are ignored: they could only verify HMAC tokens;
- a URL's key set is fetched at start (`start`; a failure there is a start-up error), each fetch
  bounded by `timeout_s` (core.cards.bounded_get), and cached as its Cache-Control says: once
  stale, the next call fetches it again in the background (the keys held go on serving until
  the new ones arrive), but never more often than every `refresh_interval` seconds;
- a `kid` the set does not hold makes one awaited fetch (how rotated keys are picked up), at
  most once every `refresh_interval` seconds, shared by all the calls waiting on it: a flood of
  made-up key ids costs one fetch. A failed fetch keeps the keys held.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import jwt

from a2a_grpc.core.cards import CardFetchError, bounded_get, max_age
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.trust.auth import (
    AuthenticationError,
    AuthenticationPending,
    BearerTokens,
    CardSecurity,
    Presented,
)

logger = logging.getLogger(__name__)

PRINCIPAL_PREFIX = "jwt:"
ALGORITHMS = ("RS256", "PS256", "ES256", "EdDSA")
"""The algorithms a JWT may be signed with (`serve --jwt-algorithms` picks among them)."""
DISCOVERY_PATH = "/.well-known/openid-configuration"
DEFAULT_TIMEOUT_S = 5.0
DEFAULT_REFRESH_INTERVAL_S = 10.0
DEFAULT_LEEWAY_S = 30.0
MAX_JWKS_BYTES = 256 * 1024
NUMERIC_DATES = ("exp", "nbf", "iat")
"""Claims that are JSON numbers (RFC 7519 §2, NumericDate): PyJWT also takes `"1893456000"`
and `true` (it calls int() on them), which a token's issuer never writes."""


def _numeric_date(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


_KEY_TYPES = {
    "RS256": ("RSA", None),
    "PS256": ("RSA", None),
    "ES256": ("EC", "P-256"),
    "EdDSA": ("OKP", "Ed25519"),
}
"""The key type (and curve) each algorithm verifies with."""


def discovery_url(issuer: str) -> str:
    """The OpenID Connect discovery document's URL for `issuer`."""
    return issuer.rstrip("/") + DISCOVERY_PATH


def check_http_url(url: str, what: str) -> None:
    """ValueError unless `url` is an absolute http(s) URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{what} must be an http(s) URL, got {url!r}")


def looks_like_jwt(token: str) -> bool:
    """Whether `token` has the shape of a JWS compact: three dot-separated parts, the first a
    base64url JSON object naming an `alg`."""
    if token.count(".") != 2:
        return False
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        return False
    return "alg" in header


@dataclass(frozen=True)
class KeySet:
    """The usable (asymmetric) keys of a JWKS by key id, and how long they stay fresh."""

    keys: Mapping[str, Mapping[str, Any]]
    fresh_until: float
    etag: str | None = None


def parse_jwks(document: bytes | str, source: str) -> dict[str, Mapping[str, Any]]:
    """The keys of a JWKS by `kid`, symmetric ones left out; ValueError when malformed or when
    no key is usable."""
    try:
        loaded = json.loads(document)
    except ValueError as exc:
        raise ValueError(f"{source}: not JSON ({exc})") from exc
    if not isinstance(loaded, dict) or not isinstance(loaded.get("keys"), list):
        raise ValueError(f'{source}: expected a JWKS {{"keys": [...]}}')
    keys: dict[str, Mapping[str, Any]] = {}
    for entry in loaded["keys"]:
        if not isinstance(entry, dict) or entry.get("kty") not in ("RSA", "EC", "OKP"):
            continue  # oct (symmetric) or unknown: never a key a JWT is accepted with
        if entry.get("use", "sig") != "sig" or entry.get("alg", ALGORITHMS[0]) not in ALGORITHMS:
            continue
        try:
            jwt.PyJWK(entry)
        except jwt.PyJWTError as exc:
            logger.warning("%s: key %r left out: %s", source, entry.get("kid"), exc)
            continue
        keys[str(entry.get("kid", ""))] = entry
    if not keys:
        raise ValueError(f"{source}: no usable key (RSA, EC P-256 or OKP Ed25519, for signing)")
    return keys


class JwtBearer:
    """The bearer-token authenticator when JWTs are accepted (see the module docstring);
    `static` is the table other bearer values are looked up in (None: JWTs only)."""

    headers = ("authorization",)

    def __init__(
        self,
        *,
        issuer: str,
        audience: str,
        oidc: bool,
        jwks: str = "",
        algorithms: Sequence[str] = ALGORITHMS,
        principal_claim: str = "sub",
        leeway: float = DEFAULT_LEEWAY_S,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        refresh_interval: float = DEFAULT_REFRESH_INTERVAL_S,
        static: BearerTokens | None = None,
        http: httpx.AsyncClient | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        unknown = [a for a in algorithms if a not in ALGORITHMS]
        if unknown or not algorithms:
            raise ValueError(
                f"JWT algorithms must be among {', '.join(ALGORITHMS)}, got "
                f"{', '.join(algorithms) or 'none'}"
            )
        if not issuer or not audience:
            raise ValueError("JWTs need an issuer and an audience")
        self.issuer, self.audience, self.oidc = issuer, audience, oidc
        self.jwks = jwks
        self.algorithms = tuple(algorithms)
        self.principal_claim = principal_claim
        self.leeway = leeway
        self.static = static
        self._timeout_s = timeout_s
        self._refresh_interval = refresh_interval
        self._clock = clock or time.monotonic
        self._owns_http = http is None
        # Never from the environment: a proxy would fetch on our behalf, elsewhere.
        self._http = http or httpx.AsyncClient(trust_env=False, follow_redirects=False)
        self._jwks_url = ""  # the key set's URL, once known (empty: a file)
        self._keyset = KeySet({}, float("inf"))
        self._fetched_at = -float("inf")
        self._kid_refreshed_at = -float("inf")  # the last fetch an unknown key id asked for
        self._refresh: asyncio.Task[None] | None = None
        self._last_problem = ""
        self._verifiers: dict[tuple[str, str], jwt.PyJWK] = {}

    @property
    def discovery_url(self) -> str | None:
        """The discovery document's URL (the card's OpenID Connect scheme), None with --jwks."""
        return discovery_url(self.issuer) if self.oidc else None

    def card_security(self) -> CardSecurity:
        """The OpenID Connect scheme `oidc` at the discovery URL with an issuer, else the HTTP
        bearer scheme `jwt` of format JWT; after `static`'s, as its alternative (the two share
        the header)."""
        scheme = a2a_pb2.SecurityScheme()
        url = self.discovery_url
        if url is not None:
            oidc = scheme.open_id_connect_security_scheme
            oidc.open_id_connect_url = url
            oidc.description = "bearer JWT from this OpenID Connect issuer"
            own = CardSecurity.of("oidc", scheme)
        else:
            bearer = scheme.http_auth_security_scheme
            bearer.scheme, bearer.bearer_format = "Bearer", "JWT"
            own = CardSecurity.of("jwt", scheme)
        if self.static is None:
            return own
        return CardSecurity.any_of((self.static.card_security(), own))

    async def start(self) -> None:
        """Fetches the discovery document and the key set (or reads the key file); ValueError
        saying what failed."""
        if self.oidc:
            self._jwks_url = await self._discover()
        elif self.jwks.startswith(("http://", "https://")):
            check_http_url(self.jwks, "--jwks")
            self._jwks_url = self.jwks
        else:
            try:
                text = await asyncio.to_thread(Path(self.jwks).read_text)
            except OSError as exc:
                raise ValueError(f"--jwks {self.jwks}: {exc.strerror or exc}") from exc
            self._keyset = KeySet(parse_jwks(text, f"--jwks {self.jwks}"), float("inf"))
            return
        try:
            self._keyset = await self._fetch_keys()
        except CardFetchError as exc:
            raise ValueError(str(exc)) from exc

    async def _discover(self) -> str:
        url = discovery_url(self.issuer)
        try:
            status, _, body = await bounded_get(
                self._http,
                url,
                {"accept": "application/json"},
                timeout_s=self._timeout_s,
                what="the OpenID Connect discovery document",
                max_bytes=MAX_JWKS_BYTES,
            )
        except CardFetchError as exc:
            raise ValueError(f"--oidc-issuer: {exc}") from exc
        if status != 200:
            raise ValueError(f"--oidc-issuer: GET {url}: HTTP {status}")
        try:
            document = json.loads(body)
        except ValueError as exc:
            raise ValueError(f"--oidc-issuer: {url} is not JSON ({exc})") from exc
        if not isinstance(document, dict) or document.get("issuer") != self.issuer:
            raise ValueError(
                f"--oidc-issuer: {url} names the issuer "
                f"{document.get('issuer') if isinstance(document, dict) else None!r}, "
                f"not {self.issuer!r}"
            )
        jwks_uri = document.get("jwks_uri")
        if not isinstance(jwks_uri, str):
            raise ValueError(f"--oidc-issuer: {url} names no jwks_uri")
        check_http_url(jwks_uri, f"{url}'s jwks_uri")
        return jwks_uri

    async def _fetch_keys(self) -> KeySet:
        """The key set at its URL (revalidated with its ETag); ValueError or CardFetchError."""
        held = self._keyset
        headers = {"accept": "application/json"}
        if held.etag:
            headers["if-none-match"] = held.etag
        self._fetched_at = self._clock()
        status, response_headers, body = await bounded_get(
            self._http,
            self._jwks_url,
            headers,
            timeout_s=self._timeout_s,
            what="the JWKS",
            max_bytes=MAX_JWKS_BYTES,
        )
        now = self._clock()
        if status == 304 and held.keys:
            keys: Mapping[str, Mapping[str, Any]] = held.keys
        elif status == 200:
            keys = parse_jwks(body, self._jwks_url)
        else:
            raise ValueError(f"GET {self._jwks_url}: HTTP {status}")
        age = max(max_age(response_headers.get("cache-control")), 0.0)
        etag = response_headers.get("etag") or held.etag
        return KeySet(keys, now + age, etag)

    def _refresh_keys(self) -> asyncio.Task[None]:
        """The fetch in flight, or a new one: every caller waiting on keys shares it."""
        if self._refresh is None or self._refresh.done():
            self._refresh = asyncio.ensure_future(self._refreshed())
        return self._refresh

    async def _refreshed(self) -> None:
        try:
            self._keyset = await self._fetch_keys()
            self._last_problem = ""
            self._verifiers.clear()
        except (CardFetchError, ValueError) as exc:
            # The keys held keep serving: an unreachable issuer does not lock out its callers.
            self._last_problem = str(exc)
            logger.warning("the JWKS could not be fetched again: %s", exc)

    async def _wait_for_keys(self) -> None:
        await asyncio.shield(self._refresh_keys())

    def _may_fetch(self, now: float) -> bool:
        """Whether stale keys may be fetched again now (one fetch a `refresh_interval`)."""
        return bool(self._jwks_url) and now - self._fetched_at >= self._refresh_interval

    def authenticate(self, presented: Presented) -> str | None:
        headers = presented.values("authorization")
        if not headers:
            return None
        text = headers[0]
        scheme, _, token = text.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise AuthenticationError("authorization must be 'Bearer <token>'")
        if not looks_like_jwt(token):
            if self.static is not None:
                return self.static.authenticate(presented)
            raise AuthenticationError("the bearer token is not a JWT")
        return self.verify(token)

    def verify(self, token: str) -> str:
        """The principal of a JWT; AuthenticationError (the check that failed) or
        AuthenticationPending (its key id is unknown, the keys are fetched again)."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise AuthenticationError("the JWT is malformed") from None
        alg = header.get("alg")
        if alg not in self.algorithms:
            raise AuthenticationError(
                f"the JWT's algorithm {alg!r} is not allowed "
                f"(allowed: {', '.join(self.algorithms)})"
            )
        now = self._clock()
        if now >= self._keyset.fresh_until and self._may_fetch(now):
            self._refresh_keys()  # stale: fetched again in the background; these keys serve
        kid = header.get("kid")
        key = self._key(kid)
        if key is None:
            message = f"unknown key id {kid!r}: the issuer's JWKS does not publish it" + (
                f" (fetching it again failed: {self._last_problem})" if self._last_problem else ""
            )
            refreshing = self._refresh is not None and not self._refresh.done()
            if refreshing or (
                self._jwks_url and now - self._kid_refreshed_at >= self._refresh_interval
            ):
                if not refreshing:
                    self._kid_refreshed_at = now  # the calls until the next window: no fetch
                raise AuthenticationPending(message, self._wait_for_keys)
            raise AuthenticationError(
                message + f" (the JWKS is fetched again at most every {self._refresh_interval:g} s)"
            )
        verifier = self._verifier(str(kid or ""), key, alg)
        try:
            claims = jwt.decode(
                token,
                key=verifier,
                algorithms=[alg],
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise AuthenticationError("the JWT has expired (exp)") from None
        except jwt.ImmatureSignatureError:
            raise AuthenticationError(
                "the JWT is not valid yet (nbf or iat in the future)"
            ) from None
        except jwt.MissingRequiredClaimError as exc:
            raise AuthenticationError(f"the JWT has no {exc.claim!r} claim") from None
        except jwt.InvalidAudienceError:
            raise AuthenticationError(
                f"wrong audience: the JWT is not for {self.audience!r} (aud)"
            ) from None
        except jwt.InvalidIssuerError:
            raise AuthenticationError(
                f"wrong issuer: the JWT is not from {self.issuer!r} (iss)"
            ) from None
        except jwt.InvalidSignatureError:
            raise AuthenticationError(
                f"the JWT's signature does not verify with key {kid!r}"
            ) from None
        except jwt.InvalidAlgorithmError:
            raise AuthenticationError(f"the JWT's algorithm does not fit key {kid!r}") from None
        except (jwt.DecodeError, OverflowError):  # OverflowError: a date of Infinity
            raise AuthenticationError("the JWT is malformed") from None
        except jwt.PyJWTError as exc:
            raise AuthenticationError(f"the JWT is not valid ({type(exc).__name__})") from None
        for name in NUMERIC_DATES:
            value = claims.get(name)
            if value is not None and not _numeric_date(value):
                raise AuthenticationError(
                    f"the JWT's {name!r} claim is not a number (RFC 7519 NumericDate), but "
                    f"{type(value).__name__} {str(value)[:40]!r}"
                )
        subject = claims.get(self.principal_claim)
        if not isinstance(subject, str) or not subject:
            raise AuthenticationError(
                f"the JWT has no {self.principal_claim!r} claim naming the caller"
            )
        return PRINCIPAL_PREFIX + subject

    def _key(self, kid: object) -> Mapping[str, Any] | None:
        keys = self._keyset.keys
        if kid is None:  # no kid: usable only when the set holds one key
            return next(iter(keys.values())) if len(keys) == 1 else None
        return keys.get(kid) if isinstance(kid, str) else None

    def _verifier(self, kid: str, key: Mapping[str, Any], alg: str) -> jwt.PyJWK:
        """The key to verify `alg` with; AuthenticationError when the key is for another."""
        verifier = self._verifiers.get((kid, alg))
        if verifier is not None:
            return verifier
        kty, crv = _KEY_TYPES[alg]
        if key.get("kty") != kty or (crv and key.get("crv") != crv):
            raise AuthenticationError(f"key {kid!r} is not a key for the JWT's algorithm {alg}")
        if key.get("alg", alg) != alg:
            raise AuthenticationError(f"key {kid!r} is for {key.get('alg')}, not {alg}")
        try:
            verifier = jwt.PyJWK(dict(key), algorithm=alg)
        except jwt.PyJWTError:
            raise AuthenticationError(f"key {kid!r} is not a key for {alg}") from None
        self._verifiers[(kid, alg)] = verifier
        return verifier

    async def aclose(self) -> None:
        if self._refresh is not None:
            self._refresh.cancel()
            with contextlib.suppress(BaseException):
                await self._refresh
        if self._owns_http:
            await self._http.aclose()
