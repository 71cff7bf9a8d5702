"""Our real server as a newer A2A version's server would answer: a relay on each binding that
passes every call to it and back, adding what a newer version adds.

A2A 1.1 (the spec's dev branch) adds fields such as `generation` on Task and the update
events, and may add stream event kinds; no released server speaks it yet. So the relay takes
the real answers of our server (real tasks, real errors) and adds, as a 1.1 server would:

- HTTP (JSON-RPC and HTTP+JSON): a member 1.0 does not have on every JSON object answered
  (`generation` on the Task and the update events, one on the response itself and on the
  JSON-RPC envelope), members the card does not have in 1.0, and after the first event of
  each stream an event of a kind 1.0 does not have (`taskGenerationUpdate`);
- gRPC: a field number 1.0 does not use on every response message, and after the first event
  of each stream an event carrying only a payload field 1.0 does not have (field 9).

Everything else (status codes, headers, errors, the order of events) passes unchanged.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import grpc
from aiohttp import web

from a2a_grpc.core.service import SERVICE
from a2a_grpc.server.transports.http.server import CARD_PATH

UNKNOWN_KIND = "taskGenerationUpdate"
"""The JSON member of the event kind the relay adds to every HTTP stream."""
UNKNOWN_FIELD = b"\x98\x06\x01"
"""Field 99 (a varint, 1): on every gRPC response, a field no 1.0 message has."""
UNKNOWN_EVENT = b"\x4a\x02\x08\x01"
"""A StreamResponse whose only member is field 9, a payload kind 1.0 does not have."""
_HOP_HEADERS = {"content-length", "transfer-encoding", "connection", "host", "keep-alive"}


@dataclass
class NewerPeer:
    card_url: str
    grpc_target: str
    _runner: web.AppRunner
    _server: grpc.aio.Server
    _upstream: grpc.aio.Channel
    _session: aiohttp.ClientSession

    async def close(self) -> None:
        await self._server.stop(0)
        await self._upstream.close()
        await self._runner.cleanup()
        await self._session.close()


async def start_newer_peer(http_base: str, grpc_target: str) -> NewerPeer:
    """A relay to our server at `http_base` (its HTTP port) and `grpc_target` (its gRPC port)."""
    session = aiohttp.ClientSession(auto_decompress=False)
    upstream = grpc.aio.insecure_channel(grpc_target)
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((_grpc_relay(upstream),))
    grpc_port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    app = web.Application()
    runner = web.AppRunner(app)
    relay = _HttpRelay(session, http_base.rstrip("/"), f"127.0.0.1:{grpc_port}")
    app.router.add_route("*", "/{tail:.*}", relay.handle)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    relay.base = f"http://127.0.0.1:{port}"
    return NewerPeer(
        relay.base + CARD_PATH, f"127.0.0.1:{grpc_port}", runner, server, upstream, session
    )


# -- HTTP ----------------------------------------------------------------------------------


class _HttpRelay:
    def __init__(self, session: aiohttp.ClientSession, upstream: str, grpc_target: str) -> None:
        self.session = session
        self.upstream = upstream
        self.grpc_target = grpc_target
        self.base = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
        body = await request.read()
        async with self.session.request(
            request.method, self.upstream + request.path_qs, data=body, headers=headers
        ) as answer:
            kept = {
                k: v
                for k, v in answer.headers.items()
                if k.lower() not in _HOP_HEADERS and k.lower() != "etag"
            }
            if answer.content_type == "text/event-stream":
                return await self._stream(request, answer, kept)
            data = await answer.read()
            if answer.content_type.endswith("json") and data:
                data = json.dumps(self._newer(request.path, json.loads(data))).encode()
            return web.Response(body=data, status=answer.status, headers=kept)

    def _newer(self, path: str, value: Any) -> Any:
        if path == CARD_PATH:
            return self._newer_card(value)
        if not isinstance(value, dict):
            return value
        if value.get("jsonrpc") == "2.0":  # a JSON-RPC response: its envelope and its result
            value["a2aTrace"] = {"hop": 1}
            if isinstance(value.get("result"), dict):
                value["result"] = _with_generation(value["result"])
            return value
        return _with_generation(value)

    def _newer_card(self, card: dict[str, Any]) -> dict[str, Any]:
        card["generationTracking"] = {"supported": True}
        card.setdefault("capabilities", {})["eventGenerations"] = True
        for interface in card.get("supportedInterfaces", []):
            interface["priority"] = 1
            binding = interface.get("protocolBinding")
            if binding == "GRPC":
                interface["url"] = self.grpc_target
            elif binding == "JSONRPC":
                interface["url"] = self.base + "/"
            else:
                interface["url"] = self.base
        return card

    async def _stream(
        self, request: web.Request, answer: aiohttp.ClientResponse, headers: dict[str, str]
    ) -> web.StreamResponse:
        response = web.StreamResponse(status=answer.status, headers=headers)
        await response.prepare(request)
        first = True
        async for event in _sse_events(answer):
            await response.write(self._newer_event(event))
            data = _data_of(event)
            if first and data is not None and "error" not in data:
                first = False
                await response.write(self._unknown_event(data))
        await response.write_eof()
        return response

    def _newer_event(self, event: str) -> bytes:
        lines = []
        for line in event.split("\n"):
            if line.startswith("data: "):
                line = "data: " + json.dumps(self._newer("", json.loads(line[6:])))
            lines.append(line)
        return ("\n".join(lines) + "\n\n").encode()

    @staticmethod
    def _unknown_event(after: dict[str, Any]) -> bytes:
        newer: dict[str, Any] = {UNKNOWN_KIND: {"taskId": "any", "generation": 2}}
        if after.get("jsonrpc") == "2.0":
            newer = {"jsonrpc": "2.0", "id": after.get("id"), "result": newer}
        return f"data: {json.dumps(newer)}\n\n".encode()


def _data_of(event: str) -> dict[str, Any] | None:
    """The JSON object an SSE event carries (None for a comment or a keep-alive)."""
    for line in event.split("\n"):
        if line.startswith("data: "):
            value = json.loads(line[6:])
            return value if isinstance(value, dict) else None
    return None


def _with_generation(value: dict[str, Any]) -> dict[str, Any]:
    """A response object with `generation` on each Task and update event in it, and a member
    of its own."""
    for key in ("task", "statusUpdate", "artifactUpdate"):
        if isinstance(value.get(key), dict):
            value[key]["generation"] = 7
    if "status" in value and "id" in value:  # a bare Task (GetTask, CancelTask)
        value["generation"] = 7
    for listed in value.get("tasks", []):
        listed["generation"] = 7
    value["responseGeneration"] = 7
    return value


async def _sse_events(answer: aiohttp.ClientResponse) -> AsyncIterator[str]:
    """Each event of an SSE body, as its lines joined by newlines (without the blank line)."""
    lines: list[str] = []
    async for raw in answer.content:
        line = raw.decode().rstrip("\r\n")
        if line:
            lines.append(line)
        elif lines:
            yield "\n".join(lines)
            lines = []
    if lines:
        yield "\n".join(lines)


# -- gRPC ----------------------------------------------------------------------------------


def _grpc_relay(upstream: grpc.aio.Channel) -> grpc.GenericRpcHandler:
    handlers = {}
    for method in SERVICE.methods:
        path = f"/{SERVICE.full_name}/{method.name}"
        if method.server_streaming:
            handlers[method.name] = grpc.unary_stream_rpc_method_handler(
                _relay_stream(upstream.unary_stream(path)),
                request_deserializer=None,
                response_serializer=None,
            )
        else:
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                _relay_unary(upstream.unary_unary(path)),
                request_deserializer=None,
                response_serializer=None,
            )
    return grpc.method_handlers_generic_handler(SERVICE.full_name, handlers)


def _metadata(context: grpc.aio.ServicerContext) -> tuple[tuple[str, Any], ...]:
    return tuple((key, value) for key, value in context.invocation_metadata() or ())


def _trailers(error: grpc.aio.AioRpcError) -> tuple[tuple[str, Any], ...]:
    return tuple((key, value) for key, value in error.trailing_metadata() or ())


def _relay_unary(call: Any) -> Any:
    async def relay(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        try:
            answer: bytes = await call(request, metadata=_metadata(context))
        except grpc.aio.AioRpcError as error:
            await context.abort(error.code(), error.details() or "", _trailers(error))
        return answer + UNKNOWN_FIELD

    return relay


def _relay_stream(call: Any) -> Any:
    async def relay(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        upstream = call(request, metadata=_metadata(context))
        first = True
        try:
            async for event in upstream:
                yield event + UNKNOWN_FIELD
                if first:
                    first = False
                    yield UNKNOWN_EVENT
        except grpc.aio.AioRpcError as error:
            await context.abort(error.code(), error.details() or "", _trailers(error))
        finally:
            upstream.cancel()

    return relay
