"""The JSON-RPC transport to an A2A 0.3 agent: 0.3's methods and JSON, translated to and from 1.0.

0.3's JSON-RPC names its methods `message/send`, `message/stream`, `tasks/get`, `tasks/cancel`,
`tasks/resubscribe`, `tasks/pushNotificationConfig/{set,get,list,delete}` and
`agent/getAuthenticatedExtendedCard`, and its objects follow 0.3's JSON schema (`kind`
discriminators, `"input-required"`, `"user"`, parts as `{"kind": "text", ...}`), not ProtoJSON.
A request goes 1.0 → 0.3 protobuf (`a2a_grpc.core.v03`, the server's 0.3 code run the other way)
→ its ProtoJSON → 0.3's JSON shape; a result the same way back. An object whose `kind` is not one
the method may return is InvalidAgentResponseError. Errors are decoded as in 1.0's JSON-RPC (0.3's
codes are the same). ListTasks, which 0.3 does not have, is UnsupportedOperationError.
"""

# ruff: noqa: ASYNC109

from __future__ import annotations

from typing import Any, cast

from google.protobuf import json_format
from google.protobuf.message import Message

from a2a_grpc.client.transports.base import RESPONSES, Metadata
from a2a_grpc.client.transports.jsonrpc import JsonRpcTransport
from a2a_grpc.core import v03, v03_agents
from a2a_grpc.core.errors import InvalidAgentResponseError, UnsupportedOperationError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.generated import a2a_v03_pb2 as old

_STATES = {word: old.TaskState.Name(state) for state, word in v03.STATE_WORDS.items()}
"""0.3 JSON's task states → the 0.3 proto's names (an unknown word reads as unspecified)."""
_ROLES = {"user": "ROLE_USER", "agent": "ROLE_AGENT"}


