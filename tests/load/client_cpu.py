"""The client side of one call: CPU per call in the client's own process, and its req/s.

    .venv/bin/python -m tests.load.client_cpu --client ours|sdk|bare --transport grpc|jsonrpc
        --target 127.0.0.1:PORT|http://127.0.0.1:PORT [--stream] [--calls N] [--warmup N]
        [--concurrency C]

One client (one channel, or one httpx pool) shared by C workers makes `--warmup` calls, then
`--calls` more, timed: CPU is `time.process_time()` of this process (every thread: grpc's own
threads count), wall time is `perf_counter()`. A call is a blocking SendMessage of "hello" or,
with `--stream`, a SendStreamingMessage read to its end (the demo agent's Task, WORKING,
artifact, COMPLETED: 4 events). Every message has its own messageId (the server dedupes by it).
Prints one JSON line: cpu_us_per_call, its user and system parts (user_us_per_call and
system_us_per_call, from `os.times()`, in clock ticks), rps, calls, errors, events_per_call.

- `ours`: `a2a_grpc.client.A2AClient` (`connect(host:port)` for gRPC, `connect(URL)` with the
  JSON-RPC transport, which reads the card at the URL).
- `sdk`: the official a2a-sdk 1.3.0 client (`ClientFactory`; streaming off for SendMessage).
  This process then imports only the SDK, never a2a_grpc: both register the same proto symbols.
- `bare`: the floor. gRPC: a `grpc.aio` multicallable on raw bytes (the request serialized
  once, each call's messageId spliced into its bytes; responses not parsed). JSON-RPC: an
  `httpx.AsyncClient` POSTing a prebuilt body (likewise spliced), its JSON parsed; streams
  read line by line, each `data:` line parsed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

Call = Callable[[str], Awaitable[int]]
"""One call with this messageId; the number of events it read (1 for SendMessage)."""

TEXT = "hello"
ID_WIDTH = 36
PLACEHOLDER = "x" * ID_WIDTH
HEADERS = {"Content-Type": "application/json", "A2A-Version": "1.0"}
GRPC_METADATA = (("a2a-version", "1.0"),)
TIMEOUT_S = 30.0


class Ids:
    """Distinct messageIds of one width (so they splice into serialized bytes)."""

    def __init__(self) -> None:
        self._prefix = uuid.uuid4().hex[:20]
        self._next = 0

    def __call__(self) -> str:
        self._next += 1
        return f"{self._prefix}{self._next:016d}"


async def ours(transport: str, target: str, stream: bool) -> tuple[Call, Callable[[], Any]]:
    from a2a_grpc.client import A2AClient
    from a2a_grpc.generated import a2a_pb2

    if transport == "grpc":
        client = A2AClient.connect(target)
    else:
        client = A2AClient.connect(target, transports=("jsonrpc",))
    await client.__aenter__()

    def message(message_id: str) -> a2a_pb2.Message:
        return a2a_pb2.Message(
            message_id=message_id, role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text=TEXT)]
        )

    async def send(message_id: str) -> int:
        await client.send_message(message(message_id), timeout=TIMEOUT_S)
        return 1

    async def streamed(message_id: str) -> int:
        events = 0
        async for _ in client.send_streaming_message(message(message_id), timeout=TIMEOUT_S):
            events += 1
        return events

    return (streamed if stream else send), client.close


async def sdk(transport: str, target: str, stream: bool) -> tuple[Call, Callable[[], Any]]:
    import grpc
    from a2a.client import ClientConfig, ClientFactory
    from a2a.types import a2a_pb2

    if transport == "grpc":
        config = ClientConfig(
            streaming=stream,
            supported_protocol_bindings=["GRPC"],
            grpc_channel_factory=grpc.aio.insecure_channel,
        )
        card = a2a_pb2.AgentCard(
            name="bench",
            description="our server",
            version="0.1.0",
            supported_interfaces=[
                a2a_pb2.AgentInterface(url=target, protocol_binding="GRPC", protocol_version="1.0")
            ],
            capabilities=a2a_pb2.AgentCapabilities(streaming=True),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
        )
        client = ClientFactory(config).create(card)
    else:
        config = ClientConfig(streaming=stream, supported_protocol_bindings=["JSONRPC"])
        client = await ClientFactory(config).create_from_url(target)

    async def call(message_id: str) -> int:
        message = a2a_pb2.Message(message_id=message_id, role=a2a_pb2.ROLE_USER)
        message.parts.add(text=TEXT)
        events = 0
        async for _ in client.send_message(a2a_pb2.SendMessageRequest(message=message)):
            events += 1
        return events

    return call, client.close


async def bare(transport: str, target: str, stream: bool) -> tuple[Call, Callable[[], Any]]:
    if transport == "grpc":
        return await _bare_grpc(target, stream)
    return await _bare_jsonrpc(target, stream)


async def _bare_grpc(target: str, stream: bool) -> tuple[Call, Callable[[], Any]]:
    import grpc

    from a2a_grpc.generated import a2a_pb2

    request = a2a_pb2.SendMessageRequest(
        message=a2a_pb2.Message(
            message_id=PLACEHOLDER, role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text=TEXT)]
        )
    ).SerializeToString()
    before, after = request.split(PLACEHOLDER.encode())
    channel = grpc.aio.insecure_channel(target)
    await asyncio.wait_for(channel.channel_ready(), timeout=10)
    service = "/lf.a2a.v1.A2AService/"
    send = channel.unary_unary(service + "SendMessage")
    streaming = channel.unary_stream(service + "SendStreamingMessage")

    async def call(message_id: str) -> int:
        body = before + message_id.encode() + after
        if not stream:
            await send(body, metadata=GRPC_METADATA, timeout=TIMEOUT_S)
            return 1
        events = 0
        async for _ in streaming(body, metadata=GRPC_METADATA, timeout=TIMEOUT_S):
            events += 1
        return events

    return call, channel.close


async def _bare_jsonrpc(target: str, stream: bool) -> tuple[Call, Callable[[], Any]]:
    import httpx

    method = "SendStreamingMessage" if stream else "SendMessage"
    message = {"messageId": PLACEHOLDER, "role": "ROLE_USER", "parts": [{"text": TEXT}]}
    envelope = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message}}
    before, after = json.dumps(envelope).encode().split(PLACEHOLDER.encode())
    http = httpx.AsyncClient(timeout=TIMEOUT_S)
    url = target.rstrip("/") + "/"

    async def call(message_id: str) -> int:
        body = before + message_id.encode() + after
        if not stream:
            response = await http.post(url, content=body, headers=HEADERS)
            if response.status_code != 200 or "result" not in json.loads(response.content):
                raise RuntimeError(f"HTTP {response.status_code}: {response.content[:200]!r}")
            return 1
        events = 0
        async with http.stream("POST", url, content=body, headers=HEADERS) as response:
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    if "result" not in json.loads(line[5:]):
                        raise RuntimeError(f"error event: {line[:200]}")
                    events += 1
        return events

    return call, http.aclose


CLIENTS = {"ours": ours, "sdk": sdk, "bare": bare}


async def run(
    client: str,
    transport: str,
    target: str,
    stream: bool,
    calls: int,
    warmup: int,
    concurrency: int,
) -> dict[str, float]:
    call, close = await CLIENTS[client](transport, target, stream)
    ids = Ids()
    errors = 0
    events = 0

    async def drive(count: int) -> None:
        left = count

        async def worker() -> None:
            nonlocal left, errors, events
            while left > 0:
                left -= 1
                try:
                    read = await call(ids())  # not `events += await ...`: that loses updates
                    events += read
                except Exception as error:  # counted: the figures say how many failed
                    if not errors:
                        print(f"first error: {error!r}", file=sys.stderr, flush=True)
                    errors += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))

    try:
        await drive(warmup)
        errors = events = 0
        cpu, wall, times = time.process_time(), time.perf_counter(), os.times()
        await drive(calls)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        user, system = os.times().user - times.user, os.times().system - times.system
    finally:
        await close()
    return {
        "cpu_us_per_call": cpu / calls * 1e6,
        "user_us_per_call": user / calls * 1e6,
        "system_us_per_call": system / calls * 1e6,
        "rps": (calls - errors) / wall if wall else 0.0,
        "calls": calls,
        "errors": errors,
        "events_per_call": events / calls,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", choices=sorted(CLIENTS), required=True)
    parser.add_argument("--transport", choices=("grpc", "jsonrpc"), required=True)
    parser.add_argument("--target", required=True, help="host:port (gRPC) or http://host:port")
    parser.add_argument("--stream", action="store_true", help="SendStreamingMessage")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("-c", "--concurrency", type=int, default=32)
    args = parser.parse_args()
    figures = asyncio.run(
        run(
            args.client,
            args.transport,
            args.target,
            args.stream,
            args.calls,
            args.warmup,
            args.concurrency,
        )
    )
    print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
