"""The pure fold of StreamResponse events into one task view (streams, GetTask polling, pushes).

Every source of events goes through the same rules, so a view built from a stream, from polled
snapshots or from push notifications comes out the same:
- a Task snapshot replaces the view's task;
- a status update replaces the status (its message is progress, or a question when interrupted);
- an artifact update creates the artifact (replacing one with the same id), or with `append`
  extends the parts of the one with that artifact id; `last_chunk` marks it complete;
- a Message is a direct answer, and nothing may follow it; a Message inside a task stream is an
  error;
- an event without a payload, or for another task than the view's, is InvalidAgentResponseError
  (two payload members cannot survive protobuf parsing; `events.py` detects them on the wire);
- `done` is true at a terminal or interrupted state, or after a direct answer;
- a stream event's id (core/event_ids.py) is the stream's, not the task's: it is left out of
  the view's task and message, so a view does not depend on where a stream was resumed.

Tolerated on purpose: a status or artifact update before any snapshot (the official SDK server
opens a continuation stream with a status update) starts a view from the event's ids alone, and
an `append` for an artifact the view has not seen creates it. Neither loses data.

`fold` never mutates its inputs: every change copies the task, so earlier views stay valid. The
protobuf messages inside a view are shared with later views where unchanged: treat them as
read-only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TypeVar

from a2a_grpc.core.budget import BUDGET_EXTENSION
from a2a_grpc.core.errors import InvalidAgentResponseError
from a2a_grpc.core.event_ids import EVENT_ID_EXTENSION
from a2a_grpc.core.states import INTERRUPTED_STATES, is_settled
from a2a_grpc.generated import a2a_pb2


@dataclass(frozen=True)
class TaskView:
    """What is known about one interaction so far: a task, or a direct answer.

    `expected_task_id`, when set, is the only task id events may carry (e.g. for SubscribeToTask
    or a continuation); otherwise the first event fixes it.
    """

    task: a2a_pb2.Task | None = None
    """The task as the events so far make it (artifacts' chunks appended, the stream's event
    ids left out); None before any task event, or for a direct answer."""
    message: a2a_pb2.Message | None = None
    """The agent's direct answer (a Message instead of a task); None otherwise."""
    completed_artifacts: frozenset[str] = frozenset()
    """Ids of the artifacts whose last chunk arrived (every artifact of a Task snapshot); an
    artifact still being streamed in chunks is not among them."""
    expected_task_id: str = ""
    """The only task id events may carry (InvalidAgentResponseError for another); empty: the
    first event fixes it."""
    resumed_from_snapshot: bool = False
    """True once a broken stream was resumed from a snapshot of the task instead of a replay of
    the events it missed (the server keeps no event ids, or no longer kept the events after
    the last id seen; `follow` sets it): the view is right, but events in between were not
    yielded one by one."""
    skipped_events: int = 0
    """Stream events of a kind this client does not know (a newer A2A version's), skipped
    so far (`follow` counts them; the views yielded after one show it)."""

    @property
    def task_id(self) -> str:
        """The task's id, else `expected_task_id`; empty before either is known."""
        return self.task.id if self.task is not None else self.expected_task_id

    @property
    def state(self) -> int:
        """The task's state; TASK_STATE_UNSPECIFIED before any task event or for a message."""
        return self.task.status.state if self.task is not None else a2a_pb2.TASK_STATE_UNSPECIFIED

    @property
    def done(self) -> bool:
        """True once the task is terminal or interrupted, or a direct answer arrived."""
        task = self.task
        return self.message is not None or (task is not None and is_settled(task.status.state))

    @property
    def question(self) -> a2a_pb2.Message | None:
        """The agent's status message while it waits for input or auth, else None."""
        if self.task is not None and self.state in INTERRUPTED_STATES:
            status = self.task.status
            return status.message if status.HasField("message") else None
        return None


def fold(view: TaskView, event: a2a_pb2.StreamResponse) -> TaskView:
    """The view after `event`; raises InvalidAgentResponseError for a contract break."""
    member = event.WhichOneof("payload")
    if member is None:
        raise InvalidAgentResponseError("StreamResponse has no payload")
    if view.message is not None:
        raise InvalidAgentResponseError(f"{member} event after the agent's direct answer")
    if member == "message":
        return _on_message(view, event.message)
    if member == "task":
        return _on_task(view, event.task)
    if member == "status_update":
        update = event.status_update
        task = _task_for_update(view, update.task_id, update.context_id, member)
        task.status.CopyFrom(update.status)
        if update.HasField("metadata") and BUDGET_EXTENSION in update.metadata:
            # The budget extension's contract: the update that ends a run carries the task's
            # budget-and-cost entry, so the view's task has the figures GetTask would show.
            task.metadata[BUDGET_EXTENSION] = update.metadata[BUDGET_EXTENSION]
        return _with_task(view, task, view.completed_artifacts)
    return _on_artifact(view, event.artifact_update)


