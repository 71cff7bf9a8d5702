"""Caller identity: pluggable authenticators, and the current call's caller.

Each transport authenticates every A2A call before the protocol sees it (gRPC's interceptor,
transports/grpc/auth.py; the HTTP bindings themselves) and sets its caller (`set_caller`); the
call gate's first step asks for the principal (`current_principal`), so a caller without valid
credentials gets UNAUTHENTICATED before any lookup and learns nothing about which tasks exist.
The principal scopes every task operation (with the request's tenant).

What a call presents is a `Presented`: its metadata (gRPC metadata, or the HTTP headers of the
same names), the names of the client certificate TLS verified, and the address the connection
comes from. Principals: a bearer token's principal; a client certificate's SPIFFE ID
(`spiffe://td/ns/x/sa/y`, its URI SAN) or, without one, `cert:<CN>`; the SPIFFE ID a trusted
sidecar forwards in `x-forwarded-client-cert` (ForwardedClientCert, trust/mesh.py).

Configured with neither tokens nor client certificates (nor a trusted sidecar), the server
authenticates nothing and serves every caller as the anonymous principal "".

Each authenticator also states what the agent card says of it (`card_security`): its security
schemes and the requirements a caller meets it by. The combinators (AnyOf, AllOf,
ForwardedClientCert) combine their members' as they combine their checks, so the card the
server serves states exactly what its authenticator enforces.
"""

from __future__ import annotations

import contextvars
import hashlib
import itertools
import json
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.trust.mesh import (
    XFCC_HEADER,
    IdentityProblem,
    Network,
    forwarded_spiffe_id,
    is_trusted,
    spiffe_id,
)

TOKENS_ENV = "A2A_GRPC_TOKENS"


class AuthenticationError(Exception):
    """Missing or invalid credentials; the message says what the caller must send."""


class AuthenticationPending(Exception):
    """An authenticator cannot decide before some I/O is done (e.g. fetching keys for a JWT's
    unknown key id): `caller_of` awaits `wait()` and asks it once more. Checking credentials
    stays synchronous; only the authenticators that fetch anything raise this. The message is
    the refusal should the second answer be pending too."""

    def __init__(self, message: str, wait: Callable[[], Awaitable[None]]) -> None:
        self.wait = wait
        super().__init__(message)


RESERVED_PREFIXES = ("cert:", "jwt:", "spiffe:")
"""Principals starting so are those of client certificates (by CN or SPIFFE ID) and JWTs: no
static token may name one, so that a principal names one kind of credential only."""


_caller: contextvars.ContextVar[str | AuthenticationError] = contextvars.ContextVar(
    "a2a_caller", default=""
)


def current_principal() -> str:
    """The principal of the call being handled ("" when anonymous).

    Raises the call's AuthenticationError when its credentials were refused, so the servicer
    answers UNAUTHENTICATED before it looks anything up (and audits and traces the refusal).
    """
    caller = _caller.get()
    if isinstance(caller, AuthenticationError):
        raise caller
    return caller


@dataclass(frozen=True)
class Presented:
    """What one call presents to be authenticated, as its transport received it."""

    metadata: Sequence[tuple[str, str | bytes]] = ()
    """The call's gRPC metadata, or an HTTP request's headers of the same (lowercase) names."""
    peer: Mapping[str, Sequence[bytes]] = field(default_factory=dict)
    """The client certificate TLS verified, as gRPC's auth context names it: `x509_common_name`
    (its subject CN), `peer_uri` (its URI SANs), `x509_subject_alternative_name` (all its
    SANs); empty without a client certificate."""
    remote: str | None = None
    """The IP address the connection comes from (`127.0.0.1`, `::1`); None when it has none
    (a Unix socket)."""

    def values(self, key: str) -> list[str]:
        """The text values of metadata `key`, in order."""
        return [v.decode() if isinstance(v, bytes) else v for k, v in self.metadata if k == key]


