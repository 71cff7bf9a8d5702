"""A Google ADK agent with no model, served over A2A by ADK itself, run as a child process by the
tests in tests/interop/peers.

It runs in the ADK's own virtual environment (tests/interop/adk/adk_env.py builds it: google-adk
brings its own a2a-sdk), imports only ADK, the SDK it brought, uvicorn and the standard library,
and never a2a_grpc. The agent is a `BaseAgent` whose `_run_async_impl` yields Events; `to_a2a()`
wraps it in ADK's A2aAgentExecutor and the SDK's JSON-RPC routes, and serves the card ADK builds
for it at /.well-known/agent-card.json. The first word of the user's text picks the behaviour:
- (anything else)  a text Event echoing the text: the A2A side reports WORKING with it, then an
                   artifact holding it and COMPLETED.
- `ask`            a text question and a long-running function call `ask_user` (ADK's way of
                   waiting for a human): ADK's converter reports it as INPUT_REQUIRED. The next
                   message on the task (plain text, or a function_response data part for the
                   call, metadata `adk_type: function_response`) is the answer: "hello,
                   <answer>", COMPLETED. (A plain text answer reaches the agent through ADK's
                   default executor; its newer one, opted into with ADK's own A2A extension,
                   would insist on the function_response.)
- `slow [S]`       a text Event "working slowly", then a sleep of S seconds (default 30), then
                   "slow result"; cancelable.
- `fail`           an Event with an error_code: ADK reports the task FAILED with its message.
- `crash`          raises: ADK's executor reports the task FAILED with the exception's text.

    .venv/peers/adk/bin/python -I tests/interop/adk/agent_server.py

What it serves (ADK 2.13.0 with the a2a-sdk 1.3.0 that requirements.txt pins): A2A 1.0 over
JSON-RPC at `POST /`; its card lists that one interface (`JSONRPC`, `http://127.0.0.1:<port>`,
protocol version 1.0, capabilities `streaming`); the endpoint also answers 0.3's JSON-RPC
methods, which the card does not say. ADK marks all of its A2A parts experimental (the warnings
are silenced below).

Binds 127.0.0.1:0; once the app has started, prints one JSON line on stdout, then serves until
killed:
    {"url": "http://127.0.0.1:<port>", "card_url": ".../.well-known/agent-card.json"}
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import uuid
import warnings
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import uvicorn
from google.adk.a2a.utils.agent_to_a2a import to_a2a
from google.adk.agents import BaseAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.events import Event
from google.genai import types
from starlette.applications import Starlette

ASK_TOOL = "ask_user"
QUESTION = "What is your name?"


def _text_of(content: types.Content | None) -> str:
    if content is None or not content.parts:
        return ""
    return " ".join(part.text for part in content.parts if part.text)


def _response_in(content: types.Content | None) -> str | None:
    """The answer an `ask_user` function_response carries in a user message, if it has one.
    (ADK resumes the asking invocation for it: the call's own id is not needed here.)"""
    for part in (content.parts if content else None) or []:
        response = part.function_response
        if response is not None and response.name == ASK_TOOL:
            return str((response.response or {}).get("answer", ""))
    return None


class EchoAgent(BaseAgent):
    """Echo, ask/answer, slow, fail and crash, with no model."""

    def _pending_call(self, ctx: InvocationContext) -> str | None:
        """The id of this agent's last long-running `ask_user` call in the session, if no
        function response has answered it."""
        answered: set[str] = set()
        for event in reversed(ctx.session.events):
            for part in (event.content.parts if event.content else None) or []:
                if part.function_response is not None and part.function_response.id:
                    answered.add(part.function_response.id)
            if event.author != self.name:
                continue
            for part in (event.content.parts if event.content else None) or []:
                call = part.function_call
                if (
                    call is not None
                    and call.name == ASK_TOOL
                    and call.id in (event.long_running_tool_ids or ())
                    and call.id not in answered
                ):
                    return call.id
            return None
        return None

    def _event(self, ctx: InvocationContext, *parts: types.Part, **fields: Any) -> Event:
        return Event(
            author=self.name,
            invocation_id=ctx.invocation_id,
            content=types.Content(role="model", parts=list(parts)) if parts else None,
            **fields,
        )

    async def _run_async_impl(self, ctx: InvocationContext) -> AsyncGenerator[Event, None]:
        answer = _response_in(ctx.user_content)
        if answer is not None:  # ADK's way of answering: a function_response for the call
            yield self._event(ctx, types.Part(text=f"hello, {answer}"))
            return
        pending = self._pending_call(ctx)
        if pending is not None:
            # A plain text answer: recorded as the call's response, so that the call is no
            # longer pending in the session, then greeted.
            answer = _text_of(ctx.user_content)
            yield self._event(
                ctx,
                types.Part(
                    function_response=types.FunctionResponse(
                        id=pending, name=ASK_TOOL, response={"answer": answer}
                    )
                ),
            )
            yield self._event(ctx, types.Part(text=f"hello, {answer}"))
            return
        text = _text_of(ctx.user_content)
        words = text.split()
        keyword = words[0].lower() if words else ""
        if keyword == "ask":
            call_id = f"ask-{uuid.uuid4()}"
            yield self._event(
                ctx,
                types.Part(text=QUESTION),
                types.Part(
                    function_call=types.FunctionCall(
                        id=call_id, name=ASK_TOOL, args={"question": QUESTION}
                    )
                ),
                long_running_tool_ids={call_id},
            )
        elif keyword == "slow":
            seconds = float(words[1]) if len(words) > 1 else 30.0
            yield self._event(ctx, types.Part(text="working slowly"))
            await asyncio.sleep(seconds)
            yield self._event(ctx, types.Part(text="slow result"))
        elif keyword == "fail":
            yield self._event(
                ctx, error_code="AGENT_ERROR", error_message="the agent failed on purpose"
            )
        elif keyword == "crash":
            raise RuntimeError("the agent crashed on purpose")
        else:
            yield self._event(ctx, types.Part(text=text))


async def serve() -> None:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"

    @asynccontextmanager
    async def announce(app: Starlette) -> AsyncIterator[None]:
        # to_a2a() runs this after its own startup step has built the card and mounted the
        # routes, so the line means "serving".
        print(
            json.dumps({"url": url, "card_url": f"{url}/.well-known/agent-card.json"}), flush=True
        )
        yield

    agent = EchoAgent(name="adk_echo", description="An ADK agent with no model that echoes")
    # The card ADK builds lists one JSONRPC interface at http://host:port/.
    app = to_a2a(agent, host="127.0.0.1", port=sock.getsockname()[1], lifespan=announce)
    config = uvicorn.Config(app, loop="asyncio", access_log=False, log_level="warning")
    await uvicorn.Server(config).serve(sockets=[sock])


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    # ADK warns on every use of its A2A parts that they are experimental; once is in this docstring.
    warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]", category=UserWarning)
    asyncio.run(serve())
