"""One execution of the agent for one accepted message: its event sink and its supervisor.

A run turns the agent's calls into task changes and their stream events (both written through
the task store), creating the task on the first task event. It settles at a terminal or interrupted
state, or when the agent answers with a direct message; settling wakes blocking callers. An agent
that raises ServiceUnavailableError ("not now") did not take the message: the run withdraws it
(`TaskStore.withdraw`), its owner forgets the message id, and it settles `unavailable`.
A run counts the events its agent reports (`events_reported`), so that housekeeping can
stop one that stays silent too long (`time_out`, `serve --agent-inactivity-timeout`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any, NoReturn, Protocol

from opentelemetry import trace

from a2a_grpc.core.budget import Money, cost_of
from a2a_grpc.core.errors import ServiceUnavailableError
from a2a_grpc.core.ids import new_id
from a2a_grpc.core.media_types import media_type_of
from a2a_grpc.core.states import SETTLED_STATES
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import (
    AgentContractError,
    AgentExecutor,
    BudgetExceededError,
    RequestContext,
    TaskMemoryFullError,
    agent_message,
)
from a2a_grpc.server.protocol import log_context
from a2a_grpc.server.protocol.spend import Ledger, OverBudget
from a2a_grpc.server.tasks.base import (
    EventBuilder,
    FirstStatus,
    Scope,
    StoreFullError,
    StoreUnavailableError,
    TaskFinishedError,
    TaskStore,
)

log = logging.getLogger(__name__)
tracer = trace.get_tracer("a2a_grpc.server")

AGENT_FAILED_TEXT = "the agent failed while working on this task"

STORE_DOWN_TEXT = (
    "the task store was unavailable while the agent worked on this task, so the task ended "
    "here; retry as a new task, listing this one in reference_task_ids"
)
"""The status message of a task FAILED because an event of its agent could not be stored."""

TASK_MEMORY_FULL_TEXT = (
    "the server's task memory is full of unfinished tasks: the agent's {what} ({size} bytes) "
    "could not be stored, so the task ended here; what it stored before is kept. Retry later "
    "as a new task, listing this one in reference_task_ids"
)
"""The status message of a task FAILED because a write of its agent did not fit."""

AGENT_RETRY_DELAY = 1.0
"""The RetryInfo delay (seconds) of an agent's ServiceUnavailableError that names none."""

NOT_TAKEN_TEXT = "the agent could not take this answer now, so the task waits for it again: {why}"
"""The status message of a task put back to wait because its agent could not take the answer."""

INACTIVE_TEXT = (
    "the agent reported nothing for {seconds:g} s, the longest this server lets an agent stay "
    "silent, so its work was stopped; retry as a new task, listing this one in "
    "reference_task_ids"
)
"""The status message of a task FAILED because its agent reported nothing for too long."""

MessageLike = a2a_pb2.Message | str | None


class RunOwner(Protocol):
    """Who started a run (the intake), told as it ends."""

    def run_settled(self, run: TaskRun) -> None:
        """The run settled (a blocking caller can be answered); synchronous."""
        ...

    async def run_withdrawn(self, run: TaskRun) -> None:
        """The run did not take its message (its agent could not work on it now): awaited
        before it settles, so that the message id is free again before anyone is told."""
        ...

    def run_unrecorded(self, run: TaskRun, state: int, text: str | None) -> None:
        """The run settled, but the store was unavailable to write its end (`state`, status
        `text`): the owner writes it once the store answers again (protocol/unrecorded.py)."""
        ...


_REPORTABLE_STATES = frozenset(a2a_pb2.TaskState.values()) - {a2a_pb2.TASK_STATE_UNSPECIFIED}


