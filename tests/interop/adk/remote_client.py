"""Google ADK's `RemoteA2aAgent` as a caller of an A2A agent, run as a child process by the tests
in tests/interop/peers (ADK → our server).

It runs in ADK's own virtual environment (tests/interop/adk/adk_env.py builds it), imports only
ADK, the a2a-sdk it brought and the standard library, and never a2a_grpc. The `RemoteA2aAgent`
is the root agent of an ADK `InMemoryRunner`, so what ADK keeps is its session's events.

    .venv/peers/adk/bin/python -I tests/interop/adk/remote_client.py CARD SCENARIOS

CARD is the agent card as ADK takes it: an `http(s)://` URL (ADK fetches and checks it), a file
path (ADK reads the JSON file), or `object:PATH` (this script parses the JSON file into the
SDK's `AgentCard` and hands ADK the object). SCENARIOS is a JSON object naming scenarios, each
run with a `RemoteA2aAgent` and a session of its own, one after the other; a scenario is one of:
- `{"turns": ["hello", ...]}`: one session, each text one user turn, each turn run to its end;
  a turn `{"answer": TEXT}` is ADK's own way of answering a remote INPUT_REQUIRED: a
  function_response `{"result": TEXT}` to the long-running call ADK made of it (the session's
  last event with a long-running tool id);
- `{"cancel": "slow 30"}`: one turn, whose run is closed (`aclose()`, what cancelling an ADK
  invocation does to the agent's generator) once ADK has yielded the first event that names
  the remote task.

Prints one JSON object on stdout, each scenario's name with its result, and exits 0, whatever
ADK did; a result is
    {"turns": [[<event>, ...], ...], "session": [<event>, ...], "error": null | "<text>"}
`turns` holds what `run_async` yielded per turn (partial events included), `session` what the
session kept at the end. An <event> is the part of an ADK Event the tests read: `id`, `author`,
`partial`, `artifact_id` (the remote artifact an artifact update's event holds, else null),
`texts` (non-thought text parts), `thoughts`, `function_calls` ({id, name, args}),
`function_responses` ({id, name, response}), `long_running_tool_ids`, `error_message`, and from
its `custom_metadata` the remote `task_id`, `context_id` and `state` (the task's state in the
response it came from). `error` is an exception escaping ADK (its type and text), else null.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import uuid
import warnings
from typing import Any

from google.adk.a2a.agent._remote_a2a_agent import A2A_METADATA_PREFIX
from google.adk.agents.remote_a2a_agent import RemoteA2aAgent
from google.adk.events import Event
from google.adk.runners import InMemoryRunner
from google.adk.sessions import Session
from google.genai import types

APP = "a2a_grpc_interop"
USER = "tester"


def _summary(event: Event) -> dict[str, Any]:
    parts = (event.content.parts if event.content else None) or []
    metadata = event.custom_metadata or {}
    response = metadata.get(A2A_METADATA_PREFIX + "response")
    status = response.get("status") if isinstance(response, dict) else None
    artifacts = response.get("artifacts") if isinstance(response, dict) else None
    return {
        "artifact_id": next(
            (
                artifact["artifactId"]
                for artifact in artifacts or ()
                if _artifact_event_id(artifact.get("artifactId", ""), event.invocation_id)
                == event.id
            ),
            None,
        ),
        "id": event.id,
        "author": event.author,
        "partial": bool(event.partial),
        "texts": [p.text for p in parts if p.text is not None and not p.thought],
        "thoughts": [p.text for p in parts if p.text is not None and p.thought],
        "function_calls": [
            {"id": p.function_call.id, "name": p.function_call.name, "args": p.function_call.args}
            for p in parts
            if p.function_call is not None
        ],
        "function_responses": [
            {
                "id": p.function_response.id,
                "name": p.function_response.name,
                "response": p.function_response.response,
            }
            for p in parts
            if p.function_response is not None
        ],
        "long_running_tool_ids": sorted(event.long_running_tool_ids or ()),
        "error_message": event.error_message,
        "task_id": metadata.get(A2A_METADATA_PREFIX + "task_id"),
        "context_id": metadata.get(A2A_METADATA_PREFIX + "context_id"),
        "state": status.get("state") if isinstance(status, dict) else None,
    }


def _artifact_event_id(artifact_id: str, invocation_id: str) -> str:
    """The event id ADK gives every event of one artifact's updates (to_adk_event.py's
    `_artifact_event_id`), so that an event can be told to come from an artifact update."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{invocation_id}:{artifact_id}"))


def _card(source: str) -> Any:
    if not source.startswith("object:"):
        return source
    from a2a.client.card_resolver import parse_agent_card

    with open(source.removeprefix("object:"), encoding="utf-8") as file:
        return parse_agent_card(json.load(file))


def _user(turn: str | dict[str, str], session: Session) -> types.Content:
    if isinstance(turn, str):
        return types.Content(role="user", parts=[types.Part(text=turn)])
    pending = next(e for e in reversed(session.events) if e.long_running_tool_ids)
    call = next(
        call for call in pending.get_function_calls() if call.id in pending.long_running_tool_ids
    )
    response = types.FunctionResponse(
        id=call.id, name=call.name, response={"result": turn["answer"]}
    )
    return types.Content(role="user", parts=[types.Part(function_response=response)])


async def _session(runner: InMemoryRunner, session_id: str) -> Session:
    kept = await runner.session_service.get_session(
        app_name=APP, user_id=USER, session_id=session_id
    )
    assert kept is not None
    return kept


async def run(card_source: str, scenario: dict[str, Any]) -> dict[str, Any]:
    agent = RemoteA2aAgent(name="our_server", agent_card=_card(card_source), timeout=60)
    runner = InMemoryRunner(agent=agent, app_name=APP)
    session = await runner.session_service.create_session(app_name=APP, user_id=USER)
    result: dict[str, Any] = {"turns": [], "session": [], "error": None}
    try:
        if "cancel" in scenario:
            seen: list[dict[str, Any]] = []
            result["turns"].append(seen)
            events = runner.run_async(
                user_id=USER, session_id=session.id, new_message=_user(scenario["cancel"], session)
            )
            try:
                async for event in events:
                    seen.append(_summary(event))
                    if seen[-1]["task_id"]:
                        break
            finally:
                await events.aclose()
        for turn in scenario.get("turns", ()):
            seen = []
            result["turns"].append(seen)
            message = _user(turn, await _session(runner, session.id))
            async for event in runner.run_async(
                user_id=USER, session_id=session.id, new_message=message
            ):
                seen.append(_summary(event))
    except Exception as error:  # reported, for the test to show
        result["error"] = f"{type(error).__name__}: {error}"
    finally:
        result["session"] = [_summary(e) for e in (await _session(runner, session.id)).events]
        await agent.cleanup()
    return result


async def run_all(card_source: str, scenarios: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {name: await run(card_source, scenario) for name, scenario in scenarios.items()}


if __name__ == "__main__":
    logging.basicConfig(level=logging.CRITICAL)  # ADK logs failed requests; the JSON says them
    # ADK warns on every use of its A2A parts that they are experimental; once is in this docstring.
    warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]", category=UserWarning)
    print(json.dumps(asyncio.run(run_all(sys.argv[1], json.loads(sys.argv[2]))), default=str))
