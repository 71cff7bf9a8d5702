"""A2A 1.0 (`lf.a2a.v1`) → A2A 0.3 (`a2a.v1`) the other way round: what a 1.0 client calling a
0.3 agent needs (`a2a_grpc.client.transports.grpc_v03`, its JSON-RPC and HTTP+JSON twins, and
the card fetch). 1.0 requests → 0.3, 0.3 results and cards → 1.0; the same fields are dropped on
the way as in core/v03.py (a 1.0 `tenant` and `reference_task_ids`, say).
"""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format

from a2a_grpc.core.v03 import (
    PROTOCOL_VERSION,
    SCHEME_TYPES,
    config_ids_of,
    config_name,
    message,
    message_from_v03,
    part_into,
    push_config,
    push_config_into,
    rewire,
)
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.generated import a2a_v03_pb2 as v03


def send_request_v03(request: a2a_pb2.SendMessageRequest) -> v03.SendMessageRequest:
    """SendMessage / SendStreamingMessage. The configuration is always sent, so that `blocking`
    says what 1.0's `return_immediately` says (0.3 readers differ on its absence)."""
    out = v03.SendMessageRequest(request=message(request.message))
    if request.HasField("metadata"):
        out.metadata.CopyFrom(request.metadata)
    given = request.configuration
    configuration = out.configuration
    configuration.accepted_output_modes.extend(given.accepted_output_modes)
    if given.HasField("history_length"):
        configuration.history_length = given.history_length
    configuration.blocking = not given.return_immediately
    if given.HasField("task_push_notification_config"):
        configuration.push_notification.CopyFrom(
            push_config(given.task_push_notification_config).push_notification_config
        )
    return out


def get_task_request_v03(request: a2a_pb2.GetTaskRequest) -> v03.GetTaskRequest:
    out = v03.GetTaskRequest(name=f"tasks/{request.id}")
    if request.HasField("history_length"):
        out.history_length = request.history_length
    return out


def cancel_request_v03(request: a2a_pb2.CancelTaskRequest) -> v03.CancelTaskRequest:
    return v03.CancelTaskRequest(name=f"tasks/{request.id}")


def subscribe_request_v03(request: a2a_pb2.SubscribeToTaskRequest) -> v03.TaskSubscriptionRequest:
    return v03.TaskSubscriptionRequest(name=f"tasks/{request.id}")


def create_config_request_v03(
    request: a2a_pb2.TaskPushNotificationConfig,
) -> v03.CreateTaskPushNotificationConfigRequest:
    return v03.CreateTaskPushNotificationConfigRequest(
        parent=f"tasks/{request.task_id}", config_id=request.id, config=push_config(request)
    )


def get_config_request_v03(
    request: a2a_pb2.GetTaskPushNotificationConfigRequest,
) -> v03.GetTaskPushNotificationConfigRequest:
    return v03.GetTaskPushNotificationConfigRequest(name=config_name(request.task_id, request.id))


def delete_config_request_v03(
    request: a2a_pb2.DeleteTaskPushNotificationConfigRequest,
) -> v03.DeleteTaskPushNotificationConfigRequest:
    return v03.DeleteTaskPushNotificationConfigRequest(
        name=config_name(request.task_id, request.id)
    )


def list_configs_request_v03(
    request: a2a_pb2.ListTaskPushNotificationConfigsRequest,
) -> v03.ListTaskPushNotificationConfigRequest:
    return v03.ListTaskPushNotificationConfigRequest(
        parent=f"tasks/{request.task_id}",
        page_size=request.page_size,
        page_token=request.page_token,
    )


def artifact_from_v03(given: v03.Artifact) -> a2a_pb2.Artifact:
    out = a2a_pb2.Artifact(
        artifact_id=given.artifact_id,
        name=given.name,
        description=given.description,
        extensions=given.extensions,
    )
    if given.HasField("metadata"):
        out.metadata.CopyFrom(given.metadata)
    for given_part in given.parts:
        part_into(given_part, out.parts.add())
    return out


def status_from_v03(given: v03.TaskStatus) -> a2a_pb2.TaskStatus:
    out = a2a_pb2.TaskStatus(state=given.state)  # type: ignore[arg-type]  # same numbers
    if given.HasField("update"):
        out.message.CopyFrom(message_from_v03(given.update))
    if given.HasField("timestamp"):
        out.timestamp.CopyFrom(given.timestamp)
    return out


