"""A2A 0.3 (`a2a.v1`) ↔ A2A 1.0 (`lf.a2a.v1`) messages: pure translation, no I/O.

Requests go 0.3 → 1.0 (what a 0.3 caller asks, as the 1.0 handler takes it); results go
1.0 → 0.3. Fields that exist on one side only (docs/a2a-0.3.md lists them) are
dropped; nothing is invented. A resource name that is not exactly `tasks/{id}` or
`tasks/{id}/pushNotificationConfigs/{config}` is INVALID_PARAMS (INVALID_ARGUMENT).

Messages whose fields have the same numbers and types in both versions (security schemes and
requirements, skills, providers, extensions: `tests/unit/test_v03_translation.py` checks each
pair) are carried over by their bytes, and the fields only the 1.0 side has are discarded.

The other way round, a 1.0 client calling a 0.3 agent, is core/v03_agents.py, which reuses the
conversions both ways share (`rewire`, `part_into`, `push_config_into`, `SCHEME_TYPES`).
"""

from __future__ import annotations

import base64
import re
from typing import Any, TypeVar

from google.protobuf import json_format
from google.protobuf.message import Message as ProtoMessage

from a2a_grpc.core.errors import (
    FieldViolation,
    InvalidParamsError,
    StatusError,
    UnsupportedOperationError,
)
from a2a_grpc.core.states import TERMINAL_STATES
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.generated import a2a_v03_pb2 as v03

PROTOCOL_VERSION = "0.3"
"""The protocol version of the 0.3 interface on the card and of `a2a-version` from 0.3 callers."""
DATA_PART_COMPAT = "data_part_compat"
"""Part metadata key: a 0.3 DataPart `{"value": X}` that stands for 1.0 data X that is not a JSON
object (0.3 data is always an object). The official SDK's 0.3 layer uses the same convention."""

_FIELD_NAMES = (
    (re.compile(r"(?<![\w.])message\.parts\b"), "message.content"),
    (
        re.compile(r"(?<![\w.])configuration\.task_push_notification_config\b"),
        "configuration.push_notification",
    ),
    (
        re.compile(r"(?<![\w.])config\.(?=url|token|authentication)"),
        "config.push_notification_config.",
    ),
    (re.compile(r"\bauthentication\.scheme\b"), "authentication.schemes"),
)
"""1.0 field paths in error texts and field violations → the 0.3 fields they came from."""
_TASK_NAME = re.compile(r"tasks/([^/]+)")
_CONFIG_NAME = re.compile(r"tasks/([^/]+)/pushNotificationConfigs/([^/]+)")

Wire = TypeVar("Wire", bound=ProtoMessage)


def is_v03(version: str) -> bool:
    """True for `0.3` and `0.3.x` (patch ignored)."""
    parts = version.strip().split(".")
    return len(parts) in (2, 3) and parts[0] == "0" and parts[1] == "3"


# -- resource names -------------------------------------------------------------------------


def task_id_of(name: str, field: str = "name") -> str:
    """The id in `tasks/{id}`; INVALID_PARAMS naming `field` when `name` is anything else."""
    match = _TASK_NAME.fullmatch(name)
    if match is None:
        raise _bad_name(field, name, "tasks/{id}")
    return match.group(1)


def config_ids_of(name: str, field: str = "name") -> tuple[str, str]:
    """(task id, config id) from `tasks/{id}/pushNotificationConfigs/{config}`."""
    match = _CONFIG_NAME.fullmatch(name)
    if match is None:
        raise _bad_name(field, name, "tasks/{id}/pushNotificationConfigs/{config}")
    return match.group(1), match.group(2)


def config_name(task_id: str, config_id: str) -> str:
    return f"tasks/{task_id}/pushNotificationConfigs/{config_id}"


def _bad_name(field: str, name: str, shape: str) -> InvalidParamsError:
    return InvalidParamsError(
        f"{field} {name!r} is not a resource name of the form {shape}",
        field_violations=[FieldViolation(field, f"must be {shape}")],
    )


