"""`serve` builds ServerConfig from its options by field name (server/cli.py config_from_args):
every field has an option of its name or a stated reason not to, and every option is a field or
a stated input of another kind. The options are the settings' table (server/settings.py), and
server/options.py refuses a setting that names no field or cannot convert its value."""

from __future__ import annotations

import argparse
import dataclasses
import re

import pytest

from a2a_grpc.server.cli import config_from_args, parser
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.options import SAME_ROW, Kind, Setting, add_options, options_table
from a2a_grpc.server.settings import NOT_CONFIG, NOT_OPTIONS, SETTINGS

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


def test_the_parser_is_the_settings_table_in_order() -> None:
    options = [
        action.option_strings[0]
        for action in parser()._actions  # argparse has no public list of a parser's options
        if not isinstance(action, argparse._HelpAction)
    ]
    assert options == [setting.option for setting in SETTINGS]
    assert len({setting.name for setting in SETTINGS}) == len(SETTINGS), "a setting twice"


def test_a_field_s_type_gives_its_converter_and_its_default() -> None:
    command = argparse.ArgumentParser()
    add_options(
        command,
        [
            Setting("max_tasks", help="", doc="x"),  # int
            Setting("task_ttl", help="", doc="x"),  # float
            Setting("http_port", help="", doc="x", default=None),  # int | None
            Setting("store", help="", doc="x"),  # str: the text
            Setting("worker_index", help="", doc="x", into="a worker's index"),  # no field
        ],
    )
    args = command.parse_args(
        ["--max-tasks", "7", "--task-ttl", "2", "--http-port", "9", "--store", "12"]
    )
    assert (args.max_tasks, args.task_ttl, args.http_port, args.store) == (7, 2.0, 9, "12")
    assert args.worker_index is None
    assert command.parse_args([]).max_tasks == ServerConfig().max_tasks


@pytest.mark.parametrize(
    ("setting", "says"),
    [
        (Setting("max_taks", help="", doc="x"), "ServerConfig has no field of that name"),
        (Setting("bindings", help="", doc="x"), "a field of type tuple[str, ...] needs `convert`"),
    ],
)
def test_a_setting_that_cannot_be_an_option_is_refused(setting: Setting, says: str) -> None:
    with pytest.raises(TypeError, match=re.escape(says)):
        add_options(argparse.ArgumentParser(), [setting])


def test_the_docs_table_needs_a_first_row_and_a_default_in_words() -> None:
    with pytest.raises(ValueError, match="the first row needs its text"):
        options_table([Setting("port", help="", doc=SAME_ROW)])
    with pytest.raises(ValueError, match="max_store_bytes: say its default in words"):
        options_table([Setting("max_store_bytes", help="", doc="x")])
    table = options_table(
        [
            Setting("metrics", kind=Kind.SWITCH, help="", doc="metrics"),
            Setting("compat_03", kind=Kind.OFF, help="", doc="no 0.3"),
            Setting("host", help="", doc="where"),
            Setting("port", help="", doc=SAME_ROW),
            Setting("jwks", metavar="URL|FILE", help="", doc="keys"),
            Setting("worker_index", help="", doc="", into="x", hidden=True),
        ]
    )
    assert table.splitlines()[2:] == [
        "| `--metrics` / `--no-metrics` [on] | metrics |",
        "| `--no-compat-03` | no 0.3 |",
        "| `--host` [127.0.0.1], `--port` [50051] | where |",
        "| `--jwks URL\\|FILE` | keys |",
    ]
