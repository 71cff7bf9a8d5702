"""Our server in a child process, and the official a2a-sdk client in this one.

This directory runs in a pytest process of its own: the SDK's generated module registers the
same lf.a2a.v1 symbols as ours, so nothing here may import a2a_grpc.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.client.client import Client
from a2a.types import a2a_pb2 as sdk

LAUNCHER = Path(__file__).with_name("our_server.py")


def _launch(*args: str) -> Iterator[int]:
    for grpc_port, _ in _launch_ports(*args):
        yield grpc_port


def _launch_http(*args: str) -> Iterator[str]:
    """Our server in a child process: the base URL of its HTTP port."""
    for _, http_port in _launch_ports(*args):
        yield f"http://127.0.0.1:{http_port}"


def _launch_ports(*args: str) -> Iterator[tuple[int, int]]:
    """Our server in a child process: its (gRPC port, HTTP port)."""
    with subprocess.Popen(
        [sys.executable, str(LAUNCHER), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert line.startswith("PORT "), f"our server did not start: {line!r}"
            words = line.split()
            yield int(words[1]), int(words[3])
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    yield from _launch()


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """The base URL of our server's HTTP port (card, JSON-RPC and HTTP+JSON)."""
    yield from _launch_http()


@pytest.fixture(scope="module")
def secure_http_url() -> Iterator[str]:
    """Like `http_url`, for a server that requires the bearer token `sdk-token`."""
    yield from _launch_http("--secure")


@pytest.fixture(scope="module")
def strict_http_url() -> Iterator[str]:
    """Like `http_url`, for the `--strict` server (required extension, text/plain only)."""
    yield from _launch_http("--strict")


@pytest.fixture(scope="module")
def oauth2_http_url() -> Iterator[str]:
    """Like `http_url`, for a card with an OAuth2 scheme that has 1.0-only parts."""
    yield from _launch_http("--oauth2")


@pytest.fixture(scope="module")
def no_compat_http_url() -> Iterator[str]:
    """Like `http_url`, for a server that does not serve A2A 0.3 callers."""
    yield from _launch_http("--no-compat-03")


@pytest.fixture(scope="module")
def v03_fields_http_url() -> Iterator[str]:
    """Like `http_url`, for a server whose HTTP card carries A2A 0.3's fields too
    (`serve --card-v03-fields`)."""
    yield from _launch_http("--card-v03-fields")


@pytest.fixture(scope="module")
def secure_v03_fields_http_url() -> Iterator[str]:
    """Like `secure_http_url`, with `--card-v03-fields`."""
    yield from _launch_http("--secure", "--card-v03-fields")


@pytest.fixture(scope="module")
def oauth2_v03_fields_http_url() -> Iterator[str]:
    """Like `oauth2_http_url`, with `--card-v03-fields`."""
    yield from _launch_http("--oauth2", "--card-v03-fields")


@pytest.fixture(scope="module")
def strict_port() -> Iterator[int]:
    yield from _launch("--strict")


@pytest.fixture(scope="module")
def secure_port() -> Iterator[int]:
    yield from _launch("--secure")


@pytest.fixture(scope="module")
def no_compat_port() -> Iterator[int]:
    yield from _launch("--no-compat-03")


@pytest.fixture(scope="module")
def unconfigured_port() -> Iterator[int]:
    yield from _launch("--unconfigured")


def card_for(
    port: int, *, streaming: bool = True, extended: bool = False, version: str = "1.0"
) -> sdk.AgentCard:
    """A card with one gRPC interface of `version`: "0.3" makes the SDK use its 0.3 client."""
    return sdk.AgentCard(
        name="a2a-grpc under test",
        description="our server",
        version="0.1.0",
        supported_interfaces=[
            sdk.AgentInterface(
                url=f"127.0.0.1:{port}", protocol_binding="GRPC", protocol_version=version
            )
        ],
        capabilities=sdk.AgentCapabilities(streaming=streaming, extended_agent_card=extended),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[sdk.AgentSkill(id="echo", name="echo", description="echo", tags=["echo"])],
    )


async def make_client(
    port: int, *, streaming: bool, extended: bool = False, version: str = "1.0"
) -> Client:
    card = card_for(port, streaming=streaming, extended=extended, version=version)
    return await make_client_for_card(card, streaming=streaming)


async def make_client_for_card(card: sdk.AgentCard, *, streaming: bool) -> Client:
    """The SDK's client for `card`, over gRPC (its 0.3 client for a 0.3 interface)."""
    config = ClientConfig(
        streaming=streaming,
        supported_protocol_bindings=["GRPC"],
        grpc_channel_factory=grpc.aio.insecure_channel,
    )
    return ClientFactory(config).create(card)


@pytest.fixture
async def blocking_client(port: int) -> AsyncIterator[Client]:
    client = await make_client(port, streaming=False)
    yield client
    await client.close()


@pytest.fixture
async def streaming_client(port: int) -> AsyncIterator[Client]:
    client = await make_client(port, streaming=True)
    yield client
    await client.close()
