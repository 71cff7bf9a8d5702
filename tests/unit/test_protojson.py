"""Reading requests from ProtoJSON with unknown members ignored and named (spec §5.7), and what
is still refused: a known member of the wrong type is not an unknown one."""

from __future__ import annotations

from typing import Any

import pytest

from a2a_grpc.core import protojson
from a2a_grpc.generated import a2a_pb2 as pb

MESSAGE = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}


def test_a_request_without_unknown_members_parses_as_json_format_does() -> None:
    request, ignored = protojson.parse(
        {"message": MESSAGE}, pb.SendMessageRequest, ignore_unknown=True
    )
    assert ignored == []
    assert request.message.parts[0].text == "hi"


def test_unknown_members_at_every_depth_are_left_out_and_named() -> None:
    value = {
        "message": {
            **MESSAGE,
            "generation": 3,
            "parts": [{"text": "hi", "renderHint": "bold"}, {"text": "again"}],
        },
        "configuration": {"historyLength": 2, "futureOption": {"deep": [1, 2]}},
        "priority": "high",
    }
    request, ignored = protojson.parse(value, pb.SendMessageRequest, ignore_unknown=True)
    assert sorted(ignored) == [
        "Message.generation",
        "Part.renderHint",
        "SendMessageConfiguration.futureOption",
        "SendMessageRequest.priority",
    ]
    assert [part.text for part in request.message.parts] == ["hi", "again"]
    assert request.configuration.history_length == 2
    assert value["message"]["generation"] == 3, "the caller's value is not changed"


def test_proto_names_and_json_names_are_both_known() -> None:
    value = {"message": {"message_id": "m1", "role": "ROLE_USER", "parts": [{"text": "x"}]}}
    request, ignored = protojson.parse(value, pb.SendMessageRequest, ignore_unknown=True)
    assert (request.message.message_id, ignored) == ("m1", [])


def test_members_inside_struct_and_value_are_data_not_fields() -> None:
    value = {
        "message": {
            **MESSAGE,
            "metadata": {"anything": {"nested": True}},
            "parts": [{"data": {"free": {"form": 1}}}],
        }
    }
    request, ignored = protojson.parse(value, pb.SendMessageRequest, ignore_unknown=True)
    assert ignored == []
    assert request.message.metadata["anything"]["nested"] is True


def test_map_values_that_are_messages_are_looked_into() -> None:
    value = {
        "name": "n",
        "securitySchemes": {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "x": 1}}},
    }
    card, ignored = protojson.parse(value, pb.AgentCard, ignore_unknown=True)
    assert ignored == ["HTTPAuthSecurityScheme.x"]
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"


def test_strict_refuses_an_unknown_member_as_json_format_does() -> None:
    with pytest.raises(protojson.ParseError, match='no field named "generation"'):
        protojson.parse(
            {"message": {**MESSAGE, "generation": 3}}, pb.SendMessageRequest, ignore_unknown=False
        )


@pytest.mark.parametrize(
    "value",
    [
        {"message": {**MESSAGE, "messageId": 5}, "generation": 1},  # a string field given a number
        {"message": {**MESSAGE, "role": "ROLE_SYSTEM"}, "generation": 1},  # no such enum name
        {"configuration": {"historyLength": "many"}, "x": 1},
        {"message": {**MESSAGE, "parts": "hi"}, "x": 1},  # a repeated field given a string
        {"message": [MESSAGE], "x": 1},  # a message given a list
    ],
)
def test_a_known_member_of_the_wrong_type_is_refused_even_beside_unknown_ones(
    value: dict[str, Any],
) -> None:
    with pytest.raises(protojson.ParseError):
        protojson.parse(value, pb.SendMessageRequest, ignore_unknown=True)


def test_a_value_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(protojson.ParseError):
        protojson.parse(["x"], pb.GetTaskRequest, ignore_unknown=True)
