"""Credentials sent on every call: bearer tokens (fixed, from a file that rotates, or from an
OAuth2 token endpoint), API keys, your own.

`A2AClient` awaits `Credentials.metadata()` before every call and sends the entries as gRPC
metadata, or as HTTP headers on the JSON-RPC and HTTP+JSON bindings (`authorization: Bearer ...`
becomes `Authorization: Bearer ...`), so a credential that changes is picked up on the next call
whatever the transport.

- `BearerToken(token)`: one fixed token.
- `TokenFile(path)`: the token a file holds, re-read when the file changes (Kubernetes
  projected service-account tokens and SPIFFE JWT-SVIDs written by an agent rotate hourly). One
  `os.stat` per call decides: a change of inode, device, size or modification time re-reads it,
  so a token is never sent after its file has changed.
- `ClientCredentialsToken(token_url, client_id, ...)`: OAuth 2.0 client credentials (RFC 6749
  §4.4), fetched from the token endpoint and cached until shortly before it expires; one fetch
  at a time however many calls wait for it.
- `ApiKey(name, value)`: an API key in the header a card's APIKeySecurityScheme names.

A credential that cannot be had raises `CredentialsError` naming the file or endpoint, never the
secret.
"""

from __future__ import annotations

import asyncio
import base64
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote_plus

import httpx

from a2a_grpc.client.errors import CredentialsError

DEFAULT_REFRESH_MARGIN_S = 60.0
"""Seconds before a token endpoint's token expires that `ClientCredentialsToken` fetches anew."""
DEFAULT_TOKEN_LIFETIME_S = 300.0
"""How long a token whose response has no `expires_in` is used (RFC 6749 only recommends it)."""
TOKEN_ENDPOINT_TIMEOUT_S = 10.0
"""Seconds one token request may take."""


class Credentials(Protocol):
    """Supplies metadata entries for one call; awaited before every call, so it may refresh.

    Keys must be lowercase (gRPC refuses uppercase metadata keys).
    """

    async def metadata(self) -> Sequence[tuple[str, str]]:
        """The (key, value) entries to send with the next call. CredentialsError when they
        cannot be had: the call fails with it, unsent."""
        ...


@dataclass(frozen=True)
class BearerToken:
    """`authorization: Bearer <token>` (the HTTP auth scheme a card declares as `bearer`)."""

    token: str = field(repr=False)
    """The token, as the server expects it after `Bearer `; kept out of `repr`."""

    async def metadata(self) -> Sequence[tuple[str, str]]:
        """`Credentials.metadata`: the one `authorization` entry."""
        return (("authorization", f"Bearer {self.token}"),)


@dataclass(frozen=True)
class ApiKey:
    """An API key in the metadata entry a card's APIKeySecurityScheme names (location header)."""

    name: str
    """The header the scheme names (`X-API-Key`); sent lowercased, as gRPC requires."""
    value: str = field(repr=False)
    """The key; kept out of `repr`."""

    async def metadata(self) -> Sequence[tuple[str, str]]:
        """`Credentials.metadata`: the one entry `(name.lower(), value)`."""
        return ((self.name.lower(), self.value),)


FileSignature = tuple[int, int, int, int]
"""(device, inode, size, mtime in ns): what tells a rewritten or replaced file from the last one."""


RACY_WINDOW_NS = 2_000_000_000
"""A file modified this recently (ns) may be rewritten again within the file system's timestamp
granularity (a few ms; 2 s on some) without its signature changing, so it is read again."""


def file_signature(path: str | os.PathLike[str]) -> FileSignature:
    """The signature of the file at `path` (symbolic links followed, so the `..data` link swap
    of a Kubernetes volume is a change); OSError when it cannot be stat'ed."""
    stat = os.stat(path)
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


def racy(signature: FileSignature | None) -> bool:
    """Whether a file with this signature was modified too recently for its signature to prove
    it unchanged (git's "racily clean" rule): a rewrite within the same timestamp tick, keeping
    the size, would leave the signature as it was."""
    return signature is not None and time.time_ns() - signature[3] < RACY_WINDOW_NS