def task_from_v03(given: v03.Task) -> a2a_pb2.Task:
    out = a2a_pb2.Task(id=given.id, context_id=given.context_id)
    if given.HasField("status"):
        out.status.CopyFrom(status_from_v03(given.status))
    out.artifacts.extend(artifact_from_v03(a) for a in given.artifacts)
    out.history.extend(message_from_v03(m) for m in given.history)
    if given.HasField("metadata"):
        out.metadata.CopyFrom(given.metadata)
    return out


def send_response_from_v03(given: v03.SendMessageResponse) -> a2a_pb2.SendMessageResponse:
    """An empty payload stays empty (the caller's payload check refuses it)."""
    kind = given.WhichOneof("payload")
    if kind == "msg":
        return a2a_pb2.SendMessageResponse(message=message_from_v03(given.msg))
    if kind == "task":
        return a2a_pb2.SendMessageResponse(task=task_from_v03(given.task))
    return a2a_pb2.SendMessageResponse()


def stream_response_from_v03(given: v03.StreamResponse) -> a2a_pb2.StreamResponse:
    """0.3's `final` flag has no 1.0 field: in 1.0 the stream's end says it."""
    kind = given.WhichOneof("payload")
    if kind == "task":
        return a2a_pb2.StreamResponse(task=task_from_v03(given.task))
    if kind == "msg":
        return a2a_pb2.StreamResponse(message=message_from_v03(given.msg))
    if kind == "status_update":
        event = given.status_update
        update = a2a_pb2.TaskStatusUpdateEvent(
            task_id=event.task_id,
            context_id=event.context_id,
            status=status_from_v03(event.status),
        )
        if event.HasField("metadata"):
            update.metadata.CopyFrom(event.metadata)
        return a2a_pb2.StreamResponse(status_update=update)
    if kind == "artifact_update":
        chunk = given.artifact_update
        out = a2a_pb2.TaskArtifactUpdateEvent(
            task_id=chunk.task_id,
            context_id=chunk.context_id,
            artifact=artifact_from_v03(chunk.artifact),
            append=chunk.append,
            last_chunk=chunk.last_chunk,
        )
        if chunk.HasField("metadata"):
            out.metadata.CopyFrom(chunk.metadata)
        return a2a_pb2.StreamResponse(artifact_update=out)
    return a2a_pb2.StreamResponse()


def push_config_from_v03(
    given: v03.TaskPushNotificationConfig,
) -> a2a_pb2.TaskPushNotificationConfig:
    """The ids come from the config's `name` (INVALID_PARAMS when it is not a config's name)."""
    task_id, config_id = config_ids_of(given.name)
    out = a2a_pb2.TaskPushNotificationConfig(task_id=task_id)
    push_config_into(given.push_notification_config, out)
    out.id = config_id or out.id
    return out


def push_configs_from_v03(
    given: v03.ListTaskPushNotificationConfigResponse,
) -> a2a_pb2.ListTaskPushNotificationConfigsResponse:
    return a2a_pb2.ListTaskPushNotificationConfigsResponse(
        configs=[push_config_from_v03(c) for c in given.configs],
        next_page_token=given.next_page_token,
    )


def agent_card_from_v03(card: v03.AgentCard) -> a2a_pb2.AgentCard:
    """A 0.3 card in 1.0 shape: its `url` / `preferred_transport` and `additional_interfaces`
    become 0.3 `supported_interfaces` (the preferred one first, each url once)."""
    out = a2a_pb2.AgentCard(
        name=card.name,
        description=card.description,
        version=card.version,
        default_input_modes=card.default_input_modes,
        default_output_modes=card.default_output_modes,
        skills=[rewire(skill, a2a_pb2.AgentSkill) for skill in card.skills],
        security_requirements=[rewire(r, a2a_pb2.SecurityRequirement) for r in card.security],
    )
    version = card.protocol_version or PROTOCOL_VERSION
    listed = [(card.url, card.preferred_transport or "JSONRPC")]
    listed += [(i.url, i.transport) for i in card.additional_interfaces]
    seen: set[tuple[str, str]] = set()
    for url, binding in listed:
        if url and (url, binding) not in seen:
            seen.add((url, binding))
            out.supported_interfaces.add(
                url=url, protocol_binding=binding, protocol_version=version
            )
    if card.documentation_url:
        out.documentation_url = card.documentation_url
    if card.icon_url:
        out.icon_url = card.icon_url
    if card.HasField("provider"):
        out.provider.CopyFrom(rewire(card.provider, a2a_pb2.AgentProvider))
    out.capabilities.streaming = card.capabilities.streaming
    out.capabilities.push_notifications = card.capabilities.push_notifications
    out.capabilities.extended_agent_card = card.supports_authenticated_extended_card
    out.capabilities.extensions.extend(
        rewire(ext, a2a_pb2.AgentExtension) for ext in card.capabilities.extensions
    )
    for name, scheme in card.security_schemes.items():
        out.security_schemes[name].CopyFrom(rewire(scheme, a2a_pb2.SecurityScheme))
    return out


