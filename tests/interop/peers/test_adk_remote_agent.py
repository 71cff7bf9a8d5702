"""Google ADK 2.13.0 as a caller of our server: ADK's `RemoteA2aAgent` (google.adk.agents.
remote_a2a_agent), the root agent of an ADK runner, run in ADK's own environment as a child
process (tests/interop/adk/remote_client.py) against the demo agent served here over JSON-RPC.
What ADK keeps is its session's events; the child prints them, and what `run_async` yielded, as
JSON. This module imports only a2a_grpc and the standard library, never ADK or the SDK.

How ADK takes our card:
- as an object, or from a JSON file: the card as served at /.well-known/agent-card.json works;
  ADK's client factory picks our JSONRPC interface (it speaks JSON-RPC and HTTP+JSON, not
  gRPC).
- by URL: ADK refuses our card as served, "Agent card RPC URL must use https, or http on a
  loopback host: 127.0.0.1:<port>". ADK checks every interface of a card it fetched as if it
  were an HTTP URL, the ones it would never use included, and our GRPC interface's url is
  `host:port`, as the proto says a GRPC url is (`AgentInterface.url`: 'For GRPC, "host:port"').
  It also wants every interface on the origin the card came from, so a gRPC interface on its
  own port would be refused even as `http://`. ADK is wrong here: nothing in the spec (digest)
  ties a card's interfaces to its origin or to an HTTP scheme, and a GRPC interface's url is
  `host:port` by definition. A card that lists only our HTTP interfaces (what `serve --card
  FILE` serves from a file listing just them) works by URL.

What ADK does with what we send, and who is right (against the A2A 1.0 spec digest):
- an artifact becomes an event that is `partial` unless the update says `lastChunk`, and ADK's
  runner keeps no partial event: that is why a whole artifact must say `lastChunk: true`
  (decision §9.13; before it, ADK kept nothing of `hello`'s echo);
- a chunked artifact (`chunks 3`: `append` on the 2nd and 3rd, `lastChunk` on the 3rd): ADK
  yields each chunk, the first two partial, but keeps only the last chunk's parts ("chunk 3 of
  3"), as if the closing update replaced the artifact (ADK's model, per the docstring of
  `_artifact_event_id` in its to_adk_event.py: chunks "closed by a `last_chunk` update that
  replaces it whole (`append=False`)", what ADK's own server sends).
  The spec disagrees: `append` means "append to the earlier artifact with the same id" (digest
  §1.4, TaskArtifactUpdateEvent; the proto: "Extend the parts of the artifact with the same id
  instead of replacing it"), so the last chunk holds its own parts only and the artifact is all
  three; our server and its stored task have them all. ADK is wrong; the test pins what ADK
  keeps, so it shows when ADK changes;
- INPUT_REQUIRED becomes a long-running call `mock_function_call_for_required_user_input` with
  our question; a plain text turn, or a function_response to that call, continues the same
  task, and the answer completes it. The continuation's first event (the Task, SUBMITTED)
  repeats our question as a thought, from the task's history;
- FAILED is an event with our status text (no `error_message`: ADK sets one only in its task
  mode);
- cancel: ADK cannot. RemoteA2aAgent never calls CancelTask; closing its run (aclose(), what
  cancelling the invocation does) only closes the SSE stream, and the task goes on WORKING here,
  as a dropped stream should leave it (digest §3.6: reconnecting is opening a new stream, and a
  client may miss events while disconnected). We cancel it ourselves afterwards.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf import json_format

from a2a_grpc.client import A2AClient
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.app import RunningServer, ServerPlan, start_server
from a2a_grpc.server.card import Serving, finalize_card
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.demo_agent import DemoAgent
from tests.interop.peers.conftest import ROOT, _child_env

# The first test may build ADK's environment (tests/interop/adk/adk_env.py): pip's time.
pytestmark = pytest.mark.timeout(900)

REMOTE_CLIENT = ROOT / "tests" / "interop" / "adk" / "remote_client.py"
QUESTION = "What would you like me to echo? Reply on this task."
INPUT_CALL = "mock_function_call_for_required_user_input"


@pytest.fixture
async def server() -> AsyncIterator[RunningServer]:
    config = ServerConfig(host="127.0.0.1", port=0, http_port=0, drain_delay=0, shutdown_grace=0.5)
    running = await start_server(ServerPlan(config, DemoAgent()))
    yield running
    await running.stop(0)


async def served_card(running: RunningServer) -> dict[str, Any]:
    assert running.card_url is not None
    async with httpx.AsyncClient() as http:
        response = await http.get(running.card_url)
    response.raise_for_status()
    card: dict[str, Any] = response.json()
    return card


def serve_http_interfaces_only(running: RunningServer) -> a2a_pb2.AgentCard:
    """Serves, from now on, the card `serve --card FILE` makes of a file that lists only the
    HTTP interfaces (JSON-RPC and HTTP+JSON at the HTTP port), and returns it."""
    assert running.http_server is not None and running.public is not None
    card = a2a_pb2.AgentCard()
    card.CopyFrom(running.handler.card)
    kept = [i for i in card.supported_interfaces if i.protocol_binding != "GRPC"]
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(kept)
    config = running.handler.config
    final = finalize_card(
        card,
        Serving(
            running.public.grpc,
            http_url=running.public.http,
            http_bindings=config.http_bindings,
            v03=config.compat_03,
        ),
    )
    running.http_server.set_card(final, v03=config.compat_03)
    return final


async def adk(adk_python: Path, card: str, scenarios: dict[str, Any]) -> dict[str, Any]:
    """Runs the scenarios with ADK's RemoteA2aAgent in its own environment (while this loop
    serves), and returns what it printed, scenario by scenario."""
    child = await asyncio.create_subprocess_exec(
        str(adk_python),
        "-I",
        str(REMOTE_CLIENT),
        card,
        json.dumps(scenarios),
        cwd=ROOT,
        env=_child_env(),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await child.communicate()
    assert child.returncode == 0, err.decode(errors="replace")[-4000:]
    results: dict[str, Any] = json.loads(out)
    for name, result in results.items():
        assert result["error"] is None, (name, result["error"])
    return results


def ours(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [event for event in events if event["author"] == "our_server"]


def kept_artifacts(result: dict[str, Any]) -> dict[str, list[str]]:
    """What ADK's session kept of each artifact: its id, and the texts of its events."""
    kept: dict[str, list[str]] = {}
    for event in ours(result["session"]):
        if event["artifact_id"]:
            kept.setdefault(event["artifact_id"], []).extend(event["texts"])
    return kept