class TaskRun:
    """The agent's `TaskEvents` for one run, plus the run's outcome for the handler.

    `started` is set once the caller can be answered: the task exists, or the agent replied.
    `settled` is set once a blocking caller can be answered (terminal or interrupted state,
    direct reply, or the agent ended).
    """

    # Attributes that start at a constant are class attributes until a run sets them: one store
    # fewer each for every message.
    reply_message: a2a_pb2.Message | None = None
    unavailable: ServiceUnavailableError | None = None
    """Set as the run settles when its agent could not work on the message now (it raised
    ServiceUnavailableError): the message was not taken, and this is the caller's answer."""
    last_state: int = a2a_pb2.TASK_STATE_UNSPECIFIED
    """The last state this run recorded (UNSPECIFIED before any)."""
    skill = ""
    """The card skill the agent said this run serves (`use_skill`), for metrics."""
    whole_artifacts = 0
    """Artifacts this run recorded whole (one chunk each), for metrics."""
    chunked_artifacts: tuple[int, ...] = ()
    """The chunks of each artifact this run streamed and finished (its last chunk), in order,
    for metrics. Chunks an earlier run of the task sent are not known here."""
    _streaming: dict[str, int] | None = None  # chunks so far of the artifacts being streamed
    stop_outcome: tuple[int, str | None] = (a2a_pb2.TASK_STATE_CANCELED, None)
    """How the task ends when the server stops the agent (state, status text)."""
    _open = True  # until settled (a plain flag: it is read on every event)
    _warned_output_modes = False
    _runner: asyncio.Task[None] | None = None
    _started: asyncio.Event | None = None  # see `started`
    _ledger: Ledger | None = None  # budget and cost, once either exists
    _runners: set[asyncio.Task[None]]  # set by `start`, with `_runner`
    events_reported = 0
    """Status updates, artifacts and charges the agent reported so far: housekeeping watches
    it move (`Housekeeping.watch_agents`) to stop a silent agent."""
    # A count and one look over the runs, not a timer per run: a TimerHandle armed and
    # cancelled per run, with a clock read per event, cost 25k instructions per blocking send
    # (453,905 against 428,623, make perf's count: 6 %).

    def __init__(
        self,
        *,
        store: TaskStore,
        scope: Scope,
        context: RequestContext,
        owner: RunOwner,
        traced: bool = False,
        reserved_size: int = 0,
    ) -> None:
        """`reserved_size`: the size the handler reserved in the store for a new task."""
        self.store = store
        self.reserved_size = reserved_size
        self.scope = scope
        self.context = context
        self.task_id = context.task_id
        self.context_id = context.context_id
        self.settled = asyncio.Event()
        self._task_exists = self._has_started = context.task is not None
        cost = None if context.task is None else cost_of(context.task)
        # Most tasks have neither budget nor cost: no ledger until the agent quotes or charges.
        if context.budget is not None or cost is not None:
            self._ledger = Ledger(context.budget, cost)
        self._owner = owner
        self._traced = traced
        self._artifact_ids: set[str] = set()

    @property
    def started(self) -> asyncio.Event:
        """Made when first asked for (a blocking call waits on `settled` alone, so most runs
        never make it: one Event and two `set` calls fewer per message)."""
        event = self._started
        if event is None:
            event = self._started = asyncio.Event()
            if self._has_started:
                event.set()
        return event

    def _mark_started(self) -> None:
        self._has_started = True
        if self._started is not None:
            self._started.set()

    @property
    def is_settled(self) -> bool:
        return not self._open

    @property
    def cost(self) -> Money | None:
        """What the task has spent so far (budget extension), None when nothing was charged."""
        return None if self._ledger is None else self._ledger.cost

    def start(self, agent: AgentExecutor, runners: set[asyncio.Task[None]]) -> None:
        """Schedules the agent (it runs at the caller's next await). Its asyncio task is in
        `runners` until it ends: the run takes it out itself as it ends, and whoever cancels
        it (`_stop_agent`, a drain) makes sure a task cancelled before it began leaves too.
        A done callback would do the same at the cost of one more loop callback per message
        (call_soon, a Handle, its run: ~10k instructions per blocking send, make perf)."""
        # Log records of the agent (and of the call that started it) name the task.
        log_context.RUN.set((self.task_id, self.context_id))
        coroutine = self._traced_execute(agent) if self._traced else self._execute(agent)
        self._runners = runners
        self._runner = runner = asyncio.get_running_loop().create_task(coroutine)
        runners.add(runner)

    def time_out(self, seconds: float) -> None:
        """The agent reported nothing for `seconds`: like CancelTask, with FAILED and a status
        message saying why (`INACTIVE_TEXT`), in the background. The task ends first, so that
        it ends even if the agent ignores its cancellation."""
        stopping = asyncio.get_running_loop().create_task(self._time_out(seconds))
        self._runners.add(stopping)  # held until it ends (a drain waits for it too)
        stopping.add_done_callback(self._runners.discard)

    async def _time_out(self, seconds: float) -> None:
        log.warning(
            "task %s: the agent reported nothing for %g s (--agent-inactivity-timeout): the "
            "task is FAILED and the agent cancelled",
            self.task_id,
            seconds,
        )
        if not self.is_settled:
            await self._settle_safely(
                a2a_pb2.TASK_STATE_FAILED, INACTIVE_TEXT.format(seconds=seconds)
            )
        self._stop_agent()

    async def cancel(self) -> None:
        """CancelTask: the task is CANCELED now; the agent is told at its next await."""
        if not self.is_settled:
            await self._settle_with(a2a_pb2.TASK_STATE_CANCELED, None)
        self._stop_agent()

    def abort(self, state: int = a2a_pb2.TASK_STATE_CANCELED) -> None:
        """The task ended elsewhere (canceled on another replica): `state` is already stored.
        Settles without writing and stops the agent at its next await."""
        self.last_state = state
        self._mark_settled()
        self._stop_agent()

    def _stop_agent(self) -> None:
        runner = self._runner
        if runner is not None and not runner.done() and runner is not asyncio.current_task():
            runner.add_done_callback(self._runners.discard)  # if it is cancelled before it began
            runner.cancel()

    async def _traced_execute(self, agent: AgentExecutor) -> None:
        # The agent always runs in the server span's context (asyncio copies it into its task);
        # with an SDK configured it also gets a span of its own.
        with tracer.start_as_current_span(
            "a2a.agent.execute",
            attributes={"a2a.task_id": self.task_id, "a2a.context_id": self.context_id},
        ):
            await self._execute(agent)

    async def _execute(self, agent: AgentExecutor) -> None:
        try:
            await agent.execute(self.context, self)
        except (BudgetExceededError, TaskMemoryFullError):
            pass  # the task has already ended REJECTED / FAILED with the reason
        except ServiceUnavailableError as unavailable:
            if self.is_settled:  # the message was taken: what the task recorded stands
                log.warning("agent said unavailable after task %s settled", self.task_id)
            else:
                await self._withdraw(unavailable)
        except asyncio.CancelledError:
            if not self.is_settled:  # cancelled by shutdown rather than by CancelTask
                state, text = self.stop_outcome
                await self._settle_safely(state, text)
            raise
        except StoreUnavailableError as down:
            # Not the agent's fault: one of its events met the store down, which the store
            # logged once for every call it failed (no line per task here).
            log.debug("task %s: an event of the agent was not stored: %s", self.task_id, down)
            if not self.is_settled:
                await self._settle_safely(a2a_pb2.TASK_STATE_FAILED, STORE_DOWN_TEXT)
        except Exception:
            log.exception("agent raised while working on task %s", self.task_id)
            if not self.is_settled:
                await self._settle_safely(a2a_pb2.TASK_STATE_FAILED, AGENT_FAILED_TEXT)
        else:
            if not self.is_settled:
                await self._settle_safely(a2a_pb2.TASK_STATE_COMPLETED, None)
        finally:
            if self._runner is not None:  # set by `start`
                self._runners.discard(self._runner)

    async def _withdraw(self, raised: ServiceUnavailableError) -> None:
        """The agent could not work on the message now: the store withdraws it (a task the
        message made goes; a task it answered waits for the answer again, keeping what this
        run recorded), the owner forgets the message id, and the run settles with the error
        the caller gets (retryable unless the agent said otherwise, with a RetryInfo delay)."""
        error = ServiceUnavailableError(
            raised.message,
            metadata=raised.metadata,
            retryable=raised.retryable,
            retry_delay=AGENT_RETRY_DELAY if raised.retry_delay is None else raised.retry_delay,
        )
        answered = self.context.task
        waiting = None
        if answered is not None:
            text = NOT_TAKEN_TEXT.format(why=error.message)
            waiting = (answered.status.state, self._agent_message(text))
        else:
            # The message's own task goes: its id is given back first, so that a repeat on
            # another replica that saw the claim and opens its stream after the withdrawal's
            # notice finds the claim gone with the task (`Claims.outcome`), not a task that
            # will never come. (An answer keeps its id until the task waits again: a repeat
            # in between follows the task, where the notice reaches it.)
            await self._give_back()
        try:
            await self.store.withdraw(self.task_id, self.scope, error, waiting)
        except TaskFinishedError as finished:  # canceled meanwhile: that is its outcome
            self.last_state = finished.state
            self._mark_settled()
            return
        except StoreUnavailableError as down:  # the store logged its outage once
            log.debug("could not withdraw the message of task %s: %s", self.task_id, down)
        except Exception:
            log.exception("could not withdraw the message of task %s", self.task_id)
        if waiting is not None:
            self.last_state = waiting[0]
        self.unavailable = error
        try:
            if waiting is not None:
                await self._give_back()
        finally:
            self._mark_settled()

    async def _give_back(self) -> None:
        """The owner forgets the message id, on every replica (`Idempotency.withdraw`)."""
        try:
            await self._owner.run_withdrawn(self)
        except StoreUnavailableError as down:  # the store logged its outage once
            log.debug("could not give back the message id of task %s: %s", self.task_id, down)
        except Exception:  # the id stays claimed until the window forgets it
            log.exception("could not give back the message id of task %s", self.task_id)

    async def _settle_safely(self, state: int, text: str | None) -> None:
        # Whatever goes wrong here, waiting callers must be answered rather than left hanging.
        try:
            await self._settle_with(state, text)
        except StoreUnavailableError as down:
            # Not this process's fault, and the store logged its outage once: no line per
            # task. The end is written once the store answers again (protocol/unrecorded.py).
            log.debug(
                "could not record the end of task %s (%s) yet: %s",
                self.task_id,
                a2a_pb2.TaskState.Name(state),
                down,
            )
            self._mark_settled()
            self._owner.run_unrecorded(self, state, text)
        except Exception:
            log.exception("could not record the end of task %s", self.task_id)
            self._mark_settled()

    # -- TaskEvents -----------------------------------------------------------------------

    async def update_status(self, state: int, message: MessageLike = None) -> None:
        if state not in _REPORTABLE_STATES:
            raise AgentContractError(f"not a task state: {state}")
        if not self._open:  # `_check_open`, inlined on the two events every task has
            self._refuse_closed()
        self.events_reported += 1
        status_message = None if message is None else self._agent_message(message)
        # `_record` inlined: one coroutine less per event (~1k instructions).
        ledger = self._ledger
        spend = ledger.metadata() if ledger is not None and state in SETTLED_STATES else None
        try:
            if self._task_exists:
                backlog = await self.store.set_status(
                    self.task_id, state, status_message, event_metadata=spend
                )
            else:  # the first event: the task is created with it, in one store write
                backlog = await self._create_task(FirstStatus(state, status_message, spend))
        except TaskFinishedError as finished:
            self._ended_elsewhere(finished)
        except StoreFullError:  # only what a write adds is refused: here, its message
            size = 0 if status_message is None else 2 * status_message.ByteSize()
            await self._no_room("status message", size)
        self.last_state = state
        if state in SETTLED_STATES:
            self._mark_settled()
        elif backlog:
            await asyncio.sleep(0)  # the readers' turn, see below

    async def _record(self, state: int, message: a2a_pb2.Message | None) -> bool:
        # The status update that ends a run carries the spend (budget extension).
        ledger = self._ledger
        spend = ledger.metadata() if ledger is not None and state in SETTLED_STATES else None
        try:
            # The server's own short message: never refused for room.
            backlog = await self.store.set_status(
                self.task_id, state, message, event_metadata=spend, force_room=True
            )
        except TaskFinishedError as finished:
            self._ended_elsewhere(finished)
        self.last_state = state
        return backlog

    def _ended_elsewhere(self, finished: TaskFinishedError) -> NoReturn:
        """The task turned terminal behind this run's back (canceled by a caller on another
        replica, or failed by a lease reaper): the agent stops here."""
        self.abort(finished.state)
        raise asyncio.CancelledError(str(finished))

    # -- budget and cost (the budget extension; the arithmetic is `Ledger`'s) ---------------

    async def quote(self, amount: Decimal | str) -> None:
        refusal = self._spending().quote(amount)
        if refusal is not None:
            self._check_open()
            await self._ensure_task()
            await self._refuse_spend(a2a_pb2.TASK_STATE_REJECTED, refusal)

    async def charge(self, amount: Decimal | str, currency: str | None = None) -> None:
        self._check_open()
        self.events_reported += 1
        await self._ensure_task()
        ledger = self._spending()
        refusal = ledger.charge(amount, currency)
        if refusal is not None:
            await self._refuse_spend(a2a_pb2.TASK_STATE_FAILED, refusal)
        spend = ledger.metadata() or {}
        await self._update(lambda task: task.metadata.update(spend))

    def _spending(self) -> Ledger:
        if self._ledger is None:
            self._ledger = Ledger(None, None)
        return self._ledger

    async def _update(
        self,
        mutate: Callable[[a2a_pb2.Task], None],
        event: EventBuilder | None = None,
        *,
        size: int = 0,
        what: str = "",
    ) -> bool:
        try:
            return await self.store.update(self.task_id, mutate, event, size=size)
        except TaskFinishedError as finished:
            self._ended_elsewhere(finished)
        except StoreFullError:
            await self._no_room(what, size)

    async def _no_room(self, what: str, size: int) -> NoReturn:
        """A write of the agent did not fit in the store's byte budget (live tasks fill it): the
        task ends FAILED saying so, keeping what it stored before, and the agent stops."""
        await self._ensure_task()  # a first event refused: the task exists in its reserved room
        text = TASK_MEMORY_FULL_TEXT.format(what=what, size=size)
        await self._record(a2a_pb2.TASK_STATE_FAILED, self._agent_message(text))
        self._mark_settled()
        raise TaskMemoryFullError(text)

    async def _refuse_spend(self, state: int, refusal: OverBudget) -> NoReturn:
        """Ends the task in `state` with a status message saying why, then stops the agent."""
        message = self._agent_message(refusal.text)
        message.parts.add().data.struct_value.update(refusal.details)
        await self._record(state, message)
        self._mark_settled()
        raise BudgetExceededError(refusal.summary)

    async def working(self, message: MessageLike = None) -> None:
        await self.update_status(a2a_pb2.TASK_STATE_WORKING, message)

    async def complete(self, message: MessageLike = None) -> None:
        await self.update_status(a2a_pb2.TASK_STATE_COMPLETED, message)

    async def fail(self, message: MessageLike = None) -> None:
        await self.update_status(a2a_pb2.TASK_STATE_FAILED, message)

    async def reject(self, message: MessageLike = None) -> None:
        await self.update_status(a2a_pb2.TASK_STATE_REJECTED, message)

    async def require_input(self, message: a2a_pb2.Message | str) -> None:
        await self.update_status(a2a_pb2.TASK_STATE_INPUT_REQUIRED, message)

    async def require_auth(self, message: a2a_pb2.Message | str) -> None:
        await self.update_status(a2a_pb2.TASK_STATE_AUTH_REQUIRED, message)

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
        # Without chunking (no append, no explicit last_chunk), the artifact is whole: its one
        # event is also its last chunk (agent.TaskEvents.add_artifact).
        whole_or_last = (not append) if last_chunk is None else last_chunk
        if not parts:
            raise AgentContractError("an artifact needs at least one part")
        if not self._open:
            self._refuse_closed()
        self.events_reported += 1
        if self.context.accepted_output_modes and not self._warned_output_modes:
            self._check_output_modes(parts)
        if not self._task_exists:
            await self._create_task()
        fresh = artifact_id is None
        if artifact_id is None:
            artifact_id = new_id()

        def fill(artifact: a2a_pb2.Artifact) -> None:
            artifact.artifact_id = artifact_id
            artifact.name = name
            artifact.description = description
            artifact.parts.extend(parts)
            if metadata:
                artifact.metadata.update(metadata)

        def mutate(task: a2a_pb2.Task) -> None:
            existing = None if fresh else _find_artifact(task, artifact_id)
            if existing is None:
                fill(task.artifacts.add())  # built in place in the stored task: no copy in
            elif append:
                existing.parts.extend(parts)
                if metadata:
                    existing.metadata.update(metadata)
            else:
                existing.Clear()
                fill(existing)

        def event() -> a2a_pb2.StreamResponse:
            built = a2a_pb2.StreamResponse()
            update = built.artifact_update
            update.task_id = self.task_id
            update.context_id = self.context_id
            fill(update.artifact)  # the event carries this chunk only
            update.append = append
            update.last_chunk = whole_or_last
            return built

        # Counted when it lands: the parts' serialized size (what the names and metadata add is
        # counted when the task settles).
        size = sum([part.ByteSize() for part in parts])
        # `_update` inlined: one coroutine less per artifact.
        try:
            backlog = await self.store.update(self.task_id, mutate, event, size=size)
        except TaskFinishedError as finished:
            self._ended_elsewhere(finished)
        except StoreFullError:
            await self._no_room("artifact", size)
        if append or not whole_or_last:
            self._count_chunk(artifact_id, append, whole_or_last)
        else:  # a whole artifact, the common case: a count, no tuple
            self.whole_artifacts += 1
        if backlog:
            await asyncio.sleep(0)  # the readers' turn, see below
        self._artifact_ids.add(artifact_id)
        return artifact_id

    def _count_chunk(self, artifact_id: str, append: bool, last: bool) -> None:
        """Counts a chunk of a streamed artifact; its count joins `chunked_artifacts` at its
        last chunk."""
        streaming = self._streaming
        if streaming is None:
            streaming = self._streaming = {}
        chunks = streaming.pop(artifact_id, 0) + 1 if append else 1
        if last:
            self.chunked_artifacts += (chunks,)
        else:
            streaming[artifact_id] = chunks

    def use_skill(self, skill_id: str) -> None:
        self.skill = skill_id

    @property
    def artifact_count(self) -> int:
        """Artifacts the task holds: those it had before this run and those this run added."""
        if self.context.task is None:
            return len(self._artifact_ids)
        before = {artifact.artifact_id for artifact in self.context.task.artifacts}
        return len(before | self._artifact_ids)

    async def reply(self, message: a2a_pb2.Message | str) -> None:
        self._check_open()
        if self._task_exists:
            raise AgentContractError(
                "a direct reply is only allowed as the first and only event of a new request"
            )
        reply = agent_message(message, context_id=self.context_id)
        self.reply_message = reply
        await self.store.release(
            self.scope, self.task_id
        )  # the room reserved for this task will not be used
        self._mark_started()
        await self.store.reply(self.task_id, reply)
        self._mark_settled()

    # -- internals ------------------------------------------------------------------------

    def _check_output_modes(self, parts: Sequence[a2a_pb2.Part]) -> None:
        """Logs, once per run, an artifact part the caller said it does not accept."""
        for part in parts:
            media_type = media_type_of(part)
            if not self.context.accepts(media_type):
                self._warned_output_modes = True
                log.warning(
                    "task %s: the agent sent a %s artifact part; the caller accepts only %s",
                    self.task_id,
                    media_type,
                    ", ".join(self.context.accepted_output_modes),
                )
                return

    # The readers' turn: once a reader has a backlog (Broker.backlog_mark queued events), the
    # event methods yield once (sleep 0). An agent that emits in a tight loop would otherwise
    # fill every reader's queue before any of them is scheduled. Below the mark nothing yields:
    # a short stream reaches its reader in one go, and a blocking SendMessage never yields.

    def _agent_message(self, message: a2a_pb2.Message | str) -> a2a_pb2.Message:
        return agent_message(message, context_id=self.context_id, task_id=self.task_id)

    def _check_open(self) -> None:
        if not self._open:
            self._refuse_closed()

    def _refuse_closed(self) -> None:
        raise AgentContractError(
            f"task {self.task_id} has settled; this run can report nothing more"
        )

    async def _ensure_task(self) -> None:
        if not self._task_exists:
            await self._create_task()

    async def _create_task(self, first_status: FirstStatus | None = None) -> bool:
        """Creates the task (with its `first_status`, see TaskStore.create)."""
        task = a2a_pb2.Task(id=self.task_id, context_id=self.context_id)
        task.status.state = a2a_pb2.TASK_STATE_SUBMITTED
        user_message = task.history.add()
        user_message.CopyFrom(self.context.message)
        user_message.task_id = self.task_id
        user_message.context_id = self.context_id
        spend = None if self._ledger is None else self._ledger.metadata()
        if spend is not None:
            task.metadata.update(spend)
        # Built here and never touched again: no copy in. The handler reserved its room.
        backlog = await self.store.create(
            task, self.scope, reserved_size=self.reserved_size, first_status=first_status
        )
        self._task_exists = True
        self._mark_started()
        return backlog

    async def record_end(self, state: int, text: str | None) -> None:
        """Writes the end this run settled with while the store was unavailable (raises
        StoreUnavailableError while it still is)."""
        await self._settle_with(state, text)

    async def _settle_with(self, state: int, text: str | None) -> None:
        await self._ensure_task()
        message = None if text is None else self._agent_message(text)
        ledger = self._ledger
        spend = ledger.metadata() if ledger is not None and state in SETTLED_STATES else None
        try:
            # The server's own end of the run (short or no message): never refused for room.
            await self.store.set_status(
                self.task_id, state, message, event_metadata=spend, force_room=True
            )
            self.last_state = state
        except TaskFinishedError as finished:
            self.last_state = finished.state  # ended elsewhere meanwhile: nothing to record
        self._mark_settled()

    def _mark_settled(self) -> None:
        if not self._open:
            return
        self._open = False
        self._mark_started()
        self.settled.set()
        self._owner.run_settled(self)


def _find_artifact(task: a2a_pb2.Task, artifact_id: str) -> a2a_pb2.Artifact | None:
    for artifact in task.artifacts:
        if artifact.artifact_id == artifact_id:
            return artifact
    return None
