"""The HTTP limit: a bare aiohttp server answering POST / with a canned JSON-RPC result (a
completed Task, as ours answers SendMessage) and no A2A logic at all. What tests.load.http_load
and aiohttp can do on this machine, so an HTTP figure can be read against it.

    .venv/bin/python -m tests.load.http_limit_server   # prints `PORT <n>`, stops on SIGTERM
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket

from aiohttp import web

ANSWER = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {
            "task": {
                "id": "0f8f5d0e-7f6b-4f7e-9a43-2f1f1d1c2b3a",
                "contextId": "5b1c1f9e-6a8e-4c57-8f0e-9d6f5e4d3c2b",
                "status": {"state": "TASK_STATE_COMPLETED"},
                "artifacts": [{"artifactId": "echo", "parts": [{"text": "hello"}]}],
            }
        },
    },
    separators=(",", ":"),
).encode()


async def answer(request: web.Request) -> web.Response:
    await request.read()
    return web.Response(body=ANSWER, content_type="application/json")


async def serve() -> None:
    app = web.Application()
    app.router.add_post("/", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    sock.setblocking(False)
    await web.SockSite(runner, sock).start()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    await stop.wait()
    await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(serve())