@dataclass(frozen=True)
class CardSecurity:
    """What an authenticator states on the agent card: its security schemes by name (the card's
    `securitySchemes`) and the security requirements a caller meets it by (its
    `securityRequirements`, A2A 1.0 §4.4: any one requirement will do, and a requirement needs
    every scheme it names)."""

    schemes: Mapping[str, a2a_pb2.SecurityScheme] = field(default_factory=dict)
    """The schemes, by the names the requirements use, in the order the card lists them."""
    requirements: tuple[tuple[str, ...], ...] = ()
    """The alternatives, in order, each the names of the schemes a caller presents together.
    Empty: nothing a card can state (no credentials, or none a card's reader would send)."""

    @classmethod
    def of(cls, name: str, scheme: a2a_pb2.SecurityScheme) -> CardSecurity:
        """One scheme, `name`, which is enough on its own."""
        return cls({name: scheme}, ((name,),))

    @classmethod
    def any_of(cls, parts: Iterable[CardSecurity]) -> CardSecurity:
        """A caller meets any one of `parts`: their schemes, and their requirements in turn.
        ValueError when two parts name different schemes alike."""
        parts = tuple(parts)
        return cls(_schemes(parts), tuple(r for part in parts for r in part.requirements))

    @classmethod
    def all_of(cls, parts: Iterable[CardSecurity]) -> CardSecurity:
        """A caller meets every one of `parts`: their schemes, and one requirement per way to
        pick a requirement of each (parts without any are left out). ValueError when two parts
        name different schemes alike."""
        parts = tuple(parts)
        asked = [part.requirements for part in parts if part.requirements]
        combined = (
            tuple(
                tuple(dict.fromkeys(name for names in picked for name in names))
                for picked in itertools.product(*asked)
            )
            if asked
            else ()
        )
        return cls(_schemes(parts), combined)


def _schemes(parts: Sequence[CardSecurity]) -> dict[str, a2a_pb2.SecurityScheme]:
    schemes: dict[str, a2a_pb2.SecurityScheme] = {}
    for part in parts:
        for name, scheme in part.schemes.items():
            if schemes.setdefault(name, scheme) != scheme:
                raise ValueError(f"two authenticators state different security schemes {name!r}")
    return schemes


class Authenticator(Protocol):
    """Turns what a call presents into a principal, or raises AuthenticationError, and states
    on the agent card how a caller is to present it.

    `authenticate` runs on every call of every transport, before the call gate (keep it
    synchronous and quick; raise AuthenticationPending to await I/O first). It returns None
    when this authenticator found no credentials of its kind (so another may try).
    An authenticator may have a `wants` attribute: what a caller must send, for the refusal of
    a call that sent nothing any authenticator takes.
    """

    def authenticate(self, presented: Presented) -> str | None:
        """The principal of the credentials `presented` carries; None when it carries none of
        this authenticator's kind; AuthenticationError when they are not valid."""
        ...

    def card_security(self) -> CardSecurity:
        """What the agent card states of this authenticator (asked once, at start)."""
        ...

    @property
    def headers(self) -> Sequence[str]:
        """The metadata keys (lowercase) `authenticate` reads: an HTTP binding passes the
        request's headers of these names, and no other, as `Presented.metadata`."""
        ...


class BearerTokens:
    """`authorization: Bearer <token>` → principal, from a fixed table of tokens."""

    wants = "'authorization: Bearer <token>'"
    headers = ("authorization",)

    def __init__(self, tokens: Mapping[str, str]) -> None:
        self.replace(tokens)

    def replace(self, tokens: Mapping[str, str]) -> None:
        """From now on `tokens` are the valid ones (and only they); ValueError when empty."""
        if not tokens:
            raise ValueError("at least one token is needed")
        check_token_principals(tokens)
        # Keyed by digest so lookups do not compare secrets character by character.
        self._principals = {_digest(token): principal for token, principal in tokens.items()}

    def authenticate(self, presented: Presented) -> str | None:
        text = next(iter(presented.values("authorization")), None)
        if text is None:
            return None
        scheme, _, token = text.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthenticationError("authorization must be 'Bearer <token>'")
        principal = self._principals.get(_digest(token.strip()))
        if principal is None:
            raise AuthenticationError("the bearer token is not valid")
        return principal

    def card_security(self) -> CardSecurity:
        """The HTTP bearer scheme `bearer`."""
        scheme = a2a_pb2.SecurityScheme()
        scheme.http_auth_security_scheme.scheme = "Bearer"
        return CardSecurity.of("bearer", scheme)


