"""The call gate: the one sequence every A2A call passes through once, whatever its transport.

A transport (gRPC 1.0, gRPC 0.3, JSON-RPC, HTTP+JSON) reads a call's service parameters, then:

    call = gate.begin(rpc, params, transport, stream=False)   # the span opens, the clock starts
    try:
        context, activated = call.admit()   # drain, capacity, principal, audit, version, extensions
        call.parsed(request)                # what the log and the audit record name
        result = await handler_method(request, context)
    except Exception as exc:
        error = call.failed(exc)            # the StatusError to answer with
    except BaseException:
        call.cancelled()                    # the caller went away, or the server is stopping
        raise
    else:
        call.ok(result)

A stream tells the gate its first event (`call.first_event`), which names the task. Exactly one
of `ok`, `failed` and `cancelled` ends a call: it puts the task and context ids and the status on
the span and ends it, writes the audit record, counts the metric sample and gives the capacity
slot back. So spans, audit records, metric samples, log fields and capacity are the same on
every binding; transports keep only decoding, encoding and how they report an error.

Plain methods on a slotted object, no context managers: this is on every call's path, and
`make perf` judges it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Sequence
from time import perf_counter
from typing import Any, NamedTuple, Protocol

from opentelemetry import context as otel_context
from opentelemetry.trace import Span

from a2a_grpc.core import metadata as service_params
from a2a_grpc.core.errors import (
    InternalError,
    ResourceExhaustedError,
    ServiceUnavailableError,
    StatusError,
    UnauthenticatedError,
    VersionNotSupportedError,
)
from a2a_grpc.core.service import SERVICE_NAME, V03_SERVICE_NAME
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.protocol import log_context
from a2a_grpc.server.protocol.call_context import CallContext
from a2a_grpc.server.protocol.fairness import Share, Shares
from a2a_grpc.server.protocol.ignored_fields import IgnoredFields
from a2a_grpc.server.protocol.spans import RpcTracing, annotate, failed, task_id_of
from a2a_grpc.server.push.configs import V10
from a2a_grpc.server.tasks.base import StoreFullError, StoreUnavailableError
from a2a_grpc.server.tasks.broker import SubscriberOverflowError
from a2a_grpc.server.trust.audit import AuditLog
from a2a_grpc.server.trust.auth import AuthenticationError, current_principal

log = logging.getLogger(__name__)

INTERNAL_MESSAGE = "internal error: the server failed to handle this request"
DRAINING_MESSAGE = "the server is shutting down; try again"
AUDIT_RETRY_DELAY = 1.0
"""Seconds a caller refused because the audit trail cannot be written is told to wait."""
STORE_FULL_RETRY_DELAY = 1.0
"""Seconds a caller refused for a full store is told to wait (finished tasks expire meanwhile)."""
STORE_DOWN_RETRY_DELAY = 1.0
"""RetryInfo of UNAVAILABLE when the shared task store (Redis) does not answer."""
AT_CAPACITY_RETRY_DELAY = 1.0
"""Seconds a caller refused at max_concurrent_calls / max_open_streams is told to wait: a burst
of demo-agent calls at the default limit drains in well under that."""
REFUSAL_LOG_INTERVAL = 10.0
"""At most one warning per this many seconds while calls or streams are being refused."""
SPAN_SYSTEMS = {"grpc": "grpc", "grpc-0.3": "grpc", "jsonrpc": "jsonrpc", "http": "http"}
"""Each transport (the metrics' `transport` label) -> its spans' `rpc.system`."""
_SERVED_VERSIONS: set[str] = set()
"""a2a-version values already found acceptable, so the common case is one set lookup (without
it, 10.8k more instructions per blocking SendMessage, +2.4%, tests.load.instructions)."""


class ServiceParams(NamedTuple):
    """The service parameters the gate acts on, as a transport read them (no validation yet):
    `a2a-version`, every `a2a-extensions` value, and the W3C trace context entries."""

    version: str | None
    extension_values: Sequence[str]
    trace_headers: Sequence[tuple[str, str]]
    last_event_id: str | None = None
    """The event id a stream resumes after (core/event_ids.py), as the transport read it."""


NO_PARAMS = ServiceParams(None, (), ())
"""The parameters of a request refused before its parameters were read."""


class CallMetrics(Protocol):
    """Where the gate counts every finished call (the server's metrics: ops/metrics.py's
    RpcMetrics). Called on the server's event loop only."""

    def observe(self, rpc: str, code: str, transport: str, seconds: float) -> None:
        """Counts one finished call of `rpc` on `transport` (a stream counts when it ends),
        which ended with status `code` after `seconds`."""


class CallGate:
    """Admission, identity, version, extensions, tracing, audit and metrics of every call.

    Admission: at most `max_calls` unary calls and, counted apart, `max_streams` streams are
    handled at once, over every transport together; past either, a call is refused at once
    with RESOURCE_EXHAUSTED, retryable, with RetryInfo. A stream also takes a share of its
    principal's and its tenant's (`shares`, fairness.py; and of their replays, for a resumed
    SubscribeToTask), refused the same way past a cap, once its request names the tenant
    (`parsed`). Once `close()`d (the shutdown grace is over), every new call is refused with
    UNAVAILABLE.
    """

    def __init__(
        self,
        *,
        max_calls: int,
        max_streams: int,
        declared_extensions: Collection[str] = (),
        strict_version: bool = False,
        v03_over_grpc: bool = False,
        audit: AuditLog | None = None,
        metrics: CallMetrics | None = None,
        shares: Shares | None = None,
    ) -> None:
        self.max_calls = max_calls
        self.max_streams = max_streams
        self.declared_extensions = frozenset(declared_extensions)
        self.strict_version = strict_version
        self.v03_over_grpc = v03_over_grpc
        """A2A 0.3's service is served on the gRPC port too (what a refusal of a request
        without a version tells its caller)."""
        self.audit = audit
        self.metrics = metrics
        """Where every finished call is counted; None: nowhere."""
        self.shares = shares
        """Streams and replays by principal and tenant; None: no caps but `max_streams`."""
        self.ignored_fields = IgnoredFields()
        """Request members the JSON bindings ignored as unknown (spec §5.7), by name."""
        self.tracing = RpcTracing()
        self.closed = False
        self.calls = 0
        """Unary calls being handled now."""
        self.streams = 0
        """Streams open now."""
        self._last_refusal_log = float("-inf")

    def close(self) -> None:
        """From now on every new call is refused with UNAVAILABLE (calls admitted go on)."""
        self.closed = True

    def begin(
        self, rpc: str, params: ServiceParams, transport: str, *, stream: bool = False
    ) -> Call:
        """Starts one call of `rpc` (named as in the 1.0 service) on `transport` (`grpc`,
        `grpc-0.3`, `jsonrpc`, `http`): its clock and its span. Never raises."""
        return Call(self, rpc, params, transport, stream)

    def _unversioned(self, transport: str) -> str:
        """Why a call without a version is refused (`--strict-version`), truthfully for its
        transport: over gRPC 0.3 has a service of its own on the same port."""
        if transport.startswith("grpc"):
            said = "no a2a-version metadata: a request without it means A2A 0.3"
            if self.v03_over_grpc:
                return (
                    f"{said}, which this port serves on A2A 0.3's own service, "
                    f"{V03_SERVICE_NAME}, not on this one ({SERVICE_NAME}, "
                    "A2A 1.0, which --strict-version keeps to callers that say so): send "
                    "a2a-version: 1.0, or call the 0.3 service"
                )
            return (
                f"{said}, which this server does not serve (--no-compat-03); send a2a-version: 1.0"
            )
        said = "no A2A-Version header: a request without it means A2A 0.3"
        if self.v03_over_grpc:
            return (
                f"{said}, which this server serves over gRPC only "
                f"({V03_SERVICE_NAME} on its gRPC port), not over HTTP; send "
                "A2A-Version: 1.0"
            )
        return f"{said}, which this server does not serve; send A2A-Version: 1.0"

    def at_capacity(self, kind: str) -> ResourceExhaustedError:
        """The refusal for a call or stream past its limit (warned about now and then)."""
        now = time.monotonic()
        if now - self._last_refusal_log >= REFUSAL_LOG_INTERVAL:
            self._last_refusal_log = now
            log.warning(
                "at capacity: refusing new %s with RESOURCE_EXHAUSTED (%d calls, %d streams "
                "open; limits %d and %d)",
                kind,
                self.calls,
                self.streams,
                self.max_calls,
                self.max_streams,
            )
        return ResourceExhaustedError(
            f"the server is handling as many {kind} as it takes at once; retry after the delay "
            "in RetryInfo",
            retry_delay=AT_CAPACITY_RETRY_DELAY,
        )

    def check_version(self, version: str | None, transport: str = "grpc") -> None:
        """Refuses an `a2a-version` this server does not speak (none at all means 0.3, refused
        only with `strict_version`, saying where this server serves 0.3: over `transport`'s
        port or not)."""
        if version is None or not version.strip():
            if self.strict_version:
                raise VersionNotSupportedError(
                    self._unversioned(transport),
                    metadata={"supportedVersions": service_params.PROTOCOL_VERSION},
                )
            return
        if version in _SERVED_VERSIONS:
            return
        if service_params.major_minor(version) in service_params.SUPPORTED_VERSIONS:
            if len(_SERVED_VERSIONS) < 64:  # remember a few spellings ("1.0", "1.0.2", ...)
                _SERVED_VERSIONS.add(version)
            return
        raise VersionNotSupportedError(
            f"a2a-version {version!r} is not supported: this server speaks A2A "
            f"{service_params.PROTOCOL_VERSION}",
            metadata={"supportedVersions": service_params.PROTOCOL_VERSION},
        )


class Call:
    """One call through the gate; see the module docstring for the sequence."""

    __slots__ = (
        "_counted",
        "_share",
        "_token",
        "gate",
        "params",
        "principal",
        "request",
        "result",
        "rpc",
        "span",
        "started",
        "stream",
        "transport",
    )

    def __init__(
        self, gate: CallGate, rpc: str, params: ServiceParams, transport: str, stream: bool
    ) -> None:
        self.gate = gate
        self.rpc = rpc
        self.params = params
        self.transport = transport
        self.stream = stream
        self.started = perf_counter()
        self.request: Any = None
        """The request as the handler takes it, once parsed (`parsed`)."""
        self.result: Any = None
        """The call's result, or a stream's first event."""
        self.principal: str | None = None
        self._counted = False
        self._share: Share | None = None
        self._token: object = None
        tracing = gate.tracing
        started = None
        if params.trace_headers or tracing.recording:  # `start`'s own test, without its call
            started = tracing.start(rpc, params.trace_headers, SPAN_SYSTEMS[transport])
        if started is None:
            self.span: Span | None = None
        else:
            self.span, self._token = started

    def admit(
        self, check_version: Callable[[str | None], None] | None = None
    ) -> tuple[CallContext, Sequence[str]]:
        """Lets the call in, or raises what refuses it: the drain gate (UNAVAILABLE), then the
        capacity limit (RESOURCE_EXHAUSTED), then the caller's principal (UNAUTHENTICATED before
        anything is looked up), then a fail-closed audit trail, then the version (by
        `check_version` when given: another protocol version's service), then the extensions.
        Returns the handler's CallContext and the extensions to echo as activated."""
        gate = self.gate
        if gate.closed:
            raise ServiceUnavailableError(DRAINING_MESSAGE)
        if self.stream:
            if gate.streams >= gate.max_streams:
                raise gate.at_capacity("streams")
            gate.streams += 1
        else:
            if gate.calls >= gate.max_calls:
                raise gate.at_capacity("calls")
            gate.calls += 1
        self._counted = True
        self.principal = principal = current_principal()
        audit = gate.audit
        if audit is not None and audit.refusing:
            raise ServiceUnavailableError(
                "the audit trail cannot be written and this server does not serve unaudited "
                "requests; retry later",
                retry_delay=AUDIT_RETRY_DELAY,
            )
        params = self.params
        if check_version is not None:
            check_version(params.version)
        elif params.version not in _SERVED_VERSIONS:  # a version seen before needs no call
            gate.check_version(params.version, self.transport)
        replay_done = self.replayed if self.stream and params.last_event_id else None
        if not params.extension_values:
            return CallContext(principal, (), V10, params.last_event_id, replay_done), ()
        requested = service_params.parse_extensions(params.extension_values)
        activated = [uri for uri in requested if uri in gate.declared_extensions]
        return CallContext(principal, requested, V10, params.last_event_id, replay_done), activated

    def parsed(self, request: Any) -> None:
        """The request as the handler takes it: the log's call fields and the audit record
        name it from now on. A stream takes its share of its principal's and tenant's here
        (RESOURCE_EXHAUSTED past a cap: fairness.py); a resumed SubscribeToTask, of their
        replays too."""
        self.request = request
        log_context.CALL.set((self.rpc, self.principal or "", request))
        if self.stream and self.gate.shares is not None and self._share is None:
            self._share = self.gate.shares.take(
                self.principal or "",
                getattr(request, "tenant", ""),
                replay=bool(self.params.last_event_id) and self.rpc == "SubscribeToTask",
            )
        audit = self.gate.audit
        if audit is not None and isinstance(request, a2a_pb2.SendMessageRequest):
            # The outcome of the run this may start is written after this call's record.
            audit.opened(request.tenant, self.principal or "", request.message.message_id)

    def ignored(self, names: Sequence[str]) -> None:
        """The members of the parsed request that were left out as unknown (a JSON binding's
        request; spec §5.7): counted, and each name logged once, with the call's log fields."""
        self.gate.ignored_fields.note(names)

    def replayed(self) -> None:
        """A resumed stream caught up with its task: its replay slot is free again."""
        if self._share is not None:
            self._share.replayed()

    def first_event(self, event: Any) -> None:
        """A stream's first event, which names its task (call it once)."""
        self.result = event

    def ok(self, result: Any = None) -> None:
        """Ends a call that succeeded (`result`: a unary call's result)."""
        if result is not None:
            self.result = result
        self._end("OK")

    def failed(self, exc: Exception) -> StatusError:
        """Ends a call that failed with `exc`; returns the error to answer with. An unexpected
        exception is logged and becomes INTERNAL with a generic message."""
        error = as_status_error(exc)
        if error is None:
            log.exception("unexpected error while handling a request", exc_info=exc)
            error = InternalError(INTERNAL_MESSAGE)
        failed(self.span, error.code.name)
        self._end(error.code.name)
        return error

    def cancelled(self) -> None:
        """Ends a call whose caller went away, or that the server's stop cut short."""
        self._end("CANCELLED")

    def _end(self, code: str) -> None:
        gate = self.gate
        if self._counted:
            self._counted = False
            if self.stream:
                gate.streams -= 1
            else:
                gate.calls -= 1
        share = self._share
        if share is not None:
            self._share = None
            share.release()
        span = self.span
        if span is not None:
            annotate(span, self.request, self.result)
            otel_context.detach(self._token)  # type: ignore[arg-type]
            span.end()
        audit = gate.audit
        if audit is not None:
            request = self.request
            principal = self.principal
            message = request.message if isinstance(request, a2a_pb2.SendMessageRequest) else None
            audit.request(
                method=self.rpc,
                principal=_principal_or_none() if principal is None else principal,
                tenant=getattr(request, "tenant", ""),
                outcome=code,
                task_id=task_id_of(request, self.result),
                message=message,
            )
        if gate.metrics is not None:
            gate.metrics.observe(self.rpc, code, self.transport, perf_counter() - self.started)


def _principal_or_none() -> str:
    try:
        return current_principal()
    except AuthenticationError:
        return ""  # refused: audited as anonymous


def as_status_error(exc: Exception) -> StatusError | None:
    """The status error an exception stands for; None for an unexpected one."""
    if isinstance(exc, StatusError):
        return exc
    if isinstance(exc, StoreFullError):
        return ResourceExhaustedError(str(exc), retry_delay=STORE_FULL_RETRY_DELAY)
    if isinstance(exc, StoreUnavailableError):
        return ServiceUnavailableError(str(exc), retry_delay=STORE_DOWN_RETRY_DELAY)
    if isinstance(exc, SubscriberOverflowError):
        return ResourceExhaustedError(str(exc), retry_delay=0.0)
    if isinstance(exc, AuthenticationError):
        return UnauthenticatedError(str(exc))
    return None