async def our_task(running: RunningServer, task_id: str) -> a2a_pb2.Task:
    async with A2AClient.connect(running.address, timeout=10) as client:
        return await client.get_task(task_id)


def task_id_of(result: dict[str, Any]) -> str:
    ids = {event["task_id"] for event in ours(result["session"]) if event["task_id"]}
    assert len(ids) == 1, ids
    return ids.pop()


async def test_adk_takes_our_card_from_a_file(
    server: RunningServer, adk_python: Path, tmp_path: Path
) -> None:
    card_file = tmp_path / "card.json"
    card_file.write_text(json.dumps(await served_card(server)))
    results = await adk(
        adk_python,
        str(card_file),
        {
            "hello": {"turns": ["hello"]},
            "chunks": {"turns": ["chunks 3"]},
            "ask": {"turns": ["ask", "Ada"]},
            "ask_adk_way": {"turns": ["ask", {"answer": "Grace"}]},
            "fail": {"turns": ["fail"]},
            "cancel": {"cancel": "slow 30"},
        },
    )

    # hello: the echo's artifact is in ADK's session, whole, and the task completed.
    hello = results["hello"]
    task = await our_task(server, task_id_of(hello))
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert kept_artifacts(hello) == {task.artifacts[0].artifact_id: ["hello"]}
    assert ours(hello["session"])[-1]["state"] == "TASK_STATE_COMPLETED"

    # chunks 3: ADK yielded every chunk, but keeps the last one only (see the docstring).
    chunks = results["chunks"]
    task = await our_task(server, task_id_of(chunks))
    artifact = task.artifacts[0]
    assert [p.text for p in artifact.parts] == [f"chunk {i} of 3\n" for i in (1, 2, 3)]
    yielded = [(e["texts"], e["partial"]) for e in ours(chunks["turns"][0]) if e["artifact_id"]]
    assert yielded == [
        (["chunk 1 of 3\n"], True),
        (["chunk 2 of 3\n"], True),
        (["chunk 3 of 3\n"], False),
    ]
    assert kept_artifacts(chunks) == {artifact.artifact_id: ["chunk 3 of 3\n"]}

    # ask, then answer: in text, and as ADK's function_response to the call it made of it.
    for name, answer in (("ask", "Ada"), ("ask_adk_way", "Grace")):
        result = results[name]
        asked, answered = result["turns"]
        question = ours(asked)[-1]
        assert question["state"] == "TASK_STATE_INPUT_REQUIRED"
        [call] = question["function_calls"]
        assert call["name"] == INPUT_CALL and call["args"] == {"input_required": QUESTION}
        assert question["long_running_tool_ids"] == [call["id"]]
        task = await our_task(server, task_id_of(result))  # one task for both turns
        assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
        assert task.history[-2].parts[0].text == answer  # what ADK sent us
        assert kept_artifacts(result) == {task.artifacts[0].artifact_id: [answer]}
        assert ours(answered)[-1]["texts"] == [f"Thanks, got it: {answer}"]
        assert ours(result["session"])[-1]["state"] == "TASK_STATE_COMPLETED"

    # fail: a FAILED task, its reason in ADK's session.
    failed = results["fail"]
    task = await our_task(server, task_id_of(failed))
    assert task.status.state == a2a_pb2.TASK_STATE_FAILED
    last = ours(failed["session"])[-1]
    assert last["state"] == "TASK_STATE_FAILED"
    assert last["texts"] == ["asked to fail: the demo agent gave up on purpose"]

    # cancel: ADK only closes its stream; the task goes on until someone cancels it.
    task_id = task_id_of(results["cancel"])
    assert (await our_task(server, task_id)).status.state in (
        a2a_pb2.TASK_STATE_SUBMITTED,
        a2a_pb2.TASK_STATE_WORKING,
    )
    async with A2AClient.connect(server.address, timeout=10) as client:
        canceled = await client.cancel_task(task_id)
    assert canceled.status.state == a2a_pb2.TASK_STATE_CANCELED

    # Every call ADK made went over JSON-RPC.
    async with httpx.AsyncClient() as http:
        assert server.http_server is not None
        metrics = (await http.get(f"{server.http_server.base_url}/metrics")).text
    sends = [
        line
        for line in metrics.splitlines()
        if line.startswith("a2a_rpc_requests_total") and "SendStreamingMessage" in line
    ]
    assert sends and all('transport="jsonrpc"' in line for line in sends), sends


