"""The official a2a-sdk 1.3.0 HTTP servers (JSON-RPC and HTTP+JSON) with the interop echo agent,
run as a child process by the tests in tests/interop/peers.

Imports only the SDK (and starlette / uvicorn, which it serves with), never a2a_grpc: both
register the same proto symbols. The agent is tests/interop/sdk_server/peer_server.py's
EchoExecutor, so the behaviours are the gRPC peer's: echo, `ask` (INPUT_REQUIRED, then
"hello, <answer>"), `chunks`, `reply` (a direct Message), `slow [S]` (cancelable).

One Starlette application on one 127.0.0.1 port, laid out as our own server lays out its HTTP
port: JSON-RPC at `POST /`, the HTTP+JSON routes at the root (and under `/{tenant}`), the card at
`/.well-known/agent-card.json`, each the SDK's own route factory.

    python -m tests.interop.sdk_http.peer_http_server [--protocol 1.0|0.3]

`--protocol 1.0` (the default): the card lists JSONRPC and HTTP+JSON, protocol version 1.0, and
the server speaks only 1.0. `--protocol 0.3`: the SDK's 0.3 compatibility mode
(`enable_v0_3_compat=True` on both route factories): the JSON-RPC endpoint also answers 0.3's
methods (`message/send`, `tasks/get`, ...; 1.0's are still served), the 0.3 HTTP+JSON routes are
added under `/v1/...`, and the card lists only 0.3 interfaces, so that the SDK's card writer adds
the 0.3 top-level fields (`url`, `preferredTransport`, `protocolVersion`, `additionalInterfaces`)
a 0.3 client reads.

Once the socket listens it prints one JSON line on stdout, then serves until killed:
    {"url": "http://127.0.0.1:<port>", "card_url": ".../.well-known/agent-card.json",
     "protocol": "1.0"}
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket

import uvicorn
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import a2a_pb2
from starlette.applications import Starlette

from tests.interop.sdk_server.peer_server import EchoExecutor

PROTOCOLS = ("1.0", "0.3")


def card(url: str, protocol: str) -> a2a_pb2.AgentCard:
    """The echo agent's card: JSONRPC at `url/`, HTTP+JSON at `url`, both speaking `protocol`."""
    return a2a_pb2.AgentCard(
        name="sdk-http-echo",
        description="The official SDK's JSON-RPC and HTTP+JSON servers with an echo agent",
        version="1.0.0",
        supported_interfaces=[
            a2a_pb2.AgentInterface(
                url=f"{url}/", protocol_binding="JSONRPC", protocol_version=protocol
            ),
            a2a_pb2.AgentInterface(
                url=url, protocol_binding="HTTP+JSON", protocol_version=protocol
            ),
        ],
        capabilities=a2a_pb2.AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[a2a_pb2.AgentSkill(id="echo", name="Echo", description="echoes", tags=["echo"])],
    )


async def serve(protocol: str) -> None:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    agent_card = card(url, protocol)
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(), task_store=InMemoryTaskStore(), agent_card=agent_card
    )
    compat = protocol == "0.3"
    # Order matters: the REST factory ends with a `/{tenant}` mount that would also match the
    # card's path, so the card and JSON-RPC routes come first.
    app = Starlette(
        routes=[
            *create_agent_card_routes(agent_card),
            *create_jsonrpc_routes(handler, rpc_url="/", enable_v0_3_compat=compat),
            *create_rest_routes(handler, enable_v0_3_compat=compat),
        ]
    )
    config = uvicorn.Config(
        app, loop="asyncio", lifespan="off", access_log=False, log_level="warning"
    )
    server = uvicorn.Server(config)
    # The socket listens already: a connection made before uvicorn serves waits in its backlog.
    line = {"url": url, "card_url": f"{url}/.well-known/agent-card.json", "protocol": protocol}
    print(json.dumps(line), flush=True)
    await server.serve(sockets=[sock])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocol", choices=PROTOCOLS, default="1.0")
    asyncio.run(serve(parser.parse_args().protocol))


if __name__ == "__main__":
    main()
