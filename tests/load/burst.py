"""A burst of concurrent SendMessage calls against our server, and what each call got.

    .venv/bin/python -m tests.load.burst [--calls 5000] [--channels 1] [--text hello]
                                         [--config FIELD=INT ...]

Starts our server (`tests.load.servers ours`, demo agent, `--config` passed on) as a child
process, opens `--channels` connections to it from this process (grpc.aio, 127.0.0.1), starts
all `--calls` SendMessage calls at once, spread evenly over the connections, and waits for every
one (each has a 60 s deadline). `--text` is the message: the demo agent's `slow 1` holds each
call for a second, so that calls pile up in the server rather than in grpc's queue. Prints one
JSON line: the calls' status codes, how many of the RESOURCE_EXHAUSTED ones carried ErrorInfo
retryable=true and RetryInfo, and the seconds it took.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import Counter

import grpc

from a2a_grpc.core import status
from a2a_grpc.generated import a2a_pb2_grpc
from tests.load.rapid_reset import echo_request
from tests.load.servers import ours_in_child

METADATA = (("a2a-version", "1.0"),)
CALL_TIMEOUT = 60.0


async def burst(port: int, *, calls: int, channels: int, text: str) -> dict[str, object]:
    """Fires `calls` SendMessage at once over `channels` connections; what they got."""
    outcomes: Counter[str] = Counter()
    # A local subchannel pool per channel, or channels to one address share one connection.
    opened = [
        grpc.aio.insecure_channel(
            f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)]
        )
        for _ in range(channels)
    ]
    stubs = [a2a_pb2_grpc.A2AServiceStub(channel) for channel in opened]
    try:
        await asyncio.gather(*(channel.channel_ready() for channel in opened))

        async def call(index: int) -> None:
            try:
                await stubs[index % channels].SendMessage(
                    echo_request(text), metadata=METADATA, timeout=CALL_TIMEOUT
                )
                outcomes["OK"] += 1
            except grpc.aio.AioRpcError as error:
                outcomes[error.code().name] += 1
                decoded = status.decode(
                    error.code(), error.details() or "", error.trailing_metadata()
                )
                if decoded is not None and decoded.retryable and decoded.retry_delay is not None:
                    outcomes[f"{error.code().name} with RetryInfo"] += 1

        started = time.monotonic()
        await asyncio.gather(*(call(index) for index in range(calls)))
        seconds = time.monotonic() - started
    finally:
        await asyncio.gather(*(channel.close() for channel in opened))
    return {
        "calls": calls,
        "channels": channels,
        "text": text,
        "outcomes": dict(outcomes),
        "seconds": round(seconds, 2),
    }


async def _with_server(args: argparse.Namespace) -> dict[str, object]:
    settings = [arg for setting in args.config for arg in ("--config", setting)]
    async with ours_in_child(*settings) as port:
        return await burst(port, calls=args.calls, channels=args.channels, text=args.text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--channels", type=int, default=1)
    parser.add_argument("--text", default="hello", help="the message text (demo agent)")
    parser.add_argument(
        "--config", action="append", default=[], metavar="FIELD=INT", help="a server setting"
    )
    args = parser.parse_args()
    print(json.dumps(asyncio.run(_with_server(args)), sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
