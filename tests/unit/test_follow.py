"""Following a stream without sockets: when reading stops, and how resumption is bounded."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from a2a_grpc.client.client import DEFAULT_RESUME
from a2a_grpc.client.errors import (
    DeadlineExceededError,
    StreamResumeError,
    UnavailableError,
    from_rpc_error,
)
from a2a_grpc.client.events import UnknownEvent
from a2a_grpc.client.follow import Mode, StreamDeadline, StreamItem, follow
from a2a_grpc.client.reducer import TaskView
from a2a_grpc.client.retry import Backoff, RetryPolicy
from a2a_grpc.core import status
from a2a_grpc.core.errors import (
    EventIdExpiredError,
    InternalError,
    MethodNotFoundError,
    ServiceUnavailableError,
    UnsupportedOperationError,
)
from a2a_grpc.core.event_ids import stamp
from a2a_grpc.generated import a2a_pb2

WORKING = a2a_pb2.TASK_STATE_WORKING
INPUT_REQUIRED = a2a_pb2.TASK_STATE_INPUT_REQUIRED
COMPLETED = a2a_pb2.TASK_STATE_COMPLETED


class FakeTime:
    """A clock that moves only when `follow` sleeps; every backoff is its ceiling (rand = 1)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now

    def backoff(self) -> Backoff:
        return Backoff(sleep=self.sleep, rand=lambda: 1.0, clock=self.clock)


def snapshot(state: int = WORKING) -> a2a_pb2.StreamResponse:
    return a2a_pb2.StreamResponse(
        task=a2a_pb2.Task(id="t1", context_id="c1", status=a2a_pb2.TaskStatus(state=state))
    )


def update(state: int) -> a2a_pb2.StreamResponse:
    return a2a_pb2.StreamResponse(
        status_update=a2a_pb2.TaskStatusUpdateEvent(
            task_id="t1", context_id="c1", status=a2a_pb2.TaskStatus(state=state)
        )
    )


def rpc_error(code: grpc.StatusCode, details: str = "", trailers: Any = ()) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(
        code, grpc.aio.Metadata(), grpc.aio.Metadata(*trailers), details=details
    )


DROP = rpc_error(grpc.StatusCode.UNAVAILABLE, "connection reset")


class FakeCall:
    """A transport's event stream: the events, then `error` if given (a gRPC error mapped as
    the gRPC transport maps it); records `aclose`."""

    def __init__(
        self, *events: a2a_pb2.StreamResponse | UnknownEvent, error: Exception | None = None
    ) -> None:
        self.events = events
        self.error = error
        self.read = 0
        self.cancelled = False

    def __aiter__(self) -> AsyncIterator[a2a_pb2.StreamResponse | UnknownEvent]:
        return self._responses()

    async def _responses(self) -> AsyncIterator[a2a_pb2.StreamResponse | UnknownEvent]:
        for event in self.events:
            self.read += 1
            yield event
        if isinstance(self.error, grpc.aio.AioRpcError):
            raise from_rpc_error(self.error) from self.error
        if self.error is not None:
            raise self.error

    async def aclose(self) -> None:
        self.cancelled = True


class Agent:
    """Hands out the scripted SubscribeToTask calls in order; GetTask answers `final`."""

    def __init__(self, *subscriptions: FakeCall, final: a2a_pb2.Task | None = None) -> None:
        self.subscriptions = list(subscriptions)
        self.final = final
        self.resubscribed = 0
        self.after: list[str | None] = []
        """The event id each resubscription resumed after."""

    def resubscribe(self, task_id: str, after: str | None = None) -> FakeCall:
        assert task_id == "t1"
        self.resubscribed += 1
        self.after.append(after)
        return self.subscriptions.pop(0)

    async def fetch_task(self, task_id: str) -> a2a_pb2.Task:
        assert task_id == "t1" and self.final is not None
        return self.final


