"""`A2AClient`: one typed async method per A2A RPC, with metadata, tenant, retry and resumption."""

# A call's `timeout` becomes the gRPC deadline the server sees; asyncio.timeout cannot do that.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, cast

import httpx
from google.protobuf import empty_pb2

from a2a_grpc.client.audit import DIRECT_REPLY, ClientAuditLog, outcome_of
from a2a_grpc.client.card import (
    DEFAULT_CARD_TIMEOUT_S,
    DEFAULT_TRANSPORTS,
    GRPC_BINDING,
    CardResolver,
    select_interface,
)
from a2a_grpc.client.channel import ChannelOptions, TlsConfig, create_channel
from a2a_grpc.client.credentials import Credentials
from a2a_grpc.client.follow import Mode, Resend, StreamCall, StreamDeadline, StreamItem, follow
from a2a_grpc.client.reducer import TaskView
from a2a_grpc.client.retry import Attempts, Backoff, RetryPolicy, call_with_retry
from a2a_grpc.client.signing import SIGNED_MESSAGE_EXTENSION, MessageSigner
from a2a_grpc.client.transports.base import Transport
from a2a_grpc.client.transports.grpc import GrpcTransport
from a2a_grpc.client.transports.http import create_http_client
from a2a_grpc.client.transports.opening import open_transport
from a2a_grpc.core.errors import InvalidAgentResponseError
from a2a_grpc.core.event_ids import LAST_EVENT_ID_KEY
from a2a_grpc.core.metadata import EXTENSIONS_KEY, PROTOCOL_VERSION, VERSION_KEY, major_minor
from a2a_grpc.core.tracing import outgoing_headers
from a2a_grpc.generated import a2a_pb2

MetadataEntries = Sequence[tuple[str, str | bytes]]

DEFAULT_RETRY = RetryPolicy()
"""SendMessage: up to 5 attempts, bounded overall by the call's timeout."""
DEFAULT_RESUME = RetryPolicy(max_attempts=6, deadline_s=60.0)
"""Stream resumption: up to 6 SubscribeToTask attempts within 60 s of a drop."""
_DEFAULT_BACKOFF = Backoff()
_DEFAULT_CHANNEL_OPTIONS = ChannelOptions()