class JsonRpcV03Transport(JsonRpcTransport):
    """A2A 0.3 over JSON-RPC 2.0 to `interface.url` (see the module docstring)."""

    def _params(self, rpc: str, request: Message) -> tuple[str, Any]:
        if rpc in ("SendMessage", "SendStreamingMessage"):
            send = v03_agents.send_request_v03(cast(a2a_pb2.SendMessageRequest, request))
            params: dict[str, Any] = {"message": _message_out(_proto_json(send.request))}
            configuration = _proto_json(send.configuration)
            if "pushNotification" in configuration:
                configuration["pushNotificationConfig"] = configuration.pop("pushNotification")
            configuration.setdefault("blocking", False)
            params["configuration"] = configuration
            if send.HasField("metadata"):
                params["metadata"] = _proto_json(send.metadata)
            method = "message/send" if rpc == "SendMessage" else "message/stream"
            return method, params
        if rpc == "GetTask":
            get = cast(a2a_pb2.GetTaskRequest, request)
            query: dict[str, Any] = {"id": get.id}
            if get.HasField("history_length"):
                query["historyLength"] = get.history_length
            return "tasks/get", query
        if rpc in ("CancelTask", "SubscribeToTask"):
            method = "tasks/cancel" if rpc == "CancelTask" else "tasks/resubscribe"
            return method, {"id": cast(a2a_pb2.CancelTaskRequest, request).id}
        if rpc == "CreateTaskPushNotificationConfig":
            config = cast(a2a_pb2.TaskPushNotificationConfig, request)
            converted = _proto_json(v03.push_config(config).push_notification_config)
            return "tasks/pushNotificationConfig/set", {
                "taskId": config.task_id,
                "pushNotificationConfig": converted,
            }
        if rpc in ("GetTaskPushNotificationConfig", "DeleteTaskPushNotificationConfig"):
            named = cast(a2a_pb2.GetTaskPushNotificationConfigRequest, request)
            verb = "get" if rpc.startswith("Get") else "delete"
            return f"tasks/pushNotificationConfig/{verb}", {
                "id": named.task_id,
                "pushNotificationConfigId": named.id,
            }
        if rpc == "ListTaskPushNotificationConfigs":
            listing = cast(a2a_pb2.ListTaskPushNotificationConfigsRequest, request)
            return "tasks/pushNotificationConfig/list", {"id": listing.task_id}
        if rpc == "GetExtendedAgentCard":
            return "agent/getAuthenticatedExtendedCard", {}
        raise UnsupportedOperationError(f"{rpc} is not part of A2A 0.3 (this agent's interface)")

    async def call(
        self, rpc: str, request: Message, *, timeout: float | None, metadata: Metadata
    ) -> Message:
        """`Transport.call` with 0.3's methods and JSON; ListTasks raises
        UnsupportedOperationError, unsent, and so does GetExtendedAgentCard's answer (read
        a 0.3 agent's card instead)."""
        if rpc == "ListTasks":
            raise UnsupportedOperationError(
                "ListTasks is not part of A2A 0.3 (this agent's interface)"
            )
        return await super().call(rpc, request, timeout=timeout, metadata=metadata)

    def _decode_result(self, rpc: str, result: Any) -> Message:
        if rpc == "SendMessage":
            kind = _kind(result, ("task", "message"))
            if kind == "message":
                return a2a_pb2.SendMessageResponse(message=_message_in(result))
            return a2a_pb2.SendMessageResponse(task=_task_in(result))
        if rpc in ("GetTask", "CancelTask"):
            _kind(result, ("task",))
            return _task_in(result)
        if rpc in ("CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig"):
            return _push_config_in(result)
        if rpc == "ListTaskPushNotificationConfigs":
            if not isinstance(result, list):
                raise InvalidAgentResponseError("tasks/pushNotificationConfig/list: not a list")
            return a2a_pb2.ListTaskPushNotificationConfigsResponse(
                configs=[_push_config_in(item) for item in result]
            )
        if rpc == "GetExtendedAgentCard":
            raise UnsupportedOperationError(
                "reading a 0.3 agent's extended card over JSON-RPC is not done; read its card"
            )
        return RESPONSES[rpc]()  # DeleteTaskPushNotificationConfig: null → Empty

    def _decode_event(self, result: Any) -> a2a_pb2.StreamResponse:
        kind = _kind(result, ("task", "message", "status-update", "artifact-update"))
        if kind == "task":
            return a2a_pb2.StreamResponse(task=_task_in(result))
        if kind == "message":
            return a2a_pb2.StreamResponse(message=_message_in(result))
        wrapped: dict[str, Any] = {
            "taskId": result.get("taskId", ""),
            "contextId": result.get("contextId", ""),
        }
        if kind == "status-update":
            wrapped["status"] = _status_json(result.get("status") or {})
            member = "statusUpdate"
        else:
            wrapped["artifact"] = _artifact_json(result.get("artifact") or {})
            wrapped["append"] = bool(result.get("append"))
            wrapped["lastChunk"] = bool(result.get("lastChunk"))
            member = "artifactUpdate"
        if isinstance(result.get("metadata"), dict):
            wrapped["metadata"] = result["metadata"]
        event = _parse(old.StreamResponse, {member: wrapped})
        return v03_agents.stream_response_from_v03(event)


# -- 0.3 protobuf ↔ 0.3 JSON ---------------------------------------------------------------


def _proto_json(message: Message) -> dict[str, Any]:
    value: dict[str, Any] = json_format.MessageToDict(message)
    return value


def _parse(cls: type[Any], value: dict[str, Any]) -> Any:
    out = cls()
    try:
        json_format.ParseDict(value, out, ignore_unknown_fields=True)
    except (json_format.ParseError, TypeError, ValueError, RecursionError) as error:
        raise InvalidAgentResponseError(
            f"malformed A2A 0.3 {cls.DESCRIPTOR.name}: {error}"
        ) from error
    return out


def _kind(value: Any, allowed: tuple[str, ...]) -> str:
    kind = value.get("kind") if isinstance(value, dict) else None
    if kind not in allowed:
        raise InvalidAgentResponseError(
            f"an A2A 0.3 result of kind {kind!r}; expected {' or '.join(allowed)}"
        )
    return cast(str, kind)


