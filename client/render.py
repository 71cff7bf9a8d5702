"""How the `a2a-grpc` client commands show A2A objects: text for a person, or ProtoJSON lines.

The functions return text and `LivePrinter` writes to the stream it is given; which stream, and
whether to show anything at all, is the command's decision (client/cli.py).
"""

from __future__ import annotations

import json
from typing import Any, TextIO

from google.protobuf import json_format
from google.protobuf.message import Message

from a2a_grpc.client.reducer import TaskView
from a2a_grpc.client.state_names import state_name
from a2a_grpc.core.budget import BudgetFormatError, budget_of, cost_of
from a2a_grpc.core.states import INTERRUPTED_STATES
from a2a_grpc.generated import a2a_pb2

PROGRAM = "a2a-grpc"
"""The command's name, as its usage, errors and hints print it."""


def json_line(message: Message) -> str:
    """The message as ProtoJSON on one line."""
    return json_format.MessageToJson(message, indent=None)


def render_message(message: a2a_pb2.Message) -> str:
    """A direct answer: `agent: <parts>`."""
    return f"agent: {render_parts(message.parts)}"


def render_task(task: a2a_pb2.Task, *, history: bool = False) -> str:
    """The task's ids and state, the agent's status message, each artifact on a line, and with
    `history` the conversation."""
    lines = [f"task {task.id} (context {task.context_id}): {state_name(task.status.state)}"]
    status_line = _status_message(task.status)
    if status_line is not None:
        lines.append(status_line)
    for artifact in task.artifacts:
        name = artifact.name or artifact.artifact_id
        lines.append(f"artifact {name}: {render_parts(artifact.parts, separator='')}")
    spent = _spending(task)
    if spent is not None:
        lines.append(spent)
    if history:
        for message in task.history:
            role = "user" if message.role == a2a_pb2.ROLE_USER else "agent"
            lines.append(f"  {role}: {render_parts(message.parts)}")
    return "\n".join(lines)


def render_task_list(response: a2a_pb2.ListTasksResponse) -> str:
    """One line per task, the count, and the option that fetches the next page if there is one."""
    lines = [
        f"{t.id}  {state_name(t.status.state):<15} context {t.context_id}"
        + (f"  {t.status.timestamp.ToJsonString()}" if t.status.HasField("timestamp") else "")
        for t in response.tasks
    ]
    lines.append(f"{len(response.tasks)} of {response.total_size} task(s)")
    if response.next_page_token:
        lines.append(f"next page: --page-token {response.next_page_token}")
    return "\n".join(lines)


def render_card(card: a2a_pb2.AgentCard) -> str:
    """Name, version and description, then interfaces, capabilities and skills, one a line."""
    lines = [f"{card.name} {card.version}: {card.description}"]
    for interface in card.supported_interfaces:
        tenant = f" tenant {interface.tenant}" if interface.tenant else ""
        lines.append(
            f"  {interface.protocol_binding} {interface.protocol_version} {interface.url}{tenant}"
        )
    capabilities = card.capabilities
    flags = [
        name
        for name, on in (
            ("streaming", capabilities.streaming),
            ("push-notifications", capabilities.push_notifications),
            ("extended-agent-card", capabilities.extended_agent_card),
        )
        if on
    ]
    lines.append(f"  capabilities: {', '.join(flags) or 'none'}")
    lines += [f"  skill {skill.id}: {skill.name}: {skill.description}" for skill in card.skills]
    return "\n".join(lines)


def render_outcome(view: TaskView) -> str:
    """The line that ends a followed stream: `task <id> <state>`, and what it cost when the
    agent reported a cost (budget extension)."""
    line = f"task {view.task_id} {state_name(view.state)}"
    spent = None if view.task is None else _spending(view.task)
    return line if spent is None else f"{line}\n{spent}"


def _spending(task: a2a_pb2.Task) -> str | None:
    """`cost 0.02 USD (budget 0.10 USD)` for a task that reported a cost; None otherwise (or
    for figures that are not the extension's)."""
    try:
        cost, budget = cost_of(task), budget_of(task)
    except BudgetFormatError:
        return None
    if cost is None:
        return None
    return f"cost {cost}" + ("" if budget is None else f" (budget {budget})")


