"""Caller identity: pluggable authenticators, and the current call's caller.

Each transport authenticates every A2A call before the protocol sees it (gRPC's interceptor,
transports/grpc/auth.py; the HTTP bindings themselves) and sets its caller (`set_caller`); the
call gate's first step asks for the principal (`current_principal`), so a caller without valid
credentials gets UNAUTHENTICATED before any lookup and learns nothing about which tasks exist.
The principal scopes every task operation (with the request's tenant).

Configured with neither tokens nor client certificates, the server authenticates nothing and
serves every caller as the anonymous principal "".
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

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


RESERVED_PREFIXES = ("cert:", "jwt:")
"""Principals starting so are those of client certificates and JWTs: no static token may name
one, so that a principal names one kind of credential only."""


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


class Authenticator(Protocol):
    """Turns a call's metadata and TLS peer into a principal, or raises AuthenticationError.

    Returns None when this authenticator found no credentials of its kind (so another may try).
    """

    def authenticate(
        self, metadata: Sequence[tuple[str, str | bytes]], peer: Mapping[str, Sequence[bytes]]
    ) -> str | None: ...


class BearerTokens:
    """`authorization: Bearer <token>` → principal, from a fixed table of tokens."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        self.replace(tokens)

    def replace(self, tokens: Mapping[str, str]) -> None:
        """From now on `tokens` are the valid ones (and only they); ValueError when empty."""
        if not tokens:
            raise ValueError("at least one token is needed")
        reserved = sorted({p for p in tokens.values() if p.startswith(RESERVED_PREFIXES)})
        if reserved:
            raise ValueError(
                f"token principals may not start with {' or '.join(RESERVED_PREFIXES)} (those of "
                f"certificates and JWTs): {', '.join(map(repr, reserved))}"
            )
        # Keyed by digest so lookups do not compare secrets character by character.
        self._principals = {_digest(token): principal for token, principal in tokens.items()}

    def authenticate(
        self, metadata: Sequence[tuple[str, str | bytes]], peer: Mapping[str, Sequence[bytes]]
    ) -> str | None:
        header = next((v for k, v in metadata if k == "authorization"), None)
        if header is None:
            return None
        text = header.decode() if isinstance(header, bytes) else header
        scheme, _, token = text.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthenticationError("authorization must be 'Bearer <token>'")
        principal = self._principals.get(_digest(token.strip()))
        if principal is None:
            raise AuthenticationError("the bearer token is not valid")
        return principal


class ClientCertificates:
    """mTLS: the principal is the verified client certificate's subject common name."""

    def authenticate(
        self, metadata: Sequence[tuple[str, str | bytes]], peer: Mapping[str, Sequence[bytes]]
    ) -> str | None:
        names = peer.get("x509_common_name") or peer.get("x509_subject_alternative_name")
        if not names:
            return None
        return "cert:" + names[0].decode()


@dataclass(frozen=True)
class AnyOf:
    """Tries each authenticator in turn; the first that finds credentials decides."""

    authenticators: tuple[Authenticator, ...]

    def authenticate(
        self, metadata: Sequence[tuple[str, str | bytes]], peer: Mapping[str, Sequence[bytes]]
    ) -> str:
        for authenticator in self.authenticators:
            principal = authenticator.authenticate(metadata, peer)
            if principal is not None:
                return principal
        raise AuthenticationError(
            "this server needs credentials: send 'authorization: Bearer <token>'"
            + (" or a client certificate" if self._takes_certificates else "")
        )

    @property
    def _takes_certificates(self) -> bool:
        return any(isinstance(a, ClientCertificates) for a in self.authenticators)


@dataclass(frozen=True)
class AllOf:
    """Every authenticator must find valid credentials; the first one's principal is the caller.

    With bearer tokens and client certificates both configured, the TLS handshake already
    requires a certificate (grpc's Python server cannot make it optional), so both are required:
    the certificate admits the connection and the token names the principal.
    """

    authenticators: tuple[Authenticator, ...]

    def authenticate(
        self, metadata: Sequence[tuple[str, str | bytes]], peer: Mapping[str, Sequence[bytes]]
    ) -> str:
        principals = [a.authenticate(metadata, peer) for a in self.authenticators]
        if any(principal is None for principal in principals):
            raise AuthenticationError(
                "this server needs both a client certificate and 'authorization: Bearer <token>'"
            )
        return principals[0] or ""


def load_tokens(path: str | None, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Tokens from a JSON file `{"<token>": "<principal>", ...}` and/or `A2A_GRPC_TOKENS`.

    The environment form is `token1=alice,token2=bob`. Entries from the file win on conflict.
    Fails closed: a file that is unreadable, malformed or holds no token is a ValueError, never
    a server that quietly serves everyone.
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
        tokens.update(loaded)
    return tokens


async def caller_of(
    authenticator: Authenticator,
    metadata: Sequence[tuple[str, str | bytes]],
    peer: Mapping[str, Sequence[bytes]],
) -> str | AuthenticationError:
    """The caller's principal, or the refusal to answer with UNAUTHENTICATED. An authenticator
    that is pending (AuthenticationPending) is asked again once its wait is over."""
    for last in (False, True):
        try:
            principal = authenticator.authenticate(metadata, peer)
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


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()
