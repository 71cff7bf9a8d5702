"""Instructions per blocking SendMessage, counted by callgrind: a deterministic cost measure.

    .venv/bin/python -m tests.load.instructions [--max-tasks N] [--requests N] [--compare]

Wall time on a shared VM moves by ~5 % between runs, which hides the 1-2 % a single hot-path
change is worth; an instruction count repeats to ~0.1 %. This runs the servicer, the handler and
the demo agent in process (no sockets: the request bytes are parsed and the response serialized
as grpc would), 32 calls in flight, against a store of `--max-tasks` tasks that is full (so
every new task evicts one) once the first requests are through. It runs twice under
`valgrind --tool=callgrind`, with a warm-up alone and with `--requests` more, and prints the
difference per request, so start-up and imports cancel out. Needs valgrind; takes ~1-2 minutes.
`--profile` runs the same requests under cProfile instead (seconds, no valgrind): the exact calls
per send of each function, and where the time goes, to find work that need not happen per call.
`--redis` counts the same on the Redis store (a redis-server of its own, outside valgrind:
only this process's instructions), the one repeatable measure of that path on a noisy VM;
`--postgres` on the PostgreSQL store the same way (a PostgreSQL of its own, from
tests/postgres_servers.py). `--profile` goes with either.
The figure counts our Python, protobuf and asyncio work, not grpc's; under real load it costs
more per instruction (see tests/load/RESULTS.md).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import cProfile
import json
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

WARMUP_REQUESTS = 3000
CONCURRENCY = 32


class _Context:
    """The parts of grpc's servicer context the SendMessage path reads."""

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("a2a-version", "1.0"), ("user-agent", "grpc-go/1.0"))

    async def send_initial_metadata(self, metadata: Any) -> None:
        return None


async def _drive(
    total: int, max_tasks: int, store: str = "", profile: cProfile.Profile | None = None
) -> None:
    """Sends `total` requests, 32 in flight; `profile` is enabled after the warm-up ones."""
    from a2a_grpc.generated import a2a_pb2
    from a2a_grpc.server.card import demo_card
    from a2a_grpc.server.compose import build_handler
    from a2a_grpc.server.config import ServerConfig
    from a2a_grpc.server.demo_agent import DemoAgent
    from a2a_grpc.server.ops.metrics import RpcMetrics
    from a2a_grpc.server.protocol.gate import CallGate
    from a2a_grpc.server.transports.grpc.servicer import A2AServicer

    config = ServerConfig(max_tasks=max_tasks, store=store)
    handler = build_handler(DemoAgent(), demo_card("127.0.0.1:1"), config)
    if store:
        await handler.store.start()
    # As `serve` builds it by default: metrics on (ServerConfig.metrics).
    gate = CallGate(
        max_calls=config.max_concurrent_calls,
        max_streams=config.max_open_streams,
        metrics=RpcMetrics(),
    )
    servicer = A2AServicer(handler, gate)
    context = _Context()
    requests = enumerate(
        [
            a2a_pb2.SendMessageRequest(
                message=a2a_pb2.Message(
                    message_id=str(uuid.uuid4()),
                    role=a2a_pb2.ROLE_USER,
                    parts=[a2a_pb2.Part(text="hello")],
                )
            ).SerializeToString()
            for _ in range(total)
        ]
    )

    async def caller() -> None:
        for sent, data in requests:
            if profile is not None and sent == WARMUP_REQUESTS:
                profile.enable()
            request = a2a_pb2.SendMessageRequest.FromString(data)
            response = await servicer.SendMessage(request, context)
            response.SerializeToString()

    try:
        await asyncio.gather(*(caller() for _ in range(CONCURRENCY)))
    finally:
        if profile is not None:
            profile.disable()
        if store:
            await handler.store.close()


