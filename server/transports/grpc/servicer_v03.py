"""A2A 0.3's `a2a.v1.A2AService`, served over the 1.0 handler on the same port.

Each call goes through the call gate (protocol/gate.py) as a 1.0 call does: the same admission
limits, authentication, audit trail, metrics and tracing (under the 1.0 RPC that serves it).
The request is translated to 1.0 (`core/v03.py`), the handler runs it exactly as it runs a
1.0 call (the same tasks, validation and errors), and the result is translated back.

0.3 specifics: `a2a-version` absent or 0.3 is served and anything else is
VERSION_NOT_SUPPORTED; extensions are read from `a2a-extensions` and `x-a2a-extensions`, and
the activated ones are echoed under both; an error's status message starts with its class name
(`TaskNotFoundError: …`), which official 0.3 clients turn into typed errors, and carries the
same ErrorInfo as over 1.0.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, NoReturn, TypeVar

from google.protobuf import empty_pb2

from a2a_grpc.core import status
from a2a_grpc.core import v03 as translate
from a2a_grpc.core.errors import StatusError, VersionNotSupportedError
from a2a_grpc.core.metadata import EXTENSIONS_KEY, PROTOCOL_VERSION
from a2a_grpc.core.service import V03_SERVICE_NAME as SERVICE_NAME
from a2a_grpc.generated import a2a_pb2, a2a_v03_pb2, a2a_v03_pb2_grpc
from a2a_grpc.server.protocol.call_context import CallContext
from a2a_grpc.server.protocol.gate import CallGate
from a2a_grpc.server.protocol.handler import RequestHandler
from a2a_grpc.server.transports.grpc.servicer import Context, check_parsed, read_params

TRANSPORT = "grpc-0.3"
"""The `transport` label of 0.3 calls in the metrics (their `method` is the 1.0 RPC)."""

LEGACY_EXTENSIONS_KEY = "x-a2a-extensions"
"""A2A 0.3's name for the `a2a-extensions` metadata."""
EXTENSION_KEYS = (EXTENSIONS_KEY, LEGACY_EXTENSIONS_KEY)
"""Both are read on the 0.3 service (merged)."""

V03 = TypeVar("V03")
V10 = TypeVar("V10")
Result = TypeVar("Result")
PROTOCOL = translate.PROTOCOL_VERSION
"""The protocol a 0.3 call's handler context names: its webhooks speak 0.3."""


RPC_NAMES = {
    "SendMessage": "SendMessage",
    "SendStreamingMessage": "SendStreamingMessage",
    "GetTask": "GetTask",
    "CancelTask": "CancelTask",
    "TaskSubscription": "SubscribeToTask",
    "CreateTaskPushNotificationConfig": "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig": "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfig": "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig": "DeleteTaskPushNotificationConfig",
    "GetAgentCard": "GetExtendedAgentCard",
}
"""Each 0.3 method -> the 1.0 RPC it is served as, and named as in metrics, audit and traces
(also when the server refuses it while draining)."""


