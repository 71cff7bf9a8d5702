"""Following one task's stream to its end: first-event checks, folding, and resumption.

A stream that ends or breaks before its task settles is resumed with SubscribeToTask; the message
is sent again (the same message_id) only when a send stream fails before its first event, or
the server ends it with an error it marks retryable.
Resumption sends the id of the last event seen (core/event_ids.py) when the server gave one, and
the server replays exactly the events after it: every event is yielded once, in order, however
often the stream breaks. Without an id, or when the server no longer keeps the events after it
(EventIdExpiredError), the stream resumes from a snapshot of the task, as a server without ids
allows, and the view says so (`TaskView.resumed_from_snapshot`).
Resumption is bounded by the policy's attempts, by its window (`deadline_s` from the latest drop
that followed progress) and by the stream's overall deadline.

An event of a kind this client does not know (a newer A2A version's; `events.UnknownEvent`) is
skipped, as the official SDK's client skips it: not folded, not yielded, counted in the view's
`skipped_events`, and logged (a warning, once per kind in the process).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, replace

import grpc

from a2a_grpc.client.errors import (
    A2ATransportError,
    DeadlineExceededError,
    RpcFailedError,
    StreamResumeError,
)
from a2a_grpc.client.events import UnknownEvent
from a2a_grpc.client.reducer import TaskView, fold
from a2a_grpc.client.retry import Attempts, Backoff, Clock, RetryPolicy
from a2a_grpc.client.state_names import state_name
from a2a_grpc.client.transports.base import EventStream
from a2a_grpc.core.errors import (
    EventIdExpiredError,
    InvalidAgentResponseError,
    MethodNotFoundError,
    StatusError,
    UnsupportedOperationError,
)
from a2a_grpc.core.event_ids import event_id
from a2a_grpc.core.states import INTERRUPTED_STATES
from a2a_grpc.generated import a2a_pb2

log = logging.getLogger(__name__)

StreamItem = tuple[a2a_pb2.StreamResponse, TaskView]
"""An event and the view after it."""

StreamCall = EventStream
"""An open stream of a transport (`client/transports/base.py`)."""

Resubscribe = Callable[[str, str | None], StreamCall]
"""Opens SubscribeToTask for a task id, after an event id (None: from a snapshot), with the
stream's tenant, metadata and deadline."""

FetchTask = Callable[[str], Awaitable[a2a_pb2.Task]]
"""GetTask for a task id, with the stream's tenant, metadata and deadline."""


@dataclass
class Resend:
    """How a send stream that failed before its first event is opened again: `open` makes the
    same SendStreamingMessage call (its message_id, metadata and deadline) under `attempts`."""

    open: Callable[[], StreamCall]
    attempts: Attempts

    def delay_after(self, error: BaseException) -> float | None:
        """Seconds to wait before opening it again after `error`; None: do not."""
        if not isinstance(error, A2ATransportError | StatusError):
            return None
        return self.attempts.delay_after(error)

    def again(self) -> StreamCall:
        self.attempts.remaining()  # counts the attempt (DeadlineExceeded when none is left)
        return self.open()


class Mode(enum.Enum):
    """Which call a stream is: fixes the events it may open with."""

    SEND = "send"
    """SendStreamingMessage for a new task: opens with a Task or a Message."""
    CONTINUATION = "continuation"
    """SendStreamingMessage naming a task: opens with a Task or a Message, or with a status or
    artifact update, as the official SDK server does (the spec says a Task)."""
    SUBSCRIBE = "subscribe"
    """SubscribeToTask asked for by the caller: opens with the Task."""
    RESUME = "resume"
    """SubscribeToTask opened by `follow` after a drop: opens with the Task."""
    REPLAY = "replay"
    """SubscribeToTask after the last event id seen (opened by `follow` after a drop, or by a
    caller resuming with `subscribe_to_task(after=...)`): the events after it, no snapshot."""


_SEND_MODES = (Mode.SEND, Mode.CONTINUATION)
_RESUME_MODES = (Mode.RESUME, Mode.REPLAY)

_FIRST_EVENTS: dict[Mode, tuple[str, ...]] = {
    Mode.SEND: ("task", "message"),
    Mode.CONTINUATION: ("task", "message", "status_update", "artifact_update"),
    Mode.SUBSCRIBE: ("task",),
    Mode.RESUME: ("task",),
    Mode.REPLAY: ("task", "status_update", "artifact_update"),
}


class StreamDeadline:
    """A stream's overall deadline (its `timeout`) and the window its resumption must succeed in.

    Both are instants on `clock`; None means unbounded. The window is unbounded until
    `open_window` is called.
    """

    def __init__(self, timeout_s: float | None, clock: Clock) -> None:
        self._clock = clock
        self._overall = None if timeout_s is None else clock() + timeout_s
        self._window: float | None = None

    def now(self) -> float:
        return self._clock()

    def remaining(self) -> float | None:
        """Seconds left before the overall deadline, never negative; None when unbounded."""
        return None if self._overall is None else max(self._overall - self._clock(), 0.0)

    def expired(self, at: float | None = None) -> bool:
        """Whether the overall deadline has passed now, or will have at the clock reading `at`."""
        if self._overall is None:
            return False
        return (self._clock() if at is None else at) >= self._overall

    def open_window(self, seconds: float | None) -> None:
        """Resumption must succeed within `seconds` from now (None: only the overall deadline)."""
        self._window = None if seconds is None else self._clock() + seconds

    def window_closed(self, at: float) -> bool:
        """Whether the resume window will have closed at the clock reading `at`."""
        return self._window is not None and at >= self._window


