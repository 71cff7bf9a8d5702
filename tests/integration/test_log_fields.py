"""Log records logged during a call name its method, principal, task and context, whichever
transport the call came by (the filter `serve` installs; JSON lines: test_serve_reload_and_logs)."""

from __future__ import annotations

import json
import logging

import aiohttp
import pytest

from a2a_grpc.server.ops.logs import CallFields
from tests.integration.conftest import Factory, send_request
from tests.integration.logging_agent import LoggingAgent


@pytest.fixture
def records(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="tests.logging_agent")
    caplog.handler.addFilter(CallFields())
    return caplog


def agent_record(caplog: pytest.LogCaptureFixture, text: str) -> logging.LogRecord:
    return next(r for r in caplog.records if r.getMessage() == f"agent at work on {text}")


async def test_records_of_a_grpc_call_name_it(
    make_server: Factory, records: pytest.LogCaptureFixture
) -> None:
    harness = await make_server(agent=LoggingAgent(), tokens={"t-alice": "alice"})
    response = await harness.stub.SendMessage(
        send_request("grpc"), metadata=(("authorization", "Bearer t-alice"),)
    )
    record = agent_record(records, "grpc")
    assert (record.method, record.principal) == ("SendMessage", "alice")  # type: ignore[attr-defined]
    assert record.task_id == response.task.id  # type: ignore[attr-defined]
    assert record.context_id == response.task.context_id  # type: ignore[attr-defined]


async def test_records_of_a_jsonrpc_call_name_it(
    make_server: Factory, records: pytest.LogCaptureFixture
) -> None:
    harness = await make_server(agent=LoggingAgent(), tokens={"t-bob": "bob"}, http_port=0)
    assert harness.running.http_server is not None
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": "m-1",
                "contextId": "my-context",
                "role": "ROLE_USER",
                "parts": [{"text": "jsonrpc"}],
            }
        },
    }
    headers = {"Content-Type": "application/json", "Authorization": "Bearer t-bob"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            harness.running.http_server.base_url + "/", data=json.dumps(body), headers=headers
        ) as response,
    ):
        task = (await response.json())["result"]["task"]
    record = agent_record(records, "jsonrpc")
    assert (record.method, record.principal) == ("SendMessage", "bob")  # type: ignore[attr-defined]
    assert (record.task_id, record.context_id) == (task["id"], "my-context")  # type: ignore[attr-defined]
