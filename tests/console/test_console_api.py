"""The console's back end over real HTTP, without a browser: a gRPC `host:port` TARGET, what the
page is told when its input is wrong, and an agent that cannot be reached."""

from __future__ import annotations

import socket
from typing import Any

import aiohttp
import pytest

from a2a_grpc.server.app import ServerPlan, start_server
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.demo_agent import DemoAgent
from tests.console.browser import Console, console
from tests.integration.conftest import Factory, make_server

__all__ = ["make_server"]

pytestmark = pytest.mark.timeout(120)


async def call(running: Console, method: str, path: str, **kw: Any) -> tuple[int, Any]:
    headers = {"X-Console-Token": running.token}
    async with (
        aiohttp.ClientSession(base_url=running.base, headers=headers) as http,
        http.request(method, path, **kw) as response,
    ):
        return response.status, await response.json()


def adjacent_free_ports() -> int:
    """A port P such that P and P + 1 are free now (an a2a-grpc server's default pair)."""
    for _ in range(50):
        with socket.socket() as first:
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            with socket.socket() as second:
                try:
                    second.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
                return int(port)
    raise AssertionError("no two adjacent free ports in 50 tries")


async def test_a_grpc_target_shows_the_public_card_and_sends_over_grpc() -> None:
    """host:port: GetExtendedAgentCard is refused (the demo has none), so the card shown is the
    public one an a2a-grpc server serves on the gRPC port + 1, as `card host:port` finds it."""
    port = adjacent_free_ports()
    config = ServerConfig(host="127.0.0.1", port=port, http_port=port + 1, drain_delay=0)
    running = await start_server(ServerPlan(config, DemoAgent(), None))
    try:
        async with console(f"127.0.0.1:{port}") as con:
            status, card = await call(con, "GET", "/api/card")
            assert status == 200, card
            assert card["source"].startswith(f"http://127.0.0.1:{port + 1}/")
            assert "the public card (GetExtendedAgentCard: " in card["source"]
            status, sent = await call(con, "POST", "/api/send", json={"text": "hello"})
            assert status == 200 and sent["task"]["state"] == "completed", sent
            status, session = await call(con, "GET", "/api/session")
            assert session["interface"]["protocolBinding"] == "GRPC"
    finally:
        await running.stop(0)


async def test_wrong_input_is_a_usage_error_that_says_what_to_fix(make_server: Factory) -> None:
    harness = await make_server(http_port=0)
    assert harness.running.card_url is not None
    async with console(harness.running.card_url) as running:
        status, body = await call(running, "POST", "/api/send", json={"data": "{not json"})
        assert status == 400 and body["error"]["category"] == "usage"
        assert "data is not valid JSON" in body["error"]["message"]
        status, body = await call(running, "POST", "/api/send", json={})
        assert status == 400 and "at least one part" in body["error"]["message"]
        status, body = await call(running, "GET", "/api/tasks?state=sleepy")
        assert status == 400 and "bad filter" in body["error"]["message"]
        status, body = await call(running, "POST", "/api/send", json={"text": "x", "budget": "-1"})
        assert status == 400 and "budget" in body["error"]["message"]


async def test_an_unreachable_agent_is_a_could_not_talk_error() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with console(f"127.0.0.1:{port}", "--timeout", "5") as running:
        status, body = await call(running, "GET", "/api/tasks")
        assert status == 502
        error = body["error"]
        assert error["category"] == "could-not-talk" and error["retryable"] is True, error
        assert error["code"] in ("UNAVAILABLE", "DEADLINE_EXCEEDED"), error