async def follow(
    call: StreamCall,
    view: TaskView,
    mode: Mode,
    *,
    deadline: StreamDeadline,
    policy: RetryPolicy | None,
    backoff: Backoff,
    resubscribe: Resubscribe,
    fetch_task: FetchTask,
    resend: Resend | None = None,
) -> AsyncGenerator[StreamItem, None]:
    """Reads `call` into `view`, yielding each event with the view after it, and resumes with
    SubscribeToTask under `policy` (None: resumption off) until the task settles.

    A send stream that fails before its first event with a retryable error (could not talk, or
    retryable by the server's ErrorInfo) is opened again as `resend` allows, as a blocking
    SendMessage is retried: the same message_id, so a server that already took
    the message streams the task it started instead of running it twice (spec §3.3.1). So is
    one the server ends after some events with an error it marks retryable (its agent could
    not take the message now, so the task it began is gone or waits again; or its own outage):
    the view starts over with the new stream, which a server that took the message opens with
    the task as it stands.

    A send stream (SEND or CONTINUATION) stops reading once the view is done (terminal,
    interrupted, or a direct answer), also after it was resumed on SubscribeToTask, which the
    server keeps open through interrupted states; a subscription reads until the server ends
    it. An interrupted state ends a send stream only when it was reached after the message was
    taken: a continuation's opening snapshot of the task as it was (still INPUT_REQUIRED, say)
    does not end it; the stream is read on, and ends there only if the server closes it then.
    Whenever reading stops, the call is cancelled.

    A resumed stream refused with UnsupportedOperationError means the task finished while we were
    away: its final state is fetched with `fetch_task` and yielded as a Task event. One refused
    because the server has no SubscribeToTask (MethodNotFound, UNIMPLEMENTED, an HTTP route that
    is not there) is a StreamResumeError saying the stream was cut and cannot be resumed there.

    Raises the agent's A2A error; InvalidAgentResponseError for a contract break; the last error
    when a send stream fails before its first event and may not be opened again;
    DeadlineExceededError when the overall deadline expires; StreamResumeError when resumption
    is off or fails.
    """
    stop_when_done = mode in _SEND_MODES  # a subscription reads until the server ends it
    initial = view
    resumption = _Resumption(policy, backoff, deadline)
    last: a2a_pb2.StreamResponse | None = None  # the last event read; its id is read on a drop
    while True:
        events = 0
        error: A2ATransportError | StatusError | None = None
        # A continuation may open with the task as it was, still interrupted (the official JS
        # SDK's server does): that state was not reached after the message was taken, so it
        # does not end the stream.
        as_it_was = False
        continuation = mode is Mode.CONTINUATION
        try:
            try:
                async for event in call:
                    if isinstance(event, UnknownEvent):
                        view = replace(view, skipped_events=view.skipped_events + 1)
                        _log_skipped(event.kind)
                        continue
                    if events == 0:
                        _check_first_event(event, mode)
                    view = fold(view, event)
                    events += 1
                    last = event
                    as_it_was = (
                        continuation
                        and events == 1
                        and event.HasField("task")
                        and view.state in INTERRUPTED_STATES
                    )
                    yield event, view
                    if stop_when_done and view.done and not as_it_was:
                        break
            finally:
                await call.aclose()
        except A2ATransportError as mapped:
            if resend is not None and events == 0 and mode in _SEND_MODES:
                delay = resend.delay_after(mapped)
                if delay is not None:
                    await backoff.sleep(delay)
                    call = resend.again()
                    continue
            error = mapped
        except EventIdExpiredError:
            if mode is not Mode.REPLAY:
                raise
            # The server no longer keeps the events after our id: from a snapshot, and the
            # view says that events in between may not all have been yielded.
            last = None
            view = replace(view, resumed_from_snapshot=True)
            call = resubscribe(view.task_id, None)
            mode = Mode.RESUME
            continue
        except UnsupportedOperationError:
            if mode is not Mode.RESUME:
                raise
            final = a2a_pb2.StreamResponse(task=await fetch_task(view.task_id))
            view = fold(view, final)
            yield final, view
            if not view.done:
                raise
        except (StatusError, RpcFailedError) as refused:
            if mode in _RESUME_MODES and _not_offered(refused):
                raise _resume_error(
                    view,
                    f"this server does not offer SubscribeToTask ({_named(refused)}), so a stream "
                    "cut short cannot be resumed on it; GetTask reads the task as it stands",
                    refused,
                ) from refused
            if not isinstance(refused, StatusError) or not refused.retryable:
                raise
            # Retryable by its ErrorInfo on a send stream (RESOURCE_EXHAUSTED, or its agent
            # said not now): the send is made again.
            if resend is not None and mode in _SEND_MODES:
                delay = resend.delay_after(refused)
                if delay is None:
                    raise
                await backoff.sleep(delay)
                call = resend.again()
                if events:  # the server ended a stream it had begun (e.g. its agent said not now)
                    view, last = initial, None
                continue
            # On SubscribeToTask (the caller's, or one opened to resume): the server ended the
            # stream and says to come back (a replica whose store did not answer ends its
            # streams so: "subscribe again"). It is resumed as a dropped one is, no sooner than
            # the server's RetryInfo says.
            error = refused
        if view.done and not (as_it_was and error is not None):
            return
        # A resumed stream that only replayed its opening snapshot brought nothing new.
        progressed = events > 0 if mode is Mode.REPLAY else mode is not Mode.RESUME or events > 1
        await backoff.sleep(resumption.delay(view, error, progressed=progressed))
        last_id = None if last is None else event_id(last)
        call = resubscribe(view.task_id, last_id)
        if last_id is None:
            if view.task is not None:  # not before the first event: nothing was missed then
                view = replace(view, resumed_from_snapshot=True)
            mode = Mode.RESUME
        else:
            mode = Mode.REPLAY