def in_v03_terms(error: StatusError) -> StatusError:
    """`error` with the 1.0 field paths its message and field violations name replaced by the
    0.3 fields a 0.3 caller sent (`message.parts` → `message.content`, ...)."""
    message = _v03_paths(error.message)
    violations = [
        FieldViolation(_v03_paths(v.field), _v03_paths(v.description))
        for v in error.field_violations
    ]
    if message == error.message and violations == list(error.field_violations):
        return error
    return type(error)(
        message,
        metadata=error.metadata,
        field_violations=violations,
        retryable=error.retryable,
        retry_delay=error.retry_delay,
    )


def _v03_paths(text: str) -> str:
    for pattern, replacement in _FIELD_NAMES:
        text = pattern.sub(replacement, text)
    return text


# -- requests: 0.3 → 1.0 --------------------------------------------------------------------


def send_request(request: v03.SendMessageRequest) -> a2a_pb2.SendMessageRequest:
    """SendMessage / SendStreamingMessage. Without a configuration the call blocks (0.3's
    default); with one, `blocking` false asks for an immediate answer. History length 0 means
    no limit in 0.3, so it is left unset."""
    out = a2a_pb2.SendMessageRequest()
    if request.HasField("request"):
        _message_into(request.request, out.message)
    if request.HasField("metadata"):
        out.metadata.CopyFrom(request.metadata)
    if request.HasField("configuration"):
        given = request.configuration
        configuration = out.configuration
        configuration.accepted_output_modes.extend(given.accepted_output_modes)
        if given.history_length:
            configuration.history_length = given.history_length
        configuration.return_immediately = not given.blocking
        if given.HasField("push_notification"):
            push_config_into(given.push_notification, configuration.task_push_notification_config)
    return out


def get_task_request(request: v03.GetTaskRequest) -> a2a_pb2.GetTaskRequest:
    out = a2a_pb2.GetTaskRequest(id=task_id_of(request.name))
    if request.history_length:  # 0: no limit
        out.history_length = request.history_length
    return out


def cancel_request(request: v03.CancelTaskRequest) -> a2a_pb2.CancelTaskRequest:
    return a2a_pb2.CancelTaskRequest(id=task_id_of(request.name))


def subscribe_request(request: v03.TaskSubscriptionRequest) -> a2a_pb2.SubscribeToTaskRequest:
    return a2a_pb2.SubscribeToTaskRequest(id=task_id_of(request.name))


def create_config_request(
    request: v03.CreateTaskPushNotificationConfigRequest,
) -> a2a_pb2.TaskPushNotificationConfig:
    """The config to create under `parent`, with the id `config_id` (or the config's own id;
    neither: the server mints one). The config's `name` is output only (AIP-133) and ignored."""
    task_id = task_id_of(request.parent, "parent")
    given = request.config.push_notification_config
    if request.config_id and given.id and request.config_id != given.id:
        raise InvalidParamsError(
            f"config_id {request.config_id!r} and config.push_notification_config.id "
            f"{given.id!r} differ: set one of them, or both to the same id",
            field_violations=[
                FieldViolation("config_id", "differs from config.push_notification_config.id")
            ],
        )
    out = a2a_pb2.TaskPushNotificationConfig()
    push_config_into(given, out)
    out.task_id = task_id
    out.id = request.config_id or given.id
    return out


def get_config_request(
    request: v03.GetTaskPushNotificationConfigRequest,
) -> a2a_pb2.GetTaskPushNotificationConfigRequest:
    task_id, config_id = config_ids_of(request.name)
    return a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=task_id, id=config_id)


def delete_config_request(
    request: v03.DeleteTaskPushNotificationConfigRequest,
) -> a2a_pb2.DeleteTaskPushNotificationConfigRequest:
    task_id, config_id = config_ids_of(request.name)
    return a2a_pb2.DeleteTaskPushNotificationConfigRequest(task_id=task_id, id=config_id)


def list_configs_request(
    request: v03.ListTaskPushNotificationConfigRequest,
) -> a2a_pb2.ListTaskPushNotificationConfigsRequest:
    return a2a_pb2.ListTaskPushNotificationConfigsRequest(
        task_id=task_id_of(request.parent, "parent"),
        page_size=request.page_size,
        page_token=request.page_token,
    )


