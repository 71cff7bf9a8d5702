"""Task state sets the protocol gives meaning to."""

from __future__ import annotations

from a2a_grpc.generated import a2a_pb2

TERMINAL_STATES: frozenset[int] = frozenset(
    {
        a2a_pb2.TASK_STATE_COMPLETED,
        a2a_pb2.TASK_STATE_FAILED,
        a2a_pb2.TASK_STATE_CANCELED,
        a2a_pb2.TASK_STATE_REJECTED,
    }
)
"""A task in one of these never changes again."""

INTERRUPTED_STATES: frozenset[int] = frozenset(
    {a2a_pb2.TASK_STATE_INPUT_REQUIRED, a2a_pb2.TASK_STATE_AUTH_REQUIRED}
)
"""The agent waits for the caller; blocking calls return and streams close here (spec §9.1)."""

SETTLED_STATES: frozenset[int] = TERMINAL_STATES | INTERRUPTED_STATES
"""Terminal or interrupted: where a blocking SendMessage returns and a stream closes."""


def is_settled(state: int) -> bool:
    return state in SETTLED_STATES
