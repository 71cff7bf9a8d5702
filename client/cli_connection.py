"""How a client command reaches its agent: `Connection` opens the client the command's options
describe (TARGET as a card URL or a gRPC target, TLS, the bearer token, the message signer, the
audit log) and closes it. A bad option is a UsageError, which the command reports in one line
(client/cli.py).
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from a2a_grpc.client.audit import ClientAuditLog
from a2a_grpc.client.card import DEFAULT_CARD_TIMEOUT_S, DEFAULT_TRANSPORTS, CardResolver
from a2a_grpc.client.channel import ChannelOptions, TlsConfig, channel_target
from a2a_grpc.client.client import A2AClient
from a2a_grpc.client.credentials import (
    BearerToken,
    ClientCredentialsToken,
    Credentials,
    TokenFile,
)
from a2a_grpc.client.retry import RetryPolicy
from a2a_grpc.client.signing import MessageSigner
from a2a_grpc.client.transports.http import create_http_client
from a2a_grpc.core import audit_chain
from a2a_grpc.core.budget import BUDGET_EXTENSION
from a2a_grpc.core.jose import KeyFormatError
from a2a_grpc.generated import a2a_pb2

SEND_RETRY = RetryPolicy(max_attempts=4, max_backoff_s=2.0)
"""SendMessage from the command line: fewer and shorter retries than the library's default, so a
person learns sooner that the agent cannot be reached."""

HOST_PORT = re.compile(
    r"^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.\-_]*[A-Za-z0-9])?):(\d{1,5})$"
)
"""A gRPC target's `host:port` (a host name, an IPv4 or a bracketed IPv6 address); group 1
is the port."""


class UsageError(Exception):
    """Bad command-line input; reported in one line with exit code 2."""


class Connection:
    """`async with Connection(args) as client`: resolves TARGET, opens, closes."""

    def __init__(self, args: argparse.Namespace) -> None:
        self._args = args
        self._client: A2AClient | None = None
        self._audit: ClientAuditLog | None = None

    async def __aenter__(self) -> A2AClient:
        args = self._args
        if args.audit_log:
            try:
                self._audit = ClientAuditLog(args.audit_log)
            except OSError as error:
                raise UsageError(
                    f"cannot append to the audit log {args.audit_log}: {error.strerror or error}"
                ) from error
            except audit_chain.NotAChainError as error:
                raise UsageError(f"--audit-log: {error}") from error
        try:
            self._client = await self._open(args)
        except BaseException:
            if self._audit is not None:
                await self._audit.aclose()  # nothing was recorded
            raise
        return self._client

    async def _open(self, args: argparse.Namespace) -> A2AClient:
        """A client to TARGET: a card URL picks its interface (`--transport` narrows the pick
        to one binding), anything else is a gRPC target."""
        tls = tls_config(args)
        extensions = list(args.extension)
        if getattr(args, "budget", None) is not None and BUDGET_EXTENSION not in extensions:
            extensions.append(BUDGET_EXTENSION)  # the agent learns that a budget was asked for
        common: dict[str, Any] = {
            "extensions": extensions,
            "credentials": credentials_from_args(args),
            "retry": SEND_RETRY,
            "audit": self._audit,
            "signer": _signer(args),
        }
        if args.tenant is not None:
            common["tenant"] = args.tenant
        options = ChannelOptions(lb_policy=args.lb_policy)
        if args.max_message_size is not None:
            options = replace(
                options,
                max_send_message_bytes=args.max_message_size,
                max_receive_message_bytes=args.max_message_size,
            )
        if is_url(args.target):
            card = await fetch_card(args.target, args.timeout, tls)
            return A2AClient.for_card(
                card,
                transports=allowed_transports(args),
                tls=tls,
                channel_options=options,
                **common,
            )
        _check_grpc_target(args.target)
        if args.transport not in (None, "grpc"):
            raise UsageError(
                f"--transport {args.transport} needs the URL of an agent card as TARGET "
                f"(host:port is a gRPC target)"
            )
        several = len(channel_target(args.target).addresses) > 1
        if several and tls is not None and tls.server_name_override is None:
            raise UsageError(
                "TLS to several addresses needs --server-name NAME, the name the servers' "
                "certificates are checked against"
            )
        return A2AClient.connect(args.target, tls=tls, channel_options=options, **common)

    async def __aexit__(self, *exc_info: object) -> None:
        if self._client is not None:
            await self._client.close()
        audit = self._audit
        if audit is not None:
            await audit.aclose()
            if audit.lost or audit.unwritten_bytes:
                self._args.audit_incomplete = (
                    f"the audit log {audit.path} could not be written: the records of this "
                    "command's calls are missing from it"
                )


def credentials_from_args(args: argparse.Namespace) -> Credentials | None:
    """The bearer token the command sends: `--token`, `--token-file` or the `--oauth-*` client
    credentials (one of them); else $A2A_TOKEN_FILE, else $A2A_TOKEN; else none."""
    oauth = {
        name: getattr(args, f"oauth_{name}")
        for name in ("token_url", "client_id", "client_secret_file", "scope", "audience")
    }
    given = [
        option
        for option, value in (
            ("--token", args.token),
            ("--token-file", args.token_file),
            ("--oauth-token-url", oauth["token_url"]),
        )
        if value
    ]
    if len(given) > 1:
        raise UsageError(f"{' and '.join(given)} each give the token: use one")
    if oauth["token_url"]:
        missing = [
            f"--oauth-{name.replace('_', '-')}"
            for name in ("client_id", "client_secret_file")
            if not oauth[name]
        ]
        if missing:
            raise UsageError(f"--oauth-token-url needs {' and '.join(missing)}")
        try:
            return ClientCredentialsToken(
                oauth["token_url"],
                oauth["client_id"],
                client_secret_file=oauth["client_secret_file"],
                scope=oauth["scope"],
                audience=oauth["audience"],
                auth_in_body=args.oauth_client_auth == "client_secret_post",
            )
        except ValueError as error:
            raise UsageError(f"--oauth-token-url: {error}") from error
    others = [f"--oauth-{name.replace('_', '-')}" for name, value in oauth.items() if value]
    if others:
        raise UsageError(f"{' and '.join(others)} go with --oauth-token-url URL")
    if args.token:
        return BearerToken(args.token)
    token_file = args.token_file or os.environ.get("A2A_TOKEN_FILE")
    if token_file:
        return TokenFile(token_file)
    token = os.environ.get("A2A_TOKEN")
    return BearerToken(token) if token else None


def _check_grpc_target(text: str) -> None:
    """UsageError unless `text` is a gRPC target the client takes."""
    if "," in text:
        try:
            channel_target(text)
        except ValueError as error:
            raise UsageError(f"bad TARGET: {error}") from error
        return
    name = text.removeprefix("dns:///")
    match = HOST_PORT.match(name)
    if match is None or not 0 < int(match.group(1)) < 65536:
        raise UsageError(
            f"bad TARGET {text!r}: expected host:port, ip:port,ip:port,... , dns:///host:port "
            "or an http(s) URL of an agent card"
        )


def allowed_transports(args: argparse.Namespace) -> tuple[str, ...]:
    """The bindings the client may use: `--transport`'s, else all (the card's order picks)."""
    return (args.transport,) if args.transport else DEFAULT_TRANSPORTS


async def fetch_card(url: str, timeout_s: float | None, tls: TlsConfig | None) -> a2a_pb2.AgentCard:
    """The card at `url`, fetched over HTTPS with the command's TLS settings (`--ca`,
    `--cert/--key`, `--server-name`)."""
    try:
        http = create_http_client(tls)
    except ValueError as error:
        raise UsageError(str(error)) from error
    except OSError as error:  # PEM data the ssl module cannot load
        raise UsageError(f"cannot use the TLS files: {error}") from error
    async with (
        http,
        CardResolver(http, timeout_s=timeout_s or DEFAULT_CARD_TIMEOUT_S) as resolver,
    ):
        try:
            return await resolver.get(url)
        except ValueError as error:
            raise UsageError(f"bad TARGET {url!r}: {error}") from error


def _signer(args: argparse.Namespace) -> MessageSigner | None:
    """`send --sign-key PEM --sign-kid KID [--sign-card URL]`; None for other commands."""
    key, kid, card = (getattr(args, name, None) for name in ("sign_key", "sign_kid", "sign_card"))
    if not key and not kid and not card:
        return None
    if not key or not kid:
        raise UsageError("--sign-key and --sign-kid go together (--sign-card needs both)")
    try:
        pem = Path(key).read_bytes()
    except OSError as error:
        raise UsageError(f"cannot read --sign-key {key!r}: {error.strerror}") from error
    try:
        return MessageSigner.from_pem(pem, kid, card_url=card or "")
    except KeyFormatError as error:
        raise UsageError(f"--sign-key {key!r}: {error}") from error
    except ValueError as error:
        raise UsageError(f"--sign-card {card!r}: {error}") from error


def is_url(text: str) -> bool:
    """Whether TARGET is an agent card's URL (else it is a gRPC target)."""
    return text.startswith(("http://", "https://"))


def tls_config(args: argparse.Namespace) -> TlsConfig | None:
    """The TLS settings `--tls`, `--ca`, `--cert`/`--key` and `--server-name` give (None:
    plaintext); UsageError for a pair given by half or a file that cannot be read."""
    if not (args.tls or args.ca or args.cert or args.key or args.server_name):
        return None
    if bool(args.cert) != bool(args.key):
        raise UsageError("--cert and --key go together")
    try:
        return TlsConfig.from_files(args.ca, args.cert, args.key, args.server_name)
    except OSError as error:
        raise UsageError(f"cannot read a TLS file: {error}") from error
