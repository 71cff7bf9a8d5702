"""RequestHandler driven directly, without grpc: the protocol rules the servicer relies on.

No sockets and no clock: agents here hold on asyncio events the tests set, and every wait is on
an event, a stream's next item or a blocking call, bounded by `within`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import pytest

from a2a_grpc.core.errors import (
    ContentTypeNotSupportedError,
    ExtensionSupportRequiredError,
    InvalidParamsError,
    StatusError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from a2a_grpc.server.card import demo_card
from a2a_grpc.server.compose import build_handler
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.demo_agent import DemoAgent
from a2a_grpc.server.protocol.call_context import CallContext
from a2a_grpc.server.protocol.handler import RequestHandler
from a2a_grpc.server.tasks.base import LiveTaskLimitError, StoreFullError

ALICE = CallContext(principal="alice")
BOB = CallContext(principal="bob")

T = TypeVar("T")
Stream = AsyncIterator[a2a_pb2.StreamResponse]
Make = Callable[..., RequestHandler]


async def within(awaitable: Awaitable[T]) -> T:
    """An upper bound for waits that should end at once: a hang fails instead of timing out."""
    return await asyncio.wait_for(awaitable, 5)


# -- agents ---------------------------------------------------------------------------------


class Recorder(DemoAgent):
    """The demo agent (see its keywords), noting every context it is given."""

    def __init__(self) -> None:
        self.contexts: list[RequestContext] = []

    @property
    def runs(self) -> int:
        return len(self.contexts)

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        self.contexts.append(context)
        await super().execute(context, events)


class Gate:
    """WORKING, then holds until `go`; then INPUT_REQUIRED for "ask", otherwise COMPLETED.

    A message that continues a task completes it at once. `entered` is set once the task is
    WORKING, `cancelled` when the run is cancelled while held.
    """

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.go = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.runs = 0

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        self.runs += 1
        if context.task is not None:
            await events.complete("thanks")
            return
        await events.working()
        self.entered.set()
        try:
            await self.go.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        if context.text() == "ask":
            await events.require_input("which colour?")
        else:
            await events.complete()


# -- helpers --------------------------------------------------------------------------------


@pytest.fixture
async def make() -> AsyncIterator[Make]:
    made: list[RequestHandler] = []

    def build(
        agent: Any = None, card: a2a_pb2.AgentCard | None = None, **config: Any
    ) -> RequestHandler:
        handler = build_handler(
            agent or Recorder(), card or demo_card("localhost:50051"), ServerConfig(**config)
        )
        made.append(handler)
        return handler

    yield build
    for handler in made:
        await handler.housekeeping.drain(0)  # cancels the agents a test left holding


_ids = itertools.count()


def request(
    text: str = "hello",
    *,
    tenant: str = "",
    return_immediately: bool = False,
    **fields: Any,
) -> a2a_pb2.SendMessageRequest:
    fields.setdefault("message_id", f"m{next(_ids)}")
    fields.setdefault("role", a2a_pb2.ROLE_USER)
    message = a2a_pb2.Message(parts=[a2a_pb2.Part(text=text)], **fields)
    sent = a2a_pb2.SendMessageRequest(message=message, tenant=tenant)
    if return_immediately:
        sent.configuration.return_immediately = True
    return sent


async def send(
    handler: RequestHandler, sent: a2a_pb2.SendMessageRequest, call: CallContext = ALICE
) -> a2a_pb2.Task:
    response = await within(handler.send_message(sent, call))
    assert response.HasField("task"), response
    return response.task


async def get(
    handler: RequestHandler, task_id: str, call: CallContext = ALICE, tenant: str = ""
) -> a2a_pb2.Task:
    return await handler.get_task(a2a_pb2.GetTaskRequest(id=task_id, tenant=tenant), call)


async def collect(stream: Stream) -> list[a2a_pb2.StreamResponse]:
    """The rest of a stream, up to its end (which must come without help)."""

    async def rest() -> list[a2a_pb2.StreamResponse]:
        return [event async for event in stream]

    return await within(rest())


def subscribe(
    handler: RequestHandler, task_id: str, call: CallContext = ALICE, tenant: str = ""
) -> Stream:
    return handler.subscribe_to_task(
        a2a_pb2.SubscribeToTaskRequest(id=task_id, tenant=tenant), call
    )


def states(events: list[a2a_pb2.StreamResponse]) -> list[int]:
    return [e.status_update.status.state for e in events if e.HasField("status_update")]


def fields_of(error: StatusError) -> list[str]:
    return [violation.field for violation in error.field_violations]


async def stored_count(handler: RequestHandler, call: CallContext = ALICE) -> int:
    listed = await handler.list_tasks(a2a_pb2.ListTasksRequest(), call)
    return listed.total_size


# -- validation -----------------------------------------------------------------------------

REQUIRED = "urn:example:required"
CALL_WITH_EXTENSION = CallContext(principal="alice", extensions=(REQUIRED,))


def strict_card() -> a2a_pb2.AgentCard:
    """Plain text only, and an extension every caller must activate."""
    card = demo_card("localhost:50051")
    del card.default_input_modes[:]
    card.default_input_modes.append("text/plain")
    card.capabilities.extensions.add(uri=REQUIRED, required=True)
    return card


async def test_checks_run_in_the_documented_order(make: Make) -> None:
    agent = Recorder()
    handler = make(agent, strict_card(), max_inline_bytes=8, max_message_bytes=256)
    done = await send(
        handler, request(message_id="m-done", context_id="ctx-a"), CALL_WITH_EXTENSION
    )
    assert done.status.state == a2a_pb2.TASK_STATE_COMPLETED

    # One request that breaks every rule; each step fixes the rule the handler named, and the
    # next rule in the documented order must be the one named next.
    bad = request("x" * 300, message_id="m-done", task_id="no-such-task", context_id="ctx-b")
    bad.message.role = a2a_pb2.ROLE_UNSPECIFIED
    bad.message.parts.insert(0, a2a_pb2.Part(raw=b"123456789", media_type="image/png"))
    call = ALICE
    message = bad.message

    def fix_role() -> None:
        message.role = a2a_pb2.ROLE_USER

    def fix_message_id() -> None:
        message.message_id = "m-new"

    def fix_media_type() -> None:
        message.parts[0].media_type = "text/plain"

    def fix_inline_size() -> None:
        message.parts[0].raw = b"12345678"  # exactly the limit

    def fix_message_size() -> None:
        message.parts[1].text = "short"

    def fix_extensions() -> None:
        nonlocal call
        call = CALL_WITH_EXTENSION

    def fix_task() -> None:
        message.task_id = done.id

    def fix_context() -> None:
        message.context_id = done.context_id

    steps: list[tuple[type[StatusError], list[str], Callable[[], None]]] = [
        (InvalidParamsError, ["message.role"], fix_role),
        (InvalidParamsError, ["message.message_id"], fix_message_id),
        (ContentTypeNotSupportedError, [], fix_media_type),
        (InvalidParamsError, ["message.parts[0].raw"], fix_inline_size),
        (InvalidParamsError, ["message"], fix_message_size),
        (ExtensionSupportRequiredError, [], fix_extensions),
        (TaskNotFoundError, [], fix_task),
        (InvalidParamsError, ["message.context_id"], fix_context),
    ]
    for expected, fields, fix in steps:
        with pytest.raises(StatusError) as caught:
            await handler.send_message(bad, call)
        assert type(caught.value) is expected, (expected, caught.value)
        assert fields_of(caught.value) == fields
        fix()
    with pytest.raises(UnsupportedOperationError, match="COMPLETED"):  # a finished task
        await handler.send_message(bad, call)
    assert agent.runs == 1  # no refused request reached the agent
    assert await stored_count(handler) == 1  # nor created a task


async def test_every_missing_required_field_is_named_at_once(make: Make) -> None:
    agent = Recorder()
    handler = make(agent)
    with pytest.raises(InvalidParamsError) as caught:
        await handler.send_message(a2a_pb2.SendMessageRequest(), ALICE)
    assert fields_of(caught.value) == ["message"]
    empty = a2a_pb2.SendMessageRequest(message=a2a_pb2.Message(role=a2a_pb2.ROLE_AGENT))
    empty.message.parts.add()  # a part with no content
    empty.configuration.history_length = -1
    with pytest.raises(InvalidParamsError) as caught:
        await handler.send_message(empty, ALICE)
    assert fields_of(caught.value) == [
        "message.message_id",
        "message.role",
        "message.parts[0]",
        "configuration.history_length",
    ]
    with pytest.raises(InvalidParamsError):  # the streaming RPC checks the same
        await anext(handler.send_streaming_message(empty, ALICE))
    assert agent.runs == 0


async def test_message_size_counts_the_whole_serialized_message(make: Make) -> None:
    sent = request("x" * 100)
    limit = sent.message.ByteSize()
    handler = make(max_message_bytes=limit, max_inline_bytes=0)
    assert (await send(handler, sent)).status.state == a2a_pb2.TASK_STATE_COMPLETED  # at the limit
    with_metadata = request("x" * 100)
    with_metadata.message.metadata.update({"k": "v"})  # metadata counts too
    with pytest.raises(InvalidParamsError, match=f"the limit is {limit}") as caught:
        await handler.send_message(with_metadata, ALICE)
    assert fields_of(caught.value) == ["message"]
    assert await stored_count(handler) == 1


async def test_a_url_part_of_a_type_the_card_does_not_accept_is_refused(make: Make) -> None:
    handler = make(card=strict_card())
    sent = request()
    sent.message.parts.add(url="https://example.com/x.png", media_type="image/png")
    with pytest.raises(ContentTypeNotSupportedError) as caught:
        await handler.send_message(sent, CALL_WITH_EXTENSION)
    assert caught.value.metadata == {"mediaType": "image/png"}


# -- idempotency ----------------------------------------------------------------------------


async def test_a_repeated_message_id_gets_the_original_task(make: Make) -> None:
    agent = Recorder()
    handler = make(agent)
    sent = request()
    first = await send(handler, sent)
    again = await send(handler, sent)
    assert again.id == first.id
    streamed = await collect(handler.send_streaming_message(sent, ALICE))
    assert streamed[0].task.id == first.id
    assert agent.runs == 1
    assert await stored_count(handler) == 1


async def test_a_repeated_direct_reply_is_the_same_reply(make: Make) -> None:
    agent = Recorder()
    handler = make(agent)
    sent = request("reply hi")
    first = await within(handler.send_message(sent, ALICE))
    again = await within(handler.send_message(sent, ALICE))
    assert first.HasField("message")
    assert again.message == first.message
    assert agent.runs == 1
    assert await stored_count(handler) == 0  # a direct reply creates no task


async def test_concurrent_repeats_follow_one_run(make: Make) -> None:
    agent = Gate()
    handler = make(agent)
    sent = request()
    # Each call runs up to its wait before the agent's task first runs (asyncio runs ready
    # tasks in order), so all of them find the run in progress.
    calls = [asyncio.ensure_future(handler.send_message(sent, ALICE)) for _ in range(10)]
    await within(agent.entered.wait())
    assert not any(call.done() for call in calls)
    streamed = handler.send_streaming_message(sent, ALICE)
    head = await within(anext(streamed))
    assert head.task.status.state == a2a_pb2.TASK_STATE_WORKING
    agent.go.set()
    responses = await within(asyncio.gather(*calls))
    assert {r.task.id for r in responses} == {head.task.id}
    assert {r.task.status.state for r in responses} == {a2a_pb2.TASK_STATE_COMPLETED}
    assert states(await collect(streamed)) == [a2a_pb2.TASK_STATE_COMPLETED]
    assert agent.runs == 1


async def test_the_same_message_id_with_other_content_is_invalid_params(make: Make) -> None:
    agent = Recorder()
    handler = make(agent)
    await send(handler, request("one", message_id="m1"))
    with pytest.raises(InvalidParamsError, match="different message") as caught:
        await handler.send_message(request("two", message_id="m1"), ALICE)
    assert fields_of(caught.value) == ["message.message_id"]
    with pytest.raises(InvalidParamsError, match="different message"):
        await anext(handler.send_streaming_message(request("two", message_id="m1"), ALICE))
    assert agent.runs == 1


async def test_message_ids_are_per_caller_and_tenant(make: Make) -> None:
    agent = Recorder()
    handler = make(agent)
    tasks = {
        (await send(handler, request(message_id="m1", tenant=tenant), call)).id
        for call, tenant in [(ALICE, ""), (BOB, ""), (ALICE, "acme")]
    }
    assert len(tasks) == 3
    assert agent.runs == 3


# -- tenants and principals -----------------------------------------------------------------


async def test_a_foreign_task_looks_exactly_like_an_unknown_one(make: Make) -> None:
    agent = Recorder()
    handler = make(agent)
    task = await send(handler, request("ask", tenant="acme"), ALICE)
    assert task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED

    async def refusals(task_id: str, call: CallContext, tenant: str) -> list[tuple[type, str]]:
        """What each task RPC says about `task_id` to this caller in this tenant."""
        attempts: list[Callable[[], Awaitable[Any]]] = [
            lambda: get(handler, task_id, call, tenant),
            lambda: handler.cancel_task(a2a_pb2.CancelTaskRequest(id=task_id, tenant=tenant), call),
            lambda: anext(subscribe(handler, task_id, call, tenant)),
            lambda: handler.send_message(request("red", task_id=task_id, tenant=tenant), call),
            lambda: anext(
                handler.send_streaming_message(request("red", task_id=task_id, tenant=tenant), call)
            ),
        ]
        seen = []
        for attempt in attempts:
            with pytest.raises(TaskNotFoundError) as caught:
                await attempt()
            seen.append((type(caught.value), str(caught.value).replace(task_id, "ID")))
        return seen

    unknown = await refusals("no-such-task", ALICE, "acme")
    for call, tenant in [(BOB, "acme"), (ALICE, "globex"), (ALICE, "")]:
        assert await refusals(task.id, call, tenant) == unknown
        listed = await handler.list_tasks(a2a_pb2.ListTasksRequest(tenant=tenant), call)
        assert list(listed.tasks) == []
    # Nothing the others tried touched it: the owner still finds it waiting, and answers it.
    assert (await get(handler, task.id, ALICE, "acme")).status.state == (
        a2a_pb2.TASK_STATE_INPUT_REQUIRED
    )
    answered = await send(handler, request("red", task_id=task.id, tenant="acme"), ALICE)
    assert answered.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert agent.runs == 2


# -- continuing an INPUT_REQUIRED task ------------------------------------------------------


async def test_the_next_message_continues_an_input_required_task(make: Make) -> None:
    agent = Recorder()
    handler = make(agent)
    asked = await send(handler, request("ask"))
    assert asked.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    assert asked.status.message.role == a2a_pb2.ROLE_AGENT  # the question
    answered = await send(handler, request("red", task_id=asked.id))  # no context id: the task's
    assert (answered.id, answered.context_id) == (asked.id, asked.context_id)
    assert answered.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert [(m.role, m.parts[0].text) for m in answered.history][2] == (a2a_pb2.ROLE_USER, "red")
    assert [m.role for m in answered.history] == [
        a2a_pb2.ROLE_USER,
        a2a_pb2.ROLE_AGENT,
        a2a_pb2.ROLE_USER,
        a2a_pb2.ROLE_AGENT,
    ]
    second = agent.contexts[1]
    assert second.task is not None and second.task.id == asked.id
    assert (second.task_id, second.context_id) == (asked.id, asked.context_id)


async def test_a_continuation_stream_opens_with_the_task(make: Make) -> None:
    handler = make()
    asked = await send(handler, request("ask"))
    events = await collect(handler.send_streaming_message(request("red", task_id=asked.id), ALICE))
    assert events[0].task.id == asked.id
    assert events[0].task.history[-1].parts[0].text == "red"  # the answer, recorded
    assert events[0].task.status.state == a2a_pb2.TASK_STATE_SUBMITTED
    assert states(events) == [a2a_pb2.TASK_STATE_WORKING, a2a_pb2.TASK_STATE_COMPLETED]


async def test_a_task_still_working_takes_no_other_message(make: Make) -> None:
    agent = Gate()
    handler = make(agent)
    task = await send(handler, request(return_immediately=True))
    await within(agent.entered.wait())
    with pytest.raises(UnsupportedOperationError, match="still working"):
        await handler.send_message(request("more", task_id=task.id), ALICE)
    agent.go.set()
    assert agent.runs == 1


# -- return_immediately ---------------------------------------------------------------------


async def test_return_immediately_answers_before_the_task_settles(make: Make) -> None:
    agent = Gate()
    handler = make(agent)
    sent = request(return_immediately=True)
    task = await send(handler, sent)
    assert task.status.state in (a2a_pb2.TASK_STATE_SUBMITTED, a2a_pb2.TASK_STATE_WORKING)
    agent.go.set()
    blocking = a2a_pb2.SendMessageRequest()
    blocking.CopyFrom(sent)
    blocking.configuration.return_immediately = False  # same message: follows the same run
    assert (await send(handler, blocking)).status.state == a2a_pb2.TASK_STATE_COMPLETED


# -- cancel ---------------------------------------------------------------------------------


async def test_cancel_ends_a_running_task_at_once_and_tells_the_agent(make: Make) -> None:
    agent = Gate()
    handler = make(agent)
    task = await send(handler, request(return_immediately=True))
    await within(agent.entered.wait())
    canceled = await handler.cancel_task(a2a_pb2.CancelTaskRequest(id=task.id), ALICE)
    assert canceled.status.state == a2a_pb2.TASK_STATE_CANCELED
    await within(agent.cancelled.wait())
    assert (await get(handler, task.id)).status.state == a2a_pb2.TASK_STATE_CANCELED
    with pytest.raises(TaskNotCancelableError, match="CANCELED") as caught:
        await handler.cancel_task(a2a_pb2.CancelTaskRequest(id=task.id), ALICE)
    assert caught.value.metadata == {"taskId": task.id}


@pytest.mark.parametrize(
    ("text", "state"),
    [("hello", "COMPLETED"), ("fail", "FAILED"), ("crash", "FAILED")],
)
async def test_a_finished_task_is_not_cancelable(make: Make, text: str, state: str) -> None:
    handler = make()
    task = await send(handler, request(text))
    assert a2a_pb2.TaskState.Name(task.status.state) == f"TASK_STATE_{state}"
    with pytest.raises(TaskNotCancelableError, match=state):
        await handler.cancel_task(a2a_pb2.CancelTaskRequest(id=task.id), ALICE)
    assert (await get(handler, task.id)).status.state == task.status.state


async def test_cancel_an_input_required_task(make: Make) -> None:
    agent = Recorder()
    handler = make(agent)
    asked = await send(handler, request("ask"))
    canceled = await handler.cancel_task(a2a_pb2.CancelTaskRequest(id=asked.id), ALICE)
    assert canceled.status.state == a2a_pb2.TASK_STATE_CANCELED
    with pytest.raises(UnsupportedOperationError, match="CANCELED"):
        await handler.send_message(request("red", task_id=asked.id), ALICE)
    assert agent.runs == 1


async def test_cancel_closes_every_open_stream(make: Make) -> None:
    agent = Gate()
    handler = make(agent)
    origin = handler.send_streaming_message(request(), ALICE)
    task_id = (await within(anext(origin))).task.id
    assert states([await within(anext(origin))]) == [a2a_pb2.TASK_STATE_WORKING]
    subscriber = subscribe(handler, task_id)
    assert (await within(anext(subscriber))).task.status.state == a2a_pb2.TASK_STATE_WORKING
    await handler.cancel_task(a2a_pb2.CancelTaskRequest(id=task_id), ALICE)
    for stream in (origin, subscriber):
        assert states(await collect(stream)) == [a2a_pb2.TASK_STATE_CANCELED]


async def test_cancel_checks_the_id(make: Make) -> None:
    handler = make()
    with pytest.raises(InvalidParamsError) as caught:
        await handler.cancel_task(a2a_pb2.CancelTaskRequest(), ALICE)
    assert fields_of(caught.value) == ["id"]
    with pytest.raises(TaskNotFoundError):
        await handler.cancel_task(a2a_pb2.CancelTaskRequest(id="no-such-task"), ALICE)


# -- streams --------------------------------------------------------------------------------


async def test_a_subscription_stays_open_through_input_required_until_terminal(
    make: Make,
) -> None:
    agent = Gate()
    handler = make(agent)
    sender = handler.send_streaming_message(request("ask"), ALICE)
    head = await within(anext(sender))
    assert head.task.status.state == a2a_pb2.TASK_STATE_SUBMITTED
    assert states([await within(anext(sender))]) == [a2a_pb2.TASK_STATE_WORKING]
    subscriber = subscribe(handler, head.task.id)
    assert (await within(anext(subscriber))).task.status.state == a2a_pb2.TASK_STATE_WORKING
    agent.go.set()
    # The send stream closes at INPUT_REQUIRED; the subscription goes on.
    assert states(await collect(sender)) == [a2a_pb2.TASK_STATE_INPUT_REQUIRED]
    asked = await within(anext(subscriber))
    assert asked.status_update.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    # A subscriber that arrives while the task waits for input stays open too.
    late = subscribe(handler, head.task.id)
    assert (await within(anext(late))).task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    await send(handler, request("red", task_id=head.task.id))
    for stream in (subscriber, late):
        rest = states(await collect(stream))
        assert rest[0] == a2a_pb2.TASK_STATE_SUBMITTED
        assert rest[-1] == a2a_pb2.TASK_STATE_COMPLETED


async def test_subscribing_needs_a_task_that_can_still_change(make: Make) -> None:
    handler = make()
    with pytest.raises(TaskNotFoundError):
        await anext(subscribe(handler, "no-such-task"))
    with pytest.raises(InvalidParamsError):
        await anext(subscribe(handler, ""))
    done = await send(handler, request())
    with pytest.raises(UnsupportedOperationError, match="GetTask"):
        await anext(subscribe(handler, done.id))


async def test_a_new_task_stream_carries_every_event_in_order(make: Make) -> None:
    handler = make()
    events = await collect(handler.send_streaming_message(request(), ALICE))
    assert [e.WhichOneof("payload") for e in events] == [
        "task",
        "status_update",
        "artifact_update",
        "status_update",
    ]
    assert states(events) == [a2a_pb2.TASK_STATE_WORKING, a2a_pb2.TASK_STATE_COMPLETED]
    reply = await collect(handler.send_streaming_message(request("reply hi"), ALICE))
    assert [e.WhichOneof("payload") for e in reply] == ["message"]


async def test_a_reader_that_goes_away_never_ends_the_task(make: Make) -> None:
    agent = Gate()
    handler = make(agent)
    sent = request()
    reading = asyncio.Event()

    async def read() -> None:
        async for _ in handler.send_streaming_message(sent, ALICE):
            reading.set()

    reader = asyncio.ensure_future(read())
    await within(reading.wait())
    await within(agent.entered.wait())
    reader.cancel()  # what grpc does to the handler of a call whose client went away
    with contextlib.suppress(asyncio.CancelledError):
        await reader
    assert reader.cancelled()
    agent.go.set()
    done = await send(handler, sent)  # the same message again: follows the run to its end
    assert done.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert not agent.cancelled.is_set()


async def test_streaming_off_in_the_card_refuses_both_streams(make: Make) -> None:
    card = demo_card("localhost:50051")
    card.capabilities.streaming = False
    handler = make(card=card)
    task = await send(handler, request("ask"))
    with pytest.raises(UnsupportedOperationError, match="streaming"):
        await anext(handler.send_streaming_message(request(), ALICE))
    with pytest.raises(UnsupportedOperationError, match="streaming"):
        await anext(subscribe(handler, task.id))


# -- limits ---------------------------------------------------------------------------------


async def test_a_store_full_of_unfinished_tasks_refuses_new_ones(make: Make) -> None:
    agent = Recorder()
    handler = make(
        agent, max_tasks=2, max_live_tasks_per_principal=10, max_live_tasks_per_tenant=10
    )
    first = await send(handler, request("ask"))
    await send(handler, request("ask"))
    with pytest.raises(StoreFullError) as caught:
        await handler.send_message(request("ask"), ALICE)
    assert type(caught.value) is StoreFullError  # the store, not a caller's share
    assert agent.runs == 2
    await send(handler, request("red", task_id=first.id))  # finished: it can make room
    assert (await send(handler, request("ask"))).status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED


async def test_unfinished_tasks_filling_the_byte_budget_refuse_new_ones(make: Make) -> None:
    agent = Recorder()
    handler = make(agent, max_store_bytes=3000)
    big = "ask " + "x" * 1500  # a task of more than 1500 bytes, waiting for input
    await send(handler, request(big))
    with pytest.raises(StoreFullError, match="3000 bytes"):
        await handler.send_message(request(big), ALICE)
    assert agent.runs == 1
    assert (await send(handler, request("small"))).status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_one_caller_may_hold_only_its_share_of_unfinished_tasks(make: Make) -> None:
    agent = Recorder()
    handler = make(agent, max_live_tasks_per_principal=1)
    mine = await send(handler, request("ask"))
    for tenant in ("", "other"):  # the share counts across tenants
        with pytest.raises(LiveTaskLimitError, match="caller"):
            await handler.send_message(request("ask", tenant=tenant), ALICE)
    assert (await send(handler, request("ask"), BOB)).status.state == (
        a2a_pb2.TASK_STATE_INPUT_REQUIRED
    )
    await send(handler, request("red", task_id=mine.id))  # finished: the share is free again
    await send(handler, request("ask"))
    assert agent.runs == 4


async def test_one_tenant_may_hold_only_its_share_of_unfinished_tasks(make: Make) -> None:
    handler = make(max_live_tasks_per_tenant=2)
    carol = CallContext(principal="carol")
    await send(handler, request("ask", tenant="acme"), ALICE)
    await send(handler, request("ask", tenant="acme"), BOB)
    with pytest.raises(LiveTaskLimitError, match="tenant"):
        await handler.send_message(request("ask", tenant="acme"), carol)
    await send(handler, request("ask", tenant="globex"), carol)


async def test_direct_replies_and_refusals_take_no_share(make: Make) -> None:
    handler = make(max_live_tasks_per_principal=1)
    for _ in range(3):
        assert (await within(handler.send_message(request("reply hi"), ALICE))).HasField("message")
    with pytest.raises(InvalidParamsError):
        await handler.send_message(a2a_pb2.SendMessageRequest(), ALICE)
    with pytest.raises(TaskNotFoundError):
        await handler.send_message(request(task_id="no-such-task"), ALICE)
    await send(handler, request("ask"))  # the one unfinished task alice may have


async def test_a_run_takes_its_task_out_of_the_runners_as_it_ends(make: Make) -> None:
    handler = make()
    for _ in range(3):
        await send(handler, request())
    assert handler.intake.runners == set()


async def test_a_drain_lets_go_of_a_run_cancelled_before_it_began(make: Make) -> None:
    handler = make()
    sent = request()
    key = (sent.tenant, ALICE.principal, sent.message.message_id)
    await handler.intake.accept(sent, key, ALICE, subscribe=False)  # scheduled, not begun
    (runner,) = handler.intake.runners
    await handler.housekeeping.drain(0)  # not through `within`: its task would let it begin
    assert runner.cancelled() and handler.intake.runners == set()