async def run(
    call: FakeCall,
    agent: Agent,
    *,
    mode: Mode = Mode.SEND,
    policy: RetryPolicy | None = DEFAULT_RESUME,
    timeout_s: float | None = None,
    time: FakeTime | None = None,
) -> list[StreamItem]:
    time = time or FakeTime()
    stream = follow(
        call,
        TaskView(),
        mode,
        deadline=StreamDeadline(timeout_s, time.clock),
        policy=policy,
        backoff=time.backoff(),
        resubscribe=agent.resubscribe,
        fetch_task=agent.fetch_task,
    )
    return [item async for item in stream]


def states(items: list[StreamItem]) -> list[int]:
    return [view.state for _, view in items]


def test_deadline_remaining_and_expiry() -> None:
    time = FakeTime()
    deadline = StreamDeadline(10.0, time.clock)
    assert deadline.remaining() == 10.0 and not deadline.expired()
    assert deadline.expired(at=time.now + 10.0) and not deadline.expired(at=time.now + 9.9)
    time.now += 12.0
    assert deadline.remaining() == 0.0 and deadline.expired()
    unbounded = StreamDeadline(None, time.clock)
    assert unbounded.remaining() is None and not unbounded.expired(at=1e12)


def test_resume_window_opens_from_now() -> None:
    time = FakeTime()
    deadline = StreamDeadline(None, time.clock)
    assert not deadline.window_closed(at=1e12)  # not opened yet
    time.now += 50.0
    deadline.open_window(5.0)
    assert deadline.window_closed(at=time.now + 5.0) and not deadline.window_closed(at=time.now + 4)
    deadline.open_window(None)
    assert not deadline.window_closed(at=1e12)


async def test_a_send_stream_stops_reading_once_done_also_when_resumed() -> None:
    resumed = FakeCall(snapshot(), update(INPUT_REQUIRED), update(COMPLETED))
    agent = Agent(resumed)
    items = await run(FakeCall(snapshot(), error=DROP), agent)
    assert states(items) == [WORKING, WORKING, INPUT_REQUIRED]
    assert resumed.read == 2 and resumed.cancelled


async def test_events_of_unknown_kinds_are_skipped_and_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kind = f"kind{uuid.uuid4().hex}"  # the log says each kind once per process
    newer = UnknownEvent(kind)
    call = FakeCall(newer, snapshot(), newer, update(WORKING), newer, update(COMPLETED))
    with caplog.at_level("WARNING"):
        items = await run(call, Agent())
    assert states(items) == [WORKING, WORKING, COMPLETED]
    assert [view.skipped_events for _, view in items] == [1, 2, 3]
    said = [r.getMessage() for r in caplog.records if kind in r.getMessage()]
    assert len(said) == 1  # once per kind in the process
    assert "does not know" in said[0]


async def test_a_subscription_reads_until_the_server_ends_it() -> None:
    call = FakeCall(snapshot(), update(INPUT_REQUIRED), update(WORKING), update(COMPLETED))
    items = await run(call, Agent(), mode=Mode.SUBSCRIBE)
    assert states(items) == [WORKING, INPUT_REQUIRED, WORKING, COMPLETED]
    assert call.cancelled


async def test_progress_starts_the_attempt_count_over() -> None:
    # Two attempts allowed; three resumes that replay only their snapshot still succeed, because
    # one in the middle brought a new event.
    agent = Agent(
        FakeCall(snapshot(), error=DROP),
        FakeCall(snapshot(), update(WORKING), error=DROP),
        FakeCall(snapshot(), error=DROP),
        FakeCall(snapshot(), update(COMPLETED)),
    )
    time = FakeTime()
    policy = RetryPolicy(max_attempts=2, initial_backoff_s=1.0, max_backoff_s=10.0)
    items = await run(FakeCall(snapshot(), error=DROP), agent, policy=policy, time=time)
    assert states(items)[-1] == COMPLETED and agent.resubscribed == 4
    assert time.sleeps == [1.0, 2.0, 1.0, 2.0]  # the backoff also starts over


async def test_attempts_without_progress_run_out() -> None:
    agent = Agent(*[FakeCall(snapshot(), error=DROP) for _ in range(3)])
    policy = RetryPolicy(max_attempts=3, deadline_s=60.0)
    with pytest.raises(StreamResumeError, match="3 resume attempts failed") as raised:
        await run(FakeCall(snapshot(), error=DROP), agent, policy=policy)
    assert agent.resubscribed == 3
    assert isinstance(raised.value.__cause__, UnavailableError)