def _count(
    requests: int,
    max_tasks: int,
    scratch: Path,
    store: str = "",
    env: Mapping[str, str] | None = None,
) -> int:
    """Instructions of one `--drive` child under callgrind; `env` is its environment (e.g. a
    PYTHONPATH that puts another build of the package first)."""
    out = scratch / f"callgrind.{requests}"
    command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
    command += [sys.executable, "-m", "tests.load.instructions", "--drive", str(requests)]
    command += ["--max-tasks", str(max_tasks)]
    if store:
        command += ["--store", store]
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    match = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or match is None:
        raise RuntimeError(f"callgrind failed:\n{done.stderr[-2000:]}")
    return int(match.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-tasks", type=int, default=2000, help="store size (default 2000)")
    parser.add_argument("--requests", type=int, default=4000, help="measured requests")
    parser.add_argument(
        "--compare",
        action="store_true",
        help=f"compare with {REFERENCE.name}; exit 1 when more than {TOLERANCE:.0%}% above it",
    )
    parser.add_argument(
        "--redis",
        action="store_true",
        help="on the Redis store: a redis-server of its own, outside valgrind (its work is not "
        "counted, only this process's)",
    )
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="on the PostgreSQL store: a PostgreSQL of its own, outside valgrind (only this "
        "process's instructions are counted)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="no valgrind: run the measured requests under cProfile, in process, and print our "
        "functions with their exact calls per send and their share of the profiled time",
    )
    parser.add_argument("--drive", type=int, help=argparse.SUPPRESS)  # the child under callgrind
    parser.add_argument("--store", default="", help=argparse.SUPPRESS)  # the child's store URL
    args = parser.parse_args()
    if args.drive is not None:
        asyncio.run(_drive(WARMUP_REQUESTS + args.drive, args.max_tasks, args.store))
        return
    if (args.redis or args.postgres) and args.compare:
        parser.error("--compare holds the in-memory reference only")
    if args.redis and args.postgres:
        parser.error("one store at a time: --redis or --postgres")
    if args.profile and args.compare:
        parser.error("--profile counts nothing to compare")
    with contextlib.ExitStack() as stack:
        store = _store_url(stack, redis=args.redis, postgres=args.postgres)
        if args.profile:
            profile = cProfile.Profile()
            total = WARMUP_REQUESTS + args.requests
            asyncio.run(_drive(total, args.max_tasks, store, profile=profile))
            _print_profile(profile, args.requests)
            return
        per_request = _per_request(args.requests, args.max_tasks, store)
    where = f"store of {args.max_tasks}"
    if store:
        where = f"on {'Redis' if args.redis else 'PostgreSQL'}, this process"
    print(f"instructions per blocking SendMessage: {per_request:,.0f} ({where})")
    if args.compare:
        sys.exit(_compare(per_request, args.max_tasks))


def _store_url(stack: contextlib.ExitStack, *, redis: bool, postgres: bool) -> str:
    """The URL of a store server of its own, closed with `stack` ("" for the in-memory one)."""
    if redis:
        from tests.redis_servers import RedisServer

        server = RedisServer().start()
        stack.callback(server.close)
        return server.url
    if postgres:
        from tests.postgres_servers import PostgresServer

        database = PostgresServer().start()
        stack.callback(database.close)
        return database.create_database("a2a")
    return ""


def _per_request(requests: int, max_tasks: int, store: str) -> float:
    """Instructions per request: a run of `requests` more than a warm-up alone, under callgrind."""
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (e.g. apt-get install valgrind)")
    with tempfile.TemporaryDirectory() as scratch:
        if store:
            # One after the other: two drives on one store would evict each other's tasks.
            base = _count(0, max_tasks, Path(scratch), store)
            more = _count(requests, max_tasks, Path(scratch), store)
        else:  # each child has its own store: the two runs go side by side (half the wait)
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                counts = [
                    pool.submit(_count, number, max_tasks, Path(scratch))
                    for number in (0, requests)
                ]
                base, more = (count.result() for count in counts)
    return (more - base) / requests


PROFILE_ROWS = 45


def _print_profile(profile: cProfile.Profile, requests: int) -> None:
    """Functions by inclusive time: the call counts are exact, the time shares are cProfile's
    (its overhead weighs on small functions), so read them as where to look, not as costs."""
    stats: dict[Any, Any] = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    total = sum(row[2] for row in stats.values())
    root = str(Path(__file__).resolve().parents[2])
    rows = sorted(stats.items(), key=lambda item: item[1][3], reverse=True)
    print(f"cProfile over {requests} blocking sends after {WARMUP_REQUESTS} unprofiled ones")
    print(f"{'incl %':>7} {'self %':>7} {'calls/send':>10}  function")
    for (filename, line, name), (_, calls, own, inclusive, _) in rows[:PROFILE_ROWS]:
        where = filename.replace(root + "/", "") + (f":{line}" if line else "")
        print(
            f"{100 * inclusive / total:7.1f} {100 * own / total:7.1f} {calls / requests:10.2f}"
            f"  {where} {name}"
        )


REFERENCE = Path(__file__).with_name("perf_reference.json")
"""The committed count `make perf` compares against: update it, with the reason in the commit,
when a change moves the count on purpose."""
TOLERANCE = 0.05
"""A count more than this much above the reference fails `make perf`."""


def _compare(per_request: float, max_tasks: int) -> int:
    reference = json.loads(REFERENCE.read_text())
    if reference["max_tasks"] != max_tasks:
        print(f"the reference was counted with a store of {reference['max_tasks']}")
        return 2
    base = reference["instructions_per_send_message"]
    change = per_request / base - 1
    print(
        f"reference {base:,} ({reference['measured']}, {reference['note']}): {change:+.1%}"
        + (f", over the {TOLERANCE:.0%} tolerance" if change > TOLERANCE else "")
    )
    return 1 if change > TOLERANCE else 0


if __name__ == "__main__":
    main()