def push_config_into(
    given: v03.PushNotificationConfig, out: a2a_pb2.TaskPushNotificationConfig
) -> None:
    """0.3 lists the schemes a webhook accepts; 1.0 sends one, so the first is used."""
    out.id = given.id
    out.url = given.url
    out.token = given.token
    if given.HasField("authentication"):
        auth = given.authentication
        out.authentication.scheme = auth.schemes[0] if auth.schemes else ""
        out.authentication.credentials = auth.credentials


def _message_into(given: v03.Message, out: a2a_pb2.Message) -> None:
    out.message_id = given.message_id
    out.context_id = given.context_id
    out.task_id = given.task_id
    out.role = given.role  # type: ignore[assignment]  # same numbers in both versions
    if given.HasField("metadata"):
        out.metadata.CopyFrom(given.metadata)
    out.extensions.extend(given.extensions)
    for part in given.content:
        part_into(part, out.parts.add())


def message_from_v03(given: v03.Message) -> a2a_pb2.Message:
    out = a2a_pb2.Message()
    _message_into(given, out)
    return out


def part_into(given: v03.Part, out: a2a_pb2.Part) -> None:
    """A FilePart becomes `raw` (bytes) or `url` (URI) with its media type and file name; a
    DataPart `data` (a JSON object, or the value it wraps under DATA_PART_COMPAT)."""
    if given.HasField("metadata"):
        out.metadata.CopyFrom(given.metadata)
    kind = given.WhichOneof("part")
    if kind == "text":
        out.text = given.text
    elif kind == "file":
        file = given.file
        which = file.WhichOneof("file")
        if which == "file_with_bytes":
            out.raw = file.file_with_bytes
        elif which == "file_with_uri":
            out.url = file.file_with_uri
        out.media_type = file.mime_type
        out.filename = file.name
    elif kind == "data":
        data = given.data.data
        wrapped = out.metadata.fields.get(DATA_PART_COMPAT)
        if wrapped is not None and wrapped.bool_value and "value" in data.fields:
            del out.metadata.fields[DATA_PART_COMPAT]
            if not out.metadata.fields:
                out.ClearField("metadata")
            out.data.CopyFrom(data.fields["value"])
        else:
            out.data.struct_value.CopyFrom(data)


# -- results: 1.0 → 0.3 ---------------------------------------------------------------------


def part(given: a2a_pb2.Part) -> v03.Part:
    """`raw` / `url` become a FilePart (media type and file name kept); data that is not a JSON
    object is wrapped as `{"value": X}` with DATA_PART_COMPAT in the metadata. A text or data
    part's media type and file name have no 0.3 field and are dropped."""
    out = v03.Part()
    if given.HasField("metadata"):
        out.metadata.CopyFrom(given.metadata)
    kind = given.WhichOneof("content")
    if kind == "text":
        out.text = given.text
    elif kind in ("raw", "url"):
        if kind == "raw":
            out.file.file_with_bytes = given.raw
        else:
            out.file.file_with_uri = given.url
        out.file.mime_type = given.media_type
        out.file.name = given.filename
    elif kind == "data":
        if given.data.WhichOneof("kind") == "struct_value":
            out.data.data.CopyFrom(given.data.struct_value)
        else:
            out.data.data.fields["value"].CopyFrom(given.data)
            out.metadata.fields[DATA_PART_COMPAT].bool_value = True
    return out


def message(given: a2a_pb2.Message) -> v03.Message:
    """`reference_task_ids` has no 0.3 field and is dropped."""
    out = v03.Message(
        message_id=given.message_id,
        context_id=given.context_id,
        task_id=given.task_id,
        role=given.role,  # type: ignore[arg-type]
        extensions=given.extensions,
    )
    if given.HasField("metadata"):
        out.metadata.CopyFrom(given.metadata)
    out.content.extend(part(p) for p in given.parts)
    return out


def artifact(given: a2a_pb2.Artifact) -> v03.Artifact:
    out = v03.Artifact(
        artifact_id=given.artifact_id,
        name=given.name,
        description=given.description,
        extensions=given.extensions,
    )
    if given.HasField("metadata"):
        out.metadata.CopyFrom(given.metadata)
    out.parts.extend(part(p) for p in given.parts)
    return out


def status(given: a2a_pb2.TaskStatus) -> v03.TaskStatus:
    """States keep their numbers (TASK_STATE_CANCELED is 0.3's TASK_STATE_CANCELLED)."""
    out = v03.TaskStatus(state=given.state)  # type: ignore[arg-type]
    if given.HasField("message"):
        out.update.CopyFrom(message(given.message))
    if given.HasField("timestamp"):
        out.timestamp.CopyFrom(given.timestamp)
    return out


