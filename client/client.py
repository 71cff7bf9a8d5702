"""`A2AClient`: one typed async method per A2A RPC, with metadata, tenant, retry and resumption."""

# A call's `timeout` becomes the gRPC deadline the server sees; asyncio.timeout cannot do that.
# ruff: noqa: ASYNC109

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import grpc
from google.protobuf import empty_pb2

from a2a_grpc.client.audit import DIRECT_REPLY, ClientAuditLog, outcome_of
from a2a_grpc.client.card import grpc_interface
from a2a_grpc.client.channel import ChannelOptions, TlsConfig, create_channel
from a2a_grpc.client.credentials import Credentials
from a2a_grpc.client.errors import from_rpc_error
from a2a_grpc.client.events import decode_send_message_response
from a2a_grpc.client.follow import Mode, Resend, StreamCall, StreamDeadline, StreamItem, follow
from a2a_grpc.client.reducer import TaskView
from a2a_grpc.client.retry import Attempts, Backoff, RetryPolicy, call_with_retry
from a2a_grpc.client.signing import SIGNED_MESSAGE_EXTENSION, MessageSigner
from a2a_grpc.core.errors import InvalidAgentResponseError
from a2a_grpc.core.metadata import EXTENSIONS_KEY, PROTOCOL_VERSION, VERSION_KEY
from a2a_grpc.core.service import method_path
from a2a_grpc.core.tracing import outgoing_headers
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc

MetadataEntries = Sequence[tuple[str, str | bytes]]

DEFAULT_RETRY = RetryPolicy()
"""SendMessage: up to 5 attempts, bounded overall by the call's timeout."""
DEFAULT_RESUME = RetryPolicy(max_attempts=6, deadline_s=60.0)
"""Stream resumption: up to 6 SubscribeToTask attempts within 60 s of a drop."""
_DEFAULT_BACKOFF = Backoff()
_DEFAULT_CHANNEL_OPTIONS = ChannelOptions()


