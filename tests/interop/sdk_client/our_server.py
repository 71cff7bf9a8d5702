"""Runs our server in its own process for the SDK-client interop tests.

Usage: python our_server.py [--strict]. Prints `PORT <n>` once serving and stops on SIGTERM.
`--strict` serves a card that accepts only text/plain and requires the extension urn:x-required.
"""

from __future__ import annotations

import asyncio
import signal
import sys

from a2a_grpc.server.app import start_server
from a2a_grpc.server.card import demo_card
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.demo_agent import DemoAgent

REQUIRED_EXTENSION = "urn:x-required"


async def main(strict: bool) -> None:
    card = None
    if strict:
        card = demo_card("127.0.0.1:0")
        del card.default_input_modes[:]
        card.default_input_modes.append("text/plain")
        card.capabilities.extensions.add(uri=REQUIRED_EXTENSION, required=True)
    running = await start_server(ServerConfig(port=0, shutdown_grace=0.5), DemoAgent(), card)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    print(f"PORT {running.port}", flush=True)
    await stop.wait()
    await running.stop()


if __name__ == "__main__":
    asyncio.run(main("--strict" in sys.argv))