def task(given: a2a_pb2.Task) -> v03.Task:
    out = v03.Task(id=given.id, context_id=given.context_id)
    if given.HasField("status"):
        out.status.CopyFrom(status(given.status))
    out.artifacts.extend(artifact(a) for a in given.artifacts)
    out.history.extend(message(m) for m in given.history)
    if given.HasField("metadata"):
        out.metadata.CopyFrom(given.metadata)
    return out


STATE_WORDS = {
    v03.TASK_STATE_SUBMITTED: "submitted",
    v03.TASK_STATE_WORKING: "working",
    v03.TASK_STATE_INPUT_REQUIRED: "input-required",
    v03.TASK_STATE_COMPLETED: "completed",
    v03.TASK_STATE_CANCELLED: "canceled",
    v03.TASK_STATE_FAILED: "failed",
    v03.TASK_STATE_REJECTED: "rejected",
    v03.TASK_STATE_AUTH_REQUIRED: "auth-required",
}
"""0.3 states -> their names in A2A 0.3's JSON schema (`TaskState`); anything else is `unknown`."""


def task_json(given: a2a_pb2.Task) -> dict[str, Any]:
    """`task` as A2A 0.3's JSON schema has it (`Task` in its a2a.json, `kind: "task"`): what the
    0.3 SDKs' push senders POST to a webhook and their receivers read (docs/push.md;
    docs/a2a-0.3.md describes this body). The fields are those of `task`, with 0.3 JSON's names
    and shapes: parts carry their `kind`, a status message is `message`, states and roles are
    lower-case words."""
    translated = task(given)
    out: dict[str, Any] = {"kind": "task", "id": translated.id, "contextId": translated.context_id}
    status_out: dict[str, Any] = {"state": STATE_WORDS.get(translated.status.state, "unknown")}
    if translated.status.HasField("update"):
        status_out["message"] = _message_json(translated.status.update)
    if translated.status.HasField("timestamp"):
        status_out["timestamp"] = translated.status.timestamp.ToJsonString()
    out["status"] = status_out
    if translated.artifacts:
        out["artifacts"] = [_artifact_json(a) for a in translated.artifacts]
    if translated.history:
        out["history"] = [_message_json(m) for m in translated.history]
    if translated.HasField("metadata"):
        out["metadata"] = json_format.MessageToDict(translated.metadata)
    return out


def _message_json(given: v03.Message) -> dict[str, Any]:
    """A 0.3 message in 0.3 JSON; a role left unspecified reads as `agent` (0.3 JSON requires
    one, and the messages a task holds without one are the agent's status messages)."""
    out: dict[str, Any] = {
        "kind": "message",
        "messageId": given.message_id,
        "role": "user" if given.role == v03.ROLE_USER else "agent",
        "parts": [_part_json(p) for p in given.content],
    }
    if given.context_id:
        out["contextId"] = given.context_id
    if given.task_id:
        out["taskId"] = given.task_id
    if given.extensions:
        out["extensions"] = list(given.extensions)
    if given.HasField("metadata"):
        out["metadata"] = json_format.MessageToDict(given.metadata)
    return out


def _artifact_json(given: v03.Artifact) -> dict[str, Any]:
    out: dict[str, Any] = {
        "artifactId": given.artifact_id,
        "parts": [_part_json(p) for p in given.parts],
    }
    if given.name:
        out["name"] = given.name
    if given.description:
        out["description"] = given.description
    if given.extensions:
        out["extensions"] = list(given.extensions)
    if given.HasField("metadata"):
        out["metadata"] = json_format.MessageToDict(given.metadata)
    return out