def reply_hint(target: str, task: a2a_pb2.Task, program: str = PROGRAM) -> str | None:
    """The command that answers a task waiting for the caller, run as `program`; None when it is
    not waiting."""
    if task.status.state not in INTERRUPTED_STATES:
        return None
    return (
        f'reply with: {program} send {target} "..." '
        f"--task-id {task.id} --context-id {task.context_id}"
    )


def render_parts(parts: Any, separator: str = " ") -> str:
    """Text as is, data as compact JSON (keys sorted), files and URLs as bracketed labels."""
    rendered = []
    for part in parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            rendered.append(part.text)
        elif kind == "data":
            value = _integral(json_format.MessageToDict(part.data))
            rendered.append(json.dumps(value, separators=(",", ":"), sort_keys=True))
        elif kind == "raw":
            label = ", ".join(x for x in (part.media_type, f"{len(part.raw)} bytes") if x)
            rendered.append(f"[file {part.filename or 'unnamed'} ({label})]")
        elif kind == "url":
            rendered.append(f"[{part.url}{f' ({part.media_type})' if part.media_type else ''}]")
    return separator.join(rendered)


class LivePrinter:
    """Prints a stream for a person as it arrives: state changes, the agent's messages and
    questions, and artifacts growing chunk by chunk on their own line.

    Call `close_line` when the stream ends, so an unfinished artifact line gets its newline.
    """

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._state = a2a_pb2.TASK_STATE_UNSPECIFIED
        self._open_artifact: str | None = None
        self._seen_task = False
        self._line_ended = True

    def show(self, event: a2a_pb2.StreamResponse) -> None:
        member = event.WhichOneof("payload")
        if member == "message":
            self._line(render_message(event.message))
        elif member == "task":
            task = event.task
            if not self._seen_task:
                self._line(f"task {task.id} (context {task.context_id})")
            else:
                # Only a fallback sends a second Task: a resume by event id replays the events.
                self._line(
                    f"resumed from a snapshot of task {task.id}: "
                    "events missed meanwhile are not shown"
                )
            self._seen_task = True
            self._status(task.status)
        elif member == "status_update":
            if not self._seen_task:
                update = event.status_update
                self._line(f"task {update.task_id} (context {update.context_id})")
                self._seen_task = True
            self._status(event.status_update.status)
        elif member == "artifact_update":
            self._artifact(event.artifact_update)

    def close_line(self) -> None:
        if self._open_artifact is not None:
            if not self._line_ended:
                print(file=self._out, flush=True)
            self._open_artifact = None

    def _status(self, status: a2a_pb2.TaskStatus) -> None:
        if status.state != self._state:
            self._state = status.state
            self._line(f"state: {state_name(status.state)}")
        status_line = _status_message(status)
        if status_line is not None:
            self._line(status_line)

    def _artifact(self, update: a2a_pb2.TaskArtifactUpdateEvent) -> None:
        artifact = update.artifact
        if not (update.append and self._open_artifact == artifact.artifact_id):
            self.close_line()
            name = artifact.name or artifact.artifact_id
            self._out.write(f"artifact {name}: ")
            self._open_artifact = artifact.artifact_id
            self._line_ended = False
        text = render_parts(artifact.parts, separator="")
        self._out.write(text)
        self._out.flush()
        if text:
            self._line_ended = text.endswith("\n")
        if update.last_chunk:
            self.close_line()

    def _line(self, text: str) -> None:
        self.close_line()
        print(text, file=self._out, flush=True)


def _status_message(status: a2a_pb2.TaskStatus) -> str | None:
    """The agent's status message as a line (a question while the task waits for the caller)."""
    if not (status.HasField("message") and status.message.parts):
        return None
    label = "agent asks" if status.state in INTERRUPTED_STATES else "agent"
    return f"{label}: {render_parts(status.message.parts)}"


def _integral(value: Any) -> Any:
    """JSON numbers travel as doubles: show 1.0 as 1 again."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_integral(v) for v in value]
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    return value
