"""`a2a-grpc serve` options that reach ServerConfig."""

from __future__ import annotations

import pytest

from a2a_grpc.server.cli import parser, setup
from a2a_grpc.server.config import ServerConfig


def test_max_push_configs_reaches_the_config() -> None:
    assert setup(parser().parse_args([])).config.max_push_configs_per_task == 16
    args = parser().parse_args(["--max-push-configs", "3"])
    assert setup(args).config.max_push_configs_per_task == 3


def test_max_push_configs_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_push_configs_per_task"):
        ServerConfig(max_push_configs_per_task=0)
