"""The protocol logic of A2AService: validation order, task runs, idempotency, streams, listing.

Works on pb2 messages and core errors only; the servicer adapts it to grpc. It receives its
collaborators (task store, idempotency window, push configs, audit, verifier) and keeps the
protocol's order over them; `server/compose.py` builds them, and imports the concrete stores.
Every decision that must hold across replicas is made atomically by a collaborator: who runs a
message id (`claim`), who works on an interrupted task (`resume`), whether a write still
applies (the store's check).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any, NamedTuple

from google.protobuf import empty_pb2, json_format

from a2a_grpc.core.budget import (
    BUDGET_EXTENSION,
    BudgetFormatError,
    Money,
    budget_of,
    requested_budget,
)
from a2a_grpc.core.errors import (
    ExtendedAgentCardNotConfiguredError,
    FieldViolation,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    ServiceUnavailableError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnauthenticatedError,
    UnsupportedOperationError,
)
from a2a_grpc.core.failure_log import FailureLog
from a2a_grpc.core.ids import new_id
from a2a_grpc.core.jose import SignatureError
from a2a_grpc.core.signing import SIGNED_MESSAGE_EXTENSION, MissingSignatureError, Signer
from a2a_grpc.core.states import INTERRUPTED_STATES, SETTLED_STATES, TERMINAL_STATES
from a2a_grpc.core.tracing import tracing_configured
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import AgentExecutor, RequestContext, agent_message
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.protocol import validation
from a2a_grpc.server.protocol.dedup import Idempotency, Outcome
from a2a_grpc.server.protocol.outcomes import Outcomes
from a2a_grpc.server.protocol.push_config_rpcs import PushConfigService
from a2a_grpc.server.protocol.run import TaskRun
from a2a_grpc.server.push.webhooks import V10
from a2a_grpc.server.tasks.base import (
    REPLICA_STOPPED_TEXT,
    InvalidPageTokenError,
    Scope,
    StoreUnavailableError,
    Subscription,
    TaskBusyError,
    TaskFinishedError,
    TaskQuery,
    TaskStore,
)
from a2a_grpc.server.trust.audit import AuditLog
from a2a_grpc.server.trust.signers import MessageVerifier, SignerCardUnavailableError

log = logging.getLogger(__name__)

CANCEL_SETTLE_S = 5.0
"""Seconds a shutdown waits for the agents it cancelled to end (their tasks to be stored)."""


class CallContext(NamedTuple):
    """Who is calling and with which service parameters (already validated by the servicer).
    A NamedTuple like `Scope`: made on every call, and cheaper to make than a dataclass."""

    principal: str = ""
    extensions: tuple[str, ...] = ()
    protocol: str = V10
    """The protocol version of the service called ("0.3" through the 0.3 service): the version
    a webhook this call registers speaks."""


def _budget(message: a2a_pb2.Message) -> Money | None:
    if not message.HasField("metadata"):
        return None
    try:
        return requested_budget(message)
    except BudgetFormatError as exc:
        field = f"message.metadata[{BUDGET_EXTENSION!r}].budget"
        raise InvalidParamsError(
            f"invalid budget: {exc}", field_violations=[FieldViolation(field, str(exc))]
        ) from None


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
        extended_card: a2a_pb2.AgentCard | None = None,
    ) -> None:
        """Built by `server/compose.py` (`build_handler`). `push` serves the push-config RPCs
        and delivers webhooks (None when the card does not offer push notifications);
        `verifier` checks signed messages (see `server/trust/signers.py`; None: they are not
        verified); `audit` records what each message led to. `runs`: the unsettled runs by
        task id, shared with the store's listener (a run whose task is canceled on another
        replica stops)."""
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
        self._traced = tracing_configured()  # give each agent run a span of its own
        self._input_modes = validation.accepted_input_modes(card)
        self._required_extensions = validation.required_extensions(card)
        self._active: dict[str, TaskRun] = {} if runs is None else runs  # unsettled, by task id
        self._runners: set[asyncio.Task[None]] = set()
        self._housekeeper: asyncio.Task[None] | None = None
        self.outcomes = Outcomes(skill.id for skill in card.skills)
        """Answers by kind, artifacts per finished task, by skill (metrics)."""
        self.housekeeping_failures = FailureLog(
            log, "housekeeping (expiring tasks)", level=logging.ERROR
        )
        """Sweeps that failed for another reason than the store being down (those the store
        counts): the first with its traceback, then at most a line a minute."""

    # -- SendMessage / SendStreamingMessage -----------------------------------------------

    async def send_message(
        self, request: a2a_pb2.SendMessageRequest, call: CallContext
    ) -> a2a_pb2.SendMessageResponse:
        validation.check_send_required(request)
        configuration = request.configuration
        if configuration.HasField("task_push_notification_config"):
            await self._check_inline_webhook(configuration.task_push_notification_config)
        message = request.message
        key = (request.tenant, call.principal, message.message_id)
        run = self.dedup.repeat_of(key, message)
        if run is None:
            run = (await self._accept(request, key, call, subscribe=False))[0]
        history = configuration.history_length if configuration.HasField("history_length") else None
        # `settled` implies `started`: a blocking call waits on it alone.
        await (run.started if configuration.return_immediately else run.settled).wait()
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
            await self._check_inline_webhook(configuration.task_push_notification_config)
        message = request.message
        key = (request.tenant, call.principal, message.message_id)
        outcome: Outcome | None = self.dedup.repeat_of(key, message)
        opened: Subscription | None = None
        snapshot: a2a_pb2.Task | None = None
        if outcome is None:
            outcome, opened, snapshot = await self._accept(request, key, call, subscribe=True)
        if opened is None:  # a repeat: follow what the first delivery led to
            await outcome.started.wait()
            if outcome.reply_message is not None:
                yield a2a_pb2.StreamResponse(message=outcome.reply_message)
                return
            async for event in self._follow(outcome.task_id, outcome.scope, until_terminal=False):
                yield event
            return
        try:
            if snapshot is not None:
                # A continuation: the stream opens with the task as it stands now.
                yield a2a_pb2.StreamResponse(task=snapshot)
            async for event in opened:
                yield event
        finally:
            opened.cancel()

    async def _accept(
        self,
        request: a2a_pb2.SendMessageRequest,
        key: tuple[str, str, str],
        call: CallContext,
        *,
        subscribe: bool,
    ) -> tuple[Outcome, Subscription | None, a2a_pb2.Task | None]:
        """Checks a new message (after required fields and the local dedup) and starts its run.

        `key` is the message's dedup key: (tenant, principal, message id). Returns the run, or
        the outcome of a first delivery that another replica claimed (with no subscription).
        With `subscribe`, a subscription is opened before the agent can emit anything, and for
        a continuation also the task's snapshot it starts after.
        """
        message = request.message
        tenant = key[0]
        scope = Scope(tenant, call.principal)
        config = self.config
        size = validation.check_content(
            message, self._input_modes, config.max_inline_bytes, config.max_message_bytes
        )
        if self._required_extensions:
            validation.check_extensions(self._required_extensions, call.extensions)
        signer = None if self.verifier is None else await self._check_signature(message, tenant)
        budget = _budget(message)
        existing = await self._existing_task(message, scope)
        configuration = request.configuration
        inline: a2a_pb2.TaskPushNotificationConfig | None = None
        if self.push is not None and configuration.HasField("task_push_notification_config"):
            inline = configuration.task_push_notification_config
            if existing is not None:
                await self.push.check_room(
                    existing.id, inline.id, "configuration.task_push_notification_config"
                )
        context_id = existing.context_id if existing is not None else message.context_id or new_id()
        context = RequestContext(
            message=message,
            task_id=existing.id if existing is not None else new_id(),
            context_id=context_id,
            task=existing,
            reference_task_ids=tuple(message.reference_task_ids),
            requested_extensions=call.extensions,
            caller=call.principal,
            signed_by="" if signer is None else signer.kid,
            signer=signer,
            budget=budget if budget is not None or existing is None else budget_of(existing),
            tenant=tenant,
            metadata=(
                json_format.MessageToDict(request.metadata) if request.HasField("metadata") else {}
            ),
            **(_configuration_of(configuration) if request.HasField("configuration") else {}),
        )
        if self.store.shared:  # one process decided in repeat_of (saves a coroutine, ~1k instr.)
            first = await self.dedup.claim(key, message, context.task_id)
            if first is not None:
                return first, None, None  # another replica runs this message id
        subscription: Subscription | None = None
        try:
            if subscribe and existing is None:  # before the agent can emit anything
                subscription = await self.store.subscribe(context.task_id)
            if existing is None and inline is None:  # the common case, without a coroutine more
                await self.store.reserve(scope, size, context.task_id)  # the run uses or frees it
            else:
                await self._claim_room_or_task(
                    existing, scope, size, context, inline, call.protocol
                )
        except BaseException:
            if subscription is not None:
                subscription.cancel()
            if self.store.shared:
                await self.dedup.unclaim(key)  # nothing ran: a retry may run it
            raise
        run = TaskRun(
            store=self.store,
            scope=scope,
            context=context,
            on_settled=self._settled,
            traced=self._traced,
            reserved_size=size,
        )
        self._active[run.task_id] = run
        self.dedup.remember(key, message, run)
        runner = run.start(self.agent)  # scheduled: it runs at this coroutine's next await
        self._runners.add(runner)
        runner.add_done_callback(self._runners.discard)
        snapshot = None
        if subscribe and existing is not None:
            # A continuation's stream opens with the task as it stands (SUBMITTED, with the
            # answer); if this fails, the accepted answer is still worked on.
            watched = await self.store.watch(run.task_id, scope, until_terminal=False)
            if watched is not None:
                snapshot, subscription = watched
        return run, subscription, snapshot

    async def _claim_room_or_task(
        self,
        existing: a2a_pb2.Task | None,
        scope: Scope,
        size: int,
        context: RequestContext,
        inline: a2a_pb2.TaskPushNotificationConfig | None,
        protocol: str,
    ) -> None:
        """Room for a new task (StoreFullError now, rather than when the agent first speaks),
        or the claim on an interrupted one, whose answer is counted against the byte budget as
        it lands (StoreFullError when unfinished tasks fill it: the task waits as it was), with
        the inline webhook registered (in the caller's `protocol`); on failure nothing is left
        claimed."""
        task_id = context.task_id
        push = self.push
        if existing is None:
            await self.store.reserve(scope, size, task_id)  # used or released by the run
            if inline is not None and push is not None:
                try:
                    await push.register(inline, task_id, scope.tenant, protocol)
                except BaseException:
                    await self.store.release(scope, task_id)
                    raise
            return
        if inline is not None and push is not None:  # the task exists: a config may wait
            await push.register(inline, task_id, scope.tenant, protocol)
        await self._resume(existing, scope, context.message)

    async def _check_signature(self, message: a2a_pb2.Message, tenant: str) -> Signer | None:
        """The verified signer; None for an unsigned message this agent accepts."""
        assert self.verifier is not None
        field = f"message.metadata[{SIGNED_MESSAGE_EXTENSION!r}]"
        try:
            return await self.verifier.verify(message, tenant)
        except MissingSignatureError:
            raise InvalidParamsError(
                f"this agent only accepts signed messages: sign the message with the "
                f"{SIGNED_MESSAGE_EXTENSION} extension",
                field_violations=[FieldViolation(field, "required: a JWS over the message")],
            ) from None
        except SignatureError as exc:
            raise InvalidParamsError(
                f"the message signature was refused: {exc}",
                field_violations=[FieldViolation(field, str(exc))],
            ) from None
        except SignerCardUnavailableError as exc:
            # Not marked retryable: the failure is remembered for a while, so retrying at once
            # cannot help, and a caller learns promptly that the signer's card is down.
            raise ServiceUnavailableError(str(exc), retryable=False) from None

    async def _check_inline_webhook(self, webhook: a2a_pb2.TaskPushNotificationConfig) -> None:
        """A webhook given inline must be acceptable before anything else happens."""
        if self.push is None:
            raise PushNotificationNotSupportedError(
                "this agent does not offer push notifications; remove "
                "configuration.task_push_notification_config"
            )
        await self.push.validate(webhook, "configuration.task_push_notification_config")

    async def _existing_task(self, message: a2a_pb2.Message, scope: Scope) -> a2a_pb2.Task | None:
        if not message.task_id:
            return None
        task = await self.store.get(message.task_id, scope)
        if task is None:
            raise TaskNotFoundError(
                f"task {message.task_id} not found", metadata={"taskId": message.task_id}
            )
        if message.context_id and message.context_id != task.context_id:
            raise InvalidParamsError(
                f"message.context_id {message.context_id!r} does not match task "
                f"{task.id}'s context {task.context_id!r}: omit it or send the task's",
                field_violations=[
                    FieldViolation("message.context_id", "does not match the task's context")
                ],
            )
        if task.status.state in TERMINAL_STATES:
            raise _takes_no_more(task.id, task.status.state)
        if task.id in self._active:
            raise _busy(task.id)
        return task

    async def _resume(self, task: a2a_pb2.Task, scope: Scope, message: a2a_pb2.Message) -> None:
        """Records the caller's answer on an interrupted task and marks it SUBMITTED again,
        unless a run took it (here or on another replica) since it was read."""
        try:
            resumed = await self.store.resume(task.id, scope, message)
        except TaskBusyError:
            raise _busy(task.id) from None
        except TaskFinishedError as finished:
            raise _takes_no_more(task.id, finished.state) from None
        if resumed is None:
            raise TaskNotFoundError(f"task {task.id} not found", metadata={"taskId": task.id})

    def _settled(self, run: TaskRun) -> None:
        if self._active.get(run.task_id) is run:
            del self._active[run.task_id]
        self.outcomes.observe(
            run.skill,
            direct_reply=run.reply_message is not None,
            state=run.last_state,
            artifacts=run.artifact_count,
        )
        self.dedup.settle((run.scope.tenant, run.scope.owner, run.context.message.message_id), run)
        if run.reply_message is not None and self.push is not None:
            self.push.forget_task(run.task_id)  # a direct reply made no task to watch
        if self.audit is not None:
            self._audit_outcome(self.audit, run)

    def _audit_outcome(self, audit: AuditLog, run: TaskRun) -> None:
        if run.reply_message is not None:
            state = "DIRECT_REPLY"
        else:
            state = a2a_pb2.TaskState.Name(run.last_state)
        audit.outcome(
            task_id="" if run.reply_message is not None else run.task_id,
            state=state,
            principal=run.scope.owner,
            tenant=run.scope.tenant,
            message_id=run.context.message.message_id,
            cost=run.cost.to_json() if run.cost is not None else None,
            signer=run.context.signer,
        )

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
        run = self._active.get(task.id)
        if run is not None:
            await run.cancel()
        else:  # waiting for input, or worked on by another replica (the store tells it)
            try:
                await self.store.cancel(task.id, scope)
            except TaskFinishedError as finished:
                raise _not_cancelable(task.id, finished.state) from None
            if task.status.state in INTERRUPTED_STATES:  # no run: no run will audit it
                self._audit_canceled(task.id, scope)
        return await self._lookup(task.id, scope, None)

    def _audit_canceled(self, task_id: str, scope: Scope) -> None:
        """Audits CANCELED as the outcome of a task no agent was working on."""
        if self.audit is not None:
            self.audit.outcome(
                task_id=task_id,
                state=a2a_pb2.TaskState.Name(a2a_pb2.TASK_STATE_CANCELED),
                principal=scope.owner,
                tenant=scope.tenant,
                message_id="",
                cost=None,
            )

    async def subscribe_to_task(
        self, request: a2a_pb2.SubscribeToTaskRequest, call: CallContext
    ) -> AsyncIterator[a2a_pb2.StreamResponse]:
        self._require_streaming()
        validation.check_task_id(request.id)
        scope = Scope(request.tenant, call.principal)
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
            yield a2a_pb2.StreamResponse(task=snapshot)
            # Runs claim interrupted tasks atomically (SUBMITTED at once), so a snapshot at a
            # closing state means no event will follow for this stream.
            closes_at = TERMINAL_STATES if until_terminal else SETTLED_STATES
            if snapshot.status.state in closes_at:
                return
            async for event in subscription:
                yield event
        finally:
            subscription.cancel()

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

    # -- housekeeping ---------------------------------------------------------------------

    def start(self) -> None:
        """Starts the timer that expires tasks and message ids on time, also on an idle server
        (otherwise they would only go when new work arrives). Call on the server's loop, after
        the store's `start`."""
        if self._housekeeper is None:
            self._housekeeper = asyncio.get_running_loop().create_task(self._keep_house())

    @property
    def sweep_interval(self) -> float:
        """Seconds between sweeps: a quarter of the shortest lifetime, within 10 ms .. 1 s."""
        config = self.config
        shortest = min(config.task_ttl, config.interrupted_ttl, config.dedup_window)
        return min(1.0, max(0.01, shortest / 4))

    async def _keep_house(self) -> None:
        while True:
            await asyncio.sleep(self.sweep_interval)
            await self.sweep_once()

    async def sweep_once(self) -> None:
        """One `sweep` as the timer runs it: a failure is logged quietly and never stops the
        next sweeps; one because the store is down is not logged here (the store logs its
        outage)."""
        try:
            await self.sweep()
        except StoreUnavailableError:
            return
        except Exception as exc:
            self.housekeeping_failures.failed(f"{type(exc).__name__}: {exc}", traceback=exc)
        else:
            self.housekeeping_failures.recovered()

    async def sweep(self) -> None:
        """Cancels tasks that waited for input longer than `interrupted_ttl`, drops finished
        tasks past `task_ttl` and message ids past the dedup window."""
        store = self.store
        for task_id in await store.parked_longer_than(self.config.interrupted_ttl):
            await self._expire_parked(task_id)
        await store.evict_expired()
        self.dedup.expire(time.monotonic())

    async def _expire_parked(self, task_id: str) -> None:
        text = (
            f"canceled: no answer arrived within {self.config.interrupted_ttl:g} s of a request "
            "for input; start a new task, listing this one in reference_task_ids"
        )
        message = agent_message(text, context_id="", task_id=task_id)  # the store sets it
        scope = await self.store.cancel_parked(task_id, message)
        if scope is not None:
            self._audit_canceled(task_id, scope)

    async def drain(self, grace: float) -> None:
        """Shutdown: lets running agents finish within `grace` seconds, those started meanwhile
        too, then cancels them (their tasks end CANCELED, or FAILED saying the replica stopped
        when the store is shared) and waits up to CANCEL_SETTLE_S for them to end."""
        if self._housekeeper is not None:
            self._housekeeper.cancel()
            self._housekeeper = None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while self._runners and (left := deadline - loop.time()) > 0:
            await asyncio.wait(set(self._runners), timeout=left)
        pending = set(self._runners)
        if not pending:
            return
        if self.store.shared:
            # Another replica takes the next request for these tasks: say why they ended
            # rather than that someone canceled them (spec decision §9.11).
            for run in self._active.values():
                run.stop_outcome = (a2a_pb2.TASK_STATE_FAILED, REPLICA_STOPPED_TEXT)
        for runner in pending:
            runner.cancel()
        await asyncio.wait(pending, timeout=CANCEL_SETTLE_S)


def _configuration_of(configuration: a2a_pb2.SendMessageConfiguration) -> dict[str, Any]:
    """What the agent learns of a request's configuration (`RequestContext`); only read when
    the request has one: reading an absent one cost ~4k instructions per SendMessage."""
    return {
        "accepted_output_modes": tuple(configuration.accepted_output_modes),
        "history_length": (
            configuration.history_length if configuration.HasField("history_length") else None
        ),
        "return_immediately": configuration.return_immediately,
    }


def _takes_no_more(task_id: str, state: int) -> UnsupportedOperationError:
    return UnsupportedOperationError(
        f"task {task_id} is {a2a_pb2.TaskState.Name(state)} and takes no more "
        "messages: start a new task, listing this one in reference_task_ids",
        metadata={"taskId": task_id},
    )


def _busy(task_id: str) -> UnsupportedOperationError:
    return UnsupportedOperationError(
        f"task {task_id} is still working on an earlier message: send the next one when it "
        "asks for input",
        metadata={"taskId": task_id},
    )


def _not_cancelable(task_id: str, state: int) -> TaskNotCancelableError:
    return TaskNotCancelableError(
        f"task {task_id} is already {a2a_pb2.TaskState.Name(state)}",
        metadata={"taskId": task_id},
    )
