"""The card of an agent run without --card, made from what its class declares."""

from __future__ import annotations

import re

import pytest

from a2a_grpc.server.agent import Skill
from a2a_grpc.server.card import agent_card


class _Base:
    """A base class's docstring, which is not the agent's description."""

    async def execute(self, context: object, events: object) -> None: ...


class Plain(_Base):
    async def execute(self, context: object, events: object) -> None: ...


def test_a_card_made_from_an_agent_without_declarations() -> None:
    card = agent_card(Plain())
    assert (card.name, card.description, card.version) == ("Plain", "Plain, an A2A agent.", "0.1.0")
    assert [(s.id, s.name, s.description, list(s.tags)) for s in card.skills] == [
        ("plain", "Plain", "Plain, an A2A agent.", ["plain"])
    ]
    assert list(card.default_input_modes) == list(card.default_output_modes) == ["*/*"]
    assert card.capabilities.streaming and card.capabilities.push_notifications


@pytest.mark.parametrize(
    ("attribute", "value", "says"),
    [
        ("name", 3, "`name` must be a non-empty str"),
        ("skills", "shout", "`skills` must be a list of Skill"),
        ("skills", [], "`skills` is empty"),
        ("skills", [Skill("a"), Skill("a")], "`skills[1]` needs an id of its own"),
        ("skills", [Skill("a", tags="t")], "`skills[0].tags` must be a list of str"),
        ("input_modes", "text/plain", "`input_modes` must be a list of str"),
    ],
)
def test_a_bad_declaration_names_the_attribute(attribute: str, value: object, says: str) -> None:
    agent = Plain()
    setattr(agent, attribute, value)
    with pytest.raises(ValueError, match=re.escape(says)):
        agent_card(agent)
