"""The protocol logic of A2AService: validation order, task runs, idempotency, streams, listing.

Works on pb2 messages and core errors only; the servicer adapts it to grpc. Nothing here awaits
between checking a request and registering its run, so concurrent repeats of one message id
always find the first.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import NamedTuple

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
    TaskNotCancelableError,
    TaskNotFoundError,
    UnauthenticatedError,
    UnsupportedOperationError,
)
from a2a_grpc.core.ids import new_id
from a2a_grpc.core.jws import KeySet, SignatureError
from a2a_grpc.core.signing import SIGNED_MESSAGE_EXTENSION, MissingSignatureError, verify_message
from a2a_grpc.core.states import SETTLED_STATES, TERMINAL_STATES
from a2a_grpc.core.tracing import tracing_configured
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server import validation
from a2a_grpc.server.agent import AgentExecutor, RequestContext, agent_message
from a2a_grpc.server.audit import AuditLog
from a2a_grpc.server.broker import Broker, Subscription
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.dedup import DedupWindow
from a2a_grpc.server.push_config_rpcs import PushConfigService
from a2a_grpc.server.run import TaskRun, record_status
from a2a_grpc.server.store import InMemoryTaskStore, InvalidPageTokenError, Scope, TaskQuery
from a2a_grpc.server.webhooks import PushConfigStore, WebhookDispatcher

log = logging.getLogger(__name__)


class CallContext(NamedTuple):
    """Who is calling and with which service parameters (already validated by the servicer)."""

    principal: str = ""
    extensions: tuple[str, ...] = ()


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
        extended_card: a2a_pb2.AgentCard | None = None,
        webhooks: WebhookDispatcher | None = None,
        signature_keys: KeySet | None = None,
    ) -> None:
        """`webhooks` delivers push notifications; one is made from `config` when not given."""
        self.agent = agent
        self.card = card
        self.extended_card = extended_card
        self.config = config
        self.signature_keys = signature_keys
        self.store = InMemoryTaskStore(
            max_tasks=config.max_tasks,
            max_bytes=config.max_store_bytes,
            max_live_per_owner=config.live_tasks_per_principal,
            max_live_per_tenant=config.live_tasks_per_tenant,
            terminal_ttl=config.task_ttl,
        )
        self.push: PushConfigService | None = None
        if card.capabilities.push_notifications:
            webhooks = webhooks or WebhookDispatcher(PushConfigStore(), config.delivery_policy)
            self.push = PushConfigService(
                self.store, webhooks, max_per_task=config.max_push_configs_per_task
            )
            self.store.on_evict = webhooks.forget_task
        self.webhooks = webhooks
        self.broker = Broker(config.subscriber_queue_size, observer=webhooks)
        self.audit: AuditLog | None = None
        self._traced = tracing_configured()  # give each agent run a span of its own
        self._input_modes = validation.accepted_input_modes(card)
        self._required_extensions = validation.required_extensions(card)
        self._active: dict[str, TaskRun] = {}  # unsettled runs by task id
        self._runners: set[asyncio.Task[None]] = set()
        self.dedup = DedupWindow(window=config.dedup_window, capacity=config.max_tasks)
        self._housekeeper: asyncio.Task[None] | None = None

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
        run = (
            self.dedup.repeat_of(key, message)
            or self._accept(request, key, call, subscribe=False)[0]
        )
        history = configuration.history_length if configuration.HasField("history_length") else None
        # `settled` implies `started`: a blocking call waits on it alone.
        await (run.started if configuration.return_immediately else run.settled).wait()
        if run.reply_message is not None:
            return a2a_pb2.SendMessageResponse(message=run.reply_message)
        response = a2a_pb2.SendMessageResponse()
        if not self.store.copy_into(run.task_id, run.scope, response.task, history_length=history):
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
        repeat = self.dedup.repeat_of(key, message)
        if repeat is not None:
            await repeat.started.wait()
            if repeat.reply_message is not None:
                yield a2a_pb2.StreamResponse(message=repeat.reply_message)
                return
            async for event in self._follow(repeat.task_id, repeat.scope, until_terminal=False):
                yield event
            return
        run, subscription = self._accept(request, key, call, subscribe=True)
        assert subscription is not None
        try:
            if run.context.task is not None:
                # A continuation: the stream opens with the task as it stands now.
                snapshot = self.store.get(run.task_id, run.scope)
                if snapshot is not None:
                    yield a2a_pb2.StreamResponse(task=snapshot)
            async for event in subscription:
                yield event
        finally:
            subscription.cancel()

    def _accept(
        self,
        request: a2a_pb2.SendMessageRequest,
        key: tuple[str, str, str],
        call: CallContext,
        *,
        subscribe: bool,
    ) -> tuple[TaskRun, Subscription | None]:
        """Checks a new message (after required fields and dedup) and starts its run.

        `key` is the message's dedup key: (tenant, principal, message id). With `subscribe`, a
        broker subscription is opened before the agent can emit anything.
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
        signed_by = self._check_signature(message, tenant)
        budget = _budget(message)
        existing = self._existing_task(message, scope)
        if existing is not None and self.push is not None:
            inline = request.configuration.task_push_notification_config
            if inline.url:  # validated up front: a given inline config has a url
                self.push.check_room(
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
            signed_by=signed_by,
            budget=budget if budget is not None or existing is None else budget_of(existing),
            tenant=tenant,
            metadata=(
                json_format.MessageToDict(request.metadata) if request.HasField("metadata") else {}
            ),
        )
        if existing is None:
            # StoreFullError now, rather than when the agent first speaks. Nothing below fails,
            # so the room is always used or released by the run.
            self.store.reserve(scope, size)
        run = TaskRun(
            store=self.store,
            broker=self.broker,
            scope=scope,
            context=context,
            on_settled=self._settled,
            traced=self._traced,
            reserved_size=size,
        )
        if existing is not None:
            self._continue(existing, message)
        if self.push is not None:
            configuration = request.configuration
            if configuration.HasField("task_push_notification_config"):
                self.push.register(configuration.task_push_notification_config, run.task_id, tenant)
        subscription = self.broker.subscribe(run.task_id) if subscribe else None
        self._active[run.task_id] = run
        self.dedup.remember(key, message, run)
        runner = run.start(self.agent)
        self._runners.add(runner)
        runner.add_done_callback(self._runners.discard)
        return run, subscription

    def _check_signature(self, message: a2a_pb2.Message, tenant: str) -> str:
        """The verified signer's key id; "" for an unsigned message this agent accepts."""
        if self.signature_keys is None:
            return ""  # the extension is not offered: a signature is ignored, as spec'd
        field = f"message.metadata[{SIGNED_MESSAGE_EXTENSION!r}]"
        try:
            return verify_message(message, self.signature_keys, tenant=tenant).kid
        except MissingSignatureError:
            if not self.config.require_signed_messages:
                return ""
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

    async def _check_inline_webhook(self, webhook: a2a_pb2.TaskPushNotificationConfig) -> None:
        """A webhook given inline must be acceptable before anything else happens."""
        if self.push is None:
            raise PushNotificationNotSupportedError(
                "this agent does not offer push notifications; remove "
                "configuration.task_push_notification_config"
            )
        await self.push.validate(webhook, "configuration.task_push_notification_config")

    def _existing_task(self, message: a2a_pb2.Message, scope: Scope) -> a2a_pb2.Task | None:
        if not message.task_id:
            return None
        task = self.store.get(message.task_id, scope)
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
            raise UnsupportedOperationError(
                f"task {task.id} is {a2a_pb2.TaskState.Name(task.status.state)} and takes no more "
                "messages: start a new task, listing this one in reference_task_ids",
                metadata={"taskId": task.id},
            )
        if task.id in self._active:
            raise UnsupportedOperationError(
                f"task {task.id} is still working on an earlier message: send the next one when "
                "it asks for input",
                metadata={"taskId": task.id},
            )
        return task

    def _continue(self, task: a2a_pb2.Task, message: a2a_pb2.Message) -> None:
        """Records the caller's answer on an interrupted task and marks it SUBMITTED again."""
        stored = a2a_pb2.Message()
        stored.CopyFrom(message)
        stored.task_id = task.id
        stored.context_id = task.context_id

        self.store.apply(task.id, lambda t: t.history.append(stored), status_changed=False)
        record_status(
            self.store, self.broker, task.id, task.context_id, a2a_pb2.TASK_STATE_SUBMITTED
        )

    def _settled(self, run: TaskRun) -> None:
        if self._active.get(run.task_id) is run:
            del self._active[run.task_id]
        self.dedup.settle((run.scope.tenant, run.scope.owner, run.context.message.message_id), run)
        if run.reply_message is not None and self.push is not None:
            self.push.configs.drop_task(run.task_id)  # a direct reply made no task to watch
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
        )

    # -- GetTask / ListTasks / CancelTask / SubscribeToTask -------------------------------

    async def get_task(self, request: a2a_pb2.GetTaskRequest, call: CallContext) -> a2a_pb2.Task:
        validation.check_get(request)
        history = request.history_length if request.HasField("history_length") else None
        return self._lookup(request.id, Scope(request.tenant, call.principal), history)

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
            return self.store.list(Scope(request.tenant, call.principal), query)
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
        task = self._lookup(request.id, scope, None)
        if task.status.state in TERMINAL_STATES:
            raise TaskNotCancelableError(
                f"task {task.id} is already {a2a_pb2.TaskState.Name(task.status.state)}",
                metadata={"taskId": task.id},
            )
        run = self._active.get(task.id)
        if run is not None:
            run.cancel()
        else:  # interrupted: no agent is running, so the state changes alone
            self._cancel_idle(task.id, task.context_id, scope, None)
        return self._lookup(task.id, scope, None)

    def _cancel_idle(
        self, task_id: str, context_id: str, scope: Scope, message: a2a_pb2.Message | None
    ) -> None:
        """CANCELED for a task no agent is working on (it waits for input), with `message` as
        the status message; streams and webhooks see it, and it is audited as an outcome."""
        record_status(
            self.store, self.broker, task_id, context_id, a2a_pb2.TASK_STATE_CANCELED, message
        )
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
        task = self._lookup(request.id, scope, None)
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
        subscription = self.broker.subscribe(task_id, until_terminal=until_terminal)
        snapshot = self.store.get(task_id, scope)
        if snapshot is None:
            subscription.cancel()
            raise TaskNotFoundError(f"task {task_id} not found", metadata={"taskId": task_id})
        yield a2a_pb2.StreamResponse(task=snapshot)
        state = snapshot.status.state
        closes_at = TERMINAL_STATES if until_terminal else SETTLED_STATES
        if state in closes_at and task_id not in self._active:
            subscription.cancel()
            return
        async for event in subscription:
            yield event

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
        return await self.push_configs().create(request, Scope(request.tenant, call.principal))

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

    def _lookup(self, task_id: str, scope: Scope, history: int | None) -> a2a_pb2.Task:
        task = self.store.get(task_id, scope, history_length=history)
        if task is None:
            raise TaskNotFoundError(f"task {task_id} not found", metadata={"taskId": task_id})
        return task

    def _require_streaming(self) -> None:
        if not self.card.capabilities.streaming:
            raise UnsupportedOperationError("this agent does not offer streaming")

    # -- housekeeping ---------------------------------------------------------------------

    def start(self) -> None:
        """Starts the timer that expires tasks and message ids on time, also on an idle server
        (otherwise they would only go when new work arrives). Call on the server's loop."""
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
            try:
                self.sweep()
            except Exception:  # never let one bad sweep stop the next ones
                log.exception("housekeeping failed")

    def sweep(self) -> None:
        """Cancels tasks that waited for input longer than `interrupted_ttl`, drops finished
        tasks past `task_ttl` and message ids past the dedup window."""
        config = self.config
        store = self.store
        now = time.monotonic()
        for task_id in store.parked_since(now - config.interrupted_ttl):
            self._expire_parked(task_id)
        store.evict_expired()
        self.dedup.expire(now)

    def _expire_parked(self, task_id: str) -> None:
        task = self.store.peek(task_id)
        if task is None or task_id in self._active:
            return
        waited = a2a_pb2.TaskState.Name(task.status.state)
        text = (
            f"canceled: no answer arrived within {self.config.interrupted_ttl:g} s of "
            f"{waited}; start a new task, listing this one in reference_task_ids"
        )
        message = agent_message(text, context_id=task.context_id, task_id=task_id)
        scope = self.store.scope_of(task_id)
        assert scope is not None  # peek just found the task
        self._cancel_idle(task_id, task.context_id, scope, message)

    async def drain(self, grace: float) -> None:
        """Shutdown: lets running agents finish within `grace` seconds, then cancels them."""
        if self._housekeeper is not None:
            self._housekeeper.cancel()
            self._housekeeper = None
        runners = set(self._runners)
        if runners:
            _, pending = await asyncio.wait(runners, timeout=grace)
            for runner in pending:
                runner.cancel()
            if pending:
                await asyncio.wait(pending, timeout=5)
