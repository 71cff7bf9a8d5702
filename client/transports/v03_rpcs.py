"""What each 1.0 RPC is in A2A 0.3, for the 0.3 transports that carry 0.3's protobuf messages
(gRPC, and HTTP+JSON as their ProtoJSON): the 0.3 method, the request's translation to 0.3, the
0.3 response's class and its translation back (`a2a_grpc.core.v03`). An RPC not listed is not
part of 0.3 (ListTasks)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.protobuf import empty_pb2
from google.protobuf.message import Message

from a2a_grpc.core import v03_agents
from a2a_grpc.generated import a2a_v03_pb2 as old

V03Rpc = tuple[str, Callable[[Any], Message], type[Message], Callable[[Any], Message]]
"""(0.3 method, request 1.0 -> 0.3, 0.3 response class, result 0.3 -> 1.0)."""

V03_RPCS: dict[str, V03Rpc] = {
    "SendMessage": (
        "SendMessage",
        v03_agents.send_request_v03,
        old.SendMessageResponse,
        v03_agents.send_response_from_v03,
    ),
    "SendStreamingMessage": (
        "SendStreamingMessage",
        v03_agents.send_request_v03,
        old.StreamResponse,
        v03_agents.stream_response_from_v03,
    ),
    "GetTask": ("GetTask", v03_agents.get_task_request_v03, old.Task, v03_agents.task_from_v03),
    "CancelTask": ("CancelTask", v03_agents.cancel_request_v03, old.Task, v03_agents.task_from_v03),
    "SubscribeToTask": (
        "TaskSubscription",
        v03_agents.subscribe_request_v03,
        old.StreamResponse,
        v03_agents.stream_response_from_v03,
    ),
    "CreateTaskPushNotificationConfig": (
        "CreateTaskPushNotificationConfig",
        v03_agents.create_config_request_v03,
        old.TaskPushNotificationConfig,
        v03_agents.push_config_from_v03,
    ),
    "GetTaskPushNotificationConfig": (
        "GetTaskPushNotificationConfig",
        v03_agents.get_config_request_v03,
        old.TaskPushNotificationConfig,
        v03_agents.push_config_from_v03,
    ),
    "ListTaskPushNotificationConfigs": (
        "ListTaskPushNotificationConfig",
        v03_agents.list_configs_request_v03,
        old.ListTaskPushNotificationConfigResponse,
        v03_agents.push_configs_from_v03,
    ),
    "GetExtendedAgentCard": (
        "GetAgentCard",
        lambda _: old.GetAgentCardRequest(),
        old.AgentCard,
        v03_agents.agent_card_from_v03,
    ),
    "DeleteTaskPushNotificationConfig": (
        "DeleteTaskPushNotificationConfig",
        v03_agents.delete_config_request_v03,
        empty_pb2.Empty,
        lambda empty: empty,
    ),
}
