"""The extension point: the agent executor protocol, its request context and its event sink.

Write an agent as a class with one coroutine:

    class MyAgent:
        async def execute(self, context: RequestContext, events: TaskEvents) -> None:
            await events.working("thinking")
            await events.add_artifact([a2a_pb2.Part(text="42")], name="answer")
            await events.complete()

Contract:
- `execute` is called once per accepted message, in its own asyncio task, never for a request
  that failed validation. A message that continues a task (INPUT_REQUIRED) calls it again with
  `context.task` set to the task as stored.
- It reports progress through `events`: status changes, artifacts (whole, or in chunks with
  `append` / `last_chunk`: see `TaskEvents.add_artifact`), or, for a message that starts no
  task, one direct reply (`events.reply`). A task is created when its first event arrives;
  its id is `context.task_id`.
- It ends the run by reaching a terminal state (`complete`, `fail`, `reject`) or an interrupted one
  (`require_input`, `require_auth`) and returning. Returning without either completes the task.
  An event after the task has settled raises `AgentContractError`.
- CancelTask marks the task CANCELED at once and cancels the asyncio task running `execute`:
  `asyncio.CancelledError` is raised at its current `await`. Clean up and let it propagate.
- In-task authorization (spec §7.6): `require_auth(message)` parks the task AUTH_REQUIRED,
  saying what it needs. The next message on the task (only its caller reaches it: tasks are
  scoped to the principal) calls `execute` again with `context.answers_auth` true. What that
  message carries (a credential, an approval) authorizes that run only (spec §7.6.4): the
  server keeps no authorization between messages. A later message on the task runs with
  `answers_auth` false, although the credential stays in `context.task.history` as every
  message does: authorize from `context.message` of a run that `answers_auth`, never from the
  history; to do the guarded thing again, ask again. Every call is authenticated on its own
  (`context.caller`).
- A run that reports nothing (no status, artifact or charge) for `serve
  --agent-inactivity-timeout` seconds (an hour by default) is stopped the same way, with the
  task FAILED saying the agent stayed silent. Work that takes longer reports progress.
- An exception escaping `execute` marks the task FAILED with a generic message; the caller sees
  no exception text. The server logs it and keeps serving.
- "Not now, try again": raise `ServiceUnavailableError` (from `a2a_grpc.core.errors`, also
  importable from here), optionally with `retry_delay=` seconds, when the agent cannot work on
  the message at the moment (a dependency is down), before the task settles. The message was
  not taken: the caller gets UNAVAILABLE, retryable, with the exception's message and a
  RetryInfo delay (`retry_delay`, else 1 s), on every binding; the message id is forgotten, so
  the message sent again (the same `message_id`) runs `execute` again. A task this message
  created is removed, with what the run recorded (its streams end with the error); a task it
  answered goes back to the INPUT_REQUIRED / AUTH_REQUIRED state it was in, keeping what the
  run recorded, with a status message saying the answer was not taken. Raised after the task
  settled, it is only logged: the message was taken. One raised by `a2a_grpc.client` calling
  another agent that said "not now" is passed on the same way.
- What an event adds to the task (an artifact, a status message) is counted against the server's
  task memory when it lands. When unfinished tasks fill it, that write is not applied: the task
  ends FAILED saying so (what it stored before is kept) and `TaskMemoryFullError` is raised.
- `events` methods never block on slow readers: the server fans events out without waiting.
- The caller's OpenTelemetry trace context is current while `execute` runs: its spans, and the
  calls it makes with `a2a_grpc.client`, continue the caller's trace.

Describing the agent: `serve --agent` without `--card` serves a card made from these optional
class attributes (`server/card.py` `agent_card`):
- `name`: str, default the class name; `description`: str, default the class's own docstring;
  `version`: str, default "0.1.0";
- `skills`: a sequence of `Skill`, default one skill named after the agent;
- `input_modes` / `output_modes`: media types the agent takes and gives, default `("*/*",)`;
  the server refuses a part whose media type `input_modes` does not match.
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol

from a2a_grpc.core.budget import Money
from a2a_grpc.core.errors import ServiceUnavailableError as ServiceUnavailableError
from a2a_grpc.core.ids import new_id
from a2a_grpc.core.media_types import matches, media_type_of
from a2a_grpc.core.signing import Signer
from a2a_grpc.generated import a2a_pb2


@dataclass(frozen=True, slots=True)
class Skill:
    """One thing the agent does, as its card lists it (an AgentSkill). `name` defaults to the
    id, `description` to the name, `tags` to the id."""

    id: str
    """The skill's id, unique on the card (an empty or repeated id is refused when the card is
    made); what `TaskEvents.use_skill` names."""
    name: str = ""
    """Human-readable name; empty: the id."""
    description: str = ""
    """What the skill does; empty: the name."""
    tags: tuple[str, ...] = ()
    """Keywords describing the skill; empty: the id alone."""
    examples: tuple[str, ...] = ()
    """Example requests the skill handles; empty: none listed."""


class AgentContractError(RuntimeError):
    """The agent emitted an event its contract does not allow (e.g. after the task settled)."""


class BudgetExceededError(Exception):
    """Raised by `quote` / `charge` once the task has ended over budget; let it propagate."""


class TaskMemoryFullError(Exception):
    """Raised by an event method (`add_artifact`, a status change with a message) when what it
    adds does not fit in the server's task memory (`serve --max-store-bytes`) because unfinished
    tasks fill it. The write was not applied; the task has already ended FAILED with a status
    message saying so, and everything it stored before is kept. Let it propagate."""


_NO_METADATA: Mapping[str, object] = MappingProxyType({})


class RequestContext(NamedTuple):
    """What the agent gets to know about one accepted message. Read-only.

    A NamedTuple rather than a frozen dataclass: built once per message, and a frozen
    dataclass sets each of its 15 fields through `object.__setattr__` (28.4k instructions per
    construction with keywords, 4.9k for this with positional arguments, callgrind; the
    send as a whole: see tests/load/RESULTS.md). It is as immutable, and more so (no
    `object.__setattr__` gets past it); being a tuple it also compares and unpacks as one.
    """

    message: a2a_pb2.Message
    """The accepted message, as the caller sent it (treat it as read-only)."""
    task_id: str
    """The id of the task this message starts or continues: a fresh id for a new task, which
    exists once the run's first event arrives."""
    context_id: str
    """The context the task belongs to: the continued task's, else the message's, else a fresh
    id."""
    task: a2a_pb2.Task | None = None
    """The task as it stood when this message took it to continue it (read atomically with
    that claim, so its state is the one this message answers); None for a new task."""
    reference_task_ids: tuple[str, ...] = ()
    """The message's `reference_task_ids`: other tasks the caller points at, unchecked."""
    requested_extensions: tuple[str, ...] = ()
    """Every extension URI the call's `a2a-extensions` named, in order, whether or not the card
    declares it (only declared ones are echoed back as activated)."""
    caller: str = ""
    """The authenticated principal; empty when the server runs without authentication."""
    signed_by: str = ""
    """The key id whose signature on the message verified (signed-messages extension), or ""."""
    signer: Signer | None = None
    """Who signed the message, verified: key id, and the sender's agent card (URL, origin, name)
    when its key came from that card; None for an unsigned message."""
    budget: Money | None = None
    """What the caller allows this task to cost (budget extension); None: no limit stated."""
    tenant: str = ""
    """The request's tenant; empty when the caller named none."""
    metadata: Mapping[str, object] = _NO_METADATA
    """The request's metadata Struct as plain Python values."""
    accepted_output_modes: tuple[str, ...] = ()
    """Media types the caller accepts in artifacts (empty: any). The spec says agents SHOULD
    tailor their output to them and names no error: see `accepts`."""
    history_length: int | None = None
    """How much history the caller asked to get back (None: all)."""
    return_immediately: bool = False
    """The caller does not wait for the task to settle."""

    @property
    def answers_auth(self) -> bool:
        """Whether this message answers the agent's request for authorization: it continues a
        task that was AUTH_REQUIRED when the message took it. Only then may what the message
        carries authorize anything, and only for this run (spec §7.6.4; the module docstring
        says why the history is no place to look for it)."""
        task = self.task
        return task is not None and task.status.state == a2a_pb2.TASK_STATE_AUTH_REQUIRED

    def text(self) -> str:
        """The message's text parts joined by newlines."""
        return "\n".join(part.text for part in self.message.parts if part.HasField("text"))

    def accepts(self, media_type: str) -> bool:
        """Whether the caller accepts artifacts of `media_type` ("" counts as accepted: a part
        without a media type of its own, such as a url part, is not refused). An artifact with
        a part the caller does not accept is still delivered (the spec names no error), and
        the server logs it once per run."""
        return (
            not self.accepted_output_modes
            or not media_type
            or matches(media_type, self.accepted_output_modes)
        )

    def unaccepted(self, parts: Iterable[a2a_pb2.Part]) -> tuple[str, ...]:
        """The media types among `parts` the caller does not accept (`accepts`), each once, in
        order: what an agent that cannot meet `accepted_output_modes` should tell the caller it
        sends anyway (e.g. in its status message), since the spec names no error for it."""
        seen: dict[str, None] = {}
        for part in parts:
            media_type = media_type_of(part)
            if not self.accepts(media_type):
                seen.setdefault(media_type)
        return tuple(seen)