def _part_json(given: v03.Part) -> dict[str, Any]:
    """`{"kind": "text", "text"}`, `{"kind": "file", "file": {"bytes" (base64) | "uri",
    "mimeType", "name"}}` or `{"kind": "data", "data"}`, with the part's metadata."""
    kind = given.WhichOneof("part")
    out: dict[str, Any]
    if kind == "file":
        given_file = given.file
        file: dict[str, Any] = {}
        if given_file.WhichOneof("file") == "file_with_uri":
            file["uri"] = given_file.file_with_uri
        else:
            file["bytes"] = base64.b64encode(given_file.file_with_bytes).decode("ascii")
        if given_file.mime_type:
            file["mimeType"] = given_file.mime_type
        if given_file.name:
            file["name"] = given_file.name
        out = {"kind": "file", "file": file}
    elif kind == "data":
        out = {"kind": "data", "data": json_format.MessageToDict(given.data.data)}
    else:
        out = {"kind": "text", "text": given.text}
    if given.HasField("metadata"):
        out["metadata"] = json_format.MessageToDict(given.metadata)
    return out


def send_response(given: a2a_pb2.SendMessageResponse) -> v03.SendMessageResponse:
    if given.HasField("message"):
        return v03.SendMessageResponse(msg=message(given.message))
    return v03.SendMessageResponse(task=task(given.task))


def stream_response(given: a2a_pb2.StreamResponse) -> v03.StreamResponse:
    """A status update is `final` when its state is terminal, and only then."""
    kind = given.WhichOneof("payload")
    if kind == "task":
        return v03.StreamResponse(task=task(given.task))
    if kind == "message":
        return v03.StreamResponse(msg=message(given.message))
    if kind == "status_update":
        event = given.status_update
        update = v03.TaskStatusUpdateEvent(
            task_id=event.task_id,
            context_id=event.context_id,
            status=status(event.status),
            final=event.status.state in TERMINAL_STATES,
        )
        if event.HasField("metadata"):
            update.metadata.CopyFrom(event.metadata)
        return v03.StreamResponse(status_update=update)
    if kind == "artifact_update":
        chunk = given.artifact_update
        out = v03.TaskArtifactUpdateEvent(
            task_id=chunk.task_id,
            context_id=chunk.context_id,
            artifact=artifact(chunk.artifact),
            append=chunk.append,
            last_chunk=chunk.last_chunk,
        )
        if chunk.HasField("metadata"):
            out.metadata.CopyFrom(chunk.metadata)
        return v03.StreamResponse(artifact_update=out)
    return v03.StreamResponse()


def push_config(given: a2a_pb2.TaskPushNotificationConfig) -> v03.TaskPushNotificationConfig:
    """Named `tasks/{task}/pushNotificationConfigs/{id}`; the tenant has no 0.3 field."""
    out = v03.TaskPushNotificationConfig(name=config_name(given.task_id, given.id))
    config = out.push_notification_config
    config.id = given.id
    config.url = given.url
    config.token = given.token
    if given.HasField("authentication"):
        auth = given.authentication
        if auth.scheme:
            config.authentication.schemes.append(auth.scheme)
        config.authentication.credentials = auth.credentials
    return out


def push_configs(
    given: a2a_pb2.ListTaskPushNotificationConfigsResponse,
) -> v03.ListTaskPushNotificationConfigResponse:
    return v03.ListTaskPushNotificationConfigResponse(
        configs=[push_config(c) for c in given.configs], next_page_token=given.next_page_token
    )


def agent_card(card: a2a_pb2.AgentCard) -> v03.AgentCard:
    """The card in 0.3 shape, over its 0.3 interfaces only (UNSUPPORTED_OPERATION when it lists
    none): the first is `url` / `preferred_transport` / `protocol_version`, and
    `additional_interfaces` lists them all, the first included (0.3 asks for that). 1.0-only
    content is dropped: other versions' interfaces, tenants, the device-code OAuth flow, PKCE
    flags, and the signatures (they sign the 1.0 card, so they could not verify against this
    one)."""
    interfaces = [i for i in card.supported_interfaces if is_v03(i.protocol_version)]
    if not interfaces:
        raise UnsupportedOperationError(
            "this agent's card lists no A2A 0.3 interface (it lists no gRPC interface): read "
            "the card over HTTP at /.well-known/agent-card.json"
        )
    first = interfaces[0]
    out = v03.AgentCard(
        protocol_version=first.protocol_version,
        name=card.name,
        description=card.description,
        url=first.url,
        preferred_transport=first.protocol_binding,
        additional_interfaces=[
            v03.AgentInterface(url=i.url, transport=i.protocol_binding) for i in interfaces
        ],
        version=card.version,
        documentation_url=card.documentation_url,
        icon_url=card.icon_url,
        default_input_modes=card.default_input_modes,
        default_output_modes=card.default_output_modes,
        supports_authenticated_extended_card=card.capabilities.extended_agent_card,
        skills=[rewire(skill, v03.AgentSkill) for skill in card.skills],
        security=[rewire(r, v03.Security) for r in card.security_requirements],
    )
    if card.HasField("provider"):
        out.provider.CopyFrom(rewire(card.provider, v03.AgentProvider))
    capabilities = card.capabilities
    out.capabilities.streaming = capabilities.streaming
    out.capabilities.push_notifications = capabilities.push_notifications
    out.capabilities.extensions.extend(
        rewire(ext, v03.AgentExtension) for ext in capabilities.extensions
    )
    for name, scheme in card.security_schemes.items():
        out.security_schemes[name].CopyFrom(rewire(scheme, v03.SecurityScheme))
    return out


