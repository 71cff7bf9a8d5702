"""The agent replica tests run in their server processes, steered through the test's Redis
($A2A_TEST_REDIS) so that a test can wait on events, never on the clock.

- `hold <name>`: WORKING, then waits (BLPOP) until the test pushes to `test:release:<name>`,
  then sends `chunks` artifact chunks if the released value is a number, then COMPLETED.
- `ask`: INPUT_REQUIRED; the answer to it completes the task, saying which process ran it.
- `reply`: a direct reply (no task).
- `drip <name> <count>`: WORKING, then `count` artifact chunks, each once the test pushes to
  `test:drip:<name>`, then COMPLETED.
- `busy <name>`: "not now": raises ServiceUnavailableError (retry in 0.05 s) while the list
  `test:busy:<name>` holds a token (each run takes one), before any event; else COMPLETED. An
  answer starting with `busy <name>` is treated alike.
- `busy-after <name>`: WORKING, pushes the task id to `test:started:<message id>`, waits for
  `test:release:<name>`, then as `busy`.
- `busy-on <pid>`: "not now" in the process `pid`, COMPLETED in any other.
A held run that is cancelled pushes its message id to `test:cancelled`.
Every run appends "<message id>:<pid>" to the list `test:runs`, so a test sees where and how
often the agent ran, and pushes the task id to `test:started:<message id>` once WORKING.
"""

from __future__ import annotations

import asyncio
import os

import redis.asyncio as aioredis

from a2a_grpc.core.errors import ServiceUnavailableError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents


class ReplicaAgent:
    def __init__(self) -> None:
        self.redis = aioredis.from_url(os.environ["A2A_TEST_REDIS"])

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        words = context.text().split()
        keyword = words[0] if words else ""
        pid = os.getpid()
        await self.redis.rpush("test:runs", f"{context.message.message_id}:{pid}")
        if keyword == "reply":
            await events.reply(f"direct from {pid}")
            return
        if keyword == "busy-after":
            await events.working(f"working on {pid}")
            await self.redis.rpush(f"test:started:{context.message.message_id}", context.task_id)
            await self.redis.blpop([f"test:release:{words[1]}"])
        if keyword in ("busy", "busy-after") and await self.redis.lpop(f"test:busy:{words[1]}"):
            raise ServiceUnavailableError(f"busy on {pid}", retry_delay=0.05)
        if keyword == "busy-on" and words[1] == str(pid):
            raise ServiceUnavailableError(f"busy on {pid}", retry_delay=0.05)
        if context.task is not None:  # the answer to `ask`
            await events.complete(f"answered, on {pid}")
            return
        if keyword == "ask":
            await events.require_input(f"which one? (asked on {pid})")
            return
        if keyword in ("busy", "busy-after", "busy-on"):
            await events.complete(f"done on {pid}")
            return
        await events.working(f"working on {pid}")
        await self.redis.rpush(f"test:started:{context.message.message_id}", context.task_id)
        if keyword == "drip":
            artifact_id = None
            count = int(words[2])
            for number in range(count):
                await self.redis.blpop([f"test:drip:{words[1]}"])
                part = a2a_pb2.Part(text=f"chunk {number}")
                artifact_id = await events.add_artifact(
                    [part],
                    artifact_id=artifact_id,
                    append=number > 0,
                    last_chunk=number == count - 1,
                )
        if keyword == "hold":
            try:
                _, released = await self.redis.blpop([f"test:release:{words[1]}"])
            except asyncio.CancelledError:
                await self.redis.rpush("test:cancelled", context.message.message_id)
                raise
            count = int(released) if released.isdigit() else 0
            artifact_id = None
            for number in range(count):
                part = a2a_pb2.Part(text=f"chunk {number}")
                artifact_id = await events.add_artifact(
                    [part],
                    artifact_id=artifact_id,
                    append=number > 0,
                    last_chunk=number == count - 1,
                )
        await events.complete(f"done on {pid}")