class ClientCertificates:
    """mTLS: the principal is the verified client certificate's SPIFFE ID (its one URI SAN
    `spiffe://...`, checked against the SPIFFE ID standard), or `cert:<CN>` when it has none.

    With `trust_domains`, only SPIFFE IDs of those trust domains are accepted: a certificate of
    another trust domain, or one without a SPIFFE ID, is refused.

    The card states the mutual TLS scheme `mtls`, unless `on_card` is off: for certificates
    that reach the server only as a trusted sidecar's XFCC, beside a credential a caller
    reading the card can send itself (docs/trust.md, "How they combine").
    """

    headers = ()

    def __init__(
        self,
        trust_domains: Sequence[str] = (),
        *,
        wants: str = "a client certificate",
        on_card: bool = True,
    ) -> None:
        self.trust_domains = tuple(trust_domains)
        self.wants = wants
        self.on_card = on_card

    def card_security(self) -> CardSecurity:
        if not self.on_card:
            return CardSecurity()
        scheme = a2a_pb2.SecurityScheme()
        scheme.mtls_security_scheme.description = "client certificate"
        return CardSecurity.of("mtls", scheme)

    def authenticate(self, presented: Presented) -> str | None:
        peer = presented.peer
        uris = [uri.decode() for uri in peer.get("peer_uri", ())]
        try:
            found = spiffe_id(uris, "the client certificate", self.trust_domains)
        except IdentityProblem as exc:
            raise AuthenticationError(str(exc)) from None
        if found is not None:
            return found
        names = [n for n in peer.get("x509_common_name", ()) if n] or [
            n for n in peer.get("x509_subject_alternative_name", ()) if n
        ]
        if not names:
            return None
        if self.trust_domains:
            raise AuthenticationError(
                "the client certificate has no SPIFFE ID (a URI SAN spiffe://...): this server "
                f"accepts only trust domain(s) {', '.join(self.trust_domains)} (--trust-domain)"
            )
        return "cert:" + names[0].decode()


@dataclass(frozen=True)
class ForwardedClientCert:
    """`--trust-xfcc`: the SPIFFE ID a sidecar forwards in `x-forwarded-client-cert` stands in
    for the client certificate the sidecar verified, for `inner` to authenticate.

    A call without the header goes to `inner` as it is (its own certificate, its token). A call
    with it is refused unless its connection comes from one of `trusted_proxies` (a sidecar on
    loopback by default), unless the header parses (trust/mesh.py), and unless its last element
    (the one the local sidecar added) names one valid SPIFFE ID, of `trust_domains` when given.
    Then `inner` sees that SPIFFE ID in place of the connection's own certificate (the
    sidecar's, when the sidecar connects with mTLS: it only admits the connection).
    """

    inner: Authenticator
    trusted_proxies: tuple[Network, ...]
    trust_domains: tuple[str, ...] = ()

    @property
    def headers(self) -> Sequence[str]:
        return tuple(dict.fromkeys((*self.inner.headers, XFCC_HEADER)))

    def card_security(self) -> CardSecurity:
        """`inner`'s: the forwarded SPIFFE ID stands in for the certificate it states."""
        return self.inner.card_security()

    def authenticate(self, presented: Presented) -> str | None:
        values = presented.values(XFCC_HEADER)
        if not values:
            return self.inner.authenticate(presented)
        if not is_trusted(presented.remote, self.trusted_proxies):
            raise AuthenticationError(
                f"{XFCC_HEADER} is accepted only from a trusted proxy (--trusted-proxy); this "
                f"connection comes from {presented.remote or 'an address that is not IP'}"
            )
        try:
            forwarded = forwarded_spiffe_id(values, self.trust_domains)
        except IdentityProblem as exc:
            raise AuthenticationError(str(exc)) from None
        return self.inner.authenticate(replace(presented, peer={"peer_uri": [forwarded.encode()]}))


@dataclass(frozen=True)
class AnyOf:
    """Tries each authenticator in turn; the first that finds credentials decides."""

    authenticators: tuple[Authenticator, ...]

    @property
    def headers(self) -> Sequence[str]:
        return _headers(self.authenticators)

    def card_security(self) -> CardSecurity:
        """Any one of its members' requirements will do."""
        return CardSecurity.any_of(a.card_security() for a in self.authenticators)

    def authenticate(self, presented: Presented) -> str:
        for authenticator in self.authenticators:
            principal = authenticator.authenticate(presented)
            if principal is not None:
                return principal
        wants = [getattr(a, "wants", "credentials") for a in self.authenticators]
        raise AuthenticationError(
            "this server needs credentials: send " + " or ".join(dict.fromkeys(wants))
        )


