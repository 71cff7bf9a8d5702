"""The protocol logic of A2AService: its 11 RPCs, in the spec's order.

A new message's way to a run is intake.py; what runs on a timer and at shutdown is
housekeeping.py. Works on pb2 messages and core errors only; the transports adapt it to the
wire, through the call gate. It receives its
collaborators (task store, idempotency window, push configs, audit, verifier) and keeps the
protocol's order over them; `server/compose.py` builds them, and imports the concrete stores.
Every decision that must hold across replicas is made atomically by a collaborator: who runs a
message id (`claim`), who works on an interrupted task (`resume`), whether a write still
applies (the store's check).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable

from google.protobuf import empty_pb2

from a2a_grpc.core.errors import (
    EventIdExpiredError,
    ExtendedAgentCardNotConfiguredError,
    FieldViolation,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    StatusError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnauthenticatedError,
    UnsupportedOperationError,
)
from a2a_grpc.core.event_ids import stamp
from a2a_grpc.core.states import INTERRUPTED_STATES, SETTLED_STATES, TERMINAL_STATES
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import AgentExecutor
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.protocol import validation
from a2a_grpc.server.protocol.call_context import CallContext
from a2a_grpc.server.protocol.dedup import Idempotency, Outcome
from a2a_grpc.server.protocol.housekeeping import Housekeeping
from a2a_grpc.server.protocol.intake import Intake
from a2a_grpc.server.protocol.outcomes import Outcomes
from a2a_grpc.server.protocol.push_config_rpcs import PushConfigService
from a2a_grpc.server.protocol.run import TaskRun
from a2a_grpc.server.protocol.unrecorded import UnrecordedEnds
from a2a_grpc.server.tasks.base import (
    InvalidPageTokenError,
    Scope,
    Subscription,
    TaskFinishedError,
    TaskQuery,
    TaskStore,
)
from a2a_grpc.server.trust.audit import AuditLog
from a2a_grpc.server.trust.signers import MessageVerifier

log = logging.getLogger(__name__)


class RequestHandler:
    """A2A semantics over a task store, an event broker and an agent."""

    def __init__(
        self,
        agent: AgentExecutor,
        card: a2a_pb2.AgentCard,
        config: ServerConfig,
        *,
        store: TaskStore,
        dedup: Idempotency,
        push: PushConfigService | None = None,
        audit: AuditLog | None = None,
        verifier: MessageVerifier | None = None,
        runs: dict[str, TaskRun] | None = None,
        unrecorded: UnrecordedEnds | None = None,
        extended_card: a2a_pb2.AgentCard | None = None,
    ) -> None:
        """Built by `server/compose.py` (`build_handler`). `push` serves the push-config RPCs
        and delivers webhooks (None when the card does not offer push notifications);
        `verifier` checks signed messages (see `server/trust/signers.py`; None: they are not
        verified); `audit` records what each message led to. `runs`: the unsettled runs by
        task id, shared with the store's listener (a run whose task is canceled on another
        replica stops); `unrecorded`: the ends of runs the store was unavailable to write,
        shared with the store's listener too (written once the store answers again)."""
        self.agent = agent
        self.card = card
        self.extended_card = extended_card
        self.config = config
        self.verifier = verifier
        self.store = store
        self.dedup = dedup
        self.push = push
        self.webhooks = None if push is None else push.dispatcher
        self.audit = audit
        self.outcomes = Outcomes(skill.id for skill in card.skills)
        """Answers by kind, artifacts per finished task, by skill (metrics)."""
        self.intake = Intake(
            agent,
            card,
            config,
            store=store,
            dedup=dedup,
            push=push,
            audit=audit,
            verifier=verifier,
            outcomes=self.outcomes,
            active={} if runs is None else runs,
            unrecorded=UnrecordedEnds() if unrecorded is None else unrecorded,
        )
        self.housekeeping = Housekeeping(
            config,
            store=store,
            dedup=dedup,
            audit=audit,
            active=self.intake.active,
            runners=self.intake.runners,
        )

    # -- SendMessage / SendStreamingMessage -----------------------------------------------

    async def send_message(
        self, request: a2a_pb2.SendMessageRequest, call: CallContext
    ) -> a2a_pb2.SendMessageResponse:
        validation.check_send_required(request)
        configuration = request.configuration
        if configuration.HasField("task_push_notification_config"):
            await self.intake.check_inline_webhook(configuration.task_push_notification_config)
        message = request.message
        key = (request.tenant, call.principal, message.message_id)
        run = self.dedup.repeat_of(key, message)
        if run is None:
            run = (await self.intake.accept(request, key, call, subscribe=False))[0]
        history = configuration.history_length if configuration.HasField("history_length") else None
        # `settled` implies `started`: a blocking call waits on it alone.
        await (run.started if configuration.return_immediately else run.settled).wait()
        if run.unavailable is not None:  # the agent could not take it now: send it again
            raise _again(run.unavailable)
        if run.reply_message is not None:
            return a2a_pb2.SendMessageResponse(message=run.reply_message)
        response = a2a_pb2.SendMessageResponse()
        found = await self.store.copy_into(
            run.task_id, run.scope, response.task, history_length=history
        )
        if not found:
            raise TaskNotFoundError(f"task {run.task_id} is no longer stored")  # evicted since
        return response

    async def send_streaming_message(
        self, request: a2a_pb2.SendMessageRequest, call: CallContext
    ) -> AsyncIterator[a2a_pb2.StreamResponse]:
        self._require_streaming()
        validation.check_send_required(request)
        configuration = request.configuration
        if configuration.HasField("task_push_notification_config"):
            await self.intake.check_inline_webhook(configuration.task_push_notification_config)
        message = request.message
        key = (request.tenant, call.principal, message.message_id)
        outcome: Outcome | None = self.dedup.repeat_of(key, message)
        opened: Subscription | None = None
        snapshot: a2a_pb2.Task | None = None
        if outcome is None:
            outcome, opened, snapshot = await self.intake.accept(request, key, call, subscribe=True)
        if opened is None:  # a repeat: follow what the first delivery led to
            await outcome.started.wait()
            if outcome.unavailable is not None:
                raise _again(outcome.unavailable)
            if outcome.reply_message is not None:
                yield a2a_pb2.StreamResponse(message=outcome.reply_message)
                return
            async for event in self._follow(outcome.task_id, outcome.scope, until_terminal=False):
                yield event
            return
        try:
            if snapshot is not None:
                # A continuation: the stream opens with the task as it stands now.
                yield _snapshot_event(snapshot, opened)
            async for event in opened:
                yield event
        finally:
            opened.cancel()

    # -- GetTask / ListTasks / CancelTask / SubscribeToTask -------------------------------

    async def get_task(self, request: a2a_pb2.GetTaskRequest, call: CallContext) -> a2a_pb2.Task:
        validation.check_get(request)
        history = request.history_length if request.HasField("history_length") else None
        return await self._lookup(request.id, Scope(request.tenant, call.principal), history)

    async def list_tasks(
        self, request: a2a_pb2.ListTasksRequest, call: CallContext
    ) -> a2a_pb2.ListTasksResponse:
        page_size = validation.list_page_size(request)
        after = request.status_timestamp_after
        query = TaskQuery(
            page_size=page_size,
            page_token=request.page_token,
            context_id=request.context_id,
            state=request.status,
            updated_after_ns=after.seconds * 1_000_000_000 + after.nanos,
            history_length=request.history_length if request.HasField("history_length") else None,
            include_artifacts=request.include_artifacts,
        )
        try:
            return await self.store.list(Scope(request.tenant, call.principal), query)
        except InvalidPageTokenError:
            raise InvalidParamsError(
                "page_token is not one this server issued: pass next_page_token from the "
                "previous page, or leave it empty for the first page",
                field_violations=[FieldViolation("page_token", "unknown page token")],
            ) from None

    async def cancel_task(
        self, request: a2a_pb2.CancelTaskRequest, call: CallContext
    ) -> a2a_pb2.Task:
        validation.check_task_id(request.id)
        scope = Scope(request.tenant, call.principal)
        task = await self._lookup(request.id, scope, None)
        if task.status.state in TERMINAL_STATES:
            raise _not_cancelable(task.id, task.status.state)
        run = self.intake.active.get(task.id)
        if run is not None:
            await run.cancel()
        else:  # waiting for input, or worked on by another replica (the store tells it)
            try:
                await self.store.cancel(task.id, scope)
            except TaskFinishedError as finished:
                raise _not_cancelable(task.id, finished.state) from None
            # No run: no run will audit it.
            if task.status.state in INTERRUPTED_STATES and self.audit is not None:
                self.audit.canceled(task.id, scope.owner, scope.tenant)
        return await self._lookup(task.id, scope, None)

    async def subscribe_to_task(
        self, request: a2a_pb2.SubscribeToTaskRequest, call: CallContext
    ) -> AsyncIterator[a2a_pb2.StreamResponse]:
        self._require_streaming()
        validation.check_task_id(request.id)
        scope = Scope(request.tenant, call.principal)
        if call.last_event_id:  # an empty Last-Event-ID is none (as an EventSource sends it)
            # Resumed after an event id: exactly the events after it, kept ones first, also
            # after the task finished (while it is stored); no snapshot.
            replayed = self._replay(request.id, scope, call.last_event_id, call.replay_done)
            async for event in replayed:
                yield event
            return
        task = await self._lookup(request.id, scope, None)
        if task.status.state in TERMINAL_STATES:
            raise UnsupportedOperationError(
                f"task {task.id} is {a2a_pb2.TaskState.Name(task.status.state)}: there is nothing "
                "left to stream; read it with GetTask",
                metadata={"taskId": task.id},
            )
        # Open until the task is terminal (spec §3.1.6, decision §9.1): a subscriber to an
        # INPUT_REQUIRED task sees the answer arrive and the work that follows.
        async for event in self._follow(task.id, scope, until_terminal=True):
            yield event

    async def _follow(
        self, task_id: str, scope: Scope, *, until_terminal: bool
    ) -> AsyncIterator[a2a_pb2.StreamResponse]:
        """The task's current snapshot, then its events until it is terminal, or (without
        `until_terminal`) until it is terminal or interrupted."""
        watched = await self.store.watch(task_id, scope, until_terminal=until_terminal)
        if watched is None:
            raise TaskNotFoundError(f"task {task_id} not found", metadata={"taskId": task_id})
        snapshot, subscription = watched
        try:
            yield _snapshot_event(snapshot, subscription)
            # Runs claim interrupted tasks atomically (SUBMITTED at once), so a snapshot at a
            # closing state means no event will follow for this stream.
            closes_at = TERMINAL_STATES if until_terminal else SETTLED_STATES
            if snapshot.status.state in closes_at:
                return
            async for event in subscription:
                yield event
        finally:
            subscription.cancel()

    async def _replay(
        self, task_id: str, scope: Scope, after: str, done: Callable[[], None] | None = None
    ) -> AsyncIterator[a2a_pb2.StreamResponse]:
        """The task's events after the id `after`, then its live ones until it is terminal
        (EventIdExpiredError when they are no longer all kept, saying what works instead).
        `done` is called once the kept events are all read (the replay's slot: fairness.py)."""
        try:
            watched = await self.store.watch(task_id, scope, until_terminal=True, after=after)
        except EventIdExpiredError as expired:
            raise await self._next_step(task_id, scope, expired) from None
        if watched is None:
            raise TaskNotFoundError(f"task {task_id} not found", metadata={"taskId": task_id})
        subscription = watched[1]
        if done is not None:
            # broker.Subscription's; a store's own subscription without it read every kept
            # event at once (base.Subscription).
            when_caught_up = getattr(subscription, "when_caught_up", None)
            if when_caught_up is None:
                done()
            else:
                when_caught_up(done)
        try:
            async for event in subscription:
                yield event
        finally:
            subscription.cancel()

    async def _next_step(
        self, task_id: str, scope: Scope, expired: EventIdExpiredError
    ) -> EventIdExpiredError:
        """`expired` (the store's why), with the call that works now: a subscription without
        the id while the task runs, GetTask once it is terminal (a subscription is refused
        then)."""
        task = await self.store.get(task_id, scope, history_length=0)
        if task is not None and task.status.state in TERMINAL_STATES:
            state = a2a_pb2.TaskState.Name(task.status.state)
            advice = (
                f"task {task_id} is {state}, so nothing is left to stream (a subscription "
                "without the id is refused too): read it with GetTask"
            )
        else:
            advice = "subscribe without it for the task as it stands"
        return EventIdExpiredError(
            f"{expired.message}; {advice}", metadata={**expired.metadata, "taskId": task_id}
        )

    # -- push notification configs and the extended card ---------------------------------

    def push_configs(self) -> PushConfigService:
        """The push-config RPCs; PushNotificationNotSupported when the card does not offer them."""
        if self.push is None:
            raise PushNotificationNotSupportedError(
                "this agent does not offer push notifications (capabilities.push_notifications "
                "is off)"
            )
        return self.push

    async def create_task_push_notification_config(
        self, request: a2a_pb2.TaskPushNotificationConfig, call: CallContext
    ) -> a2a_pb2.TaskPushNotificationConfig:
        scope = Scope(request.tenant, call.principal)
        return await self.push_configs().create(request, scope, call.protocol)

    async def get_task_push_notification_config(
        self, request: a2a_pb2.GetTaskPushNotificationConfigRequest, call: CallContext
    ) -> a2a_pb2.TaskPushNotificationConfig:
        return await self.push_configs().get(request, Scope(request.tenant, call.principal))

    async def list_task_push_notification_configs(
        self, request: a2a_pb2.ListTaskPushNotificationConfigsRequest, call: CallContext
    ) -> a2a_pb2.ListTaskPushNotificationConfigsResponse:
        return await self.push_configs().list(request, Scope(request.tenant, call.principal))

    async def delete_task_push_notification_config(
        self, request: a2a_pb2.DeleteTaskPushNotificationConfigRequest, call: CallContext
    ) -> empty_pb2.Empty:
        return await self.push_configs().delete(request, Scope(request.tenant, call.principal))

    async def get_extended_agent_card(
        self, request: a2a_pb2.GetExtendedAgentCardRequest, call: CallContext
    ) -> a2a_pb2.AgentCard:
        if not self.card.capabilities.extended_agent_card:
            raise UnsupportedOperationError(
                "this agent does not offer an extended agent card "
                "(capabilities.extended_agent_card is off)"
            )
        if not call.principal:
            raise UnauthenticatedError("the extended agent card is for authenticated callers only")
        if self.extended_card is None:
            raise ExtendedAgentCardNotConfiguredError(
                "this agent declares an extended card but none is configured"
            )
        card = a2a_pb2.AgentCard()
        card.CopyFrom(self.extended_card)
        return card

    # -- shared ---------------------------------------------------------------------------

    async def _lookup(self, task_id: str, scope: Scope, history: int | None) -> a2a_pb2.Task:
        task = await self.store.get(task_id, scope, history_length=history)
        if task is None:
            raise TaskNotFoundError(f"task {task_id} not found", metadata={"taskId": task_id})
        return task

    def _require_streaming(self) -> None:
        if not self.card.capabilities.streaming:
            raise UnsupportedOperationError("this agent does not offer streaming")


def _snapshot_event(snapshot: a2a_pb2.Task, subscription: Subscription) -> a2a_pb2.StreamResponse:
    """A stream's opening Task, with the id of the last event it includes (a copy: the
    snapshot is the caller's own)."""
    event = a2a_pb2.StreamResponse(task=snapshot)
    if subscription.snapshot_id:
        stamp(event, subscription.snapshot_id)
    return event


def _again(error: StatusError) -> StatusError:
    """A copy of a run's refusal for one caller (several may wait on the run)."""
    return type(error)(
        error.message,
        metadata=error.metadata,
        retryable=error.retryable,
        retry_delay=error.retry_delay,
    )


def _not_cancelable(task_id: str, state: int) -> TaskNotCancelableError:
    return TaskNotCancelableError(
        f"task {task_id} is already {a2a_pb2.TaskState.Name(state)}",
        metadata={"taskId": task_id},
    )