async def test_adk_takes_our_card_as_an_object(
    server: RunningServer, adk_python: Path, tmp_path: Path
) -> None:
    card_file = tmp_path / "card.json"
    card_file.write_text(json.dumps(await served_card(server)))
    results = await adk(adk_python, f"object:{card_file}", {"hello": {"turns": ["hello"]}})
    task = await our_task(server, task_id_of(results["hello"]))
    assert kept_artifacts(results["hello"]) == {task.artifacts[0].artifact_id: ["hello"]}


async def test_by_url_adk_refuses_a_card_with_a_grpc_interface(
    server: RunningServer, adk_python: Path
) -> None:
    assert server.card_url is not None
    results = await adk(adk_python, server.card_url, {"hello": {"turns": ["hello"]}})
    [refused] = ours(results["hello"]["session"])
    assert refused["error_message"].endswith(
        f"Agent card RPC URL must use https, or http on a loopback host: 127.0.0.1:{server.port}"
    )
    assert refused["task_id"] is None  # it never called us


async def test_by_url_adk_takes_a_card_of_http_interfaces_only(
    server: RunningServer, adk_python: Path
) -> None:
    card = serve_http_interfaces_only(server)
    assert {i.protocol_binding for i in card.supported_interfaces} == {"JSONRPC", "HTTP+JSON"}
    served = json_format.ParseDict(
        await served_card(server), a2a_pb2.AgentCard(), ignore_unknown_fields=True
    )
    assert served.supported_interfaces == card.supported_interfaces
    assert server.card_url is not None
    results = await adk(
        adk_python,
        server.card_url,
        {"hello": {"turns": ["hello"]}, "ask": {"turns": ["ask", "Ada"]}},
    )
    task = await our_task(server, task_id_of(results["hello"]))
    assert kept_artifacts(results["hello"]) == {task.artifacts[0].artifact_id: ["hello"]}
    task = await our_task(server, task_id_of(results["ask"]))
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert kept_artifacts(results["ask"]) == {task.artifacts[0].artifact_id: ["Ada"]}