V03_CARD_KEYS = frozenset(
    {
        "url",
        "preferredTransport",
        "preferred_transport",
        "additionalInterfaces",
        "additional_interfaces",
        "protocolVersion",
        "protocol_version",
    }
)
"""Top-level names only an A2A 0.3 card has (in JSON or ProtoJSON spelling)."""
_V10_INTERFACES_KEYS = ("supportedInterfaces", "supported_interfaces")
_SCHEME_FIELDS = {kind: field for field, kind in SCHEME_TYPES.items()}
"""0.3 JSON's scheme `type` -> the 0.3 ProtoJSON field that holds the scheme."""


def is_v03_card_json(document: object) -> bool:
    """Whether an agent card's JSON is an A2A 0.3 card: it names its interfaces as 0.3 does
    (`url`, `preferredTransport`, `additionalInterfaces`, `protocolVersion`) and not as 1.0
    does (`supportedInterfaces`). A card with both (served for both versions, as
    `--card-v03-fields` and the official SDK's compatibility mode serve it) is a 1.0 card."""
    return (
        isinstance(document, dict)
        and not any(key in document for key in _V10_INTERFACES_KEYS)
        and any(key in document for key in V03_CARD_KEYS)
    )


def agent_card_from_v03_json(document: dict[str, Any]) -> a2a_pb2.AgentCard:
    """An A2A 0.3 card as its JSON schema has it (`AgentCard` in 0.3's a2a.json, what the
    official SDK 0.3 serves), in 1.0 shape (`agent_card_from_v03`): the inverse of
    `agent_card_json`. Security is reshaped to 0.3's ProtoJSON first: a scheme's `type`
    picks its field (an API key's `in` is `location`), a requirement's `{name: scopes}`
    becomes `{"schemes": {name: {"list": scopes}}}`; of an OAuth2 scheme's `flows`, which
    0.3's JSON lets list several and both protos hold one of, the first listed is kept.
    Unknown fields are ignored. Raises json_format.ParseError (or ValueError) when a known
    field is malformed."""
    shaped = dict(document)
    schemes = shaped.get("securitySchemes", shaped.get("security_schemes"))
    if isinstance(schemes, dict):
        shaped.pop("security_schemes", None)
        shaped["securitySchemes"] = {
            name: _scheme_from_json(scheme) for name, scheme in schemes.items()
        }
    if isinstance(shaped.get("security"), list):
        shaped["security"] = _requirements_from_json(shaped["security"])
    skills = shaped.get("skills")
    if isinstance(skills, list):
        shaped["skills"] = [
            {**skill, "security": _requirements_from_json(skill["security"])}
            if isinstance(skill, dict) and isinstance(skill.get("security"), list)
            else skill
            for skill in skills
        ]
    card = v03.AgentCard()
    json_format.ParseDict(shaped, card, ignore_unknown_fields=True)
    return agent_card_from_v03(card)


def _scheme_from_json(scheme: Any) -> Any:
    """One 0.3 JSON security scheme (`{"type": "http", ...}`) as 0.3 ProtoJSON; a scheme
    already in ProtoJSON shape (or unknown) is left as it is."""
    if not isinstance(scheme, dict) or "type" not in scheme:
        return scheme
    fields = {key: value for key, value in scheme.items() if key != "type"}
    field = _SCHEME_FIELDS.get(str(scheme["type"]))
    if field is None:
        return {}  # a scheme type 0.3 does not define: nothing this client can use of it
    if "in" in fields:
        fields["location"] = fields.pop("in")
    flows = fields.get("flows")
    if isinstance(flows, dict) and len(flows) > 1:
        first = next(iter(flows))
        fields["flows"] = {first: flows[first]}
    return {field: fields}


def _requirements_from_json(requirements: list[Any]) -> list[Any]:
    """0.3 JSON's `[{name: scopes}]` as 0.3 ProtoJSON's `[{"schemes": {name: {"list":
    scopes}}}]`; a requirement already in that shape is left as it is."""
    return [
        requirement
        if not isinstance(requirement, dict) or isinstance(requirement.get("schemes"), dict)
        else {"schemes": {name: {"list": scopes} for name, scopes in requirement.items()}}
        for requirement in requirements
    ]
