"""Task states by the short names people read and type: `input-required` for
TASK_STATE_INPUT_REQUIRED."""

from __future__ import annotations

from typing import cast

from a2a_grpc.generated import a2a_pb2

_PREFIX = "TASK_STATE_"


def state_name(state: int) -> str:
    """`input-required` for TASK_STATE_INPUT_REQUIRED; ValueError for an unknown number."""
    return str(a2a_pb2.TaskState.Name(state)).removeprefix(_PREFIX).lower().replace("_", "-")


def parse_state_name(text: str) -> a2a_pb2.TaskState:
    """The state a short name (any case, `-` or `_`) or a full enum name stands for; ValueError
    when it names none."""
    name = _PREFIX + text.upper().replace("-", "_").removeprefix(_PREFIX)
    return cast(a2a_pb2.TaskState, a2a_pb2.TaskState.Value(name))
