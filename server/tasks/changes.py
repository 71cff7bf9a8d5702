"""A status change as every store makes it: applied to the Task, stamped, and told as a stream
event."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from a2a_grpc.core.states import TERMINAL_STATES
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.base import TaskFinishedError


def apply_status(task: a2a_pb2.Task, state: int, message: a2a_pb2.Message | None) -> None:
    """Sets `state`, with `message` as the status message (also appended to the history; None
    clears it). TaskFinishedError when the task is already terminal. The caller stamps the
    status time."""
    status = task.status
    if status.state in TERMINAL_STATES:
        raise TaskFinishedError(task.id, status.state)
    status.state = state  # type: ignore[assignment]
    if message is not None:
        status.message.CopyFrom(message)
        task.history.append(message)
    elif status.HasField("message"):
        status.ClearField("message")


def status_event(
    task: a2a_pb2.Task, event_metadata: dict[str, Any] | None
) -> a2a_pb2.StreamResponse:
    """The status update event of `task`'s current status, carrying `event_metadata`."""
    event = a2a_pb2.StreamResponse()
    update = event.status_update
    update.task_id = task.id
    update.context_id = task.context_id
    update.status.CopyFrom(task.status)
    if event_metadata:
        update.metadata.update(event_metadata)
    return event


class StatusClock:
    """Stamps status times from `clock_ns`, strictly increasing, so that ListTasks order is the
    order of the changes this process made."""

    __slots__ = ("_clock_ns", "_last_ns")

    def __init__(self, clock_ns: Callable[[], int] = time.time_ns) -> None:
        self._clock_ns = clock_ns
        self._last_ns = 0

    def stamp(self, status: a2a_pb2.TaskStatus) -> int:
        """Sets `status.timestamp` to now; returns it in nanoseconds."""
        now = self._clock_ns()
        if now <= self._last_ns:
            now = self._last_ns + 1
        self._last_ns = now
        timestamp = status.timestamp
        timestamp.seconds, timestamp.nanos = divmod(now, 1_000_000_000)
        return now