class A2AClient:
    """An A2A client over one `grpc.aio` channel.

    Every call sends `a2a-version: 1.0`, the client's `a2a-extensions` (comma-joined), the
    credentials' entries and the client's and call's extra metadata (keys lowercased). The
    client's tenant (normally the chosen card interface's) is copied into every request whose
    tenant is empty; requests passed in are never mutated.

    Timeouts are seconds; a call's `timeout` overrides the client's `timeout`; None is unbounded.

    Errors: an A2A error class from `a2a_grpc.core.errors` when the agent says no;
    `A2ATransportError` subclasses when we could not talk; `RpcFailedError` for any other failed
    status; `InvalidAgentResponseError` when the agent breaks the protocol's contract.

    Use as `async with A2AClient.connect("host:50051") as client: ...` (or several servers:
    `connect("10.0.0.1:50051,10.0.0.2:50051")`, balanced call by call, see `connect`); a client
    built on a channel you pass in leaves that channel open when it closes.

    `audit` keeps the sender's own audit trail (`client/audit.py`): one record per call, with
    the message's id and hash, `target` (set by `connect`) and the outcome. A path is opened
    here (OSError if it cannot be appended to) and closed with the client; a `ClientAuditLog`
    passed in may be shared by several clients and is closed by its owner.
    """

    def __init__(
        self,
        channel: Any,
        *,
        tenant: str = "",
        extensions: Sequence[str] = (),
        credentials: Credentials | None = None,
        metadata: MetadataEntries = (),
        timeout: float | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
        resume: RetryPolicy | None = DEFAULT_RESUME,
        backoff: Backoff = _DEFAULT_BACKOFF,
        owns_channel: bool = False,
        signer: MessageSigner | None = None,
        audit: str | os.PathLike[str] | ClientAuditLog | None = None,
        target: str = "",
    ) -> None:
        # Opened first: a path that cannot be appended to leaves nothing half made.
        self._owns_audit = audit is not None and not isinstance(audit, ClientAuditLog)
        self._audit: ClientAuditLog | None = (
            audit if audit is None or isinstance(audit, ClientAuditLog) else ClientAuditLog(audit)
        )
        self.target = target
        self._channel = channel
        self._owns_channel = owns_channel
        self.tenant = tenant
        self._signer = signer
        if signer is not None and SIGNED_MESSAGE_EXTENSION not in extensions:
            extensions = (*extensions, SIGNED_MESSAGE_EXTENSION)
        self._extensions = tuple(extensions)
        self._credentials = credentials
        self._metadata = _lowercased(metadata)
        self._timeout = timeout
        self._retry = retry
        self._resume = resume
        self._backoff = backoff
        self._stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        # SendMessage and the streams are read as raw bytes: only there can a response with two
        # payload members still be seen (see events.py).
        self._send_raw = channel.unary_unary(
            method_path("SendMessage"),
            request_serializer=a2a_pb2.SendMessageRequest.SerializeToString,
            response_deserializer=None,
        )
        self._send_stream_raw = channel.unary_stream(
            method_path("SendStreamingMessage"),
            request_serializer=a2a_pb2.SendMessageRequest.SerializeToString,
            response_deserializer=None,
        )
        self._subscribe_raw = channel.unary_stream(
            method_path("SubscribeToTask"),
            request_serializer=a2a_pb2.SubscribeToTaskRequest.SerializeToString,
            response_deserializer=None,
        )

    @classmethod
    def connect(
        cls,
        target: str,
        *,
        tls: TlsConfig | None = None,
        channel_options: ChannelOptions = _DEFAULT_CHANNEL_OPTIONS,
        **kwargs: Any,
    ) -> A2AClient:
        """A client on a new channel to `target`, closed with the client.

        `target` is `host:port`; several servers as a comma-separated list of IP addresses
        (`10.0.0.1:50051,10.0.0.2:50051`); or `dns:///name:port` for a name whose records list
        several servers. A list or a `dns:` name is balanced call by call with `round_robin`
        unless `channel_options.lb_policy` says otherwise; one address uses `pick_first`.
        ValueError for a target `create_channel` refuses (a list with a host name or two IP
        families; TLS to a list without `TlsConfig.server_name_override`).
        """
        channel = create_channel(target, tls=tls, options=channel_options)
        kwargs.setdefault("target", target)
        return cls(channel, owns_channel=True, **kwargs)

    @classmethod
    def for_card(
        cls,
        card: a2a_pb2.AgentCard,
        *,
        tls: TlsConfig | None = None,
        channel_options: ChannelOptions = _DEFAULT_CHANNEL_OPTIONS,
        **kwargs: Any,
    ) -> A2AClient:
        """A client for the card's first A2A 1.0 GRPC interface, with that interface's tenant.

        Raises AgentCardError when the card has no usable GRPC interface.
        """
        interface = grpc_interface(card)
        kwargs.setdefault("tenant", interface.tenant)
        return cls.connect(interface.url, tls=tls, channel_options=channel_options, **kwargs)

    async def close(self) -> None:
        """Closes the channel if this client created it (pending calls are cancelled), and the
        audit trail if it opened it (its records are written first)."""
        if self._owns_channel:
            await self._channel.close()
        if self._owns_audit and self._audit is not None:
            await self._audit.aclose()

    async def __aenter__(self) -> A2AClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    # --- the RPCs, in the proto's declaration order --------------------------------------------

    async def send_message(
        self,
        request: a2a_pb2.SendMessageRequest | a2a_pb2.Message,
        *,
        timeout: float | None = None,
        metadata: MetadataEntries = (),
        retry: RetryPolicy | None = None,
    ) -> a2a_pb2.Task | a2a_pb2.Message:
        """SendMessage: the task (blocking by default: settled) or the agent's direct answer.

        Retried on could-not-talk errors with the same message_id (one is minted if empty) under
        `retry` (the client's by default); `timeout` is the one deadline for all attempts.
        """
        send = self._prepare_send(request)
        entries = await self._call_metadata(metadata)
        attempts = 0

        async def attempt(remaining: float | None) -> bytes:
            nonlocal attempts
            attempts += 1
            try:
                raw: bytes = await self._send_raw(send, timeout=remaining, metadata=entries)
            except grpc.aio.AioRpcError as error:
                raise from_rpc_error(error) from error
            return raw

        try:
            raw = await call_with_retry(
                attempt,
                retry or self._retry,
                deadline_s=self._effective_timeout(timeout),
                backoff=self._backoff,
            )
            result = _send_result(send, raw)
        except BaseException as error:
            if self._audit is not None:
                self._record("SendMessage", send, None, error, attempts=attempts)
            raise
        if self._audit is not None:
            self._record("SendMessage", send, result, attempts=attempts)
        return result

    async def send_streaming_message(
        self,
        request: a2a_pb2.SendMessageRequest | a2a_pb2.Message,
        *,
        timeout: float | None = None,
        metadata: MetadataEntries = (),
        resume: RetryPolicy | bool | None = True,
        retry: RetryPolicy | None = None,
    ) -> AsyncIterator[StreamItem]:
        """SendStreamingMessage: yields each event with the running `TaskView`.

        The first event must be a Task or a Message; a continuation (the message names a task)
        may also open with a status or artifact update, as the official SDK server does. A
        stream that fails before its first event with a could-not-talk error is sent again
        with the same message_id under `retry` (the client's by default), as `send_message`
        is: a server that already took the message streams the task it started. If the
        stream ends or breaks after that, before the task is terminal or interrupted, it is
        resumed with SubscribeToTask (never re-sent) under `resume` (True: the client's
        policy; None/False: off); StreamResumeError when that fails. `timeout` bounds the
        whole stream, its retries included.
        """
        send = self._prepare_send(request)
        entries = await self._call_metadata(metadata)
        timeout = self._effective_timeout(timeout)
        deadline = StreamDeadline(timeout, self._backoff.clock)
        attempts = Attempts(retry or self._retry, deadline_s=timeout, backoff=self._backoff)
        attempts.remaining()

        def open_call() -> StreamCall:
            return self._send_stream_raw(send, timeout=deadline.remaining(), metadata=entries)

        view = TaskView(expected_task_id=send.message.task_id)
        mode = Mode.CONTINUATION if send.message.task_id else Mode.SEND
        counts = _StreamCounts(attempts)
        resend = Resend(open_call, attempts)
        stream = self._follow(open_call(), view, mode, entries, deadline, resume, counts, resend)
        async for item in self._audited_stream("SendStreamingMessage", send, view, stream, counts):
            yield item

    async def get_task(
        self,
        request: a2a_pb2.GetTaskRequest | str,
        *,
        timeout: float | None = None,
        metadata: MetadataEntries = (),
    ) -> a2a_pb2.Task:
        """GetTask (a task id may be passed for the request)."""
        if isinstance(request, str):
            request = a2a_pb2.GetTaskRequest(id=request)
        task: a2a_pb2.Task = await self._unary(
            "GetTask", self._stub.GetTask, request, timeout, metadata
        )
        return task

    async def list_tasks(
        self,
        request: a2a_pb2.ListTasksRequest | None = None,
        *,
        timeout: float | None = None,
        metadata: MetadataEntries = (),
    ) -> a2a_pb2.ListTasksResponse:
        """ListTasks (one page; follow `next_page_token` for more)."""
        request = request if request is not None else a2a_pb2.ListTasksRequest()
        response: a2a_pb2.ListTasksResponse = await self._unary(
            "ListTasks", self._stub.ListTasks, request, timeout, metadata
        )
        return response

    async def cancel_task(
        self,
        request: a2a_pb2.CancelTaskRequest | str,
        *,
        timeout: float | None = None,
        metadata: MetadataEntries = (),
    ) -> a2a_pb2.Task:
        """CancelTask: the task after the attempt (not retried: see channel.py)."""
        if isinstance(request, str):
            request = a2a_pb2.CancelTaskRequest(id=request)
        task: a2a_pb2.Task = await self._unary(
            "CancelTask", self._stub.CancelTask, request, timeout, metadata
        )
        return task

    async def subscribe_to_task(
        self,
        request: a2a_pb2.SubscribeToTaskRequest | str,
        *,
        timeout: float | None = None,
        metadata: MetadataEntries = (),
        resume: RetryPolicy | bool | None = True,
    ) -> AsyncIterator[StreamItem]:
        """SubscribeToTask: yields each event with the running view; the first must be the Task.

        Resumption and `timeout` work as in `send_streaming_message`.
        """
        subscribe = self._with_tenant(
            a2a_pb2.SubscribeToTaskRequest(id=request) if isinstance(request, str) else request
        )
        entries = await self._call_metadata(metadata)
        deadline = StreamDeadline(self._effective_timeout(timeout), self._backoff.clock)
        call = self._subscribe_raw(subscribe, timeout=deadline.remaining(), metadata=entries)
        view = TaskView(expected_task_id=subscribe.id)
        counts = _StreamCounts()
        stream = self._follow(call, view, Mode.SUBSCRIBE, entries, deadline, resume, counts)
        async for item in self._audited_stream("SubscribeToTask", subscribe, view, stream, counts):
            yield item

    async def create_task_push_notification_config(
        self,
        request: a2a_pb2.TaskPushNotificationConfig,
        *,
        timeout: float | None = None,
        metadata: MetadataEntries = (),
    ) -> a2a_pb2.TaskPushNotificationConfig:
        """CreateTaskPushNotificationConfig: the stored config with its server-assigned id."""
        config: a2a_pb2.TaskPushNotificationConfig = await self._unary(
            "CreateTaskPushNotificationConfig",
            self._stub.CreateTaskPushNotificationConfig,
            request,
            timeout,
            metadata,
        )
        return config

    async def get_task_push_notification_config(
        self,
        request: a2a_pb2.GetTaskPushNotificationConfigRequest,
        *,
        timeout: float | None = None,
        metadata: MetadataEntries = (),
    ) -> a2a_pb2.TaskPushNotificationConfig:
        """GetTaskPushNotificationConfig."""
        config: a2a_pb2.TaskPushNotificationConfig = await self._unary(
            "GetTaskPushNotificationConfig",
            self._stub.GetTaskPushNotificationConfig,
            request,
            timeout,
            metadata,
        )
        return config

    async def list_task_push_notification_configs(
        self,
        request: a2a_pb2.ListTaskPushNotificationConfigsRequest,
        *,
        timeout: float | None = None,
        metadata: MetadataEntries = (),
    ) -> a2a_pb2.ListTaskPushNotificationConfigsResponse:
        """ListTaskPushNotificationConfigs."""
        response: a2a_pb2.ListTaskPushNotificationConfigsResponse = await self._unary(
            "ListTaskPushNotificationConfigs",
            self._stub.ListTaskPushNotificationConfigs,
            request,
            timeout,
            metadata,
        )
        return response

    async def get_extended_agent_card(
        self,
        request: a2a_pb2.GetExtendedAgentCardRequest | None = None,
        *,
        timeout: float | None = None,
        metadata: MetadataEntries = (),
    ) -> a2a_pb2.AgentCard:
        """GetExtendedAgentCard (the agent requires credentials for it)."""
        request = request if request is not None else a2a_pb2.GetExtendedAgentCardRequest()
        card: a2a_pb2.AgentCard = await self._unary(
            "GetExtendedAgentCard", self._stub.GetExtendedAgentCard, request, timeout, metadata
        )
        return card

    async def delete_task_push_notification_config(
        self,
        request: a2a_pb2.DeleteTaskPushNotificationConfigRequest,
        *,
        timeout: float | None = None,
        metadata: MetadataEntries = (),
    ) -> None:
        """DeleteTaskPushNotificationConfig (idempotent on the server, spec §3.1.10)."""
        _: empty_pb2.Empty = await self._unary(
            "DeleteTaskPushNotificationConfig",
            self._stub.DeleteTaskPushNotificationConfig,
            request,
            timeout,
            metadata,
        )

    # --- internals ----------------------------------------------------------------------------

    async def _unary(
        self,
        rpc: str,
        method: Callable[..., Any],
        request: Any,
        timeout: float | None,
        metadata: MetadataEntries,
    ) -> Any:
        request = self._with_tenant(request)
        entries = await self._call_metadata(metadata)
        try:
            result = await method(
                request, timeout=self._effective_timeout(timeout), metadata=entries
            )
        except grpc.aio.AioRpcError as rpc_error:
            error = from_rpc_error(rpc_error)
            if self._audit is not None:
                self._record(rpc, request, None, error)
            raise error from rpc_error
        except BaseException as error:  # cancelled by the caller
            if self._audit is not None:
                self._record(rpc, request, None, error)
            raise
        if self._audit is not None:
            self._record(rpc, request, result)
        return result

    async def _audited_stream(
        self,
        rpc: str,
        request: Any,
        view: TaskView,
        stream: AsyncIterator[StreamItem],
        counts: _StreamCounts,
    ) -> AsyncIterator[StreamItem]:
        """`stream`, recorded in the audit trail when it ends (however it ends)."""
        if self._audit is None:
            async for item in stream:
                yield item
            return
        try:
            async for item in stream:
                view = item[1]
                yield item
        except BaseException as error:  # GeneratorExit: the caller stopped reading
            self._record(rpc, request, view, error, attempts=counts.sent, resumed=counts.resumed)
            raise
        self._record(rpc, request, view, attempts=counts.sent, resumed=counts.resumed)

    def _record(
        self,
        rpc: str,
        request: Any,
        result: Any,
        error: BaseException | None = None,
        *,
        attempts: int = 1,
        resumed: int = 0,
    ) -> None:
        """One audit record for a call that ended with `result` or raised `error`."""
        assert self._audit is not None
        task_id, state = _settled_as(result)
        if not task_id:
            task_id = getattr(request, "task_id", "") or getattr(request, "id", "")
        outcome, reason = ("OK", "") if error is None else outcome_of(error)
        message = request.message if isinstance(request, a2a_pb2.SendMessageRequest) else None
        if message is not None and not task_id:
            task_id = message.task_id
        self._audit.call(
            method=rpc,
            target=self.target,
            tenant=request.tenant,
            outcome=outcome,
            reason=reason,
            task_id=task_id,
            state=state,
            message=message,
            attempts=attempts,
            resumed=resumed,
        )

    def _follow(
        self,
        call: StreamCall,
        view: TaskView,
        mode: Mode,
        entries: tuple[tuple[str, str | bytes], ...],
        deadline: StreamDeadline,
        resume: RetryPolicy | bool | None,
        counts: _StreamCounts,
        resend: Resend | None = None,
    ) -> AsyncIterator[StreamItem]:
        """`follow` with this client's resume policy, backoff and tenant, and the stream's
        metadata and deadline; `counts` counts the resumptions."""

        def resubscribe(task_id: str) -> StreamCall:
            counts.resumed += 1
            request = self._with_tenant(a2a_pb2.SubscribeToTaskRequest(id=task_id))
            return self._subscribe_raw(request, timeout=deadline.remaining(), metadata=entries)

        async def fetch_task(task_id: str) -> a2a_pb2.Task:
            request = self._with_tenant(a2a_pb2.GetTaskRequest(id=task_id))
            try:
                task: a2a_pb2.Task = await self._stub.GetTask(
                    request, timeout=deadline.remaining(), metadata=entries
                )
            except grpc.aio.AioRpcError as error:
                raise from_rpc_error(error) from error
            return task

        if isinstance(resume, RetryPolicy):
            policy: RetryPolicy | None = resume
        else:
            policy = self._resume if resume else None
        return follow(
            call,
            view,
            mode,
            deadline=deadline,
            policy=policy,
            backoff=self._backoff,
            resubscribe=resubscribe,
            fetch_task=fetch_task,
            resend=resend,
        )

    def _prepare_send(
        self, request: a2a_pb2.SendMessageRequest | a2a_pb2.Message
    ) -> a2a_pb2.SendMessageRequest:
        """A copy with the tenant filled in, a message_id minted when empty, and signed last."""
        send = a2a_pb2.SendMessageRequest()
        if isinstance(request, a2a_pb2.Message):
            send.message.CopyFrom(request)
        else:
            send.CopyFrom(request)
        if not send.message.message_id:
            send.message.message_id = str(uuid.uuid4())
        if not send.tenant:
            send.tenant = self.tenant
        if self._signer is not None:
            send.message.CopyFrom(self._signer.sign(send.message, tenant=send.tenant))
        return send

    def _with_tenant(self, request: Any) -> Any:
        if not self.tenant or request.tenant:
            return request
        copy = type(request)()
        copy.CopyFrom(request)
        copy.tenant = self.tenant
        return copy

    async def _call_metadata(self, extra: MetadataEntries) -> tuple[tuple[str, str | bytes], ...]:
        """The call's metadata, layer by layer; a key set in a later layer replaces every entry
        of that key from the earlier ones (spec decision §9.10), so nothing is sent twice.

        Layers, weakest first: the protocol defaults (`a2a-version`, the client's extensions),
        the credentials, the client's `metadata`, the current trace context, and this call's
        `metadata`.
        """
        defaults: list[tuple[str, str | bytes]] = [(VERSION_KEY, PROTOCOL_VERSION)]
        if self._extensions:
            defaults.append((EXTENSIONS_KEY, ",".join(self._extensions)))
        credentials = (
            _lowercased(await self._credentials.metadata()) if self._credentials is not None else []
        )
        # The caller's trace continues on the agent's side.
        layers = (defaults, credentials, self._metadata, outgoing_headers(), _lowercased(extra))
        entries: list[tuple[str, str | bytes]] = []
        for layer in layers:
            if layer:
                keys = {key for key, _ in layer}
                entries = [entry for entry in entries if entry[0] not in keys]
                entries += layer
        return tuple(entries)

    def _effective_timeout(self, timeout: float | None) -> float | None:
        return timeout if timeout is not None else self._timeout


