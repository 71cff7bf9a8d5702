"""`serve` builds ServerConfig from its options by field name (server/cli.py config_from_args):
every field has an option of its name or a stated reason not to, and every option is a field or
a stated input of another kind."""

from __future__ import annotations

import argparse
import dataclasses

from a2a_grpc.server.cli import NOT_CONFIG, NOT_OPTIONS, config_from_args, parser
from a2a_grpc.server.config import ServerConfig

FIELDS = {field.name for field in dataclasses.fields(ServerConfig)}
DESTS = {
    action.dest
    for action in parser()._actions  # argparse has no public list of a parser's options
    if not isinstance(action, argparse._HelpAction)
}


def test_every_config_field_is_an_option_or_says_why_not() -> None:
    assert FIELDS - DESTS - set(NOT_OPTIONS) == set()
    assert set(NOT_OPTIONS) <= FIELDS, "NOT_OPTIONS names a field ServerConfig does not have"
    assert all(NOT_OPTIONS.values()), "every field without an option gives its reason"


def test_every_option_is_a_field_or_a_stated_other_input() -> None:
    assert DESTS - FIELDS - set(NOT_CONFIG) == set()
    assert set(NOT_CONFIG) <= DESTS, "NOT_CONFIG names an option serve does not have"
    assert not set(NOT_CONFIG) & FIELDS, "an option in NOT_CONFIG is a field after all"
    assert not set(NOT_OPTIONS) & DESTS, "a field in NOT_OPTIONS has an option after all"


def test_the_defaults_of_serve_are_the_configs() -> None:
    built = config_from_args(parser().parse_args(["--port", "0"]))
    defaults = ServerConfig(port=0, http_port=0)
    assert built == dataclasses.replace(defaults, max_store_bytes=built.max_store_bytes)


def test_each_option_reaches_its_field() -> None:
    args = parser().parse_args(
        ["--max-push-configs", "3", "--http-port", "-1", "--no-compat-03", "--task-ttl", "7"]
    )
    config = config_from_args(args)
    assert (config.max_push_configs, config.http_port) == (3, None)
    assert (config.compat_03, config.task_ttl, config.reuse_port) == (False, 7.0, False)
    worker = parser().parse_args(["--worker-index", "1", "--worker-lifeline", "5"])
    assert config_from_args(worker).reuse_port
