"""The official a2a-sdk 1.3.0 JSON-RPC server with the interop echo agent, the SDK's way: its
JSON-RPC and agent-card routes (`create_jsonrpc_routes`, `create_agent_card_routes`) in a
Starlette application, served by uvicorn (httptools parser, the asyncio loop as ours uses).

Imports only the SDK, never a2a_grpc (both register the same proto symbols). The agent is the
interop peer's EchoExecutor: Task, WORKING, an echo artifact, COMPLETED, as our demo agent.

    .venv/bin/python -m tests.load.sdk_jsonrpc_server   # prints `PORT <n>`, stops on SIGTERM
"""

from __future__ import annotations

import asyncio
import socket

import uvicorn
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from starlette.applications import Starlette

from tests.interop.sdk_server.peer_server import EchoExecutor, card


async def serve() -> None:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    port = int(sock.getsockname()[1])
    agent_card = card(port)
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(), task_store=InMemoryTaskStore(), agent_card=agent_card
    )
    app = Starlette(
        routes=[
            *create_jsonrpc_routes(handler, rpc_url="/"),
            *create_agent_card_routes(agent_card),
        ]
    )
    config = uvicorn.Config(
        app, http="httptools", loop="asyncio", lifespan="off", access_log=False, log_level="warning"
    )
    server = uvicorn.Server(config)
    # The socket listens already: connections made before uvicorn serves wait in its backlog.
    print(f"PORT {port}", flush=True)
    await server.serve(sockets=[sock])  # uvicorn stops on SIGTERM / SIGINT


if __name__ == "__main__":
    asyncio.run(serve())
