"""A2A 0.3 ↔ 1.0 translation (core/v03.py), socket-free."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import struct_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from a2a_grpc.core import status, v03, v03_agents
from a2a_grpc.core.errors import (
    FieldViolation,
    InvalidParamsError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.generated import a2a_v03_pb2 as old

# -- messages carried over by their bytes ---------------------------------------------------


def _wire_compatible(source: Descriptor, target: Descriptor, path: str) -> list[str]:
    """Every field of `target` exists in `source` with the same number, type and cardinality (and
    compatible nested messages); fields only `source` has are fine (they are discarded)."""
    problems: list[str] = []
    by_number = {f.number: f for f in source.fields}
    for field in target.fields:
        theirs = by_number.get(field.number)
        where = f"{path}.{field.name}"
        if theirs is None:
            continue  # absent from the 1.0 message: never set
        if (theirs.type, theirs.is_repeated) != (field.type, field.is_repeated):
            problems.append(f"{where}: type or cardinality differs")
        elif (
            field.type == FieldDescriptor.TYPE_MESSAGE
            and theirs.message_type is not field.message_type  # one type (Struct): one shape
        ):
            problems += _wire_compatible(theirs.message_type, field.message_type, where)
    return problems


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (a2a_pb2.AgentSkill, old.AgentSkill),
        (a2a_pb2.SecurityRequirement, old.Security),
        (a2a_pb2.AgentProvider, old.AgentProvider),
        (a2a_pb2.AgentExtension, old.AgentExtension),
        (a2a_pb2.SecurityScheme, old.SecurityScheme),
    ],
)
def test_rewired_messages_share_their_wire_shape(source: type, target: type) -> None:
    assert _wire_compatible(source.DESCRIPTOR, target.DESCRIPTOR, target.__name__) == []


def test_the_wire_check_sees_a_difference() -> None:
    # Part is translated field by field precisely because its field 2 differs in type.
    assert _wire_compatible(a2a_pb2.Part.DESCRIPTOR, old.Part.DESCRIPTOR, "Part") != []


# -- resource names -------------------------------------------------------------------------


def test_names_are_parsed_strictly() -> None:
    assert v03.task_id_of("tasks/abc-1") == "abc-1"
    assert v03.config_ids_of("tasks/t/pushNotificationConfigs/c") == ("t", "c")
    for bad in ("", "tasks", "tasks/", "tasks/a/b", "Tasks/a", " tasks/a"):
        with pytest.raises(InvalidParamsError) as caught:
            v03.task_id_of(bad, "parent")
        assert caught.value.field_violations[0].field == "parent"
    for bad in ("tasks/t", "tasks/t/pushNotificationConfigs", "tasks/t/pushNotificationConfigs/"):
        with pytest.raises(InvalidParamsError):
            v03.config_ids_of(bad)


# -- requests -------------------------------------------------------------------------------


def _send(**configuration: object) -> old.SendMessageRequest:
    request = old.SendMessageRequest(
        request=old.Message(message_id="m", role=old.ROLE_USER, content=[old.Part(text="hi")])
    )
    if configuration:
        request.configuration.CopyFrom(old.SendMessageConfiguration(**configuration))  # type: ignore[arg-type]
    return request


def test_blocking_is_return_immediately_inverted_and_absent_means_blocking() -> None:
    assert not v03.send_request(_send()).configuration.return_immediately
    assert v03.send_request(
        _send(blocking=False, history_length=0)
    ).configuration.return_immediately
    assert not v03.send_request(_send(blocking=True)).configuration.return_immediately


def test_history_length_zero_means_no_limit() -> None:
    assert not v03.send_request(_send(blocking=True)).configuration.HasField("history_length")
    assert v03.send_request(_send(history_length=4)).configuration.history_length == 4
    assert not v03.get_task_request(old.GetTaskRequest(name="tasks/t")).HasField("history_length")
    got = v03.get_task_request(old.GetTaskRequest(name="tasks/t", history_length=-1))
    assert got.history_length == -1  # left to the 1.0 validation, which names it


def test_a_message_and_its_parts_become_1_0() -> None:
    data = struct_pb2.Struct()
    data.update({"a": 1})
    request = _send()
    message = request.request
    message.context_id, message.task_id = "c", "t"
    message.extensions.append("urn:x")
    message.metadata.update({"k": "v"})
    message.content.add(file=old.FilePart(file_with_bytes=b"\x01", mime_type="a/b", name="f"))
    message.content.add(file=old.FilePart(file_with_uri="https://x/y"))
    message.content.add(data=old.DataPart(data=data))
    wrapped = message.content.add()
    wrapped.data.data.update({"value": [1, 2]})
    wrapped.metadata.update({v03.DATA_PART_COMPAT: True})
    out = v03.send_request(request).message
    assert (out.message_id, out.context_id, out.task_id, out.role) == ("m", "c", "t", 1)
    assert list(out.extensions) == ["urn:x"] and out.metadata["k"] == "v"
    text, raw, url, obj, listed = out.parts
    assert text.text == "hi"
    assert (raw.raw, raw.media_type, raw.filename) == (b"\x01", "a/b", "f")
    assert url.url == "https://x/y"
    assert obj.data.struct_value == data
    assert list(listed.data.list_value.values) == [
        struct_pb2.Value(number_value=1),
        struct_pb2.Value(number_value=2),
    ]
    assert not listed.HasField("metadata")


def test_push_configs_use_the_first_scheme_and_the_ids_of_the_request() -> None:
    config = old.TaskPushNotificationConfig(
        name="ignored",
        push_notification_config=old.PushNotificationConfig(
            url="https://h/x",
            token="t",
            authentication=old.AuthenticationInfo(schemes=["Bearer", "Basic"], credentials="c"),
        ),
    )
    made = v03.create_config_request(
        old.CreateTaskPushNotificationConfigRequest(parent="tasks/t", config_id="c1", config=config)
    )
    assert (made.task_id, made.id, made.url, made.token) == ("t", "c1", "https://h/x", "t")
    assert (made.authentication.scheme, made.authentication.credentials) == ("Bearer", "c")
    config.push_notification_config.id = "own"
    minted = v03.create_config_request(
        old.CreateTaskPushNotificationConfigRequest(parent="tasks/t", config=config)
    )
    assert minted.id == "own"
    with pytest.raises(InvalidParamsError, match="config_id"):
        v03.create_config_request(
            old.CreateTaskPushNotificationConfigRequest(
                parent="tasks/t", config_id="other", config=config
            )
        )
    listed = v03.list_configs_request(
        old.ListTaskPushNotificationConfigRequest(parent="tasks/t", page_size=3, page_token="p")
    )
    assert (listed.task_id, listed.page_size, listed.page_token) == ("t", 3, "p")
    deleted = v03.delete_config_request(
        old.DeleteTaskPushNotificationConfigRequest(name="tasks/t/pushNotificationConfigs/c")
    )
    assert (deleted.task_id, deleted.id) == ("t", "c")


# -- results --------------------------------------------------------------------------------


def test_parts_become_0_3_with_non_object_data_wrapped() -> None:
    assert v03.part(a2a_pb2.Part(text="x", media_type="text/plain")) == old.Part(text="x")
    raw = v03.part(a2a_pb2.Part(raw=b"\x00", media_type="image/png", filename="a.png"))
    assert raw.file == old.FilePart(file_with_bytes=b"\x00", mime_type="image/png", name="a.png")
    assert v03.part(a2a_pb2.Part(url="https://x")).file.file_with_uri == "https://x"
    number = v03.part(a2a_pb2.Part(data=struct_pb2.Value(number_value=3)))
    assert number.data.data["value"] == 3
    assert number.metadata[v03.DATA_PART_COMPAT] is True
    # and back again, unwrapped
    back = v03.message_from_v03(old.Message(content=[number])).parts[0]
    assert back.data == struct_pb2.Value(number_value=3)


def test_a_message_drops_reference_task_ids() -> None:
    message = a2a_pb2.Message(message_id="m", role=a2a_pb2.ROLE_AGENT, reference_task_ids=["x"])
    message.parts.add(text="hi")
    out = v03.message(message)
    assert out == old.Message(message_id="m", role=old.ROLE_AGENT, content=[old.Part(text="hi")])


def test_a_task_keeps_its_state_numbers() -> None:
    task = a2a_pb2.Task(id="t", context_id="c")
    task.status.state = a2a_pb2.TASK_STATE_CANCELED
    task.status.message.message_id = "s"
    task.status.timestamp.FromSeconds(5)
    task.artifacts.add(artifact_id="a", name="n").parts.add(text="x")
    task.history.add(message_id="h")
    out = v03.task(task)
    assert out.status.state == old.TASK_STATE_CANCELLED
    assert out.status.update.message_id == "s" and out.status.timestamp.seconds == 5
    assert (out.artifacts[0].artifact_id, out.artifacts[0].name) == ("a", "n")
    assert out.artifacts[0].parts[0].text == "x"
    assert out.history[0].message_id == "h"
    for name, number in a2a_pb2.TaskState.items():
        assert old.TaskState.Name(number).replace("CANCELLED", "CANCELED") == name


@pytest.mark.parametrize("state", list(a2a_pb2.TaskState.values()))
def test_final_marks_terminal_states_only(state: int) -> None:
    event = a2a_pb2.StreamResponse(
        status_update=a2a_pb2.TaskStatusUpdateEvent(
            task_id="t",
            context_id="c",
            status=a2a_pb2.TaskStatus(state=state),  # type: ignore[arg-type]
        )
    )
    out = v03.stream_response(event).status_update
    terminal = {
        a2a_pb2.TASK_STATE_COMPLETED,
        a2a_pb2.TASK_STATE_FAILED,
        a2a_pb2.TASK_STATE_CANCELED,
        a2a_pb2.TASK_STATE_REJECTED,
    }
    assert out.final == (state in terminal)
    assert (out.task_id, out.context_id, out.status.state) == ("t", "c", state)


def test_stream_payloads() -> None:
    assert v03.stream_response(a2a_pb2.StreamResponse(task=a2a_pb2.Task(id="t"))).task.id == "t"
    reply = a2a_pb2.StreamResponse(message=a2a_pb2.Message(message_id="m"))
    assert v03.stream_response(reply).msg.message_id == "m"
    chunk = a2a_pb2.StreamResponse(
        artifact_update=a2a_pb2.TaskArtifactUpdateEvent(
            task_id="t", artifact=a2a_pb2.Artifact(artifact_id="a"), append=True, last_chunk=True
        )
    )
    out = v03.stream_response(chunk).artifact_update
    assert (out.task_id, out.artifact.artifact_id, out.append, out.last_chunk) == (
        "t",
        "a",
        True,
        True,
    )
    assert v03.send_response(a2a_pb2.SendMessageResponse(message=reply.message)).msg.message_id


@pytest.mark.parametrize(
    ("append", "last_chunk"), [(False, False), (True, False), (False, True), (True, True)]
)
def test_an_artifact_chunk_keeps_append_and_last_chunk_both_ways(
    append: bool, last_chunk: bool
) -> None:
    """Catches the translation of an artifact chunk losing, swapping or fixing `append` or
    `last_chunk`, in either direction (1.0 → 0.3 for 0.3 callers of our server, 0.3 → 1.0 for
    our client of a 0.3 agent): each direction is checked on its own, every combination."""
    chunk = a2a_pb2.StreamResponse(
        artifact_update=a2a_pb2.TaskArtifactUpdateEvent(
            task_id="t",
            context_id="c",
            artifact=a2a_pb2.Artifact(artifact_id="a", parts=[a2a_pb2.Part(text="x")]),
            append=append,
            last_chunk=last_chunk,
        )
    )
    sent = v03.stream_response(chunk)
    assert sent.WhichOneof("payload") == "artifact_update"
    out = sent.artifact_update
    assert (out.append, out.last_chunk) == (append, last_chunk)
    assert (out.task_id, out.context_id, out.artifact.artifact_id) == ("t", "c", "a")
    given = old.StreamResponse(
        artifact_update=old.TaskArtifactUpdateEvent(
            task_id="t",
            context_id="c",
            artifact=old.Artifact(artifact_id="a", parts=[old.Part(text="x")]),
            append=append,
            last_chunk=last_chunk,
        )
    )
    received = v03_agents.stream_response_from_v03(given)
    assert received == chunk


def test_a_push_config_is_named_and_lists_its_scheme() -> None:
    config = a2a_pb2.TaskPushNotificationConfig(
        tenant="x", id="c", task_id="t", url="https://h", token="k"
    )
    config.authentication.scheme = "Bearer"
    out = v03.push_config(config)
    assert out.name == "tasks/t/pushNotificationConfigs/c"
    assert list(out.push_notification_config.authentication.schemes) == ["Bearer"]
    assert (out.push_notification_config.id, out.push_notification_config.url) == ("c", "https://h")


def _card() -> a2a_pb2.AgentCard:
    card = a2a_pb2.AgentCard(name="n", description="d", version="1", icon_url="https://i")
    card.supported_interfaces.add(url="h:1", protocol_binding="GRPC", protocol_version="1.0")
    card.supported_interfaces.add(url="h:1", protocol_binding="GRPC", protocol_version="0.3")
    card.supported_interfaces.add(url="h:2", protocol_binding="JSONRPC", protocol_version="0.3.0")
    card.capabilities.streaming = True
    card.capabilities.extended_agent_card = True
    card.capabilities.extensions.add(uri="urn:e", required=True)
    flows = card.security_schemes["oauth"].oauth2_security_scheme.flows
    flows.authorization_code.token_url = "https://t"
    flows.authorization_code.pkce_required = True
    card.security_schemes["device"].oauth2_security_scheme.flows.device_code.token_url = "https://d"
    card.security_requirements.add().schemes["oauth"].list.append("read")
    skill = card.skills.add(id="s", name="S", description="sd", tags=["t"])
    skill.security_requirements.add().schemes["oauth"].SetInParent()
    card.signatures.add(protected="p", signature="s")
    card.provider.organization = "o"
    return card


def test_the_card_in_0_3_shape() -> None:
    out = v03.agent_card(_card())
    assert (out.url, out.preferred_transport, out.protocol_version) == ("h:1", "GRPC", "0.3")
    assert [(i.url, i.transport) for i in out.additional_interfaces] == [
        ("h:1", "GRPC"),
        ("h:2", "JSONRPC"),
    ]
    assert (out.name, out.description, out.version, out.icon_url) == ("n", "d", "1", "https://i")
    assert out.supports_authenticated_extended_card and out.capabilities.streaming
    assert out.capabilities.extensions[0].uri == "urn:e" and out.capabilities.extensions[0].required
    assert list(out.security[0].schemes["oauth"].list) == ["read"]
    assert out.skills[0].id == "s" and "oauth" in out.skills[0].security[0].schemes
    assert out.provider.organization == "o"
    assert out.security_schemes["oauth"].oauth2_security_scheme.flows.authorization_code.token_url
    # 1.0-only content is gone, not carried as unknown fields
    assert not out.security_schemes["device"].oauth2_security_scheme.flows.ListFields()
    assert b"https://d" not in out.SerializeToString()
    assert not out.signatures


def test_a_card_without_a_0_3_interface_is_unsupported() -> None:
    card = _card()
    del card.supported_interfaces[1:]
    with pytest.raises(UnsupportedOperationError, match=r"0\.3"):
        v03.agent_card(card)


def test_versions() -> None:
    assert all(v03.is_v03(v) for v in ("0.3", "0.3.0", " 0.3.9 "))
    assert not any(v03.is_v03(v) for v in ("1.0", "0.30", "0", "0.3.0.1", "", "x.y"))


# -- the 0.3 error convention ---------------------------------------------------------------


def test_errors_name_their_class_and_keep_their_error_info() -> None:
    code, message, trailers = status.encode_named(TaskNotFoundError("task x not found"))
    assert code == grpc.StatusCode.NOT_FOUND
    assert message == "TaskNotFoundError: task x not found"
    decoded = status.decode(code, message, trailers)
    assert isinstance(decoded, TaskNotFoundError) and decoded.reason == "TASK_NOT_FOUND"


def test_errors_name_the_0_3_fields() -> None:
    error = InvalidParamsError(
        "invalid request: message.parts[1]: set one of text, raw, url or data; "
        "configuration.task_push_notification_config.url: required",
        field_violations=[
            FieldViolation("message.parts[1]", "set one of text, raw, url or data"),
            FieldViolation("config.authentication.scheme", "required, e.g. Bearer"),
            FieldViolation("configuration.task_push_notification_config.token", "bad"),
        ],
        retry_delay=2.0,
    )
    out = v03.in_v03_terms(error)
    assert isinstance(out, InvalidParamsError) and out.retry_delay == 2.0
    assert out.message == (
        "invalid request: message.content[1]: set one of text, raw, url or data; "
        "configuration.push_notification.url: required"
    )
    assert [v.field for v in out.field_violations] == [
        "message.content[1]",
        "config.push_notification_config.authentication.schemes",
        "configuration.push_notification.token",
    ]
    plain = TaskNotFoundError("task x not found")
    assert v03.in_v03_terms(plain) is plain


def test_the_card_in_0_3_json_types_its_security_as_0_3_does() -> None:
    card = a2a_pb2.AgentCard(name="n", description="d", version="1")
    card.supported_interfaces.add(url="h:1", protocol_binding="GRPC", protocol_version="1.0")
    card.supported_interfaces.add(url="h:1", protocol_binding="GRPC", protocol_version="0.3")
    card.security_schemes["key"].api_key_security_scheme.location = "header"
    card.security_schemes["key"].api_key_security_scheme.name = "X-Key"
    card.security_schemes["mtls"].mtls_security_scheme.description = "client certificates"
    oauth = card.security_schemes["oauth"].oauth2_security_scheme
    oauth.flows.client_credentials.token_url = "https://h/token"
    oauth.flows.client_credentials.scopes["read"] = "read tasks"
    card.security_requirements.add().schemes["oauth"].list.append("read")
    skill = card.skills.add(id="s", name="S", description="a skill")
    skill.security_requirements.add().schemes.get_or_create("key")  # present, no scopes
    document = v03.agent_card_json(card)
    assert document["url"] == "h:1" and document["preferredTransport"] == "GRPC"
    assert document["protocolVersion"] == "0.3"
    assert document["securitySchemes"] == {
        "key": {"type": "apiKey", "in": "header", "name": "X-Key"},
        "mtls": {"type": "mutualTLS", "description": "client certificates"},
        "oauth": {
            "type": "oauth2",
            "flows": {
                "clientCredentials": {
                    "tokenUrl": "https://h/token",
                    "scopes": {"read": "read tasks"},
                }
            },
        },
    }
    assert document["security"] == [{"oauth": ["read"]}]
    assert document["skills"] == [
        {"id": "s", "name": "S", "description": "a skill", "tags": [], "security": [{"key": []}]}
    ]
    # What 0.3 requires is there even when empty.
    assert document["capabilities"] == {}
    assert document["defaultInputModes"] == [] and document["defaultOutputModes"] == []


# -- the client's direction (1.0 requests → 0.3, 0.3 results → 1.0) ------------------------


def test_client_requests_come_back_as_they_went() -> None:
    message = a2a_pb2.Message(
        message_id="m1", context_id="c1", task_id="t1", role=a2a_pb2.ROLE_USER
    )
    message.parts.add(text="hi")
    message.parts.add(url="https://x/y.png", media_type="image/png", filename="y.png")
    message.parts.add().data.number_value = 3
    send = a2a_pb2.SendMessageRequest(message=message)
    send.configuration.accepted_output_modes.append("text/plain")
    send.configuration.history_length = 2
    send.configuration.return_immediately = True
    assert v03.send_request(v03_agents.send_request_v03(send)) == send
    blocking = a2a_pb2.SendMessageRequest(message=message)
    assert v03_agents.send_request_v03(blocking).configuration.blocking
    get = a2a_pb2.GetTaskRequest(id="t1", history_length=0)
    assert v03.get_task_request(v03_agents.get_task_request_v03(get)) == a2a_pb2.GetTaskRequest(
        id="t1"
    )
    cancel = a2a_pb2.CancelTaskRequest(id="t1")
    assert v03.cancel_request(v03_agents.cancel_request_v03(cancel)) == cancel
    subscribe = a2a_pb2.SubscribeToTaskRequest(id="t1")
    assert v03.subscribe_request(v03_agents.subscribe_request_v03(subscribe)) == subscribe
    config = a2a_pb2.TaskPushNotificationConfig(task_id="t1", id="p1", url="https://h/", token="k")
    config.authentication.scheme = "Bearer"
    assert v03.create_config_request(v03_agents.create_config_request_v03(config)) == config


def test_client_results_come_back_as_they_went() -> None:
    task = a2a_pb2.Task(id="t1", context_id="c1")
    task.status.state = a2a_pb2.TASK_STATE_INPUT_REQUIRED
    task.status.message.CopyFrom(
        a2a_pb2.Message(message_id="q", role=a2a_pb2.ROLE_AGENT, parts=[a2a_pb2.Part(text="?")])
    )
    task.artifacts.add(artifact_id="a1", name="echo", parts=[a2a_pb2.Part(text="x")])
    assert v03_agents.task_from_v03(v03.task(task)) == task
    for event in (
        a2a_pb2.StreamResponse(task=task),
        a2a_pb2.StreamResponse(
            status_update=a2a_pb2.TaskStatusUpdateEvent(
                task_id="t1", context_id="c1", status=task.status
            )
        ),
        a2a_pb2.StreamResponse(
            artifact_update=a2a_pb2.TaskArtifactUpdateEvent(
                task_id="t1", context_id="c1", artifact=task.artifacts[0], last_chunk=True
            )
        ),
    ):
        assert v03_agents.stream_response_from_v03(v03.stream_response(event)) == event
    config = a2a_pb2.TaskPushNotificationConfig(task_id="t1", id="p1", url="https://h/")
    assert v03_agents.push_config_from_v03(v03.push_config(config)) == config


def test_a_0_3_card_lists_its_interfaces_as_0_3() -> None:
    card = old.AgentCard(
        name="old", url="http://h/rpc", preferred_transport="JSONRPC", protocol_version="0.3.0"
    )
    card.additional_interfaces.add(url="h:50051", transport="GRPC")
    card.additional_interfaces.add(url="http://h/rpc", transport="JSONRPC")
    converted = v03_agents.agent_card_from_v03(card)
    listed = [
        (i.protocol_binding, i.url, i.protocol_version) for i in converted.supported_interfaces
    ]
    assert listed == [("JSONRPC", "http://h/rpc", "0.3.0"), ("GRPC", "h:50051", "0.3.0")]
