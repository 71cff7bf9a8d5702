"""Whole artifacts say so (spec decision §9.13): an artifact an agent records in one piece,
`add_artifact` without `append` and without an explicit `last_chunk`, goes out with `last_chunk`
true, over every transport; chunked artifacts keep `append` / `last_chunk` as the agent set
them. Google ADK reads an artifact without `lastChunk` as the start of a chunked one and keeps
nothing of it.

Covers the demo agent (echo, the answer of `ask`, `chunks N`) and the README's agent
(`Shouter`, taken from the README as written), over gRPC 1.0, gRPC 0.3 and JSON-RPC."""

from __future__ import annotations

import json
import types
from collections.abc import AsyncIterator

import aiohttp
import pytest

from a2a_grpc.generated import a2a_pb2, a2a_v03_pb2, a2a_v03_pb2_grpc
from a2a_grpc.server.agent import RequestContext, TaskEvents
from tests.integration.bindings import sse_data
from tests.integration.conftest import VERSION, Factory, Harness, collect, send_request
from tests.integration.test_compat_v03 import collect as collect_v03
from tests.integration.test_compat_v03 import v03_send
from tests.integration.test_serve_agents import _writing_an_agent


def chunks_of(events: list[a2a_pb2.StreamResponse]) -> list[tuple[str, bool, bool]]:
    """(text, append, last_chunk) of each artifact update on a stream."""
    return [
        (
            "".join(part.text for part in event.artifact_update.artifact.parts),
            event.artifact_update.append,
            event.artifact_update.last_chunk,
        )
        for event in events
        if event.HasField("artifact_update")
    ]


async def stream(
    harness: Harness, request: a2a_pb2.SendMessageRequest
) -> list[a2a_pb2.StreamResponse]:
    return await collect(harness.stub.SendStreamingMessage(request, metadata=VERSION))


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def test_the_demo_echo_is_one_last_chunk(demo: Harness) -> None:
    events = await stream(demo, send_request("hello"))
    assert chunks_of(events) == [("hello", False, True)]
    assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_the_answer_to_ask_is_one_last_chunk(demo: Harness) -> None:
    asked = await stream(demo, send_request("ask"))
    assert chunks_of(asked) == []
    task = asked[0].task
    answer = send_request("Ada", task_id=task.id, context_id=task.context_id)
    events = await stream(demo, answer)
    assert chunks_of(events) == [("Ada", False, True)]
    assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_chunked_artifacts_keep_append_and_last_chunk(demo: Harness) -> None:
    assert chunks_of(await stream(demo, send_request("chunks 3"))) == [
        ("chunk 1 of 3\n", False, False),
        ("chunk 2 of 3\n", True, False),
        ("chunk 3 of 3\n", True, True),
    ]
    # One chunk is the first and the last: a whole artifact.
    assert chunks_of(await stream(demo, send_request("chunks 1"))) == [
        ("chunk 1 of 1\n", False, True)
    ]


async def test_the_readme_agent_sends_a_whole_artifact(make_server: Factory) -> None:
    name, code, _ = _writing_an_agent()
    module = types.ModuleType(name.removesuffix(".py"))
    exec(compile(code, name, "exec"), module.__dict__)  # the README's code, as written
    harness = await make_server(agent=module.Shouter())
    events = await stream(harness, send_request("hello"))
    assert chunks_of(events) == [("HELLO", False, True)]
    assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


class Spelled:
    """Each way of calling `add_artifact`: default, replace, explicit chunks, explicit whole."""

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        first = await events.add_artifact([a2a_pb2.Part(text="draft")])
        await events.add_artifact([a2a_pb2.Part(text="final")], artifact_id=first)  # replaces
        chunked = await events.add_artifact([a2a_pb2.Part(text="a")], last_chunk=False)
        await events.add_artifact([a2a_pb2.Part(text="b")], artifact_id=chunked, append=True)
        await events.add_artifact(
            [a2a_pb2.Part(text="c")], artifact_id=chunked, append=True, last_chunk=True
        )
        await events.add_artifact([a2a_pb2.Part(text="whole")], last_chunk=True)
        await events.complete()


async def test_only_an_explicit_last_chunk_false_or_append_starts_a_chunked_artifact(
    make_server: Factory,
) -> None:
    harness = await make_server(agent=Spelled())
    events = await stream(harness, send_request("go"))
    assert chunks_of(events) == [
        ("draft", False, True),
        ("final", False, True),
        ("a", False, False),
        ("b", True, False),
        ("c", True, True),
        ("whole", False, True),
    ]
    stored = await harness.stub.GetTask(
        a2a_pb2.GetTaskRequest(id=events[0].task.id), metadata=VERSION
    )
    assert ["".join(p.text for p in a.parts) for a in stored.artifacts] == ["final", "abc", "whole"]


async def test_a_0_3_caller_sees_last_chunk_too(demo: Harness) -> None:
    stub = a2a_v03_pb2_grpc.A2AServiceStub(demo.channel)
    for text, expected in (
        ("hello", [(False, True)]),
        ("chunks 2", [(False, False), (True, True)]),
    ):
        events = await collect_v03(stub.SendStreamingMessage(v03_send(text)))
        updates = [e.artifact_update for e in events if e.HasField("artifact_update")]
        assert [(u.append, u.last_chunk) for u in updates] == expected, text
        assert events[-1].status_update.status.state == a2a_v03_pb2.TASK_STATE_COMPLETED


async def test_json_rpc_says_last_chunk_true(
    make_server: Factory, http: aiohttp.ClientSession
) -> None:
    harness = await make_server(http_port=0)
    assert harness.running.http_server is not None
    url = harness.running.http_server.base_url + "/"
    seen = []
    for text in ("hello", "chunks 2"):
        payload = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendStreamingMessage",
            "params": {
                "message": {"messageId": text, "role": "ROLE_USER", "parts": [{"text": text}]}
            },
        }
        headers = {"A2A-Version": "1.0"}
        async with http.post(url, json=payload, headers=headers) as response:
            assert response.content_type == "text/event-stream"
            results = [json.loads(data)["result"] async for data in sse_data(response)]
        seen.append([r["artifactUpdate"] for r in results if "artifactUpdate" in r])
    hello, chunks = seen
    assert [(u.get("append"), u.get("lastChunk")) for u in hello] == [(None, True)]
    assert [(u.get("append"), u.get("lastChunk")) for u in chunks] == [(None, None), (True, True)]
