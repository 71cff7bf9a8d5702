"""A closed-loop HTTP load generator for the JSON-RPC and HTTP+JSON bindings (ghz is gRPC only).

N workers share one aiohttp connection pool of N keep-alive connections; each sends its next
request as soon as the previous one finished, for a fixed duration, and records every latency.
Bodies are serialized before the clock starts (each with its own messageId, as servers dedupe
by it: only the id's bytes are joined per request). Only a success counts: HTTP 2xx whose JSON
holds a JSON-RPC `result` (JSON-RPC) or a `task` / `message` (HTTP+JSON); a stream counts once
it ended after at least one event and no error event. Prints one JSON line, like
tests.load.closed_loop.

    .venv/bin/python -m tests.load.http_load http://127.0.0.1:PORT KIND -c 32 -d 5
    (KIND: jsonrpc-send, jsonrpc-stream or rest-send)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable

import aiohttp

from tests.load.closed_loop import LoadResult

HEADERS = {"Content-Type": "application/json", "A2A-Version": "1.0"}
TIMEOUT = aiohttp.ClientTimeout(total=30)
MESSAGE = '{"messageId":"%s","role":"ROLE_USER","parts":[{"text":"hello"}]}'
BODIES = {
    "jsonrpc-send": (
        "/",
        '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":%s}}',
    ),
    "jsonrpc-stream": (
        "/",
        '{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":%s}}',
    ),
    "rest-send": ("/message:send", '{"message":%s}'),
}


def body_parts(kind: str) -> tuple[str, bytes, bytes]:
    """The path, and the body's bytes before and after the messageId."""
    path, template = BODIES[kind]
    before, after = (template % MESSAGE).split("%s")
    return path, before.encode(), after.encode()


def succeeded(kind: str, status: int, body: bytes) -> bool:
    if not 200 <= status < 300:
        return False
    value = json.loads(body)
    if kind == "rest-send":
        return "task" in value or "message" in value
    return "result" in value


async def stream_succeeded(response: aiohttp.ClientResponse) -> bool:
    if response.status != 200:
        await response.read()
        return False
    events = 0
    async for line in response.content:
        if line.startswith(b"data:"):
            if "result" not in json.loads(line[5:]):
                return False
            events += 1
        elif line.startswith(b"event: error"):
            return False
    return events > 0


async def run(base: str, kind: str, concurrency: int, duration: float) -> LoadResult:
    path, before, after = body_parts(kind)
    url = base.rstrip("/") + path
    result = LoadResult()
    connector = aiohttp.TCPConnector(limit=concurrency, force_close=False)
    async with aiohttp.ClientSession(connector=connector, timeout=TIMEOUT) as session:

        async def send_one(body: bytes) -> bool:
            async with session.post(url, data=body, headers=HEADERS) as response:
                if kind == "jsonrpc-stream":
                    return await stream_succeeded(response)
                return succeeded(kind, response.status, await response.read())

        async def worker(deadline: float, send: Callable[[bytes], Awaitable[bool]]) -> None:
            prefix = f"{uuid.uuid4().hex}-".encode()
            count = 0
            while time.perf_counter() < deadline:
                body = before + prefix + str(count).encode() + after
                count += 1
                started = time.perf_counter()
                try:
                    ok = await send(body)
                except (aiohttp.ClientError, TimeoutError, ValueError):
                    ok = False
                result.latencies.append((time.perf_counter() - started) * 1000)
                result.requests += 1
                if not ok:
                    result.errors += 1

        started = time.perf_counter()
        deadline = started + duration
        await asyncio.gather(*(worker(deadline, send_one) for _ in range(concurrency)))
        result.seconds = time.perf_counter() - started
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", help="http://host:port")
    parser.add_argument("kind", choices=sorted(BODIES))
    parser.add_argument("-c", "--concurrency", type=int, default=32)
    parser.add_argument("-d", "--duration", type=float, default=5.0)
    args = parser.parse_args()
    result = asyncio.run(run(args.base, args.kind, args.concurrency, args.duration))
    summary = result.summary()
    # Throughput counts the successes only.
    summary["rps"] = (result.requests - result.errors) / result.seconds if result.seconds else 0.0
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