class A2AClient:
    """An A2A client over one transport: gRPC, JSON-RPC or HTTP+JSON (`client/transports`).

    The typed methods, the protobuf objects they take and return, the errors, retry, stream
    resumption, credentials, signing and the audit trail are the same on every transport.

    Every call sends `a2a-version: 1.0`, the client's `a2a-extensions` (comma-joined), the
    credentials' entries and the client's and call's extra metadata (keys lowercased; gRPC
    metadata, or HTTP headers on the HTTP bindings: `A2A-Version`, `A2A-Extensions`,
    `Authorization`, `traceparent`). The
    client's tenant (normally the chosen card interface's) is copied into every request whose
    tenant is empty; requests passed in are never mutated.

    Timeouts are seconds; a call's `timeout` overrides the client's `timeout`; None is unbounded.

    Errors: an A2A error class from `a2a_grpc.core.errors` when the agent says no;
    `A2ATransportError` subclasses when we could not talk; `RpcFailedError` for any other failed
    status; `InvalidAgentResponseError` when the agent breaks the protocol's contract.

    Use as `async with A2AClient.connect("host:50051") as client: ...` (gRPC; or several
    servers: `connect("10.0.0.1:50051,10.0.0.2:50051")`, balanced call by call, see `connect`),
    `async with A2AClient.connect("https://agent.example") as client` (the agent's card picks
    the transport, see `connect`), or `A2AClient.for_card(card)` with a card you fetched. A
    client built on a channel or transport you pass in leaves it open when it closes.
    `interface` is the interface the client talks to.

    `audit` keeps the sender's own audit trail (`client/audit.py`): one record per call, with
    the message's id and hash, `target` (set by `connect`) and the outcome. A path is opened
    here (OSError if it cannot be appended to) and closed with the client; a `ClientAuditLog`
    passed in may be shared by several clients and is closed by its owner.
    """

    def __init__(
        self,
        channel: Any = None,
        *,
        transport: Transport | None = None,
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
        owns_transport: bool = False,
        card_target: CardTarget | None = None,
    ) -> None:
        # Opened first: a path that cannot be appended to leaves nothing half made.
        self._owns_audit = audit is not None and not isinstance(audit, ClientAuditLog)
        self._audit: ClientAuditLog | None = (
            audit if audit is None or isinstance(audit, ClientAuditLog) else ClientAuditLog(audit)
        )
        self.target = target
        """What this client calls, as given (`connect`'s target, a card's URL, or with
        `for_card` the interface's url); the audit trail names it. Informational only."""
        self._card_target = card_target
        owned = owns_transport or transport is None
        if transport is None and card_target is None:
            if channel is None:
                raise TypeError("A2AClient needs a channel or a transport")
            interface = a2a_pb2.AgentInterface(
                url=target, protocol_binding=GRPC_BINDING, protocol_version=PROTOCOL_VERSION
            )
            transport = GrpcTransport(channel, owns_channel=owns_channel, interface=interface)
        self._transport: Transport | None = transport
        self._owns_transport = owned
        self._resolving: asyncio.Lock | None = None
        self.tenant = tenant
        """The tenant put into every request that names none: the one given, else that of the
        card's interface the client picked; empty: requests go as they are."""
        self._signer = signer
        if signer is not None and SIGNED_MESSAGE_EXTENSION not in extensions:
            extensions = (*extensions, SIGNED_MESSAGE_EXTENSION)
        self._extensions = tuple(extensions)
        self._credentials = credentials
        self._metadata = _lowercased(metadata)
        self._timeout = timeout
        self._fixed: tuple[Transport | None, tuple[tuple[str, str | bytes], ...]] | None = None
        self._retry = retry
        self._resume = resume
        self._backoff = backoff

    @classmethod
    def connect(
        cls,
        target: str,
        *,
        tls: TlsConfig | None = None,
        channel_options: ChannelOptions = _DEFAULT_CHANNEL_OPTIONS,
        transports: Sequence[str] = DEFAULT_TRANSPORTS,
        client_preference: bool = False,
        card_timeout_s: float = DEFAULT_CARD_TIMEOUT_S,
        **kwargs: Any,
    ) -> A2AClient:
        """A client to `target`, with a transport of its own, closed with the client.

        A gRPC `target` is `host:port`; several servers as a comma-separated list of IP
        addresses (`10.0.0.1:50051,10.0.0.2:50051`); or `dns:///name:port` for a name whose
        records list several servers. A list or a `dns:` name is balanced call by call with
        `round_robin` unless `channel_options.lb_policy` says otherwise; one address uses
        `pick_first`. ValueError for a target `create_channel` refuses (a list with a host name
        or two IP families; TLS to a list without `TlsConfig.server_name_override`).

        An `http://` or `https://` `target` is an agent card's URL (or the origin serving
        `/.well-known/agent-card.json`). `connect` is synchronous, so the card is read later:
        on `async with` (or `await client.resolve()`, or else the first call), with `tls` for
        the fetch too, and the interface is picked as `for_card` picks it (`transports`,
        `client_preference`); the card's errors (AgentCardError, could-not-talk) surface
        there. `A2AClient.from_card_url` does the same in one await.
        """
        if target.startswith(("http://", "https://")):
            kwargs.setdefault("target", target)
            lazy = CardTarget(
                target, tls, channel_options, tuple(transports), client_preference, card_timeout_s
            )
            return cls(card_target=lazy, **kwargs)
        channel = create_channel(target, tls=tls, options=channel_options)
        kwargs.setdefault("target", target)
        return cls(channel, owns_channel=True, **kwargs)

    @classmethod
    def for_card(
        cls,
        card: a2a_pb2.AgentCard,
        *,
        transports: Sequence[str] = DEFAULT_TRANSPORTS,
        client_preference: bool = False,
        tls: TlsConfig | None = None,
        channel_options: ChannelOptions = _DEFAULT_CHANNEL_OPTIONS,
        http: httpx.AsyncClient | None = None,
        **kwargs: Any,
    ) -> A2AClient:
        """A client for the card's interface this client speaks, with that interface's tenant.

        `transports` are the bindings the client may use (`grpc`, `jsonrpc`, `http+json`); the
        interface is picked by `select_interface` (client/card.py): an A2A 1.0 interface over a
        0.3 one, then the card's order (the agent's preference, spec §8.3.2), or with
        `client_preference` the order of `transports`. `tls` applies to any binding (gRPC
        channel credentials, or the HTTPS context); `http` is an httpx client to share for an
        HTTP binding (left open by the client). `client.interface` is the one picked.

        Raises AgentCardError, listing what the card offers, when no interface is acceptable.
        """
        interface = select_interface(card, transports, client_preference=client_preference)
        transport = open_transport(interface, tls=tls, channel_options=channel_options, http=http)
        kwargs.setdefault("tenant", interface.tenant)
        kwargs.setdefault("target", interface.url)
        return cls(transport=transport, owns_transport=True, **kwargs)

    @classmethod
    async def from_card_url(
        cls,
        url: str,
        *,
        resolver: CardResolver | None = None,
        tls: TlsConfig | None = None,
        card_timeout_s: float = DEFAULT_CARD_TIMEOUT_S,
        **kwargs: Any,
    ) -> A2AClient:
        """`for_card` with the card at `url` (an origin or the card's URL), fetched with
        `resolver` (else a one-off resolver whose HTTPS uses `tls`). Card errors as in
        `CardResolver.get`; ValueError for a `url` that is no http(s) URL."""
        if resolver is not None:
            card = await resolver.get(url)
        else:
            async with (
                create_http_client(tls) as http,
                CardResolver(http, timeout_s=card_timeout_s) as own,
            ):
                card = await own.get(url)
        kwargs.setdefault("target", url)
        return cls.for_card(card, tls=tls, **kwargs)

    @property
    def interface(self) -> a2a_pb2.AgentInterface:
        """The interface this client talks to: its url, binding, protocol version and tenant.

        For a client made by `connect(URL)`, known once the card is read (RuntimeError before:
        use `async with` or `await client.resolve()` first)."""
        if self._transport is None:
            raise RuntimeError("the agent card has not been read yet: await client.resolve()")
        return self._transport.interface

    async def resolve(self) -> a2a_pb2.AgentInterface:
        """Reads the agent card and opens the transport, if `connect(URL)` left that for later;
        the interface picked."""
        return (await self._ready()).interface

    async def close(self) -> None:
        """Closes the transport if this client created it (pending calls are cancelled), and
        the audit trail if it opened it (its records are written first)."""
        if self._transport is not None and self._owns_transport:
            await self._transport.close()
        if self._owns_audit and self._audit is not None:
            await self._audit.aclose()

    async def __aenter__(self) -> A2AClient:
        if self._transport is None:
            try:
                await self._ready()
            except BaseException:
                await self.close()
                raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def _ready(self) -> Transport:
        """The transport, opened from the agent card first if `connect(URL)` deferred it."""
        if self._transport is not None:
            return self._transport
        if self._resolving is None:
            self._resolving = asyncio.Lock()
        async with self._resolving:
            if self._transport is None:
                lazy = self._card_target
                assert lazy is not None
                async with (
                    create_http_client(lazy.tls) as http,
                    CardResolver(http, timeout_s=lazy.card_timeout_s) as resolver,
                ):
                    card = await resolver.get(lazy.url)
                interface = select_interface(
                    card, lazy.transports, client_preference=lazy.client_preference
                )
                self._transport = open_transport(
                    interface, tls=lazy.tls, channel_options=lazy.channel_options
                )
                if not self.tenant:
                    self.tenant = interface.tenant
        return self._transport

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
        transport = self._transport or await self._ready()
        send = self._prepare_send(request)
        entries = await self._call_metadata(metadata)
        attempts = 0

        async def attempt(remaining: float | None) -> Any:
            nonlocal attempts
            attempts += 1
            return await transport.call("SendMessage", send, timeout=remaining, metadata=entries)

        try:
            response = await call_with_retry(
                attempt,
                retry or self._retry,
                deadline_s=self._effective_timeout(timeout),
                backoff=self._backoff,
            )
            result = _send_result(send, response)
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
    ) -> AsyncGenerator[StreamItem, None]:
        """SendStreamingMessage: yields each event with the running `TaskView`.

        The first event must be a Task or a Message; a continuation (the message names a task)
        may also open with a status or artifact update, as the official SDK server does. A
        stream that fails before its first event with a could-not-talk error (any
        `A2ATransportError`, a stream a proxy removed or reset included: `StreamLostError`) is
        sent again with the same message_id under `retry` (the client's by default), as
        `send_message` is: a server that already took the message streams the task it
        started; so is one the server ends later with an error it marks retryable (e.g. its
        agent could not take the message now), the events then starting over. If the stream
        ends or breaks after its first event, before the task is terminal or interrupted, it is
        resumed with SubscribeToTask (never re-sent) under `resume` (True: the client's policy;
        None/False: off); StreamResumeError when that fails. `timeout` bounds the whole
        stream, its retries included.
        """
        transport = self._transport or await self._ready()
        send = self._prepare_send(request)
        entries = await self._call_metadata(metadata)
        timeout = self._effective_timeout(timeout)
        deadline = StreamDeadline(timeout, self._backoff.clock)
        attempts = Attempts(retry or self._retry, deadline_s=timeout, backoff=self._backoff)
        attempts.remaining()

        def open_call() -> StreamCall:
            return transport.stream(
                "SendStreamingMessage", send, timeout=deadline.remaining(), metadata=entries
            )

        view = TaskView(expected_task_id=send.message.task_id)
        mode = Mode.CONTINUATION if send.message.task_id else Mode.SEND
        counts = _StreamCounts(attempts)
        resend = Resend(open_call, attempts)
        stream = self._follow(
            transport, open_call(), view, mode, entries, deadline, resume, counts, resend
        )
        if self._audit is not None:
            stream = self._audited_stream("SendStreamingMessage", send, view, stream, counts)
        async with contextlib.aclosing(stream):
            async for item in stream:
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
        task: a2a_pb2.Task = await self._unary("GetTask", request, timeout, metadata)
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
            "ListTasks", request, timeout, metadata
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
        task: a2a_pb2.Task = await self._unary("CancelTask", request, timeout, metadata)
        return task

    async def subscribe_to_task(
        self,
        request: a2a_pb2.SubscribeToTaskRequest | str,
        *,
        timeout: float | None = None,
        metadata: MetadataEntries = (),
        resume: RetryPolicy | bool | None = True,
        after: str | None = None,
    ) -> AsyncGenerator[StreamItem, None]:
        """SubscribeToTask: yields each event with the running view; the first must be the Task.

        `after`: the last event id a caller saw (`core.event_ids.event_id`): the events after
        it, no snapshot first; from a snapshot (`view.resumed_from_snapshot`) when the server no
        longer keeps them. Resumption and `timeout` work as in `send_streaming_message`.
        """
        transport = self._transport or await self._ready()
        subscribe = self._with_tenant(
            a2a_pb2.SubscribeToTaskRequest(id=request) if isinstance(request, str) else request
        )
        entries = await self._call_metadata(metadata)
        deadline = StreamDeadline(self._effective_timeout(timeout), self._backoff.clock)
        opening = entries if after is None else (*entries, (LAST_EVENT_ID_KEY, after))
        call = transport.stream(
            "SubscribeToTask", subscribe, timeout=deadline.remaining(), metadata=opening
        )
        view, counts = TaskView(expected_task_id=subscribe.id), _StreamCounts()
        mode = Mode.SUBSCRIBE if after is None else Mode.REPLAY
        stream = self._follow(transport, call, view, mode, entries, deadline, resume, counts)
        if self._audit is not None:
            stream = self._audited_stream("SubscribeToTask", subscribe, view, stream, counts)
        async with contextlib.aclosing(stream):
            async for item in stream:
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
            "GetExtendedAgentCard", request, timeout, metadata
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
            request,
            timeout,
            metadata,
        )

    # --- internals ----------------------------------------------------------------------------

    async def _unary(
        self,
        rpc: str,
        request: Any,
        timeout: float | None,
        metadata: MetadataEntries,
    ) -> Any:
        transport = self._transport or await self._ready()
        request = self._with_tenant(request)
        entries = await self._call_metadata(metadata)
        try:
            result = await transport.call(
                rpc, request, timeout=self._effective_timeout(timeout), metadata=entries
            )
        except BaseException as error:  # the agent's error, could-not-talk, or cancelled
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
        stream: AsyncGenerator[StreamItem, None],
        counts: _StreamCounts,
    ) -> AsyncGenerator[StreamItem, None]:
        """`stream`, recorded in the audit trail when it ends (however it ends), and closed
        with this generator: a caller that stops reading and closes it closes the stream's
        call now, in order, not whenever the event loop collects what is left."""
        async with contextlib.aclosing(stream):
            try:
                async for item in stream:
                    view = item[1]
                    yield item
            except BaseException as error:  # GeneratorExit: the caller stopped reading
                self._record(
                    rpc, request, view, error, attempts=counts.sent, resumed=counts.resumed
                )
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
        transport: Transport,
        call: StreamCall,
        view: TaskView,
        mode: Mode,
        entries: tuple[tuple[str, str | bytes], ...],
        deadline: StreamDeadline,
        resume: RetryPolicy | bool | None,
        counts: _StreamCounts,
        resend: Resend | None = None,
    ) -> AsyncGenerator[StreamItem, None]:
        """`follow` with this client's resume policy, backoff and tenant, and the stream's
        metadata and deadline; `counts` counts the resumptions."""

        def resubscribe(task_id: str, after: str | None) -> StreamCall:
            counts.resumed += 1
            request = self._with_tenant(a2a_pb2.SubscribeToTaskRequest(id=task_id))
            resumed = entries if after is None else (*entries, (LAST_EVENT_ID_KEY, after))
            return transport.stream(
                "SubscribeToTask", request, timeout=deadline.remaining(), metadata=resumed
            )

        async def fetch_task(task_id: str) -> a2a_pb2.Task:
            request = self._with_tenant(a2a_pb2.GetTaskRequest(id=task_id))
            task = await transport.call(
                "GetTask", request, timeout=deadline.remaining(), metadata=entries
            )
            return cast(a2a_pb2.Task, task)

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
        credentials = (
            _lowercased(await self._credentials.metadata()) if self._credentials is not None else []
        )
        trace = outgoing_headers()  # the caller's trace continues on the agent's side
        if not (credentials or trace or extra):
            return self._fixed_metadata()  # the layers that are the same on every call
        defaults: list[tuple[str, str | bytes]] = [(VERSION_KEY, self._protocol_version())]
        if self._extensions:
            defaults.append((EXTENSIONS_KEY, ",".join(self._extensions)))
        return _layered((defaults, credentials, self._metadata, trace, _lowercased(extra)))

    def _fixed_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
        """The protocol defaults and the client's `metadata`, layered, kept for the transport
        they were made for (the version follows its interface)."""
        fixed = self._fixed
        if fixed is None or fixed[0] is not self._transport:
            defaults: list[tuple[str, str | bytes]] = [(VERSION_KEY, self._protocol_version())]
            if self._extensions:
                defaults.append((EXTENSIONS_KEY, ",".join(self._extensions)))
            fixed = self._fixed = (self._transport, _layered((defaults, self._metadata)))
        return fixed[1]

    def _protocol_version(self) -> str:
        """The `a2a-version` calls send: the interface's Major.Minor (`0.3` to an A2A 0.3
        interface), `1.0` when it states none."""
        stated = "" if self._transport is None else self._transport.interface.protocol_version
        return major_minor(stated) or PROTOCOL_VERSION

    def _effective_timeout(self, timeout: float | None) -> float | None:
        return timeout if timeout is not None else self._timeout


