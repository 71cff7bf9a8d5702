"""Where a blocking SendMessage's time goes on the Redis store (run by hand, never by tests).

    .venv/bin/python -m tests.load.redis_profile [--sends 5000] [-c 32] [--cprofile FILE]

In this process, no gRPC: compose.build_handler in memory and on Redis with the demo
agent, each sending `--sends` echo messages `-c` at a time, on a redis-server of its own
pinned to CPU 0 (run this under `taskset -c 1` to keep the two apart). Prints:
- CPU per send in this process, in memory and on Redis;
- the Redis commands one send makes (INFO commandstats over the sends: EVALSHA is one round
  trip, the commands inside a script are not) and the time Redis spent executing them;
- the CPU one redis.asyncio round trip costs here (PING, and an EVALSHA shaped like the store's
  WRITE), one at a time and `-c` at a time, and three EVALSHA pipelined in one round trip.
`--cprofile FILE` also writes a cProfile of the Redis sends (cProfile counts every resumption
of a coroutine as a call, and inflates small calls: read its shares, not its times).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import subprocess
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import redis as sync_redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.card import demo_card
from a2a_grpc.server.compose import build_handler
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.demo_agent import DemoAgent
from a2a_grpc.server.protocol.call_context import CallContext
from a2a_grpc.server.protocol.handler import RequestHandler
from tests.redis_servers import RedisServer

WARMUP = 500


async def cpu_per_call(make: Callable[[], Awaitable[Any]], calls: int, concurrency: int) -> float:
    """Microseconds of this process's CPU per awaited `make()`, `concurrency` at a time."""
    remaining = iter(range(calls))

    async def worker() -> None:
        for _ in remaining:
            await make()

    started = time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return (time.process_time() - started) / calls * 1e6


def send(handler: RequestHandler) -> Callable[[], Awaitable[Any]]:
    call = CallContext()

    def make() -> Awaitable[Any]:
        message = a2a_pb2.Message(
            message_id=str(uuid.uuid4()), role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text="hi")]
        )
        return handler.send_message(a2a_pb2.SendMessageRequest(message=message), call)

    return make


def command_stats(redis: RedisServer) -> dict[str, tuple[int, int]]:
    client = sync_redis.Redis.from_url(redis.url)
    stats = client.info("commandstats")
    client.close()
    return {name[8:]: (value["calls"], value["usec"]) for name, value in stats.items()}


async def handlers(args: argparse.Namespace, redis: RedisServer) -> None:
    memory = build_handler(DemoAgent(), demo_card("127.0.0.1:0"), ServerConfig())
    await cpu_per_call(send(memory), WARMUP, args.concurrency)
    in_memory = await cpu_per_call(send(memory), args.sends, args.concurrency)
    config = ServerConfig(store=redis.url)
    shared = build_handler(DemoAgent(), demo_card("127.0.0.1:0"), config)
    await shared.store.start()
    try:
        await cpu_per_call(send(shared), WARMUP, args.concurrency)
        before = command_stats(redis)
        profile = cProfile.Profile() if args.cprofile else None
        if profile is not None:
            profile.enable()
        on_redis = await cpu_per_call(send(shared), args.sends, args.concurrency)
        if profile is not None:
            profile.disable()
            profile.dump_stats(args.cprofile)
        after = command_stats(redis)
    finally:
        await shared.store.close()
    print(f"CPU per send here, c={args.concurrency}: in memory {in_memory:.0f} us, "
          f"on Redis {on_redis:.0f} us{' (under cProfile)' if profile else ''}")  # fmt: skip
    print("Redis commands per send (calls, us executing inside Redis):")
    for name, (calls, usec) in sorted(after.items()):
        old_calls, old_usec = before.get(name, (0, 0))
        if (calls - old_calls) / args.sends >= 0.01 and name != "info":  # not the bench's own
            print(f"  {name:18s} {(calls - old_calls) / args.sends:5.2f} "
                  f"{(usec - old_usec) / args.sends:7.1f} us")  # fmt: skip


async def round_trips(args: argparse.Namespace, redis: RedisServer) -> None:
    # The store's client settings (RedisTaskStore.connect).
    client: Any = aioredis.from_url(
        redis.url, socket_timeout=2, retry=Retry(NoBackoff(), 0), health_check_interval=0
    )
    script = client.register_script("return 1")
    body = b"x" * 230  # a small task, serialized
    keys = ["t", "e", "p", "v", "c"]
    argv = [1, body, 3, "0" * 20, "0" * 20 + "|id", body, "", 1000, 0, "r", "a2a:ev:id"]

    async def pipelined() -> None:
        async with client.pipeline(transaction=False) as pipe:
            for _ in range(3):
                pipe.evalsha(script.sha, len(keys), *keys, *argv)
            await pipe.execute()

    calls = {
        "PING": lambda: client.ping(),
        "EVALSHA (5 keys, 11 args)": lambda: script(keys=keys, args=argv),
        "3 x EVALSHA pipelined, per pipeline": pipelined,
    }
    print("CPU per redis.asyncio round trip here:")
    for name, make in calls.items():
        await cpu_per_call(make, WARMUP, 1)
        figures = [await cpu_per_call(make, args.sends, c) for c in (1, args.concurrency)]
        print(f"  {name:36s} c=1 {figures[0]:4.0f} us, c={args.concurrency} {figures[1]:4.0f} us")
    await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sends", type=int, default=5000)
    parser.add_argument("-c", "--concurrency", type=int, default=32)
    parser.add_argument("--cprofile", metavar="FILE")
    args = parser.parse_args()
    with RedisServer() as redis:
        pid = next(line for line in redis.cli("INFO", "server").split() if "process_id" in line)
        if (os.cpu_count() or 1) >= 2:
            subprocess.run(["taskset", "-a", "-p", "-c", "0", pid.split(":")[1]], check=False,
                           capture_output=True)  # fmt: skip
        asyncio.run(handlers(args, redis))
        asyncio.run(round_trips(args, redis))


if __name__ == "__main__":
    main()
