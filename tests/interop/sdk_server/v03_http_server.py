"""The official a2a-sdk 1.3.0 HTTP servers with their A2A 0.3 compatibility on, with the interop
echo agent (peer_server.py), run as a child process: JSON-RPC at `/` (the SDK's
`create_jsonrpc_routes(enable_v0_3_compat=True)`: 0.3's `message/send`, `tasks/get`, ...) and
HTTP+JSON under `/rest` (`create_rest_routes(enable_v0_3_compat=True)`: 0.3's `/v1/...`).

Imports only the SDK, never a2a_grpc. Binds 127.0.0.1:0 and prints `PORT <n>`.

    .venv/bin/python -m tests.interop.sdk_server.v03_http_server
"""

from __future__ import annotations

import asyncio
import socket

import uvicorn
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore
from starlette.applications import Starlette

from tests.interop.sdk_server.peer_server import EchoExecutor, card


async def serve() -> None:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = int(sock.getsockname()[1])
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(), task_store=InMemoryTaskStore(), agent_card=card(port)
    )
    app = Starlette(
        routes=[
            *create_rest_routes(handler, path_prefix="/rest", enable_v0_3_compat=True),
            *create_jsonrpc_routes(handler, rpc_url="/", enable_v0_3_compat=True),
        ]
    )
    config = uvicorn.Config(
        app, loop="asyncio", lifespan="off", access_log=False, log_level="warning"
    )
    server = uvicorn.Server(config)
    print(f"PORT {port}", flush=True)
    await server.serve(sockets=[sock])


if __name__ == "__main__":
    asyncio.run(serve())