def reduce(events: Iterable[a2a_pb2.StreamResponse], view: TaskView | None = None) -> TaskView:
    """Folds `events` in order, starting from `view` (an empty view by default)."""
    result = view if view is not None else TaskView()
    for event in events:
        result = fold(result, event)
    return result


def _on_message(view: TaskView, message: a2a_pb2.Message) -> TaskView:
    if view.task is not None:
        raise InvalidAgentResponseError(
            f"a Message in the stream of task {view.task.id}; a task stream carries only "
            "Task, status and artifact events"
        )
    if view.expected_task_id and message.task_id and message.task_id != view.expected_task_id:
        raise InvalidAgentResponseError(
            f"message for task {message.task_id!r}, expected task {view.expected_task_id!r}"
        )
    if EVENT_ID_EXTENSION in message.metadata.fields:
        message = _without_event_id(message)
    return replace(view, message=message)


_Payload = TypeVar("_Payload", a2a_pb2.Message, a2a_pb2.Task)


def _without_event_id(payload: _Payload) -> _Payload:
    """A copy of a stream's Task or Message without its event id."""
    copy = type(payload)()
    copy.CopyFrom(payload)
    del copy.metadata.fields[EVENT_ID_EXTENSION]
    if not copy.metadata.fields:
        copy.ClearField("metadata")
    return copy


def _on_task(view: TaskView, snapshot: a2a_pb2.Task) -> TaskView:
    if not snapshot.id:
        raise InvalidAgentResponseError("Task without an id")
    _check_task_id(view, snapshot.id, "task")
    if EVENT_ID_EXTENSION in snapshot.metadata.fields:
        snapshot = _without_event_id(snapshot)
    # A snapshot's artifacts are complete as far as anyone can know (a Task carries no chunk
    # state), so a view folded from GetTask equals the streamed view of a finished task.
    ids = frozenset(artifact.artifact_id for artifact in snapshot.artifacts)
    return _with_task(view, snapshot, ids)


def _on_artifact(view: TaskView, update: a2a_pb2.TaskArtifactUpdateEvent) -> TaskView:
    artifact_id = update.artifact.artifact_id
    if not artifact_id:
        raise InvalidAgentResponseError("artifact update without an artifact_id")
    task = _task_for_update(view, update.task_id, update.context_id, "artifact_update")
    existing = next((a for a in task.artifacts if a.artifact_id == artifact_id), None)
    if update.append and existing is not None:
        _append_chunk(existing, update.artifact)
    elif existing is not None:
        existing.CopyFrom(update.artifact)
    else:
        task.artifacts.append(update.artifact)
    # Complete at a last chunk; a new artifact, a replacement, or more chunks after a "last"
    # one are not.
    completed = view.completed_artifacts
    if update.last_chunk:
        return _with_task(view, task, completed | {artifact_id})
    return _with_task(view, task, completed - {artifact_id})


def _with_task(view: TaskView, task: a2a_pb2.Task, completed: frozenset[str]) -> TaskView:
    """`replace(view, task=task, completed_artifacts=completed)` without replace's reading of
    the fields on every call (this runs once per event): every other field is copied as is."""
    changed = object.__new__(TaskView)
    fields = changed.__dict__
    fields.update(view.__dict__)
    fields["task"] = task
    fields["completed_artifacts"] = completed
    return changed


def _append_chunk(artifact: a2a_pb2.Artifact, chunk: a2a_pb2.Artifact) -> None:
    artifact.parts.extend(chunk.parts)
    if chunk.name:
        artifact.name = chunk.name
    if chunk.description:
        artifact.description = chunk.description
    if chunk.HasField("metadata"):
        artifact.metadata.MergeFrom(chunk.metadata)
    artifact.extensions.extend(uri for uri in chunk.extensions if uri not in artifact.extensions)


def _task_for_update(view: TaskView, task_id: str, context_id: str, kind: str) -> a2a_pb2.Task:
    """A copy of the view's task to change, or a new one started from the event's ids."""
    if not task_id:
        raise InvalidAgentResponseError(f"{kind} event without a task_id")
    _check_task_id(view, task_id, kind)
    task = a2a_pb2.Task()
    if view.task is not None:
        task.CopyFrom(view.task)
    else:
        task.id = task_id
    if not task.context_id:
        task.context_id = context_id
    return task


def _check_task_id(view: TaskView, task_id: str, kind: str) -> None:
    known = view.task_id
    if known and task_id != known:
        raise InvalidAgentResponseError(f"{kind} event for task {task_id!r}, expected {known!r}")
