"""The peers serve what the client tests take them for, checked with raw httpx JSON-RPC and
HTTP+JSON calls (no a2a_grpc client code but the card resolver), so that a failing client test
points at the client, not at the fixture.

Where a peer departs from the spec (the A2A 1.0 spec digest's sections in brackets), the test
pins what the peer does and says who is right:
- a2a-sdk 1.3.0 treats a request without `A2A-Version` as 0.3 and answers -32009
  VersionNotSupported on its 1.0-only interfaces. That is the spec's letter (§3.1: "missing
  counts as 0.3"); our server serves it as 1.0 by default (project decision §9.2). Our HTTP
  client must send `A2A-Version: 1.0`.
- a2a-sdk 1.3.0's HTTP+JSON results are `application/a2a+json` but its errors
  `application/json`; spec v1.0.1 §11.1 recommends `application/a2a+json` (§10 of the digest):
  a recommendation, so not wrong, but a client must accept both.
- a2a-sdk 1.3.0 (and ADK through it) opens a continuation stream (a message answering
  INPUT_REQUIRED) with a status update; the spec wants the Task first on every message stream
  (§2 "Task stream", §3.1.2; project decision §9.1): the SDK is wrong, our client tolerates it.
- a2a-sdk 1.3.0's JSON-RPC stream events are `{"result": ..., "id": ..., "jsonrpc": "2.0"}`,
  as §9 wants.
- ADK 2.13's card gives its JSONRPC interface URL without the trailing slash
  (`http://127.0.0.1:<port>`), and the endpoint is `POST /`: both name the same resource, fine.
- ADK 2.13 mounts the SDK's JSON-RPC routes with 0.3 compatibility on, so its endpoint also
  answers 0.3's methods (`message/send`, ...), but its card lists only the 1.0 interface. Spec
  §5.2 (digest §6): agents MUST list every protocol they support, so ADK is wrong; harmless to a
  1.0 client, and a 0.3 client reading the card finds no 0.3 interface to use.
- The 0.3 mode of our SDK peer lists only its 0.3 interfaces though it still serves 1.0 too: on
  purpose, so that it stands in for a 0.3-only agent (a test choice, not the SDK's).
- ADK reports an agent's exception as a FAILED task whose status message is the exception's
  text. The spec allows it; our server gives a generic message (project decision §9.6), so a
  client must not rely on either.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from a2a_grpc.client.card import CardResolver
from tests.interop.peers.conftest import PeerProcess

V10 = {"A2A-Version": "1.0"}

# The first ADK test may build ADK's environment (tests/interop/adk/adk_env.py): pip's time.
pytestmark = pytest.mark.timeout(900)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30) as client:
        yield client


def user_message(text: str, **ids: str) -> dict[str, Any]:
    return {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        **ids,
    }


async def rpc(
    http: httpx.AsyncClient,
    url: str,
    method: str,
    params: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One JSON-RPC call; the whole response object (result or error)."""
    response = await http.post(
        url,
        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
        headers=V10 if headers is None else headers,
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert body["jsonrpc"] == "2.0" and body["id"] == 1
    return body


async def result(http: httpx.AsyncClient, url: str, method: str, **params: Any) -> Any:
    body = await rpc(http, url, method, params)
    assert "result" in body, body
    return body["result"]


async def sse(
    http: httpx.AsyncClient, method: str, url: str, **request: Any
) -> list[dict[str, Any]]:
    """The JSON of every `data:` line of an event stream, until the server closes it."""
    events = []
    async with http.stream(method, url, headers=V10, **request) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                events.append(json.loads(line.removeprefix("data:")))
    return events


async def follow_while_canceling(
    http: httpx.AsyncClient,
    method: str,
    url: str,
    cancel: Callable[[], Awaitable[Any]],
    **request: Any,
) -> list[dict[str, Any]]:
    """Opens a subscription stream; on its first event (the Task snapshot), `cancel()`s the task,
    then reads the stream to its end."""
    events: list[dict[str, Any]] = []
    async with http.stream(method, url, headers=V10, **request) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                events.append(json.loads(line.removeprefix("data:")))
                if len(events) == 1:
                    await cancel()
    return events


def error_reason(error: dict[str, Any]) -> str:
    """The ErrorInfo reason in a JSON-RPC error's data or an AIP-193 error's details."""
    details = error.get("data") or error.get("details") or []
    infos = [d for d in details if d.get("@type", "").endswith("google.rpc.ErrorInfo")]
    assert infos and infos[0]["domain"] == "a2a-protocol.org", error
    return str(infos[0]["reason"])


def texts(parts: list[dict[str, Any]]) -> list[str]:
    return [part["text"] for part in parts if "text" in part]


def interfaces(card: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [
        (i["protocolBinding"], i["url"], i.get("protocolVersion", ""))
        for i in card["supportedInterfaces"]
    ]


async def resolved_bindings(peer: PeerProcess) -> list[tuple[str, str, str]]:
    """The card as our resolver reads it: (binding, url, version) of each interface."""
    async with CardResolver() as resolver:
        card = await resolver.get(peer.card_url)
    return [(i.protocol_binding, i.url, i.protocol_version) for i in card.supported_interfaces]


# --- a2a-sdk 1.3.0, A2A 1.0 ----------------------------------------------------------------------


async def test_sdk_card_lists_jsonrpc_and_http_json_for_1_0(
    sdk_http_peer: PeerProcess, http: httpx.AsyncClient
) -> None:
    url = sdk_http_peer.url
    card = (await http.get(sdk_http_peer.card_url)).json()
    expected = [("JSONRPC", f"{url}/", "1.0"), ("HTTP+JSON", url, "1.0")]
    assert interfaces(card) == expected
    assert card["capabilities"]["streaming"] is True
    # No 0.3 interface, so the SDK's card writer adds none of 0.3's top-level fields.
    assert not {"url", "preferredTransport", "protocolVersion"} & card.keys()
    assert await resolved_bindings(sdk_http_peer) == expected


async def test_sdk_jsonrpc_send_stream_and_errors(
    sdk_http_peer: PeerProcess, http: httpx.AsyncClient
) -> None:
    endpoint = f"{sdk_http_peer.url}/"
    task = (await result(http, endpoint, "SendMessage", message=user_message("hello sdk")))["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert texts(task["artifacts"][0]["parts"]) == ["hello sdk"]
    fetched = await result(http, endpoint, "GetTask", id=task["id"])
    assert fetched["id"] == task["id"] and fetched["status"]["state"] == "TASK_STATE_COMPLETED"

    reply = await result(http, endpoint, "SendMessage", message=user_message("reply hi there"))
    assert texts(reply["message"]["parts"]) == ["hi there"]

    events = await sse(
        http,
        "POST",
        endpoint,
        json={
            "jsonrpc": "2.0",
            "id": 7,
            "method": "SendStreamingMessage",
            "params": {"message": user_message("chunks")},
        },
    )
    assert all(e["jsonrpc"] == "2.0" and e["id"] == 7 for e in events)
    kinds = [next(iter(e["result"])) for e in events]
    assert kinds[0] == "task" and kinds.count("artifactUpdate") == 3
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"

    missing = await rpc(http, endpoint, "GetTask", {"id": "no-such-task"})
    assert missing["error"]["code"] == -32001 and error_reason(missing["error"]) == "TASK_NOT_FOUND"
    # No A2A-Version: the SDK takes the request for 0.3 (spec §3.1), which this card lacks.
    unversioned = await rpc(http, endpoint, "GetTask", {"id": task["id"]}, headers={})
    assert unversioned["error"]["code"] == -32009
    assert error_reason(unversioned["error"]) == "VERSION_NOT_SUPPORTED"


async def test_sdk_jsonrpc_ask_answer_and_cancel(
    sdk_http_peer: PeerProcess, http: httpx.AsyncClient
) -> None:
    endpoint = f"{sdk_http_peer.url}/"
    asked = (await result(http, endpoint, "SendMessage", message=user_message("ask")))["task"]
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert texts(asked["status"]["message"]["parts"]) == ["What is your name?"]
    answer = user_message("Ada", taskId=asked["id"], contextId=asked["contextId"])
    done = (await result(http, endpoint, "SendMessage", message=answer))["task"]
    assert done["id"] == asked["id"] and done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert texts(done["artifacts"][0]["parts"]) == ["hello, Ada"]

    started = (
        await result(
            http,
            endpoint,
            "SendMessage",
            message=user_message("slow 30"),
            configuration={"returnImmediately": True},
        )
    )["task"]
    assert started["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    canceled = await result(http, endpoint, "CancelTask", id=started["id"])
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    again = await rpc(http, endpoint, "CancelTask", {"id": started["id"]})
    assert again["error"]["code"] == -32002
    assert error_reason(again["error"]) == "TASK_NOT_CANCELABLE"


async def test_sdk_jsonrpc_subscribe_and_continuation_stream(
    sdk_http_peer: PeerProcess, http: httpx.AsyncClient
) -> None:
    await check_subscribe_and_continuation(f"{sdk_http_peer.url}/", http)


async def check_subscribe_and_continuation(endpoint: str, http: httpx.AsyncClient) -> None:
    """SubscribeToTask opens with the Task and ends at CANCELED; a continuation stream opens
    with a status update, not the Task (see the module docstring)."""
    started = (
        await result(
            http,
            endpoint,
            "SendMessage",
            message=user_message("slow 30"),
            configuration={"returnImmediately": True},
        )
    )["task"]

    async def cancel() -> None:
        await result(http, endpoint, "CancelTask", id=started["id"])

    events = await follow_while_canceling(
        http,
        "POST",
        endpoint,
        cancel,
        json={
            "jsonrpc": "2.0",
            "id": 5,
            "method": "SubscribeToTask",
            "params": {"id": started["id"]},
        },
    )
    assert events[0]["result"]["task"]["id"] == started["id"]
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED"

    asked = (await result(http, endpoint, "SendMessage", message=user_message("ask")))["task"]
    answer = user_message("Ada", taskId=asked["id"], contextId=asked["contextId"])
    events = await sse(
        http,
        "POST",
        endpoint,
        json={
            "jsonrpc": "2.0",
            "id": 6,
            "method": "SendStreamingMessage",
            "params": {"message": answer},
        },
    )
    assert next(iter(events[0]["result"])) == "statusUpdate"  # not the Task (see above)
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_sdk_http_json_send_stream_get_cancel_and_errors(
    sdk_http_peer: PeerProcess, http: httpx.AsyncClient
) -> None:
    url = sdk_http_peer.url
    sent = await http.post(
        f"{url}/message:send", json={"message": user_message("hello rest")}, headers=V10
    )
    assert sent.status_code == 200, sent.text
    assert sent.headers["content-type"] == "application/a2a+json"
    task = sent.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert texts(task["artifacts"][0]["parts"]) == ["hello rest"]
    fetched = await http.get(f"{url}/tasks/{task['id']}", headers=V10)
    assert fetched.status_code == 200 and fetched.json()["id"] == task["id"]

    events = await sse(http, "POST", f"{url}/message:stream", json={"message": user_message("hi")})
    assert next(iter(events[0])) == "task"
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"

    started = await http.post(
        f"{url}/message:send",
        json={"message": user_message("slow 30"), "configuration": {"returnImmediately": True}},
        headers=V10,
    )
    task_id = started.json()["task"]["id"]
    canceled = await http.post(f"{url}/tasks/{task_id}:cancel", headers=V10)
    assert (
        canceled.status_code == 200 and canceled.json()["status"]["state"] == "TASK_STATE_CANCELED"
    )

    follow = await http.post(
        f"{url}/message:send",
        json={"message": user_message("slow 30"), "configuration": {"returnImmediately": True}},
        headers=V10,
    )
    follow_id = follow.json()["task"]["id"]

    async def cancel() -> None:
        response = await http.post(f"{url}/tasks/{follow_id}:cancel", headers=V10)
        assert response.status_code == 200

    events = await follow_while_canceling(http, "GET", f"{url}/tasks/{follow_id}:subscribe", cancel)
    assert events[0]["task"]["id"] == follow_id
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED"

    missing = await http.get(f"{url}/tasks/no-such-task", headers=V10)
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/json"  # see the module docstring
    assert missing.json()["error"]["status"] == "NOT_FOUND"
    assert error_reason(missing.json()["error"]) == "TASK_NOT_FOUND"
    again = await http.post(f"{url}/tasks/{task_id}:cancel", headers=V10)
    assert again.status_code == 400 and error_reason(again.json()["error"]) == "TASK_NOT_CANCELABLE"


# --- a2a-sdk 1.3.0 in its 0.3 compatibility mode ----------------------------------------------


async def test_sdk_v03_card_carries_the_0_3_fields(
    sdk_http_peer_v03: PeerProcess, http: httpx.AsyncClient
) -> None:
    url = sdk_http_peer_v03.url
    card = (await http.get(sdk_http_peer_v03.card_url)).json()
    assert interfaces(card) == [("JSONRPC", f"{url}/", "0.3"), ("HTTP+JSON", url, "0.3")]
    assert card["url"] == f"{url}/" and card["preferredTransport"] == "JSONRPC"
    assert card["protocolVersion"] == "0.3"
    assert card["additionalInterfaces"] == [{"transport": "HTTP+JSON", "url": url}]
    assert [v for _, _, v in await resolved_bindings(sdk_http_peer_v03)] == ["0.3", "0.3"]


async def test_sdk_v03_serves_0_3_jsonrpc_and_rest_and_still_1_0(
    sdk_http_peer_v03: PeerProcess, http: httpx.AsyncClient
) -> None:
    endpoint = f"{sdk_http_peer_v03.url}/"
    message_v03 = {
        "kind": "message",
        "messageId": str(uuid.uuid4()),
        "role": "user",
        "parts": [{"kind": "text", "text": "hello 0.3"}],
    }
    sent = await rpc(http, endpoint, "message/send", {"message": message_v03}, headers={})
    task = sent["result"]
    assert task["kind"] == "task" and task["status"]["state"] == "completed"
    assert task["artifacts"][0]["parts"] == [{"kind": "text", "text": "hello 0.3"}]
    got = await rpc(http, endpoint, "tasks/get", {"id": task["id"]}, headers={})
    assert got["result"]["id"] == task["id"]
    missing = await rpc(http, endpoint, "tasks/get", {"id": "no-such-task"}, headers={})
    assert missing["error"]["code"] == -32001  # 0.3 errors carry no ErrorInfo

    # 0.3's HTTP+JSON under /v1, in 0.3's ProtoJSON (`content`, not `parts`).
    rest = await http.post(
        f"{sdk_http_peer_v03.url}/v1/message:send",
        json={
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "content": [{"text": "hi"}],
            }
        },
    )
    assert rest.status_code == 200, rest.text
    assert rest.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

    # The 1.0 methods stay served on the same endpoint.
    one = await result(http, endpoint, "SendMessage", message=user_message("hello 1.0"))
    assert one["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


# --- Google ADK 2.13.0 -------------------------------------------------------------------------


async def test_adk_card_is_jsonrpc_1_0(adk_peer: PeerProcess, http: httpx.AsyncClient) -> None:
    card = (await http.get(adk_peer.card_url)).json()
    assert interfaces(card) == [("JSONRPC", adk_peer.url, "1.0")]
    assert card["capabilities"]["streaming"] is True
    assert not {"url", "preferredTransport", "protocolVersion"} & card.keys()
    assert await resolved_bindings(adk_peer) == [("JSONRPC", adk_peer.url, "1.0")]


async def test_adk_echo_blocking_and_streamed(
    adk_peer: PeerProcess, http: httpx.AsyncClient
) -> None:
    endpoint = f"{adk_peer.url}/"
    task = (await result(http, endpoint, "SendMessage", message=user_message("hello adk")))["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert texts(task["artifacts"][0]["parts"]) == ["hello adk"]

    events = await sse(
        http,
        "POST",
        endpoint,
        json={
            "jsonrpc": "2.0",
            "id": 3,
            "method": "SendStreamingMessage",
            "params": {"message": user_message("streamed adk")},
        },
    )
    results = [e["result"] for e in events]
    assert next(iter(results[0])) == "task"
    updates = [r["artifactUpdate"] for r in results if "artifactUpdate" in r]
    assert len(updates) == 1 and updates[0]["lastChunk"] is True
    assert texts(updates[0]["artifact"]["parts"]) == ["streamed adk"]
    assert results[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_adk_ask_is_input_required_then_answered(
    adk_peer: PeerProcess, http: httpx.AsyncClient
) -> None:
    endpoint = f"{adk_peer.url}/"
    for answer_parts in (
        [{"text": "Ada"}],  # a plain text answer
        None,  # ADK's own: a function_response data part for the pending call
    ):
        asked = (await result(http, endpoint, "SendMessage", message=user_message("ask")))["task"]
        status = asked["status"]
        assert status["state"] == "TASK_STATE_INPUT_REQUIRED"
        question, call = status["message"]["parts"]
        assert question == {"text": "What is your name?"}
        assert call["metadata"] == {"adk_type": "function_call", "adk_is_long_running": True}
        assert call["data"]["name"] == "ask_user"
        if answer_parts is None:
            response = {"id": call["data"]["id"], "name": "ask_user", "response": {"answer": "Ada"}}
            answer_parts = [{"data": response, "metadata": {"adk_type": "function_response"}}]
        answer = {
            **user_message("", taskId=asked["id"], contextId=asked["contextId"]),
            "parts": answer_parts,
        }
        done = (await result(http, endpoint, "SendMessage", message=answer))["task"]
        assert done["id"] == asked["id"] and done["status"]["state"] == "TASK_STATE_COMPLETED"
        assert texts(done["artifacts"][0]["parts"]) == ["hello, Ada"]


async def test_adk_subscribe_and_continuation_stream(
    adk_peer: PeerProcess, http: httpx.AsyncClient
) -> None:
    await check_subscribe_and_continuation(f"{adk_peer.url}/", http)


async def test_adk_cancel_failures_and_errors(
    adk_peer: PeerProcess, http: httpx.AsyncClient
) -> None:
    endpoint = f"{adk_peer.url}/"
    started = (
        await result(
            http,
            endpoint,
            "SendMessage",
            message=user_message("slow 30"),
            configuration={"returnImmediately": True},
        )
    )["task"]
    canceled = await result(http, endpoint, "CancelTask", id=started["id"])
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    again = await rpc(http, endpoint, "CancelTask", {"id": started["id"]})
    assert again["error"]["code"] == -32002

    failed = (await result(http, endpoint, "SendMessage", message=user_message("fail")))["task"]
    assert failed["status"]["state"] == "TASK_STATE_FAILED"
    assert texts(failed["status"]["message"]["parts"]) == ["the agent failed on purpose"]
    crashed = (await result(http, endpoint, "SendMessage", message=user_message("crash")))["task"]
    assert crashed["status"]["state"] == "TASK_STATE_FAILED"
    assert texts(crashed["status"]["message"]["parts"]) == ["the agent crashed on purpose"]

    missing = await rpc(http, endpoint, "GetTask", {"id": "no-such-task"})
    assert missing["error"]["code"] == -32001 and error_reason(missing["error"]) == "TASK_NOT_FOUND"
    # ADK mounts the SDK's JSON-RPC routes with 0.3 compatibility on, though its card says 1.0.
    v03 = await rpc(
        http,
        endpoint,
        "message/send",
        {
            "message": {
                "kind": "message",
                "messageId": "m03",
                "role": "user",
                "parts": [{"kind": "text", "text": "hi 0.3"}],
            }
        },
        headers={},
    )
    assert v03["result"]["status"]["state"] == "completed"
