"""Our card over HTTP, read as A2A 0.3 and as 1.0 by the official SDK's own parsers.

By default the card at /.well-known/agent-card.json is a strict A2A 1.0 card, which the SDK's
1.0 proto parses without `ignore_unknown_fields`, even while 0.3 callers are served (they get
their card from GetAgentCard). With `serve --card-v03-fields` one document serves both: the
SDK's 0.3 model
(`a2a.compat.v0_3.types.AgentCard`, what 0.3 clients validate a card with) must accept it and
find our 0.3 gRPC interface in its `url`, and the SDK's 1.0 card resolver must read the same
1.0 card it would without the 0.3 fields. A card read the 0.3 way then leads the SDK's 0.3
gRPC client to a working call.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from a2a.client.card_resolver import parse_agent_card
from a2a.compat.v0_3 import types as v03
from a2a.compat.v0_3.conversions import to_core_agent_card
from a2a.types import a2a_pb2 as sdk
from google.protobuf import json_format

from tests.interop.sdk_client.conftest import make_client_for_card

pytestmark = pytest.mark.timeout(60)

CARD_PATH = "/.well-known/agent-card.json"


def fetch(base_url: str) -> dict[str, Any]:
    response = httpx.get(base_url + CARD_PATH, timeout=10)
    response.raise_for_status()
    document: dict[str, Any] = response.json()
    return document


@pytest.mark.parametrize("server", ["http_url", "secure_http_url", "oauth2_http_url"])
def test_by_default_the_card_is_a_strict_1_0_card(
    server: str, request: pytest.FixtureRequest
) -> None:
    base_url: str = request.getfixturevalue(server)
    response = httpx.get(base_url + CARD_PATH, timeout=10)
    response.raise_for_status()
    card = json_format.Parse(response.text, sdk.AgentCard())  # no unknown field allowed
    assert card == parse_agent_card(response.json())
    # 0.3 is still served and listed, as a 1.0 interface entry.
    assert {i.protocol_version for i in card.supported_interfaces} == {"1.0", "0.3"}


def test_a_0_3_client_reads_the_card_and_finds_the_0_3_interface(
    secure_v03_fields_http_url: str,
) -> None:
    document = fetch(secure_v03_fields_http_url)
    card = v03.AgentCard.model_validate(document)
    core = parse_agent_card(dict(document))
    (interface,) = [i for i in core.supported_interfaces if i.protocol_version == "0.3"]
    assert card.url == interface.url and card.preferred_transport == "GRPC"
    assert card.protocol_version == "0.3"
    assert [(i.url, i.transport) for i in card.additional_interfaces or []] == [
        (interface.url, "GRPC")
    ]
    assert card.supports_authenticated_extended_card is True
    assert card.capabilities.streaming is True
    assert [skill.id for skill in card.skills] == [skill.id for skill in core.skills]
    # The bearer scheme as 0.3's JSON types it, and the requirement as 0.3 writes it.
    schemes = card.security_schemes or {}
    assert schemes and all(isinstance(s.root, v03.HTTPAuthSecurityScheme) for s in schemes.values())
    assert [s.root.scheme.lower() for s in schemes.values()] == ["bearer"]  # type: ignore[union-attr]
    assert card.security == [{name: [] for name in schemes}]


def test_a_1_0_client_reads_the_same_card_as_without_the_0_3_fields(
    secure_v03_fields_http_url: str, secure_http_url: str
) -> None:
    document = fetch(secure_v03_fields_http_url)
    resolved = parse_agent_card(dict(document))
    plain = json_format.ParseDict(document, sdk.AgentCard(), ignore_unknown_fields=True)
    assert resolved == plain
    assert {i.protocol_version for i in resolved.supported_interfaces} >= {"1.0", "0.3"}
    assert resolved.security_schemes and resolved.security_requirements
    # The same card as the one served without the 0.3 fields (ports aside).
    without = parse_agent_card(fetch(secure_http_url))
    for card in (resolved, without):
        del card.supported_interfaces[:]
    assert resolved == without


async def test_the_card_read_as_0_3_leads_to_a_working_0_3_call(v03_fields_http_url: str) -> None:
    card = to_core_agent_card(v03.AgentCard.model_validate(fetch(v03_fields_http_url)))
    # `url` first, then `additionalInterfaces`, which lists it again (0.3 asks for that).
    assert {(i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces} == {
        (card.supported_interfaces[0].url, "GRPC", "0.3")
    }
    client = await make_client_for_card(card, streaming=False)
    try:
        message = sdk.Message(message_id=str(uuid.uuid4()), role=sdk.ROLE_USER)
        message.parts.add(text="hello")
        events = [e async for e in client.send_message(sdk.SendMessageRequest(message=message))]
        (event,) = events
        assert event.task.status.state == sdk.TASK_STATE_COMPLETED
        assert event.task.artifacts[0].parts[0].text == "hello"
    finally:
        await client.close()


def test_without_0_3_callers_the_card_is_1_0_only(no_compat_http_url: str) -> None:
    document = fetch(no_compat_http_url)
    assert not {"url", "preferredTransport", "additionalInterfaces", "security"} & set(document)
    card = parse_agent_card(dict(document))
    assert {i.protocol_version for i in card.supported_interfaces} == {"1.0"}


def test_oauth2_schemes_with_1_0_only_parts_read_right_both_ways(
    oauth2_v03_fields_http_url: str,
) -> None:
    document = fetch(oauth2_v03_fields_http_url)
    card = v03.AgentCard.model_validate(document)  # 0.3 wants `scopes` on every flow
    schemes = {name: scheme.root for name, scheme in (card.security_schemes or {}).items()}
    assert all(isinstance(scheme, v03.OAuth2SecurityScheme) for scheme in schemes.values())
    code = schemes["oauth"].flows.authorization_code  # type: ignore[union-attr]
    assert code is not None and code.scopes == {"tasks": "read and write tasks"}
    service = schemes["service"].flows.client_credentials  # type: ignore[union-attr]
    assert service is not None and service.scopes == {}
    # The SDK's resolver rebuilds a scheme that has a `type` from its 0.3 fields: it must still
    # read the device-code flow and pkceRequired, that is exactly the 1.0 card (which is also
    # what the card's signatures, when it has some, are checked against).
    resolved = parse_agent_card(dict(document))
    plain = json_format.ParseDict(document, sdk.AgentCard(), ignore_unknown_fields=True)
    assert resolved == plain
    flows = {name: s.oauth2_security_scheme.flows for name, s in resolved.security_schemes.items()}
    assert flows["oauth"].authorization_code.pkce_required
    assert flows["device"].device_code.device_authorization_url == "https://idp.example/device"