@dataclass
class _StreamCounts:
    """What a stream's audit record counts: the sends made (`attempts`, None for a
    subscription) and how many times it was resumed."""

    attempts: Attempts | None = None
    resumed: int = 0

    @property
    def sent(self) -> int:
        return 1 if self.attempts is None else self.attempts.made


def _lowercased(entries: MetadataEntries) -> list[tuple[str, str | bytes]]:
    return [(key.lower(), value) for key, value in entries]


def _send_result(send: a2a_pb2.SendMessageRequest, raw: bytes) -> a2a_pb2.Task | a2a_pb2.Message:
    """SendMessage's answer; InvalidAgentResponseError when it breaks the protocol."""
    response = decode_send_message_response(raw)
    if response.HasField("message"):
        return response.message
    task = response.task
    if not task.id:
        raise InvalidAgentResponseError("SendMessage returned a Task without an id")
    if send.message.task_id and task.id != send.message.task_id:
        raise InvalidAgentResponseError(
            f"SendMessage for task {send.message.task_id!r} returned task {task.id!r}"
        )
    return task


def _settled_as(result: Any) -> tuple[str, str]:
    """(task id, state) an audit record names for a call's result (a Task, a Message or a
    stream's TaskView); ("", "") for anything else."""
    if isinstance(result, a2a_pb2.Task):
        return result.id, a2a_pb2.TaskState.Name(result.status.state)
    if isinstance(result, a2a_pb2.Message):
        return result.task_id, DIRECT_REPLY
    if isinstance(result, TaskView):
        if result.message is not None:
            return result.task_id, DIRECT_REPLY
        if result.task is not None:
            return result.task_id, a2a_pb2.TaskState.Name(result.state)
        return result.task_id, ""
    return "", ""