SCHEME_TYPES = {
    "apiKeySecurityScheme": "apiKey",
    "httpAuthSecurityScheme": "http",
    "oauth2SecurityScheme": "oauth2",
    "openIdConnectSecurityScheme": "openIdConnect",
    "mtlsSecurityScheme": "mutualTLS",
}
"""0.3 ProtoJSON's security scheme field -> the `type` A2A 0.3's JSON schema gives the scheme."""


def agent_card_json(card: a2a_pb2.AgentCard) -> dict[str, Any]:
    """`agent_card` as A2A 0.3's JSON schema has it (`AgentCard` in its a2a.json), what 0.3
    clients read over HTTP; UnsupportedOperationError as `agent_card`.

    It is the 0.3 card's ProtoJSON but for security, which 0.3's JSON shapes otherwise: a
    scheme is one object with a `type` (and an API key's `location` is `in`), a requirement
    maps scheme names straight to scopes. What 0.3 requires is present even when empty (lists,
    a flow's `scopes`, a skill's name and description, a provider's url).

    An OAuth2 scheme's `flows` are the 1.0 card's, device-code flow and `pkceRequired`
    included: a 0.3 reader ignores those, and a 1.0 reader that meets a scheme with a `type`
    (the official SDK's resolver) rebuilds the scheme from these fields, so with 0.3's flows
    alone it would lose them, and the card's signatures would no longer verify.
    """
    out = json_format.MessageToDict(agent_card(card))
    for name, scheme in out.get("securitySchemes", {}).items():
        for field, kind in SCHEME_TYPES.items():
            if field in scheme:
                fields = scheme[field]
                if "location" in fields:
                    fields["in"] = fields.pop("location")
                if kind == "oauth2":
                    oauth2 = card.security_schemes[name].oauth2_security_scheme
                    flows = json_format.MessageToDict(oauth2.flows)
                    for flow in flows.values():
                        flow.setdefault("scopes", {})
                    fields["flows"] = flows
                out["securitySchemes"][name] = {"type": kind, **fields}
    if "security" in out:
        out["security"] = _requirements_json(out["security"])
    out.setdefault("capabilities", {})
    for required in ("defaultInputModes", "defaultOutputModes", "skills"):
        out.setdefault(required, [])
    for skill in out["skills"]:
        for text in ("name", "description"):
            skill.setdefault(text, "")
        skill.setdefault("tags", [])
        if "security" in skill:
            skill["security"] = _requirements_json(skill["security"])
    if "provider" in out:
        for text in ("organization", "url"):
            out["provider"].setdefault(text, "")
    return out


def _requirements_json(requirements: list[dict[str, Any]]) -> list[dict[str, list[str]]]:
    """0.3 ProtoJSON's `[{"schemes": {name: {"list": scopes}}}]` as 0.3's JSON schema has it:
    `[{name: scopes}]`."""
    return [
        {name: scopes.get("list", []) for name, scopes in requirement.get("schemes", {}).items()}
        for requirement in requirements
    ]


def rewire(given: ProtoMessage, target: type[Wire]) -> Wire:
    """`given` read as `target`, a message with the same numbers and types for the fields both
    have; the fields only `given` has are discarded."""
    out = target.FromString(given.SerializeToString())
    out.DiscardUnknownFields()
    return out