@dataclass(frozen=True)
class CardTarget:
    """What `A2AClient.connect(URL)` needs to read the card and open a transport later."""

    url: str
    tls: TlsConfig | None
    channel_options: ChannelOptions
    transports: tuple[str, ...]
    client_preference: bool
    card_timeout_s: float


@dataclass
class _StreamCounts:
    """What a stream's audit record counts: the sends made (`attempts`, None for a
    subscription) and how many times it was resumed."""

    attempts: Attempts | None = None
    resumed: int = 0

    @property
    def sent(self) -> int:
        return 1 if self.attempts is None else self.attempts.made


def _layered(
    layers: Sequence[Sequence[tuple[str, str | bytes]]],
) -> tuple[tuple[str, str | bytes], ...]:
    """The layers' entries; a key in a later layer replaces every entry of that key before."""
    entries: list[tuple[str, str | bytes]] = []
    for layer in layers:
        if layer:
            keys = {key for key, _ in layer}
            entries = [entry for entry in entries if entry[0] not in keys]
            entries += layer
    return tuple(entries)


def _lowercased(entries: MetadataEntries) -> list[tuple[str, str | bytes]]:
    return [(key.lower(), value) for key, value in entries]


def _send_result(
    send: a2a_pb2.SendMessageRequest, response: a2a_pb2.SendMessageResponse
) -> a2a_pb2.Task | a2a_pb2.Message:
    """SendMessage's answer; InvalidAgentResponseError when it breaks the protocol."""
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
