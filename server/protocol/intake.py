"""Intake: how a new message becomes a run, after the handler's required-field checks and the
local idempotency window. The checks in the documented order (content, required extensions,
signature, budget, the task it continues), the shared claim on its message id, room in the
store (or the claim on an interrupted task), the inline webhook, and the run started; and what
a settled run leaves behind (outcome metrics, the dedup entry, the audit record).
"""

from __future__ import annotations

import asyncio

from google.protobuf import json_format

from a2a_grpc.core.budget import (
    BUDGET_EXTENSION,
    BudgetFormatError,
    Money,
    budget_of,
    requested_budget,
)
from a2a_grpc.core.errors import (
    FieldViolation,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    ServiceUnavailableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a_grpc.core.ids import new_id
from a2a_grpc.core.jose import SignatureError
from a2a_grpc.core.signing import SIGNED_MESSAGE_EXTENSION, MissingSignatureError, Signer
from a2a_grpc.core.states import TERMINAL_STATES
from a2a_grpc.core.tracing import tracing_configured
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import AgentExecutor, RequestContext
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.protocol import validation
from a2a_grpc.server.protocol.call_context import CallContext
from a2a_grpc.server.protocol.dedup import Idempotency, Outcome
from a2a_grpc.server.protocol.outcomes import Outcomes
from a2a_grpc.server.protocol.push_config_rpcs import PushConfigService
from a2a_grpc.server.protocol.run import TaskRun
from a2a_grpc.server.protocol.unrecorded import UnrecordedEnds
from a2a_grpc.server.tasks.base import (
    Scope,
    Subscription,
    TaskBusyError,
    TaskFinishedError,
    TaskStore,
)
from a2a_grpc.server.trust.audit import AuditLog
from a2a_grpc.server.trust.signers import MessageVerifier, SignerCardUnavailableError


class Intake:
    """Accepts new messages for one handler and holds the runs they started."""

    def __init__(
        self,
        agent: AgentExecutor,
        card: a2a_pb2.AgentCard,
        config: ServerConfig,
        *,
        store: TaskStore,
        dedup: Idempotency,
        push: PushConfigService | None,
        audit: AuditLog | None,
        verifier: MessageVerifier | None,
        outcomes: Outcomes,
        active: dict[str, TaskRun],
        unrecorded: UnrecordedEnds,
    ) -> None:
        self.agent = agent
        self.config = config
        self.store = store
        self.dedup = dedup
        self.push = push
        self.audit = audit
        self.verifier = verifier
        self.outcomes = outcomes
        self.active = active
        """Unsettled runs by task id (shared with the store's listener)."""
        self.unrecorded = unrecorded
        """Ends of runs the store was unavailable to write (shared with the store's listener,
        which has them written once it answers again)."""
        self.runners: set[asyncio.Task[None]] = set()
        """The runs' asyncio tasks, until they end."""
        self._traced = tracing_configured()  # give each agent run a span of its own
        self._input_modes = validation.accepted_input_modes(card)
        self._required_extensions = validation.required_extensions(card)

    async def accept(
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
        continued = message.task_id
        task_id = continued or new_id()
        configuration = request.configuration
        inline: a2a_pb2.TaskPushNotificationConfig | None = (
            configuration.task_push_notification_config
            if self.push is not None and configuration.HasField("task_push_notification_config")
            else None
        )
        # A message that makes a task with no inline webhook has its room reserved with its
        # claim where the store can (one write fewer), else after it (below).
        room = (
            (scope, size) if self.dedup.reserves_room and not continued and inline is None else None
        )
        # Who runs this message id, before any state check: a repeat gets the first delivery's
        # outcome wherever it ran, also once the task it answered has moved on (finished, or
        # working on it), which a state check would refuse.
        first = await self.dedup.claim(key, message, task_id, room)
        if first is not None:
            return first, None, None  # an earlier delivery runs this message id
        subscription: Subscription | None = None
        try:
            # Most messages start a task: no coroutine made to learn that (~1k instructions).
            existing = await self._existing_task(message, scope) if continued else None
            if inline is not None and existing is not None and self.push is not None:
                await self.push.check_room(
                    task_id, inline.id, "configuration.task_push_notification_config"
                )
            output_modes, history_length, return_immediately = (
                _configuration_of(configuration)
                if request.HasField("configuration")
                else _NO_CONFIGURATION
            )
            # Positional, in field order: 5k instructions fewer per message than keywords.
            context = RequestContext(
                message,
                task_id,
                existing.context_id if existing is not None else message.context_id or new_id(),
                existing,  # task
                tuple(message.reference_task_ids),
                call.extensions,  # requested_extensions
                call.principal,  # caller
                "" if signer is None else signer.kid,  # signed_by
                signer,
                budget if budget is not None or existing is None else budget_of(existing),
                tenant,
                json_format.MessageToDict(request.metadata) if request.HasField("metadata") else {},
                output_modes,  # accepted_output_modes
                history_length,
                return_immediately,
            )
            if subscribe and existing is None:  # before the agent can emit anything
                subscription = await self.store.subscribe(task_id)
            if existing is None and inline is None:  # the common case, without a coroutine more
                if room is None:
                    await self.store.reserve(scope, size, task_id)  # the run uses or frees it
            else:
                answered = await self._claim_room_or_task(
                    existing, scope, size, context, inline, call.protocol
                )
                if answered is not None:
                    # The agent is told the task as this message took it (atomically), not as
                    # read above: the state it answers may have moved on since (another replica
                    # ran an earlier answer), and what that state asked for is what this message
                    # answers (AUTH_REQUIRED: spec §7.6.4, `RequestContext.answers_auth`).
                    context = context._replace(task=answered)
        except BaseException:
            if subscription is not None:
                subscription.cancel()
            try:
                if room is not None:  # reserved with the claim
                    await self.store.release(scope, task_id)
            finally:
                await self.dedup.unclaim(key)  # nothing ran: a retry may run it
            raise
        run = TaskRun(
            store=self.store,
            scope=scope,
            context=context,
            owner=self,
            traced=self._traced,
            reserved_size=size,
        )
        self.active[run.task_id] = run
        self.dedup.remember(key, message, run)
        if subscribe and existing is not None:
            return run, *await self._watch_then_start(run, scope)
        run.start(self.agent, self.runners)  # scheduled: it runs at this coroutine's next await
        return run, subscription, None

    async def _watch_then_start(
        self, run: TaskRun, scope: Scope
    ) -> tuple[Subscription | None, a2a_pb2.Task | None]:
        """A continuation's stream, opened before its run starts: its snapshot is the task as
        `resume` left it on every store (SUBMITTED, with the answer; on a store that suspends
        in `watch`, an agent started first would already have moved it on), then every event
        of the run. If the watch fails, the accepted answer is still worked on."""
        try:
            watched = await self.store.watch(run.task_id, scope, until_terminal=False)
        finally:
            if not run.is_settled:  # a cancel may have ended it while the watch waited
                run.start(self.agent, self.runners)
        if watched is None:
            return None, None
        snapshot, subscription = watched
        return subscription, snapshot

    async def _claim_room_or_task(
        self,
        existing: a2a_pb2.Task | None,
        scope: Scope,
        size: int,
        context: RequestContext,
        inline: a2a_pb2.TaskPushNotificationConfig | None,
        protocol: str,
    ) -> a2a_pb2.Task | None:
        """Room for a new task (StoreFullError now, rather than when the agent first speaks),
        or the claim on an interrupted one, whose answer is counted against the byte budget as
        it lands (StoreFullError when unfinished tasks fill it: the task waits as it was), with
        the inline webhook registered (in the caller's `protocol`); on failure nothing is left
        claimed. Returns the interrupted task as it stood when claimed (None for a new one)."""
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
            return None
        if inline is not None and push is not None:  # the task exists: a config may wait
            await push.register(inline, task_id, scope.tenant, protocol)
        return await self._resume(existing, scope, context.message)

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

    async def check_inline_webhook(self, webhook: a2a_pb2.TaskPushNotificationConfig) -> None:
        """A webhook given inline must be acceptable before anything else happens."""
        if self.push is None:
            raise PushNotificationNotSupportedError(
                "this agent does not offer push notifications; remove "
                "configuration.task_push_notification_config"
            )
        await self.push.validate(webhook, "configuration.task_push_notification_config")

    async def _existing_task(self, message: a2a_pb2.Message, scope: Scope) -> a2a_pb2.Task:
        """The task a message with a task id continues; the spec's error when it cannot."""
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
        if task.id in self.active:
            raise _busy(task.id)
        return task

    async def _resume(
        self, task: a2a_pb2.Task, scope: Scope, message: a2a_pb2.Message
    ) -> a2a_pb2.Task:
        """Records the caller's answer on an interrupted task and marks it SUBMITTED again,
        unless a run took it (here or on another replica) since it was read; returns the task
        as it stood just before (the store's `resume`)."""
        try:
            resumed = await self.store.resume(task.id, scope, message)
        except TaskBusyError:
            raise _busy(task.id) from None
        except TaskFinishedError as finished:
            raise _takes_no_more(task.id, finished.state) from None
        if resumed is None:
            raise TaskNotFoundError(f"task {task.id} not found", metadata={"taskId": task.id})
        return resumed

    async def run_withdrawn(self, run: TaskRun) -> None:
        """The run did not take its message (its agent could not work on it now): the message
        id is forgotten here and given back on every replica, so that the message sent again
        runs again instead of getting this refusal."""
        key = (run.scope.tenant, run.scope.owner, run.context.message.message_id)
        await self.dedup.withdraw(key, run)

    def run_unrecorded(self, run: TaskRun, state: int, text: str | None) -> None:
        self.unrecorded.add(run, state, text)

    def run_settled(self, run: TaskRun) -> None:
        if self.active.get(run.task_id) is run:
            del self.active[run.task_id]
        if run.unavailable is not None:  # not taken: no outcome to count or remember
            if self.audit is not None:
                self._audit_outcome(self.audit, run)
            return
        self.outcomes.observe(
            run.skill,
            direct_reply=run.reply_message is not None,
            state=run.last_state,
            artifacts=run.artifact_count,
            whole_artifacts=run.whole_artifacts,
            chunked_artifacts=run.chunked_artifacts,
        )
        self.dedup.settle((run.scope.tenant, run.scope.owner, run.context.message.message_id), run)
        if run.reply_message is not None and self.push is not None:
            self.push.forget_task(run.task_id)  # a direct reply made no task to watch
        if self.audit is not None:
            self._audit_outcome(self.audit, run)

    def _audit_outcome(self, audit: AuditLog, run: TaskRun) -> None:
        if run.reply_message is not None:
            state = "DIRECT_REPLY"
        elif run.unavailable is not None:
            state = "UNAVAILABLE"  # the message was not taken
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


def _configuration_of(
    configuration: a2a_pb2.SendMessageConfiguration,
) -> tuple[tuple[str, ...], int | None, bool]:
    """What the agent learns of a request's configuration: `RequestContext`'s last three
    fields (accepted_output_modes, history_length, return_immediately); only read when the
    request has one: reading an absent one cost ~4k instructions per SendMessage."""
    return (
        tuple(configuration.accepted_output_modes),
        configuration.history_length if configuration.HasField("history_length") else None,
        configuration.return_immediately,
    )


_NO_CONFIGURATION: tuple[tuple[str, ...], int | None, bool] = ((), None, False)
"""`_configuration_of` a request without a configuration."""


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
