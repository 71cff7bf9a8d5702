"""Short task-state names: what the CLI prints and what `--state` accepts."""

from __future__ import annotations

import pytest

from a2a_grpc.client.state_names import parse_state_name, state_name
from a2a_grpc.generated import a2a_pb2


def test_every_state_round_trips_through_its_short_name() -> None:
    for state in a2a_pb2.TaskState.values():
        assert parse_state_name(state_name(state)) == state


@pytest.mark.parametrize("text", ["input-required", "INPUT_REQUIRED", "TASK_STATE_INPUT_REQUIRED"])
def test_short_and_full_names_are_accepted(text: str) -> None:
    assert parse_state_name(text) == a2a_pb2.TASK_STATE_INPUT_REQUIRED


def test_short_name() -> None:
    assert state_name(a2a_pb2.TASK_STATE_AUTH_REQUIRED) == "auth-required"


def test_unknown_name() -> None:
    with pytest.raises(ValueError):
        parse_state_name("sleeping")
