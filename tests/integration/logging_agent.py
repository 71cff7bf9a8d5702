"""An agent for `a2a-grpc serve --agent tests.integration.logging_agent:LoggingAgent`: it logs
one line naming the message's text, then completes the task."""

from __future__ import annotations

import logging

from a2a_grpc.server.agent import RequestContext, TaskEvents

log = logging.getLogger("tests.logging_agent")


class LoggingAgent:
    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        log.info("agent at work on %s", context.message.parts[0].text)
        await events.complete()