class V03Servicer(a2a_v03_pb2_grpc.A2AServiceServicer):
    """a2a.v1.A2AService over the 1.0 RequestHandler, every call through `gate`."""

    def __init__(self, handler: RequestHandler, gate: CallGate) -> None:
        self.handler = handler
        self.gate = gate

    # -- RPCs -----------------------------------------------------------------------------

    async def SendMessage(self, request: a2a_v03_pb2.SendMessageRequest, context: Context) -> Any:
        return await self._unary(
            RPC_NAMES["SendMessage"],
            request,
            context,
            translate.send_request,
            self.handler.send_message,
            translate.send_response,
        )

    async def SendStreamingMessage(
        self, request: a2a_v03_pb2.SendMessageRequest, context: Context
    ) -> AsyncIterator[a2a_v03_pb2.StreamResponse]:
        stream = self._stream(
            RPC_NAMES["SendStreamingMessage"],
            request,
            context,
            translate.send_request,
            self.handler.send_streaming_message,
        )
        async for event in stream:
            yield event

    async def GetTask(self, request: a2a_v03_pb2.GetTaskRequest, context: Context) -> Any:
        return await self._unary(
            RPC_NAMES["GetTask"],
            request,
            context,
            translate.get_task_request,
            self.handler.get_task,
            translate.task,
        )

    async def CancelTask(self, request: a2a_v03_pb2.CancelTaskRequest, context: Context) -> Any:
        return await self._unary(
            RPC_NAMES["CancelTask"],
            request,
            context,
            translate.cancel_request,
            self.handler.cancel_task,
            translate.task,
        )

    async def TaskSubscription(
        self, request: a2a_v03_pb2.TaskSubscriptionRequest, context: Context
    ) -> AsyncIterator[a2a_v03_pb2.StreamResponse]:
        stream = self._stream(
            RPC_NAMES["TaskSubscription"],
            request,
            context,
            translate.subscribe_request,
            self.handler.subscribe_to_task,
        )
        async for event in stream:
            yield event

    async def CreateTaskPushNotificationConfig(
        self, request: a2a_v03_pb2.CreateTaskPushNotificationConfigRequest, context: Context
    ) -> Any:
        return await self._unary(
            RPC_NAMES["CreateTaskPushNotificationConfig"],
            request,
            context,
            translate.create_config_request,
            self.handler.create_task_push_notification_config,
            translate.push_config,
        )

    async def GetTaskPushNotificationConfig(
        self, request: a2a_v03_pb2.GetTaskPushNotificationConfigRequest, context: Context
    ) -> Any:
        return await self._unary(
            RPC_NAMES["GetTaskPushNotificationConfig"],
            request,
            context,
            translate.get_config_request,
            self.handler.get_task_push_notification_config,
            translate.push_config,
        )

    async def ListTaskPushNotificationConfig(
        self, request: a2a_v03_pb2.ListTaskPushNotificationConfigRequest, context: Context
    ) -> Any:
        return await self._unary(
            RPC_NAMES["ListTaskPushNotificationConfig"],
            request,
            context,
            translate.list_configs_request,
            self.handler.list_task_push_notification_configs,
            translate.push_configs,
        )

    async def DeleteTaskPushNotificationConfig(
        self, request: a2a_v03_pb2.DeleteTaskPushNotificationConfigRequest, context: Context
    ) -> Any:
        return await self._unary(
            RPC_NAMES["DeleteTaskPushNotificationConfig"],
            request,
            context,
            translate.delete_config_request,
            self.handler.delete_task_push_notification_config,
            _same,
        )

    async def GetAgentCard(self, request: a2a_v03_pb2.GetAgentCardRequest, context: Context) -> Any:
        return await self._unary(
            RPC_NAMES["GetAgentCard"],
            request,
            context,
            _card_request,
            self._card,
            translate.agent_card,
        )

    async def _card(
        self, request: a2a_pb2.GetExtendedAgentCardRequest, call: CallContext
    ) -> a2a_pb2.AgentCard:
        """The extended card to an authenticated caller when the public card offers one
        (capabilities.extended_agent_card, as 1.0's GetExtendedAgentCard decides) and one is
        configured, else the public card (0.3's GetAgentCard serves both)."""
        handler = self.handler
        offered = handler.card.capabilities.extended_agent_card
        if offered and handler.extended_card is not None and call.principal:
            return handler.extended_card
        return handler.card

    # -- the two wrappers -----------------------------------------------------------------

    async def _unary(
        self,
        rpc: str,
        request: V03,
        context: Context,
        to_v10: Callable[[V03], V10],
        method: Callable[[V10, CallContext], Awaitable[Result]],
        to_v03: Callable[[Result], Any],
    ) -> Any:
        call = self.gate.begin(rpc, read_params(context, EXTENSION_KEYS), TRANSPORT)
        try:
            handler_call, activated = call.admit(check_version)
            if activated:
                await send_activated(context, activated)
            check_parsed(request)
            translated = to_v10(request)
            call.parsed(translated)
            result = await method(translated, handler_call._replace(protocol=PROTOCOL))
            answer = to_v03(result)
        except Exception as exc:
            await abort(context, call.failed(exc))
        except BaseException:  # the caller went away (cancelled) or the server is stopping
            call.cancelled()
            raise
        call.ok(result)
        return answer

    async def _stream(
        self,
        rpc: str,
        request: V03,
        context: Context,
        to_v10: Callable[[V03], V10],
        method: Callable[[V10, CallContext], AsyncIterator[a2a_pb2.StreamResponse]],
    ) -> AsyncIterator[a2a_v03_pb2.StreamResponse]:
        call = self.gate.begin(rpc, read_params(context, EXTENSION_KEYS), TRANSPORT, stream=True)
        first = True
        try:
            handler_call, activated = call.admit(check_version)
            if activated:
                await send_activated(context, activated)
            check_parsed(request)
            translated = to_v10(request)
            call.parsed(translated)
            async for event in method(translated, handler_call._replace(protocol=PROTOCOL)):
                if first:
                    first = False
                    call.first_event(event)
                yield translate.stream_response(event)
        except Exception as exc:
            await abort(context, call.failed(exc))
        except BaseException:  # the caller went away (cancelled) or the server is stopping
            call.cancelled()
            raise
        call.ok()


async def send_activated(context: Context, activated: Sequence[str]) -> None:
    """Echoes the extensions a call activated under both 0.3 keys."""
    echoed = ",".join(activated)
    await context.send_initial_metadata(((EXTENSIONS_KEY, echoed), (LEGACY_EXTENSIONS_KEY, echoed)))


async def abort(context: Context, error: StatusError) -> NoReturn:
    """Ends the call with `error` in 0.3's terms (its status message names the error class)."""
    code, message, trailers = status.encode_named(translate.in_v03_terms(error))
    await context.abort(code, message, trailing_metadata=trailers)
    raise AssertionError("context.abort returned")  # it always raises


def check_version(version: str | None) -> None:
    """Absent, empty, `0.3` or `0.3.x` is served; anything else is VERSION_NOT_SUPPORTED."""
    if version is None or not version.strip() or translate.is_v03(version):
        return
    raise VersionNotSupportedError(
        f"a2a-version {version!r} is not served by {SERVICE_NAME}, the A2A "
        f"{translate.PROTOCOL_VERSION} service: send {translate.PROTOCOL_VERSION} (or no "
        f"a2a-version), or call lf.a2a.v1.A2AService for A2A {PROTOCOL_VERSION}",
        metadata={"supportedVersions": translate.PROTOCOL_VERSION},
    )


def _card_request(request: a2a_v03_pb2.GetAgentCardRequest) -> a2a_pb2.GetExtendedAgentCardRequest:
    return a2a_pb2.GetExtendedAgentCardRequest()


def _same(result: empty_pb2.Empty) -> empty_pb2.Empty:
    return result
