"""The console's back end over real HTTP, without a browser: a gRPC `host:port` TARGET, what the
page is told when its input is wrong, and an agent that cannot be reached."""

from __future__ import annotations

import json
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


async def test_send_options_and_task_filters_reach_the_agent(make_server: Factory) -> None:
    harness = await make_server(http_port=0)
    assert harness.running.card_url is not None
    async with console(harness.running.card_url) as running:
        # Accepted output modes: a data part the caller takes only as text comes back as text.
        status, sent = await call(
            running,
            "POST",
            "/api/send",
            json={"text": "hi", "data": '{"a": 1}', "acceptedOutputModes": ["text/plain"]},
        )
        assert status == 200, sent
        parts = sent["task"]["artifacts"][0]["parts"]
        assert [p["kind"] for p in parts] == ["text", "text"] and json.loads(parts[1]["text"]) == {
            "a": 1
        }
        context = sent["task"]["contextId"]
        # History length: at most that many messages of the history.
        status, sent = await call(
            running, "POST", "/api/send", json={"text": "again", "historyLength": 1}
        )
        assert status == 200 and len(sent["task"]["history"]) <= 1, sent
        # A budget (budget extension, activated on the call): over it, the agent refuses.
        status, sent = await call(
            running, "POST", "/api/send", json={"text": "spend 0.50", "budget": "0.10"}
        )
        assert status == 200 and sent["task"]["state"] == "rejected", sent
        # Return immediately: the task comes back before it is done.
        status, sent = await call(
            running, "POST", "/api/send", json={"text": "slow 30", "returnImmediately": True}
        )
        assert status == 200 and sent["task"]["state"] in ("submitted", "working"), sent
        slow = sent["task"]["id"]
        # Filters and paging.
        status, listed = await call(running, "GET", "/api/tasks?state=rejected")
        assert [t["state"] for t in listed["tasks"]] == ["rejected"], listed
        status, listed = await call(running, "GET", f"/api/tasks?contextId={context}")
        assert [t["contextId"] for t in listed["tasks"]] == [context], listed
        status, first = await call(running, "GET", "/api/tasks?pageSize=2")
        assert len(first["tasks"]) == 2 and first["nextPageToken"], first
        status, second = await call(
            running, "GET", f"/api/tasks?pageSize=2&pageToken={first['nextPageToken']}"
        )
        ids = {t["id"] for t in first["tasks"]} | {t["id"] for t in second["tasks"]}
        assert len(ids) == 4 and first["totalSize"] == 4, (first, second)
        status, canceled = await call(running, "POST", f"/api/tasks/{slow}/cancel")
        assert status == 200 and canceled["task"]["state"] == "canceled", canceled