@dataclass(frozen=True)
class AllOf:
    """Every authenticator must find valid credentials; the first one's principal is the caller.

    With bearer tokens and client certificates both configured, the TLS handshake already
    requires a certificate (grpc's Python server cannot make it optional), so both are required:
    the certificate admits the connection and the token names the principal.
    """

    authenticators: tuple[Authenticator, ...]

    @property
    def headers(self) -> Sequence[str]:
        return _headers(self.authenticators)

    def card_security(self) -> CardSecurity:
        """One requirement of each member's, together."""
        return CardSecurity.all_of(a.card_security() for a in self.authenticators)

    def authenticate(self, presented: Presented) -> str:
        principals = [a.authenticate(presented) for a in self.authenticators]
        if any(principal is None for principal in principals):
            raise AuthenticationError(
                "this server needs both a client certificate and 'authorization: Bearer <token>'"
            )
        return principals[0] or ""


def check_token_principals(tokens: Mapping[str, str], source: str = "") -> None:
    """ValueError (one line, after `source`: where the tokens came from) when a token's
    principal is one only a certificate or a JWT may be (a RESERVED_PREFIXES prefix): a token
    must never pass for them."""
    reserved = sorted({p for p in tokens.values() if p.startswith(RESERVED_PREFIXES)})
    if reserved:
        raise ValueError(
            f"{source}token principals may not start with {' or '.join(RESERVED_PREFIXES)} "
            f"(those of certificates and JWTs): {', '.join(map(repr, reserved))}"
        )


def load_tokens(path: str | None, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Tokens from a JSON file `{"<token>": "<principal>", ...}` and/or `A2A_GRPC_TOKENS`.

    The environment form is `token1=alice,token2=bob`. Entries from the file win on conflict.
    Fails closed: a file that is unreadable, malformed or holds no token is a ValueError, never
    a server that quietly serves everyone; so is a principal of a reserved prefix
    (`check_token_principals`), at start-up as at a reload.
    """
    tokens: dict[str, str] = {}
    for entry in environ.get(TOKENS_ENV, "").split(","):
        token, sep, principal = entry.strip().partition("=")
        if entry.strip() and (not sep or not token or not principal):
            raise ValueError(f"{TOKENS_ENV}: expected token=principal, got {entry.strip()!r}")
        if sep:
            tokens[token] = principal
    if environ.get(TOKENS_ENV, "").strip() and not tokens:
        raise ValueError(f"{TOKENS_ENV} is set but names no token=principal entry")
    check_token_principals(tokens, f"{TOKENS_ENV}: ")
    if path:
        try:
            loaded = json.loads(Path(path).read_text())
        except OSError as exc:
            raise ValueError(f"--auth-tokens {path}: {exc.strerror or exc}") from exc
        except ValueError as exc:
            raise ValueError(f"--auth-tokens {path}: not JSON ({exc})") from exc
        if not isinstance(loaded, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and k and v for k, v in loaded.items()
        ):
            raise ValueError(f'--auth-tokens {path}: expected {{"<token>": "<principal>"}}')
        if not loaded:
            raise ValueError(
                f"--auth-tokens {path}: the file names no token; refusing to start without "
                'authentication (expected {"<token>": "<principal>"})'
            )
        check_token_principals(loaded, f"--auth-tokens {path}: ")
        tokens.update(loaded)
    return tokens


async def caller_of(
    authenticator: Authenticator, presented: Presented
) -> str | AuthenticationError:
    """The caller's principal, or the refusal to answer with UNAUTHENTICATED. An authenticator
    that is pending (AuthenticationPending) is asked again once its wait is over."""
    for last in (False, True):
        try:
            principal = authenticator.authenticate(presented)
        except AuthenticationError as exc:
            return exc
        except AuthenticationPending as pending:
            if last:
                return AuthenticationError(str(pending))
            await pending.wait()
            continue
        break
    return principal if principal is not None else AuthenticationError("credentials are required")


def set_caller(caller: str | AuthenticationError) -> None:
    """Makes `caller` the current call's caller (what `current_principal` answers in this
    context): each transport sets it as a call arrives."""
    _caller.set(caller)


def _headers(authenticators: Iterable[Authenticator]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(key for a in authenticators for key in a.headers))


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()
