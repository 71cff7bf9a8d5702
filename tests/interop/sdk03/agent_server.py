"""The official a2a-sdk 0.3.26, a stock A2A 0.3 agent, serving JSON-RPC and HTTP+JSON; run as a
child process by the tests in tests/interop/peers.

It runs in the SDK 0.3's own virtual environment (tests/interop/sdk03/sdk03_env.py builds it
into `.venv/peers/sdk03`: the project's .venv pins the SDK 1.x), imports only that SDK, starlette
and uvicorn and the standard library, and never a2a_grpc. The first word of the user's text
picks the behaviour:
- (anything else)  WORKING, an artifact echoing the text, COMPLETED.
- `ask`            INPUT_REQUIRED with a question; the next message on the task completes it
                   with an artifact "hello, <answer>".
- `slow [S]`       WORKING, then COMPLETED after S seconds (default 30); cancelable.

One Starlette application on one 127.0.0.1 port, as the SDK's own factories lay it out: JSON-RPC
at `POST /` (`A2AStarletteApplication`), the 0.3 HTTP+JSON routes under `/v1/...` (the SDK's
`RESTAdapter`), and the card at `/.well-known/agent-card.json` in 0.3's shape: `url` (the
JSON-RPC endpoint), `preferredTransport` JSONRPC, `protocolVersion` 0.3.0 and
`additionalInterfaces` listing JSONRPC and HTTP+JSON; no `supportedInterfaces`, which 0.3 does
not have.

    .venv/peers/sdk03/bin/python -I tests/interop/sdk03/agent_server.py

Binds 127.0.0.1:0; once the socket listens, prints one JSON line on stdout, then serves until
killed:
    {"url": "http://127.0.0.1:<port>", "card_url": ".../.well-known/agent-card.json"}
"""

from __future__ import annotations

import asyncio
import json
import socket

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2AStarletteApplication
from a2a.server.apps.rest.rest_adapter import RESTAdapter
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    TaskState,
    TextPart,
)
from a2a.utils import new_task
from starlette.applications import Starlette
from starlette.routing import Route

QUESTION = "What is your name?"


def text(value: str) -> Part:
    return Part(root=TextPart(text=value))


class EchoExecutor(AgentExecutor):
    """Echo, ask/answer and slow (see the module docstring)."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        said = context.get_user_input()
        words = said.split()
        keyword = words[0].lower() if words else ""
        task = context.current_task
        if task is None:
            assert context.message is not None
            task = new_task(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        if task.status.state == TaskState.input_required:
            await updater.start_work()
            await updater.add_artifact([text(f"hello, {said}")], name="greeting")
            await updater.complete()
        elif keyword == "ask":
            await updater.requires_input(updater.new_agent_message([text(QUESTION)]), final=True)
        elif keyword == "slow":
            seconds = float(words[1]) if len(words) > 1 else 30.0
            await updater.start_work(updater.new_agent_message([text("working slowly")]))
            await asyncio.sleep(seconds)
            await updater.add_artifact([text("slow result")], name="result")
            await updater.complete()
        else:
            await updater.start_work()
            await updater.add_artifact([text(said)], name="echo")
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def card(url: str) -> AgentCard:
    """The echo agent's 0.3 card: JSON-RPC at `url/` (preferred), HTTP+JSON under `url`."""
    return AgentCard(
        name="sdk03-echo",
        description="The official SDK 0.3's JSON-RPC and HTTP+JSON servers with an echo agent",
        version="1.0.0",
        url=f"{url}/",
        preferred_transport="JSONRPC",
        additional_interfaces=[
            AgentInterface(url=f"{url}/", transport="JSONRPC"),
            AgentInterface(url=url, transport="HTTP+JSON"),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="Echo", description="echoes", tags=["echo"])],
    )


async def serve() -> None:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    agent_card = card(url)
    handler = DefaultRequestHandler(agent_executor=EchoExecutor(), task_store=InMemoryTaskStore())
    jsonrpc = A2AStarletteApplication(agent_card=agent_card, http_handler=handler)
    rest = RESTAdapter(agent_card=agent_card, http_handler=handler)
    routes = jsonrpc.routes(rpc_url="/")
    routes += [
        Route(path, endpoint, methods=[method])
        for (path, method), endpoint in rest.routes().items()
    ]
    app = Starlette(routes=routes)
    config = uvicorn.Config(
        app, loop="asyncio", lifespan="off", access_log=False, log_level="warning"
    )
    server = uvicorn.Server(config)
    # The socket listens already: a connection made before uvicorn serves waits in its backlog.
    print(json.dumps({"url": url, "card_url": f"{url}/.well-known/agent-card.json"}), flush=True)
    await server.serve(sockets=[sock])


if __name__ == "__main__":
    asyncio.run(serve())