async def test_no_sleep_crosses_the_resume_window() -> None:
    policy = RetryPolicy(initial_backoff_s=2.0, max_backoff_s=2.0, deadline_s=1.0)
    with pytest.raises(StreamResumeError, match="the resume deadline expired"):
        await run(FakeCall(snapshot(), error=DROP), Agent(), policy=policy)


async def test_no_sleep_crosses_the_overall_deadline() -> None:
    policy = RetryPolicy(initial_backoff_s=2.0, max_backoff_s=2.0, deadline_s=60.0)
    with pytest.raises(DeadlineExceededError, match="expired while task t1 was working"):
        await run(FakeCall(snapshot(), error=DROP), Agent(), policy=policy, timeout_s=1.0)


async def test_resumption_off() -> None:
    with pytest.raises(StreamResumeError, match="resumption is off"):
        await run(FakeCall(snapshot(), error=DROP), Agent(), policy=None)


def refused(error: UnsupportedOperationError) -> grpc.aio.AioRpcError:
    code, message, trailers = status.encode(error)
    return rpc_error(code, message, trailers)


async def test_a_refused_resume_fetches_the_final_state() -> None:
    final = snapshot(COMPLETED).task
    agent = Agent(
        FakeCall(error=refused(UnsupportedOperationError("t1 is completed"))), final=final
    )
    items = await run(FakeCall(snapshot(), error=DROP), agent)
    assert states(items) == [WORKING, COMPLETED] and items[-1][0].task == final


async def test_a_refused_first_stream_is_the_agents_answer() -> None:
    call = FakeCall(error=refused(UnsupportedOperationError("t1 is completed")))
    with pytest.raises(UnsupportedOperationError):
        await run(call, Agent(final=snapshot(COMPLETED).task), mode=Mode.SUBSCRIBE)


async def test_a_continuation_opening_with_the_task_as_it_was_is_read_on() -> None:
    call = FakeCall(snapshot(INPUT_REQUIRED), update(WORKING), update(COMPLETED))
    items = await run(call, Agent(), mode=Mode.CONTINUATION)
    assert [view.state for _, view in items] == [INPUT_REQUIRED, WORKING, COMPLETED]


async def test_a_continuation_closed_after_its_opening_snapshot_ends_there() -> None:
    agent = Agent()
    items = await run(FakeCall(snapshot(INPUT_REQUIRED)), agent, mode=Mode.CONTINUATION)
    assert [view.state for _, view in items] == [INPUT_REQUIRED]
    assert agent.resubscribed == 0


async def test_a_continuation_dropped_after_its_opening_snapshot_is_resumed() -> None:
    agent = Agent(FakeCall(snapshot(WORKING), update(COMPLETED)))
    call = FakeCall(snapshot(INPUT_REQUIRED), error=DROP)
    items = await run(call, agent, mode=Mode.CONTINUATION)
    assert agent.resubscribed == 1 and items[-1][1].state == COMPLETED


async def test_a_new_tasks_stream_ends_at_its_first_interrupted_state() -> None:
    call = FakeCall(snapshot(INPUT_REQUIRED), update(WORKING))
    items = await run(call, Agent(), mode=Mode.SEND)
    assert [view.state for _, view in items] == [INPUT_REQUIRED]
    assert call.cancelled


def with_id(event: a2a_pb2.StreamResponse, event_id: str) -> a2a_pb2.StreamResponse:
    stamp(event, event_id)
    return event


async def test_a_broken_stream_resumes_after_the_last_event_id_without_a_snapshot() -> None:
    agent = Agent(
        FakeCall(with_id(update(WORKING), "3"), error=DROP),
        FakeCall(with_id(update(COMPLETED), "4")),
    )
    call = FakeCall(with_id(snapshot(), "1"), with_id(update(WORKING), "2"), error=DROP)
    items = await run(call, agent)
    assert agent.after == ["2", "3"]  # each resumption after the last id seen, however often
    assert states(items) == [WORKING, WORKING, WORKING, COMPLETED]
    final = items[-1][1]
    assert not final.resumed_from_snapshot
    assert final.task is not None and not final.task.HasField("metadata")  # the id is the stream's


