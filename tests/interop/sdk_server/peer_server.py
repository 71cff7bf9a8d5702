"""The official a2a-sdk gRPC server with an echo agent, run as a child process by the tests.

Imports only the SDK (its generated code and ours register the same proto symbols, so they
cannot share a process). Binds 127.0.0.1:0 and prints the port on stdout. The first word of
the user's text picks the behaviour:
- (anything else)  WORKING, an artifact echoing the text, COMPLETED.
- `ask`            INPUT_REQUIRED with a question; the next message on the task completes it
                   with an artifact "hello, <answer>".
- `chunks`         one artifact in three chunks (append, last_chunk), then COMPLETED.
- `reply`          a direct Message answer, no task.
- `slow [S]`       WORKING, then COMPLETED after S seconds (default 30); cancelable.
"""

from __future__ import annotations

import asyncio

import grpc
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import a2a_pb2, a2a_pb2_grpc


def text_part(text: str) -> a2a_pb2.Part:
    return a2a_pb2.Part(text=text)


class EchoExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        words = text.split()
        keyword = words[0].lower() if words else ""
        task = context.current_task
        if task is None and keyword == "reply":
            await event_queue.enqueue_event(
                a2a_pb2.Message(
                    message_id=f"reply-{context.task_id}",
                    context_id=context.context_id,
                    role=a2a_pb2.ROLE_AGENT,
                    parts=[text_part(text.partition(" ")[2] or "hello")],
                )
            )
            return
        if task is None:
            await event_queue.enqueue_event(
                a2a_pb2.Task(
                    id=context.task_id,
                    context_id=context.context_id,
                    status=a2a_pb2.TaskStatus(state=a2a_pb2.TASK_STATE_SUBMITTED),
                    history=[context.message] if context.message else [],
                )
            )
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        if task is not None and task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED:
            await updater.start_work()
            await updater.add_artifact([text_part(f"hello, {text}")], name="greeting")
            await updater.complete()
        elif keyword == "ask":
            await updater.requires_input(
                updater.new_agent_message([text_part("What is your name?")])
            )
        elif keyword == "chunks":
            await updater.start_work()
            for index, chunk in enumerate(("chunk 1", "chunk 2", "chunk 3")):
                await updater.add_artifact(
                    [text_part(chunk)],
                    artifact_id="chunked",
                    name="chunks",
                    append=index > 0,
                    last_chunk=index == 2,
                )
            await updater.complete()
        elif keyword == "slow":
            seconds = float(words[1]) if len(words) > 1 else 30.0
            await updater.start_work(updater.new_agent_message([text_part("working slowly")]))
            await asyncio.sleep(seconds)
            await updater.add_artifact([text_part("slow result")], name="result")
            await updater.complete()
        else:
            await updater.start_work()
            await updater.add_artifact([text_part(text)], name="echo")
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def card(port: int) -> a2a_pb2.AgentCard:
    """The echo agent's card, for the gRPC interface on 127.0.0.1:`port`."""
    return a2a_pb2.AgentCard(
        name="sdk-echo",
        description="The official SDK's gRPC server with an echo agent",
        version="1.0.0",
        supported_interfaces=[
            a2a_pb2.AgentInterface(
                url=f"127.0.0.1:{port}", protocol_binding="GRPC", protocol_version="1.0"
            )
        ],
        capabilities=a2a_pb2.AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[a2a_pb2.AgentSkill(id="echo", name="Echo", description="echoes", tags=["echo"])],
    )


async def serve() -> None:
    server = grpc.aio.server()
    port = server.add_insecure_port("127.0.0.1:0")
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(), task_store=InMemoryTaskStore(), agent_card=card(port)
    )
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), server)
    await server.start()
    print(port, flush=True)
    await server.wait_for_termination()


if __name__ == "__main__":
    asyncio.run(serve())
