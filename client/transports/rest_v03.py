"""The HTTP+JSON transport to an A2A 0.3 agent: 0.3's `/v1/...` routes and ProtoJSON.

The routes are the `google.api.http` annotations of A2A 0.3's proto (`proto/a2a_v03.proto`:
`POST /v1/message:send`, `GET /v1/{name=tasks/*}`, ...), read by the same code as 1.0's; the
bodies are ProtoJSON of the 0.3 messages. A request goes 1.0 → 0.3 by `a2a_grpc.core.v03`, a
result back the same way. ListTasks, which 0.3 does not have, is UnsupportedOperationError.
"""

# ruff: noqa: ASYNC109

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.protobuf import empty_pb2
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import Message

from a2a_grpc.client.events import message_from_json, payload_from_json
from a2a_grpc.client.transports.base import Metadata
from a2a_grpc.client.transports.rest import RestTransport
from a2a_grpc.core import v03
from a2a_grpc.core.errors import UnsupportedOperationError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.generated import a2a_v03_pb2 as old

V03_SERVICE: ServiceDescriptor = old.DESCRIPTOR.services_by_name["A2AService"]

_RPCS: dict[str, tuple[str, Callable[[Any], Message], type[Message], Callable[[Any], Message]]] = {
    # 1.0 RPC: (0.3 method, request 1.0 → 0.3, 0.3 response class, result 0.3 → 1.0)
    "SendMessage": (
        "SendMessage",
        v03.send_request_v03,
        old.SendMessageResponse,
        v03.send_response_from_v03,
    ),
    "SendStreamingMessage": (
        "SendStreamingMessage",
        v03.send_request_v03,
        old.StreamResponse,
        v03.stream_response_from_v03,
    ),
    "GetTask": ("GetTask", v03.get_task_request_v03, old.Task, v03.task_from_v03),
    "CancelTask": ("CancelTask", v03.cancel_request_v03, old.Task, v03.task_from_v03),
    "SubscribeToTask": (
        "TaskSubscription",
        v03.subscribe_request_v03,
        old.StreamResponse,
        v03.stream_response_from_v03,
    ),
    "CreateTaskPushNotificationConfig": (
        "CreateTaskPushNotificationConfig",
        v03.create_config_request_v03,
        old.TaskPushNotificationConfig,
        v03.push_config_from_v03,
    ),
    "GetTaskPushNotificationConfig": (
        "GetTaskPushNotificationConfig",
        v03.get_config_request_v03,
        old.TaskPushNotificationConfig,
        v03.push_config_from_v03,
    ),
    "ListTaskPushNotificationConfigs": (
        "ListTaskPushNotificationConfig",
        v03.list_configs_request_v03,
        old.ListTaskPushNotificationConfigResponse,
        v03.push_configs_from_v03,
    ),
    "GetExtendedAgentCard": (
        "GetAgentCard",
        lambda _: old.GetAgentCardRequest(),
        old.AgentCard,
        v03.agent_card_from_v03,
    ),
    "DeleteTaskPushNotificationConfig": (
        "DeleteTaskPushNotificationConfig",
        v03.delete_config_request_v03,
        empty_pb2.Empty,
        lambda empty: empty,
    ),
}


class RestV03Transport(RestTransport):
    """A2A 0.3 over HTTP+JSON under `interface.url` (see the module docstring)."""

    async def call(
        self, rpc: str, request: Message, *, timeout: float | None, metadata: Metadata
    ) -> Message:
        if rpc not in _RPCS:
            raise UnsupportedOperationError(
                f"{rpc} is not part of A2A 0.3 (this agent's interface)"
            )
        return await super().call(rpc, request, timeout=timeout, metadata=metadata)

    def _wire(self, rpc: str, request: Message) -> tuple[str, Message, ServiceDescriptor]:
        method, to_v03, _, _ = _RPCS[rpc]
        return method, to_v03(request), V03_SERVICE

    def _decode_result(self, rpc: str, value: Any) -> Message:
        _, _, response_class, from_v03 = _RPCS[rpc]
        if value is None:
            return from_v03(response_class())
        if response_class is old.SendMessageResponse:
            return from_v03(payload_from_json(old.SendMessageResponse, value))
        return from_v03(message_from_json(response_class, value))

    def _decode_event(self, value: Any) -> a2a_pb2.StreamResponse:
        return v03.stream_response_from_v03(payload_from_json(old.StreamResponse, value))