class TokenFile:
    """`authorization: Bearer <token>` with the token the file at `path` holds (surrounding
    whitespace stripped), re-read whenever the file changed since it was last read.

    Every call stats the file (one system call); a new inode, size or modification time means
    a re-read, so once the file has changed the old token is never sent again. A file changed
    while it was being read, or modified in the last 2 seconds (a same-size rewrite within one
    file-system timestamp tick would not change the signature), is read again on the next
    call. CredentialsError, naming the path, when the file is missing, unreadable or empty.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        """The file holding the token (a symbolic link is followed at each stat)."""
        self._signature: FileSignature | None = None
        self._token = ""

    def __repr__(self) -> str:
        return f"TokenFile({str(self.path)!r})"

    def token(self) -> str:
        """The token the file holds now; CredentialsError when there is none."""
        try:
            before = file_signature(self.path)
            if before == self._signature:
                return self._token
            text = self.path.read_text(encoding="utf-8")
            after = file_signature(self.path)
        except OSError as error:
            raise CredentialsError(
                f"cannot read the token file {self.path}: {error.strerror or error}"
            ) from error
        except UnicodeDecodeError as error:
            raise CredentialsError(f"the token file {self.path} is not UTF-8 text") from error
        token = text.strip()
        if not token:
            raise CredentialsError(f"the token file {self.path} is empty")
        # Changed between the two stats (this read may be torn), or so recently that a rewrite
        # might not show in the signature: the next call reads again.
        self._signature = before if before == after and not racy(before) else None
        self._token = token
        return token

    async def metadata(self) -> Sequence[tuple[str, str]]:
        """`Credentials.metadata`: `authorization: Bearer <token>`, the file read again if it
        changed; CredentialsError when it is missing, unreadable or empty."""
        return (("authorization", f"Bearer {self.token()}"),)


class ClientCredentialsToken:
    """`authorization: Bearer <token>` with an access token from an OAuth 2.0 token endpoint,
    by the client credentials grant (RFC 6749 §4.4).

    The request is a form-encoded POST of `grant_type=client_credentials` (with `scope` and
    `audience` when given; `audience` is what Auth0, Okta and RFC 8707-style endpoints use to
    name the API). The client authenticates with HTTP Basic (§2.3.1: id and secret
    form-encoded, then base64), or with `client_id`/`client_secret` in the body when
    `auth_in_body` (§2.3.1 allows it for endpoints that take nothing else). The secret is
    `client_secret`, or read from `client_secret_file` at each fetch (so a rotated secret is
    used on the next one).

    The token is cached until `expires_in` minus `refresh_margin_s` (at most half its lifetime
    for short-lived tokens), measured on `clock` (monotonic seconds; a test passes its own);
    without `expires_in`, `DEFAULT_TOKEN_LIFETIME_S`. Concurrent calls share one fetch (an
    asyncio lock). If a refresh fails while the cached token has not yet expired, that token
    is still used; otherwise the failure is a CredentialsError naming the endpoint and the OAuth
    `error` (and `error_description`) it answered, never the secret.

    `http`: an httpx client of yours for the token requests (e.g. with your CA), left open;
    else a short-lived one per fetch, verifying TLS against `verify` (an `ssl.SSLContext`, or
    True for the system trust store).
    """

    def __init__(
        self,
        token_url: str,
        client_id: str,
        client_secret: str | None = None,
        *,
        client_secret_file: str | os.PathLike[str] | None = None,
        scope: str | None = None,
        audience: str | None = None,
        auth_in_body: bool = False,
        refresh_margin_s: float = DEFAULT_REFRESH_MARGIN_S,
        timeout_s: float = TOKEN_ENDPOINT_TIMEOUT_S,
        http: httpx.AsyncClient | None = None,
        verify: Any = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if (client_secret is None) == (client_secret_file is None):
            raise ValueError("give one of client_secret and client_secret_file")
        if not token_url.startswith(("http://", "https://")):
            raise ValueError(f"the token endpoint {token_url!r} is not an http(s) URL")
        self.token_url = token_url
        """The token endpoint's http(s) URL (ValueError for another)."""
        self.client_id = client_id
        """The OAuth 2.0 client id."""
        self._secret = client_secret
        self._secret_file = Path(client_secret_file) if client_secret_file is not None else None
        self.scope = scope
        """The `scope` asked for (space-separated scopes); None: not sent."""
        self.audience = audience
        """The `audience` asked for (the API the token is for); None: not sent."""
        self.auth_in_body = auth_in_body
        """Send the client id and secret in the form body instead of HTTP Basic."""
        self.refresh_margin_s = refresh_margin_s
        """Seconds before the token expires that a new one is fetched (60; at most half the
        token's lifetime)."""
        self.timeout_s = timeout_s
        """Seconds one token request may take (10)."""
        self._http = http
        self._verify = verify
        self._clock = clock
        self._lock = asyncio.Lock()
        self._token = ""
        self._refresh_at = 0.0
        self._expires_at = 0.0

    def __repr__(self) -> str:
        return f"ClientCredentialsToken({self.token_url!r}, {self.client_id!r})"

    async def token(self) -> str:
        """A current access token: the cached one, or a new one from the endpoint."""
        if self._token and self._clock() < self._refresh_at:
            return self._token
        async with self._lock:
            now = self._clock()
            if self._token and now < self._refresh_at:  # fetched while this call waited
                return self._token
            try:
                token, lifetime = await self._fetch()
            except CredentialsError:
                if self._token and now < self._expires_at:
                    return self._token  # the endpoint failed, but this one is still valid
                raise
            margin = min(self.refresh_margin_s, lifetime / 2)
            self._token = token
            self._expires_at = now + lifetime
            self._refresh_at = now + lifetime - margin
            return token

    async def metadata(self) -> Sequence[tuple[str, str]]:
        """`Credentials.metadata`: `authorization: Bearer <token>`, fetched first when the
        cached one is due (see the class); CredentialsError when none can be had."""
        return (("authorization", f"Bearer {await self.token()}"),)

    def _client_secret(self) -> str:
        if self._secret is not None:
            return self._secret
        assert self._secret_file is not None
        try:
            secret = self._secret_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
            raise CredentialsError(
                f"cannot read the client secret file {self._secret_file}: {reason or error}"
            ) from error
        if not secret:
            raise CredentialsError(f"the client secret file {self._secret_file} is empty")
        return secret

    async def _fetch(self) -> tuple[str, float]:
        """(access token, lifetime in seconds) from the token endpoint."""
        secret = self._client_secret()
        form = {"grant_type": "client_credentials"}
        if self.scope:
            form["scope"] = self.scope
        if self.audience:
            form["audience"] = self.audience
        headers = {"accept": "application/json"}
        if self.auth_in_body:
            form["client_id"] = self.client_id
            form["client_secret"] = secret
        else:
            pair = f"{quote_plus(self.client_id)}:{quote_plus(secret)}"
            headers["authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        try:
            if self._http is not None:
                response = await self._post(self._http, form, headers)
            else:
                async with httpx.AsyncClient(verify=self._verify, follow_redirects=False) as http:
                    response = await self._post(http, form, headers)
        except httpx.HTTPError as error:
            raise CredentialsError(
                f"cannot reach the token endpoint {self.token_url}: "
                f"{type(error).__name__}: {error or 'no details'}",
                retryable=True,
            ) from error
        return self._token_of(response)

    async def _post(
        self, http: httpx.AsyncClient, form: dict[str, str], headers: dict[str, str]
    ) -> httpx.Response:
        return await http.post(self.token_url, data=form, headers=headers, timeout=self.timeout_s)

    def _token_of(self, response: httpx.Response) -> tuple[str, float]:
        where = f"the token endpoint {self.token_url}"
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code != 200:
            if isinstance(body, dict) and isinstance(body.get("error"), str):
                described = body.get("error_description")
                detail = body["error"] + (f" ({described})" if isinstance(described, str) else "")
                raise CredentialsError(
                    f"{where} refused the client {self.client_id!r}: {detail}",
                    retryable=response.status_code >= 500,
                )
            raise CredentialsError(
                f"{where} answered HTTP {response.status_code}",
                retryable=response.status_code >= 500,
            )
        if not isinstance(body, dict):
            raise CredentialsError(f"{where} answered something that is not a JSON object")
        token = body.get("access_token")
        if not isinstance(token, str) or not token:
            raise CredentialsError(f"{where} answered no access_token")
        token_type = body.get("token_type", "bearer")
        if not isinstance(token_type, str) or token_type.lower() != "bearer":
            raise CredentialsError(f"{where} answered a {token_type!r} token, not a bearer token")
        expires_in = body.get("expires_in", DEFAULT_TOKEN_LIFETIME_S)
        if isinstance(expires_in, str) and expires_in.isdigit():  # some endpoints quote it
            expires_in = int(expires_in)
        if isinstance(expires_in, bool) or not isinstance(expires_in, int | float):
            raise CredentialsError(f"{where} answered an expires_in that is not a number")
        return token, max(float(expires_in), 0.0)