async def test_an_expired_id_falls_back_to_a_snapshot_and_the_view_says_so() -> None:
    agent = Agent(
        FakeCall(error=EventIdExpiredError("the server no longer keeps the events")),
        FakeCall(with_id(snapshot(COMPLETED), "9")),
    )
    call = FakeCall(with_id(snapshot(), "1"), error=DROP)
    items = await run(call, agent)
    assert agent.after == ["1", None]
    assert states(items) == [WORKING, COMPLETED]
    assert items[-1][1].resumed_from_snapshot


async def test_a_stream_without_ids_resumes_from_a_snapshot_and_says_so() -> None:
    agent = Agent(FakeCall(snapshot(COMPLETED)))
    items = await run(FakeCall(snapshot(), error=DROP), agent)
    assert agent.after == [None] and items[-1][1].resumed_from_snapshot


@pytest.mark.parametrize(
    ("refusal", "named"),
    [
        (MethodNotFoundError("Method not found"), "MethodNotFoundError: Method not found"),
        (
            rpc_error(grpc.StatusCode.UNIMPLEMENTED, "SubscribeToTask is not served"),
            "RpcFailedError: UNIMPLEMENTED: SubscribeToTask is not served",
        ),
    ],
)
async def test_a_cut_stream_on_a_server_without_subscribe_says_it_was_cut(
    refusal: Exception, named: str
) -> None:
    agent = Agent(FakeCall(error=refusal))
    with pytest.raises(StreamResumeError) as raised:
        await run(FakeCall(snapshot(), update(WORKING)), agent)
    assert str(raised.value) == (
        "the stream of task t1 ended while it was working and could not be resumed: this "
        f"server does not offer SubscribeToTask ({named}), so a stream cut short cannot be "
        "resumed on it; GetTask reads the task as it stands"
    )
    assert raised.value.task_id == "t1" and raised.value.last_state == WORKING
    assert agent.resubscribed == 1  # tried once: asking again would not help


async def test_a_subscription_the_caller_opened_keeps_its_refusal() -> None:
    # Only a resumption the client opened by itself is reported as a cut stream.
    with pytest.raises(MethodNotFoundError):
        await run(
            FakeCall(error=MethodNotFoundError("Method not found")), Agent(), mode=Mode.SUBSCRIBE
        )


def store_unavailable() -> grpc.aio.AioRpcError:
    """What a replica ends its open streams with when its store did not answer."""
    code, message, trailers = status.encode(
        ServiceUnavailableError(
            "the task store (Redis) was unavailable; subscribe again", retry_delay=1.0
        )
    )
    return rpc_error(code, message, trailers)


async def test_a_subscription_the_server_ends_with_a_retryable_error_is_resumed() -> None:
    time = FakeTime()
    agent = Agent(FakeCall(snapshot(), update(COMPLETED)))
    ended = FakeCall(snapshot(), update(WORKING), error=store_unavailable())
    items = await run(ended, agent, mode=Mode.SUBSCRIBE, time=time)
    assert states(items) == [WORKING, WORKING, WORKING, COMPLETED]
    assert agent.resubscribed == 1
    assert time.sleeps == [1.0]  # the server's RetryInfo, above the first backoff (0.2 s)


async def test_a_resumption_refused_with_a_retryable_error_is_tried_again() -> None:
    time = FakeTime()
    agent = Agent(
        FakeCall(error=store_unavailable()),
        FakeCall(snapshot(), update(COMPLETED)),
    )
    items = await run(FakeCall(snapshot(), error=DROP), agent, time=time)
    assert states(items) == [WORKING, WORKING, COMPLETED]
    assert agent.resubscribed == 2 and time.sleeps[1] >= 1.0


async def test_a_stream_ended_with_an_error_that_is_not_retryable_keeps_it() -> None:
    code, message, trailers = status.encode(InternalError("the agent's store is corrupt"))
    agent = Agent()
    with pytest.raises(InternalError):
        await run(FakeCall(snapshot(), error=rpc_error(code, message, trailers)), agent)
    assert agent.resubscribed == 0
