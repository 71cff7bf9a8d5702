"""The bench's single-server measurements: SubscribeToTask fan-out and ListTasks page latency.

    .venv/bin/python -m tests.load.scenarios fanout 127.0.0.1:PORT --subscribers 100 --events 1000
    .venv/bin/python -m tests.load.scenarios list 127.0.0.1:PORT --calls 200

`fanout` needs our server with the burst agent (`tests.load.servers ours --agent burst`): one
task, N subscribers attached while it holds, then M artifact chunks back to back; it reports
events delivered per second over all subscribers. `list` times first ListTasks pages (50 tasks,
the default size) one after another. Each prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import grpc

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from tests.load.closed_loop import METADATA, echo_request, percentile


async def fanout(target: str, subscribers: int, events: int, hold: float) -> dict[str, float]:
    async with grpc.aio.insecure_channel(target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        request = echo_request(f"burst {events} {hold}")
        request.configuration.return_immediately = True
        response = await stub.SendMessage(request, metadata=METADATA, timeout=30)
        task_id = response.task.id
        attached = 0
        first_chunk: list[float] = []
        last_event: list[float] = []
        counts: list[int] = []
        errors = 0

        async def subscribe() -> None:
            nonlocal attached, errors
            received = 0
            try:
                call = stub.SubscribeToTask(
                    a2a_pb2.SubscribeToTaskRequest(id=task_id), metadata=METADATA, timeout=60
                )
                async for event in call:
                    now = time.perf_counter()
                    if event.HasField("task"):
                        attached += 1
                        continue
                    if event.HasField("artifact_update") and received == 0:
                        first_chunk.append(now)
                    if event.HasField("artifact_update"):
                        received += 1
                    last_event.append(now)
            except grpc.aio.AioRpcError:
                errors += 1
            counts.append(received)

        started = time.perf_counter()
        await asyncio.gather(*(subscribe() for _ in range(subscribers)))
        delivered = sum(counts) + len(counts)  # the chunks, plus each stream's final status
        window = max(last_event, default=started) - min(first_chunk, default=started)
    return {
        "subscribers": subscribers,
        "attached_in_time": attached,
        "events_per_task": events,
        "delivered": delivered,
        "incomplete_streams": sum(1 for count in counts if count != events),
        "errors": errors,
        "seconds": window,
        "events_per_s": delivered / window if window > 0 else 0.0,
    }


async def list_pages(target: str, calls: int) -> dict[str, float]:
    async with grpc.aio.insecure_channel(target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        request = a2a_pb2.ListTasksRequest()
        latencies: list[float] = []
        total = 0
        for index in range(calls + 5):
            started = time.perf_counter()
            page = await stub.ListTasks(request, metadata=METADATA, timeout=30)
            if index >= 5:  # the first calls warm the channel up
                latencies.append((time.perf_counter() - started) * 1000)
            total = page.total_size
    return {
        "stored": total,
        "page": len(page.tasks),
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=("fanout", "list"))
    parser.add_argument("target")
    parser.add_argument("--subscribers", type=int, default=100)
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--hold", type=float, default=2.0)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    if args.scenario == "fanout":
        result = asyncio.run(fanout(args.target, args.subscribers, args.events, args.hold))
    else:
        result = asyncio.run(list_pages(args.target, args.calls))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
