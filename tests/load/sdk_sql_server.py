"""The official a2a-sdk 1.3.0 gRPC server on its own SQL task store, the PostgreSQL anchor of
`make bench`: `DatabaseTaskStore` on a SQLAlchemy `AsyncEngine` with asyncpg, the SDK's
documented set-up, and the interop echo agent (as tests.load.sdk_echo_server, which keeps its
tasks in memory).

Runs in its own environment (tests/load/sdk_sql/sdk_sql_env.py: the project's .venv has no
SQLAlchemy or asyncpg) and imports only the SDK, never a2a_grpc. The engine keeps SQLAlchemy's
default pool (5 connections, 10 more on demand), as a user who follows the SDK's docs gets;
the table is created before serving.

    .venv/peers/sdk-sql/bin/python -m tests.load.sdk_sql_server postgresql://USER@HOST:PORT/DB
    # prints `PORT <n>`, stops on SIGTERM
"""

from __future__ import annotations

import asyncio
import signal
import sys

import grpc
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import a2a_pb2, a2a_pb2_grpc
from grpc_reflection.v1alpha import reflection
from sqlalchemy.ext.asyncio import create_async_engine

from tests.interop.sdk_server.peer_server import EchoExecutor, card


def asyncpg_url(url: str) -> str:
    """libpq's `postgresql://` URL as SQLAlchemy names its asyncpg dialect."""
    scheme, _, rest = url.partition("://")
    if scheme not in ("postgresql", "postgres"):
        raise SystemExit(f"expected a postgresql:// URL, got {url!r}")
    return f"postgresql+asyncpg://{rest}"


async def serve(url: str) -> None:
    engine = create_async_engine(asyncpg_url(url))
    store = DatabaseTaskStore(engine)
    await store.initialize()
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    port = server.add_insecure_port("127.0.0.1:0")
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(), task_store=store, agent_card=card(port)
    )
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), server)
    service = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"].full_name
    reflection.enable_server_reflection((service, reflection.SERVICE_NAME), server)
    await server.start()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    print(f"PORT {port}", flush=True)
    await stop.wait()
    await server.stop(0.5)
    await engine.dispose()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    asyncio.run(serve(sys.argv[1]))
