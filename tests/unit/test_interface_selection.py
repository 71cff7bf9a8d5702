"""Which interface of a card a client uses (`select_interface`, behind `A2AClient.for_card`)."""

from __future__ import annotations

import pytest

from a2a_grpc.client import A2AClient, AgentCardError, select_interface
from a2a_grpc.generated import a2a_pb2


def card(*interfaces: tuple[str, str, str]) -> a2a_pb2.AgentCard:
    made = a2a_pb2.AgentCard(name="agent")
    for binding, version, url in interfaces:
        made.supported_interfaces.add(protocol_binding=binding, protocol_version=version, url=url)
    return made


GRPC = ("GRPC", "1.0", "h:1")
JSONRPC = ("JSONRPC", "1.0", "http://h:2/")
REST = ("HTTP+JSON", "1.0", "http://h:2")


def picked(agent_card: a2a_pb2.AgentCard, *transports: str, **kw: bool) -> str:
    chosen = select_interface(agent_card, transports or ("grpc", "jsonrpc", "http+json"), **kw)
    return chosen.protocol_binding


def test_the_cards_order_decides() -> None:
    assert picked(card(JSONRPC, GRPC, REST)) == "JSONRPC"
    assert picked(card(REST, JSONRPC)) == "HTTP+JSON"
    assert picked(card(GRPC, JSONRPC)) == "GRPC"


def test_only_accepted_transports_are_taken() -> None:
    assert picked(card(GRPC, JSONRPC, REST), "jsonrpc") == "JSONRPC"
    assert picked(card(GRPC, JSONRPC, REST), "http+json", "jsonrpc") == "JSONRPC"
    assert picked(card(JSONRPC), "JSONRPC") == "JSONRPC"  # the card's spelling works too


def test_client_preference_orders_by_the_clients_list() -> None:
    assert picked(card(JSONRPC, GRPC), client_preference=True) == "GRPC"
    assert picked(card(GRPC, REST), "http+json", "grpc", client_preference=True) == "HTTP+JSON"


def test_binding_names_ignore_case_and_versions_their_patch() -> None:
    assert picked(card(("grpc", "1.0.2", "h:1"))) == "grpc"


def test_a_1_0_interface_wins_over_a_0_3_one() -> None:
    chosen = select_interface(card(("GRPC", "0.3", "h:9"), ("JSONRPC", "1.0", "http://h/")))
    assert (chosen.protocol_binding, chosen.protocol_version) == ("JSONRPC", "1.0")


def test_no_acceptable_interface_lists_what_the_card_offers() -> None:
    offered = card(("HTTP+JSON", "0.3", "http://h:9"), ("urn:custom", "1.0", "x://y"), JSONRPC)
    with pytest.raises(AgentCardError) as raised:
        select_interface(offered, ("grpc",))
    text = str(raised.value)
    assert "HTTP+JSON 0.3 at http://h:9" in text and "urn:custom 1.0 at x://y" in text
    assert "JSONRPC 1.0 at http://h:2/" in text
    with pytest.raises(AgentCardError, match="no interface at all"):
        select_interface(card())


def test_an_unknown_transport_name_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown transport 'soap'"):
        select_interface(card(GRPC), ("soap",))


async def test_for_card_exposes_the_interface_and_its_tenant() -> None:
    offered = card(JSONRPC, GRPC)
    offered.supported_interfaces[0].tenant = "acme"
    client = A2AClient.for_card(offered)
    try:
        assert client.interface.protocol_binding == "JSONRPC"
        assert client.tenant == "acme"
    finally:
        await client.close()
    client = A2AClient.for_card(offered, transports=["grpc"])
    try:
        assert client.interface.url == "h:1" and client.tenant == ""
    finally:
        await client.close()


def test_a_0_3_interface_is_used_when_there_is_no_1_0_one() -> None:
    offered = card(("HTTP+JSON", "1.0", "http://h"), ("GRPC", "0.3", "h:9"))
    chosen = select_interface(offered, ("grpc", "jsonrpc"))
    assert (chosen.protocol_binding, chosen.protocol_version) == ("GRPC", "0.3")
    chosen = select_interface(card(("JSONRPC", "0.3", "http://h/"), ("GRPC", "0.3", "h:9")))
    assert chosen.protocol_binding == "JSONRPC"  # the card's order, as for 1.0


def test_0_3_is_spoken_over_every_binding_in_the_cards_order() -> None:
    offered = card(("HTTP+JSON", "0.3", "http://h"), ("JSONRPC", "0.3", "http://h/"))
    assert select_interface(offered).protocol_binding == "HTTP+JSON"
    assert select_interface(offered, ("jsonrpc",)).protocol_binding == "JSONRPC"
    with pytest.raises(AgentCardError, match=r"for A2A 1\.0, 0\.3"):
        select_interface(card(("GRPC", "0.2", "h:1")))
