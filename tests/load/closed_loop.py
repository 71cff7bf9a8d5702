"""The Python closed-loop load generator, used when ghz is absent (and for time to first event).

N workers share one channel; each sends the next request as soon as its previous one finished,
for a fixed duration, and records every latency. Streams count as one request each (from the
call to the stream's end); their time to first event is recorded too. Prints one JSON line.

    .venv/bin/python -m tests.load.closed_loop 127.0.0.1:PORT send|stream -c 32 -d 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from dataclasses import dataclass, field

import grpc

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc

METADATA = (("a2a-version", "1.0"),)
CALL_TIMEOUT = 30.0


@dataclass
class LoadResult:
    """What one closed-loop run measured (latencies in milliseconds)."""

    requests: int = 0
    errors: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    first_events: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, float]:
        return {
            "requests": self.requests,
            "errors": self.errors,
            "rps": self.requests / self.seconds if self.seconds else 0.0,
            "p50_ms": percentile(self.latencies, 50),
            "p99_ms": percentile(self.latencies, 99),
            "ttfe_p50_ms": percentile(self.first_events, 50),
        }


def percentile(values: list[float], pct: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * len(ordered)) - 1))
    return ordered[index]


def echo_request(text: str = "hello") -> a2a_pb2.SendMessageRequest:
    return a2a_pb2.SendMessageRequest(
        message=a2a_pb2.Message(
            message_id=str(uuid.uuid4()), role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text=text)]
        )
    )


async def _worker(
    stub: a2a_pb2_grpc.A2AServiceStub, rpc: str, deadline: float, result: LoadResult
) -> None:
    while time.perf_counter() < deadline:
        request = echo_request()
        started = time.perf_counter()
        try:
            if rpc == "send":
                await stub.SendMessage(request, metadata=METADATA, timeout=CALL_TIMEOUT)
            else:
                first = True
                async for _ in stub.SendStreamingMessage(
                    request, metadata=METADATA, timeout=CALL_TIMEOUT
                ):
                    if first:
                        result.first_events.append((time.perf_counter() - started) * 1000)
                        first = False
        except grpc.aio.AioRpcError:
            result.errors += 1
            continue
        result.latencies.append((time.perf_counter() - started) * 1000)
        result.requests += 1


async def run_load(target: str, rpc: str, concurrency: int, duration: float) -> LoadResult:
    """Drives `rpc` ("send" or "stream") at `concurrency` for `duration` seconds."""
    result = LoadResult()
    async with grpc.aio.insecure_channel(target) as channel:
        await asyncio.wait_for(channel.channel_ready(), timeout=10)
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        started = time.perf_counter()
        deadline = started + duration
        await asyncio.gather(*(_worker(stub, rpc, deadline, result) for _ in range(concurrency)))
        result.seconds = time.perf_counter() - started
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target")
    parser.add_argument("rpc", choices=("send", "stream"))
    parser.add_argument("-c", "--concurrency", type=int, default=32)
    parser.add_argument("-d", "--duration", type=float, default=5.0)
    args = parser.parse_args()
    result = asyncio.run(run_load(args.target, args.rpc, args.concurrency, args.duration))
    print(json.dumps(result.summary()))


if __name__ == "__main__":
    main()