def _message_out(value: dict[str, Any]) -> dict[str, Any]:
    """0.3 ProtoJSON Message → 0.3 JSON."""
    out: dict[str, Any] = {
        key: value[key]
        for key in ("messageId", "contextId", "taskId", "metadata", "extensions")
        if key in value
    }
    out["kind"] = "message"
    out["role"] = {"ROLE_USER": "user", "ROLE_AGENT": "agent"}.get(value.get("role", ""), "user")
    out["parts"] = [_part_out(part) for part in value.get("content", [])]
    return out


def _part_out(value: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "text" in value:
        out = {"kind": "text", "text": value["text"]}
    elif "file" in value:
        file = value["file"]
        converted: dict[str, Any] = {key: file[key] for key in ("mimeType", "name") if key in file}
        if "fileWithBytes" in file:
            converted["bytes"] = file["fileWithBytes"]
        else:
            converted["uri"] = file.get("fileWithUri", "")
        out = {"kind": "file", "file": converted}
    elif "data" in value:
        out = {"kind": "data", "data": value["data"].get("data", {})}
    if "metadata" in value:
        out["metadata"] = value["metadata"]
    return out


def _part_json(value: Any) -> dict[str, Any]:
    """0.3 JSON Part → 0.3 ProtoJSON."""
    if not isinstance(value, dict):
        raise InvalidAgentResponseError("an A2A 0.3 part is not an object")
    kind = value.get("kind")
    out: dict[str, Any]
    if kind == "text":
        out = {"text": value.get("text", "")}
    elif kind == "file":
        file = value.get("file") or {}
        converted: dict[str, Any] = {key: file[key] for key in ("mimeType", "name") if key in file}
        if "bytes" in file:
            converted["fileWithBytes"] = file["bytes"]
        else:
            converted["fileWithUri"] = file.get("uri", "")
        out = {"file": converted}
    elif kind == "data":
        out = {"data": {"data": value.get("data") or {}}}
    else:
        raise InvalidAgentResponseError(f"an A2A 0.3 part of kind {kind!r}")
    if isinstance(value.get("metadata"), dict):
        out["metadata"] = value["metadata"]
    return out


def _message_json(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidAgentResponseError("an A2A 0.3 message is not an object")
    out: dict[str, Any] = {
        key: value[key]
        for key in ("messageId", "contextId", "taskId", "metadata", "extensions")
        if key in value
    }
    out["role"] = _ROLES.get(value.get("role", ""), "ROLE_UNSPECIFIED")
    out["content"] = [_part_json(part) for part in value.get("parts") or []]
    return out


def _status_json(value: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"state": _STATES.get(value.get("state", ""), "TASK_STATE_UNSPECIFIED")}
    if value.get("message") is not None:
        out["message"] = _message_json(value["message"])
    if value.get("timestamp"):
        out["timestamp"] = value["timestamp"]
    return out


def _artifact_json(value: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        key: value[key]
        for key in ("artifactId", "name", "description", "metadata", "extensions")
        if key in value
    }
    out["parts"] = [_part_json(part) for part in value.get("parts") or []]
    return out


def _task_in(value: dict[str, Any]) -> a2a_pb2.Task:
    task: dict[str, Any] = {"id": value.get("id", ""), "contextId": value.get("contextId", "")}
    task["status"] = _status_json(value.get("status") or {})
    task["artifacts"] = [_artifact_json(a) for a in value.get("artifacts") or []]
    task["history"] = [_message_json(m) for m in value.get("history") or []]
    if isinstance(value.get("metadata"), dict):
        task["metadata"] = value["metadata"]
    return v03_agents.task_from_v03(_parse(old.Task, task))


def _message_in(value: dict[str, Any]) -> a2a_pb2.Message:
    return v03.message_from_v03(_parse(old.Message, _message_json(value)))


def _push_config_in(value: Any) -> a2a_pb2.TaskPushNotificationConfig:
    if not isinstance(value, dict):
        raise InvalidAgentResponseError("an A2A 0.3 push notification config is not an object")
    config = value.get("pushNotificationConfig") or {}
    named = {
        "name": v03.config_name(value.get("taskId", ""), config.get("id", "")),
        "pushNotificationConfig": config,
    }
    return v03_agents.push_config_from_v03(_parse(old.TaskPushNotificationConfig, named))
