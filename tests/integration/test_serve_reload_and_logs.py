"""A real `a2a-grpc serve`: SIGHUP makes it read its token file and TLS files again, and say so
on stderr (the tests wait for that line, never for the clock); its JSON log lines name the call
and task they were logged in."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import grpc
import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from google.protobuf import json_format

from a2a_grpc.core.canonical import canonicalize
from a2a_grpc.core.jose import KeySet, verify_detached
from a2a_grpc.core.signing import card_signing_keys, verify_card
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.server.trust.auth import TOKENS_ENV
from tests.integration.certs import Authority
from tests.integration.conftest import send_request

ROOT = Path(__file__).resolve().parents[2]
BOUND = 30.0
"""Upper bound on any one wait for the server (it answers in milliseconds)."""


class Served:
    """A running `a2a-grpc serve` child: its gRPC port and its stderr, line by line."""

    def __init__(self, process: asyncio.subprocess.Process, port: int) -> None:
        self.process = process
        self.port = port

    async def hangup_and_read(self, says: str) -> str:
        """Sends SIGHUP and returns the first stderr line after it that contains `says`."""
        self.process.send_signal(signal.SIGHUP)
        return await self.read(says)

    async def read(self, says: str) -> str:
        """The next stderr line that contains `says`."""
        assert self.process.stderr is not None
        while True:
            line = (await asyncio.wait_for(self.process.stderr.readline(), BOUND)).decode()
            assert line, "the server exited"
            if says in line:
                return line


Start = Callable[..., Awaitable[Served]]


@pytest.fixture
async def serve() -> AsyncIterator[Start]:
    started: list[asyncio.subprocess.Process] = []

    async def start(*options: str) -> Served:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop(TOKENS_ENV, None)
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "a2a_grpc.cli.main",
            "serve",
            "--port",
            "0",
            "--drain-delay",
            "0",
            *options,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=ROOT,  # so that --agent finds the tests' agents
        )
        started.append(process)
        assert process.stdout is not None
        first = (await asyncio.wait_for(process.stdout.readline(), BOUND)).decode()
        if "--log-format" in options and "json" in options:  # the start-up lines follow it
            entry = json.loads(first)
            assert entry["logger"] == "a2a_grpc.serve" and entry["level"] == "INFO", first
            first = entry["message"]
        assert "serving A2A 1.0 over gRPC" in first, first
        return Served(process, int(first.rsplit(":", 1)[1]))

    yield start
    for process in started:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                assert await asyncio.wait_for(process.wait(), BOUND) == 0
            finally:
                if process.returncode is None:
                    process.kill()


async def send(channel: grpc.aio.Channel, token: str | None = None) -> grpc.StatusCode:
    metadata = () if token is None else (("authorization", f"Bearer {token}"),)
    try:
        await a2a_pb2_grpc.A2AServiceStub(channel).SendMessage(
            send_request(), metadata=metadata, timeout=BOUND
        )
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


async def test_sighup_reloads_the_token_file_and_keeps_it_when_broken(
    serve: Start, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"old-token": "alice"}))
    served = await serve("--auth-tokens", str(tokens))
    async with grpc.aio.insecure_channel(f"127.0.0.1:{served.port}") as channel:
        assert await send(channel, "old-token") == grpc.StatusCode.OK

        tokens.write_text(json.dumps({"new-token": "alice", "other-token": "bob"}))
        line = await served.hangup_and_read("SIGHUP")
        assert "reloaded the bearer tokens (2)" in line
        assert await send(channel, "new-token") == grpc.StatusCode.OK
        assert await send(channel, "old-token") == grpc.StatusCode.UNAUTHENTICATED

        tokens.write_text("{not json")
        line = await served.hangup_and_read("SIGHUP")
        assert "kept the previous bearer tokens" in line and "not JSON" in line
        assert await send(channel, "new-token") == grpc.StatusCode.OK

        tokens.write_text("{}")
        line = await served.hangup_and_read("SIGHUP")
        assert "kept the previous bearer tokens" in line and "names no token" in line
        assert await send(channel, "other-token") == grpc.StatusCode.OK


async def tls_send(port: int, ca: bytes) -> grpc.StatusCode:
    credentials = grpc.ssl_channel_credentials(root_certificates=ca)
    async with grpc.aio.secure_channel(f"127.0.0.1:{port}", credentials) as channel:
        return await send(channel)


async def test_sighup_swaps_the_certificate_and_keeps_it_when_the_key_is_wrong(
    serve: Start, tmp_path: Path
) -> None:
    first, second = Authority("first CA"), Authority("second CA")
    cert, key = tmp_path / "server.pem", tmp_path / "server.key"
    pem = first.issue("server", server=True)
    cert.write_bytes(pem.certificate)
    key.write_bytes(pem.key)
    served = await serve("--tls-cert", str(cert), "--tls-key", str(key))
    assert await tls_send(served.port, first.certificate) == grpc.StatusCode.OK

    renewed = second.issue("server", server=True)
    cert.write_bytes(renewed.certificate)
    key.write_bytes(renewed.key)
    line = await served.hangup_and_read("SIGHUP")
    assert "reloaded the TLS certificate" in line
    assert await tls_send(served.port, second.certificate) == grpc.StatusCode.OK
    assert await tls_send(served.port, first.certificate) == grpc.StatusCode.UNAVAILABLE

    key.write_bytes(second.issue("someone else", server=True).key)
    line = await served.hangup_and_read("SIGHUP")
    assert "kept the previous TLS certificate" in line and "does not match" in line
    assert await tls_send(served.port, second.certificate) == grpc.StatusCode.OK


async def test_json_log_lines_name_the_method_principal_task_and_context(
    serve: Start, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"alice-token": "alice"}))
    served = await serve(
        "--auth-tokens",
        str(tokens),
        "--log-format",
        "json",
        "--agent",
        "tests.integration.logging_agent:LoggingAgent",
        "--http-port",
        "0",
    )
    async with grpc.aio.insecure_channel(f"127.0.0.1:{served.port}") as channel:
        response = await a2a_pb2_grpc.A2AServiceStub(channel).SendMessage(
            send_request("over grpc"),
            metadata=(("authorization", "Bearer alice-token"),),
            timeout=BOUND,
        )
    entry = json.loads(await served.read("agent at work on over grpc"))
    assert entry["logger"] == "tests.logging_agent" and entry["level"] == "INFO"
    assert entry["method"] == "SendMessage" and entry["principal"] == "alice"
    assert entry["task_id"] == response.task.id
    assert entry["context_id"] == response.task.context_id


async def test_sighup_without_tokens_or_tls_says_so_and_serves_on(serve: Start) -> None:
    served = await serve()
    line = await served.hangup_and_read("SIGHUP")
    assert "nothing to reload" in line
    async with grpc.aio.insecure_channel(f"127.0.0.1:{served.port}") as channel:
        assert await send(channel) == grpc.StatusCode.OK


@pytest.mark.parametrize("options", [(), ("--card-v03-fields",)], ids=["1.0", "with 0.3 fields"])
async def test_sighup_publishes_new_signing_keys_on_the_card_signed_again(
    serve: Start, tmp_path: Path, options: tuple[str, ...]
) -> None:
    old, new = ed25519.Ed25519PrivateKey.generate(), ed25519.Ed25519PrivateKey.generate()
    jwks = tmp_path / "a.jwks.json"
    jwks.write_text(json.dumps({"keys": []}))  # none yet: a reload must still publish them
    card_key = ed25519.Ed25519PrivateKey.generate()
    pem = tmp_path / "card.pem"
    pem.write_bytes(
        card_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    served = await serve(
        "--http-port",
        "0",
        "--publish-signing-keys",
        str(jwks),
        "--card-signing-key",
        str(pem),
        "--card-signing-kid",
        "card-1",
        *options,
    )
    assert served.process.stdout is not None
    second = (await asyncio.wait_for(served.process.stdout.readline(), BOUND)).decode()
    url = second.split("agent card at ", 1)[1].split(";", 1)[0].strip()
    card_keys = KeySet.of_private_keys({"card-1": card_key})

    async def published() -> set[str]:
        async with httpx.AsyncClient() as http:
            document = (await http.get(url, timeout=BOUND)).json()
        card = json_format.ParseDict(document, a2a_pb2.AgentCard(), ignore_unknown_fields=True)
        assert verify_card(card, card_keys) == "card-1"  # signed again with the new keys on it
        # The reload serves the card as the start did: with 0.3's fields only when asked, and
        # with a signature over the document as served.
        assert ("preferredTransport" in document) is bool(options)
        if not options:
            json_format.ParseDict(document, a2a_pb2.AgentCard())  # strict 1.0
        served_payload = canonicalize({k: v for k, v in document.items() if k != "signatures"})
        last = document["signatures"][-1]
        token = f"{last['protected']}..{last['signature']}"
        verify_detached(token, served_payload, card_keys, now=time.time())
        return set(card_signing_keys(card))

    assert await published() == set()
    jwks.write_text(json.dumps(KeySet.of_private_keys({"a-1": old, "a-2": new}).to_jwks()))
    line = await served.hangup_and_read("SIGHUP")
    assert "published the signing keys" in line and "(2)" in line
    assert await published() == {"a-1", "a-2"}

    jwks.write_text("{not json")
    line = await served.hangup_and_read("SIGHUP")
    assert "kept the previously published signing keys" in line
    assert await published() == {"a-1", "a-2"}
