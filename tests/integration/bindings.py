"""One small client per A2A binding (gRPC, JSON-RPC, HTTP+JSON), with one interface, so the
same scenarios run over each against one real server.

The HTTP+JSON client spells its routes out by hand, from the spec's table, so the server's
routes (derived from the proto's annotations) are checked against an independent statement.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
import grpc
from google.protobuf import json_format, message_factory
from google.protobuf.message import Message

from a2a_grpc.core import status
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc

VERSION_HEADERS = {"A2A-Version": "1.0"}


@dataclass
class CallError(Exception):
    """A call a binding answered with an error: the ErrorInfo reason (None without one), and
    what the binding said in its own terms (gRPC code name, JSON-RPC code, HTTP status)."""

    reason: str | None
    grpc_code: str | None = None
    jsonrpc_code: int | None = None
    http_status: int | None = None
    message: str = ""
    details: list[dict[str, Any]] = field(default_factory=list)
    retry_delay: float | None = None
    """The RetryInfo delay in seconds, None without one."""


class Binding(Protocol):
    name: str

    async def call(self, rpc: str, request: Message) -> Message: ...

    def stream(self, rpc: str, request: Message) -> AsyncIterator[a2a_pb2.StreamResponse]: ...

    async def unknown_method(self) -> CallError: ...


RESPONSES: Mapping[str, type[Message]] = {
    method.name: message_factory.GetMessageClass(method.output_type)
    for method in a2a_pb2.DESCRIPTOR.services_by_name["A2AService"].methods
}


def _headers(authorization: str | None) -> dict[str, str]:
    if authorization is None:
        return dict(VERSION_HEADERS)
    return {**VERSION_HEADERS, "Authorization": authorization}


class GrpcBinding:
    name = "grpc"

    def __init__(
        self,
        stub: a2a_pb2_grpc.A2AServiceStub,
        channel: grpc.aio.Channel,
        authorization: str | None = None,
    ) -> None:
        self.stub = stub
        self.channel = channel
        self.metadata: tuple[tuple[str, str], ...] = (("a2a-version", "1.0"),)
        if authorization is not None:
            self.metadata += (("authorization", authorization),)

    async def call(self, rpc: str, request: Message) -> Message:
        try:
            result: Message = await getattr(self.stub, rpc)(request, metadata=self.metadata)
        except grpc.aio.AioRpcError as exc:
            raise _grpc_error(exc) from None
        return result

    async def stream(self, rpc: str, request: Message) -> AsyncIterator[a2a_pb2.StreamResponse]:
        call = getattr(self.stub, rpc)(request, metadata=self.metadata)
        try:
            async for event in call:
                yield event
        except grpc.aio.AioRpcError as exc:
            raise _grpc_error(exc) from None
        finally:
            call.cancel()

    async def unknown_method(self) -> CallError:
        method = self.channel.unary_unary("/lf.a2a.v1.A2AService/NoSuchMethod")
        try:
            await method(b"", metadata=self.metadata)
        except grpc.aio.AioRpcError as exc:
            return _grpc_error(exc)
        raise AssertionError("an unknown method succeeded")


def _grpc_error(exc: grpc.aio.AioRpcError) -> CallError:
    decoded = status.decode(exc.code(), exc.details() or "", exc.trailing_metadata())
    return CallError(
        decoded.reason if decoded else None,
        grpc_code=exc.code().name,
        message=exc.details() or "",
        retry_delay=decoded.retry_delay if decoded else None,
    )


def _retry_delay(details: list[dict[str, Any]]) -> float | None:
    """The RetryInfo delay of ProtoJSON details ("2.500s"), None without one."""
    for detail in details:
        if detail["@type"].endswith("google.rpc.RetryInfo"):
            return float(detail["retryDelay"].removesuffix("s"))
    return None


class JsonRpcBinding:
    name = "jsonrpc"

    def __init__(
        self, session: aiohttp.ClientSession, url: str, authorization: str | None = None
    ) -> None:
        self.session = session
        self.url = url
        self._ids = 0
        self.headers = _headers(authorization)

    def _payload(self, method: str, params: Any) -> dict[str, Any]:
        self._ids += 1
        return {"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params}

    async def call(self, rpc: str, request: Message) -> Message:
        payload = self._payload(rpc, json_format.MessageToDict(request))
        async with self.session.post(self.url, json=payload, headers=self.headers) as response:
            answer = await response.json()
        assert answer["id"] == payload["id"]
        if "error" in answer:
            raise _jsonrpc_error(answer["error"], response.status)
        return json_format.ParseDict(answer["result"], RESPONSES[rpc]())

    async def stream(self, rpc: str, request: Message) -> AsyncIterator[a2a_pb2.StreamResponse]:
        payload = self._payload(rpc, json_format.MessageToDict(request))
        async with self.session.post(self.url, json=payload, headers=self.headers) as response:
            if response.content_type != "text/event-stream":
                raise _jsonrpc_error((await response.json())["error"], response.status)
            async for data in sse_data(response):
                answer = json.loads(data)
                assert answer["id"] == payload["id"]
                if "error" in answer:
                    raise _jsonrpc_error(answer["error"], response.status)
                yield json_format.ParseDict(answer["result"], a2a_pb2.StreamResponse())

    async def unknown_method(self) -> CallError:
        payload = self._payload("NoSuchMethod", {})
        async with self.session.post(self.url, json=payload, headers=self.headers) as response:
            return _jsonrpc_error((await response.json())["error"], response.status)


def _jsonrpc_error(error: dict[str, Any], http_status: int) -> CallError:
    infos = [d for d in error.get("data", []) if d["@type"].endswith("google.rpc.ErrorInfo")]
    return CallError(
        infos[0]["reason"] if infos else None,
        jsonrpc_code=error["code"],
        http_status=http_status,
        message=error["message"],
        details=error.get("data", []),
        retry_delay=_retry_delay(error.get("data", [])),
    )


async def sse_data(response: aiohttp.ClientResponse) -> AsyncIterator[str]:
    """The `data` of each Server-Sent Event, as it arrives."""
    lines: list[str] = []
    event = "message"
    async for raw in response.content:
        line = raw.decode().rstrip("\r\n")
        if not line:
            if lines:
                data = "\n".join(lines)
                yield data if event == "message" else json.dumps({"__event": event, "data": data})
            lines, event = [], "message"
        elif line.startswith("data:"):
            lines.append(line[5:].removeprefix(" "))
        elif line.startswith("event:"):
            event = line[6:].strip()


class RestBinding:
    """HTTP+JSON, routes as the spec's table states them (not read from the proto)."""

    name = "http+json"

    def __init__(
        self, session: aiohttp.ClientSession, base: str, authorization: str | None = None
    ) -> None:
        self.session = session
        self.base = base
        self.headers = _headers(authorization)

    def _route(self, rpc: str, request: Any) -> tuple[str, str, dict[str, Any] | None]:
        """(verb, path, JSON body) of a request; query parameters ride in the path."""
        body = json_format.MessageToDict(request)
        prefix = f"/{request.tenant}" if getattr(request, "tenant", "") else ""
        if rpc in ("SendMessage", "SendStreamingMessage"):
            verb = "message:send" if rpc == "SendMessage" else "message:stream"
            return "POST", f"{prefix}/{verb}", body
        if rpc == "CancelTask":
            return "POST", f"{prefix}/tasks/{request.id}:cancel", body
        if rpc == "CreateTaskPushNotificationConfig":
            return "POST", f"{prefix}/tasks/{request.task_id}/pushNotificationConfigs", body
        query = {k: v for k, v in body.items() if k not in ("tenant", "id", "taskId")}
        if rpc == "GetTask":
            path = f"/tasks/{request.id}"
        elif rpc == "ListTasks":
            path = "/tasks"
        elif rpc == "SubscribeToTask":
            path = f"/tasks/{request.id}:subscribe"
        elif rpc == "GetTaskPushNotificationConfig":
            path = f"/tasks/{request.task_id}/pushNotificationConfigs/{request.id}"
        elif rpc == "ListTaskPushNotificationConfigs":
            path = f"/tasks/{request.task_id}/pushNotificationConfigs"
        elif rpc == "DeleteTaskPushNotificationConfig":
            path = f"/tasks/{request.task_id}/pushNotificationConfigs/{request.id}"
            return "DELETE", prefix + path, None
        elif rpc == "GetExtendedAgentCard":
            path = "/extendedAgentCard"
        else:
            raise AssertionError(rpc)
        if query:
            path += "?" + "&".join(f"{k}={_query_value(v)}" for k, v in query.items())
        return "GET", prefix + path, None

    async def call(self, rpc: str, request: Message) -> Message:
        verb, path, body = self._route(rpc, request)
        async with self.session.request(
            verb, self.base + path, json=body, headers=self.headers
        ) as response:
            answer = await response.json(content_type=None)
        if response.status != 200:
            raise rest_error(answer, response.status)
        assert response.content_type == "application/a2a+json"
        return json_format.ParseDict(answer, RESPONSES[rpc]())

    async def stream(self, rpc: str, request: Message) -> AsyncIterator[a2a_pb2.StreamResponse]:
        verb, path, body = self._route(rpc, request)
        async with self.session.request(
            verb, self.base + path, json=body, headers=self.headers
        ) as response:
            if response.status != 200:
                raise rest_error(await response.json(content_type=None), response.status)
            assert response.content_type == "text/event-stream"
            async for data in sse_data(response):
                answer = json.loads(data)
                if "__event" in answer:
                    # an error event after the 200 headers: its status is in its body
                    error = json.loads(answer["data"])
                    raise rest_error(error, error["error"]["code"])
                yield json_format.ParseDict(answer, a2a_pb2.StreamResponse())

    async def unknown_method(self) -> CallError:
        async with self.session.get(self.base + "/noSuchMethod", headers=self.headers) as r:
            return rest_error(await r.json(content_type=None), r.status)


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def rest_error(answer: dict[str, Any], http_status: int) -> CallError:
    error = answer["error"]
    assert error["code"] == http_status
    infos = [d for d in error["details"] if d["@type"].endswith("google.rpc.ErrorInfo")]
    return CallError(
        infos[0]["reason"] if infos else None,
        grpc_code=error["status"],
        http_status=http_status,
        message=error["message"],
        details=error["details"],
        retry_delay=_retry_delay(error["details"]),
    )