@dataclass
class _Resumption:
    """Whether a stream that ended before its task settled may be resumed, and when."""

    policy: RetryPolicy | None
    backoff: Backoff
    deadline: StreamDeadline
    failures: int = 0
    """Resume attempts in a row that brought nothing new."""

    def delay(
        self, view: TaskView, error: A2ATransportError | StatusError | None, *, progressed: bool
    ) -> float:
        """Seconds to wait before resubscribing after the stream ended with `error` (None: the
        server ended it; a StatusError: it ended it with a retryable error, whose RetryInfo
        delay is waited at least); raises instead when it may not be resumed. After progress
        the attempt count and the window start over."""
        if not view.task_id:
            if error is not None:
                raise error
            raise InvalidAgentResponseError("the stream ended without any event")
        if isinstance(error, DeadlineExceededError) and self.deadline.expired():
            raise error
        policy = self.policy
        if policy is None:
            raise _resume_error(view, "resumption is off", error)
        if progressed:
            self.failures = 0
            self.deadline.open_window(policy.deadline_s)
        else:
            self.failures += 1
        if self.failures >= policy.max_attempts:
            raise _resume_error(view, f"{self.failures} resume attempts failed", error)
        delay = policy.backoff(self.failures, self.backoff.rand)
        if isinstance(error, StatusError) and error.retry_delay is not None:
            delay = max(delay, error.retry_delay)
        wake = self.deadline.now() + delay
        if self.deadline.expired(at=wake):
            raise DeadlineExceededError(
                f"the deadline expired while task {view.task_id} was {state_name(view.state)}"
            ) from error
        if self.deadline.window_closed(at=wake):
            raise _resume_error(view, "the resume deadline expired", error)
        return delay


_MAX_LOGGED_KINDS = 32
_logged_kinds: set[str] = set()
"""Unknown event kinds this process has logged (the server names them: at most 32 are kept)."""


def _log_skipped(kind: str) -> None:
    if kind in _logged_kinds or len(_logged_kinds) >= _MAX_LOGGED_KINDS:
        return
    _logged_kinds.add(kind)
    log.warning(
        "skipped a stream event of a kind this client does not know (%r; a newer A2A "
        "version's?): the stream goes on without it (logged once per kind; "
        "TaskView.skipped_events counts them)",
        kind,
    )


def _not_offered(error: Exception) -> bool:
    """Whether `error` says the server has no such method: JSON-RPC's MethodNotFound, gRPC's
    UNIMPLEMENTED, or an HTTP route that is not there (404, 405, 501 without an A2A error)."""
    if isinstance(error, MethodNotFoundError):
        return True
    return isinstance(error, RpcFailedError) and error.code in (
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.NOT_FOUND,
    )


def _named(error: Exception) -> str:
    """`error` as a caller reads it: its class and what the server said."""
    said = error.message if isinstance(error, StatusError) else str(error)
    return f"{type(error).__name__}: {said}"


def _check_first_event(event: a2a_pb2.StreamResponse, mode: Mode) -> None:
    member = event.WhichOneof("payload")
    if member not in _FIRST_EVENTS[mode]:
        expected = "Task" if mode in (Mode.SUBSCRIBE, Mode.RESUME) else "Task or Message"
        raise InvalidAgentResponseError(
            f"the stream's first event is a {member}; expected a {expected}"
        )


def _resume_error(view: TaskView, why: str, cause: BaseException | None) -> StreamResumeError:
    error = StreamResumeError(
        f"the stream of task {view.task_id} ended while it was {state_name(view.state)} "
        f"and could not be resumed: {why}",
        task_id=view.task_id,
        last_state=view.state,
    )
    error.__cause__ = cause
    return error