class TaskEvents(Protocol):
    """Where an agent reports what it does. Every method returns once the event is recorded."""

    async def update_status(self, state: int, message: a2a_pb2.Message | str | None = None) -> None:
        """Sets the task's status to `state` (an `a2a_pb2.TaskState` value; UNSPECIFIED or an
        unknown value raises AgentContractError), with `message` as its status message (text,
        or a Message made the task's agent message by `agent_message`; None: no message). A
        terminal or interrupted state ends the run: a later event raises AgentContractError."""
        ...

    async def add_artifact(
        self,
        parts: Sequence[a2a_pb2.Part],
        *,
        artifact_id: str | None = None,
        name: str = "",
        description: str = "",
        append: bool = False,
        last_chunk: bool | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> str:
        """Records an artifact or a chunk of one; returns its artifact id.

        Whole: without `append` and without `last_chunk` (or with `last_chunk=True`), the
        artifact is complete in this one event, which says `last_chunk: true` on the wire (spec
        decision §9.13: peers such as Google ADK take an artifact without it for the start of a
        chunked one and keep nothing of it). With an `artifact_id` already recorded, it replaces
        that artifact.

        Chunked: the first chunk passes `last_chunk=False` explicitly (else it is a whole
        artifact), the next ones `append=True` and its id (`last_chunk` then defaults to False),
        and the final one `append=True, last_chunk=True`. A chunk's event carries that chunk's
        parts only; the stored task holds them all.
        """
        ...

    async def reply(self, message: a2a_pb2.Message | str) -> None:
        """Answers with a direct message and no task; only as the first and only event."""
        ...

    async def working(self, message: a2a_pb2.Message | str | None = None) -> None:
        """`update_status(TASK_STATE_WORKING, message)`: progress; the run goes on."""
        ...

    async def complete(self, message: a2a_pb2.Message | str | None = None) -> None:
        """`update_status(TASK_STATE_COMPLETED, message)`: the task is done; ends the run."""
        ...

    async def fail(self, message: a2a_pb2.Message | str | None = None) -> None:
        """`update_status(TASK_STATE_FAILED, message)`: the task could not be done; ends the
        run. The message is what the caller sees of why."""
        ...

    async def reject(self, message: a2a_pb2.Message | str | None = None) -> None:
        """`update_status(TASK_STATE_REJECTED, message)`: the agent will not do the task; ends
        the run."""
        ...

    async def require_input(self, message: a2a_pb2.Message | str) -> None:
        """`update_status(TASK_STATE_INPUT_REQUIRED, message)`: asks the caller `message` and
        ends the run; the caller's next message on this task starts a new run with
        `context.task` set. The task is CANCELED if no answer comes within the server's
        `interrupted_ttl` (`serve --interrupted-ttl`)."""
        ...

    async def require_auth(self, message: a2a_pb2.Message | str) -> None:
        """`update_status(TASK_STATE_AUTH_REQUIRED, message)`: the caller must authorize
        something (`message` says what) before the task goes on; otherwise as
        `require_input`. The run of the next message has `context.answers_auth` true, and what
        that message carries authorizes that run only (see the module docstring)."""
        ...

    async def quote(self, amount: Decimal | str) -> None:
        """States what the work will cost before doing it (budget extension).

        Over the budget (with what was already spent), the task ends REJECTED with a data part
        saying why, and BudgetExceededError is raised. Without a budget it always passes.
        """
        ...

    async def charge(self, amount: Decimal | str, currency: str | None = None) -> None:
        """Records spent cost (in the budget's currency unless given; without a budget, in the
        first charge's currency, else USD: `spend.DEFAULT_CURRENCY`).

        If it would take the task over its budget, nothing is recorded, the task ends FAILED with
        a data part saying why, and BudgetExceededError is raised. The running cost is kept in
        the task's metadata and reported in the status update that ends the run.
        """
        ...

    def use_skill(self, skill_id: str) -> None:
        """Names the card skill this run serves (one of the card's `skills` ids): the server's
        metrics count answers, artifacts and tasks without artifacts by it. An id the card does
        not list counts as `(other)`; a run that names none as `(none)`."""
        ...


class AgentExecutor(Protocol):
    """An agent. See the module docstring for the full contract."""

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        """Does the work `context.message` asks for, reporting it through `events`. Called once
        per accepted message, in its own asyncio task; cancelled by CancelTask and at
        shutdown (see the module docstring for what returning and raising mean)."""
        ...


def agent_message(
    content: a2a_pb2.Message | str | Iterable[a2a_pb2.Part], *, context_id: str, task_id: str = ""
) -> a2a_pb2.Message:
    """An agent-role message with a fresh id, carrying text, parts, or a copy of `content`."""
    message = a2a_pb2.Message(
        message_id=new_id(),
        role=a2a_pb2.ROLE_AGENT,
        context_id=context_id,
        task_id=task_id,
    )
    if isinstance(content, a2a_pb2.Message):
        message.MergeFrom(content)
        message.role = a2a_pb2.ROLE_AGENT
        message.context_id = context_id
        message.task_id = task_id
        if not message.message_id:
            message.message_id = new_id()
    elif isinstance(content, str):
        message.parts.add(text=content)
    else:
        message.parts.extend(content)
    return message
