"""The official a2a-sdk 1.3.0 gRPC server with the interop echo agent, plus server reflection.

Imports only the SDK, never a2a_grpc (both register the same proto symbols). The agent is the
interop peer's EchoExecutor (tests/interop/sdk_server/peer_server.py): on plain text it emits
the Task, WORKING, an echo artifact and COMPLETED, as our demo agent does.

    .venv/bin/python -m tests.load.sdk_echo_server      # prints `PORT <n>`, stops on SIGTERM
"""

from __future__ import annotations

import asyncio
import signal

import grpc
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import a2a_pb2, a2a_pb2_grpc
from grpc_reflection.v1alpha import reflection

from tests.interop.sdk_server.peer_server import EchoExecutor, card


async def serve() -> None:
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    port = server.add_insecure_port("127.0.0.1:0")
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(), task_store=InMemoryTaskStore(), agent_card=card(port)
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


if __name__ == "__main__":
    asyncio.run(serve())
