"""`a2a-grpc serve --help` and the docs agree: every option is documented in both (the options
table of docs/server.md, made from the settings' table), with its default; the exit-code table of
docs/cli.md is the code's."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from a2a_grpc.core import exit_codes
from a2a_grpc.server.cli import parser
from a2a_grpc.server.options import options_table
from a2a_grpc.server.settings import SETTINGS
from tests import doc_tables

DOCS = Path(__file__).resolve().parents[2] / "docs"
CLI_DOC = (DOCS / "cli.md").read_text()


def _options() -> list[argparse.Action]:
    return [
        action
        for action in parser()._actions  # argparse has no public list of a parser's options
        if action.help != argparse.SUPPRESS and action.dest != "help"
    ]


def _readme_options_table() -> list[str]:
    return doc_tables.committed("serve-options").splitlines()[2:]


def test_the_docs_options_table_is_the_settings() -> None:
    assert doc_tables.committed("serve-options") == options_table(SETTINGS), (
        "docs/server.md's options table is stale: run `make doc-tables`"
    )


@pytest.mark.parametrize("action", _options(), ids=lambda action: action.option_strings[0])
def test_every_serve_option_has_help_that_gives_its_default(action: argparse.Action) -> None:
    help_text = (action.help or "") % {"default": action.default}
    assert help_text, f"{action.option_strings[0]} has no help"
    if action.nargs != 0:  # a flag is off unless given; every other option names its default
        assert "default" in help_text, f"{action.option_strings[0]}: {help_text}"


def test_the_readme_options_table_lists_exactly_the_serve_options() -> None:
    in_readme = {
        option
        for row in _readme_options_table()
        for option in re.findall(r"--[a-z0-9][a-z0-9-]*", row.split(" | ")[0])
    }
    names = {name for action in _options() for name in action.option_strings}
    assert in_readme <= names, (
        f"docs/server.md lists options serve does not have: {in_readme - names}"
    )
    missing = [a.option_strings[0] for a in _options() if not in_readme & set(a.option_strings)]
    assert not missing, f"the options table of docs/server.md does not list {missing}"


def test_the_readme_defaults_are_the_parsers() -> None:
    defaults = {action.option_strings[0]: action.default for action in _options()}
    checked = 0
    for row in _readme_options_table():
        for option, default in re.findall(r"`(--[a-z-]+)[^`]*` \[(-?[\d.]+)\b", row):
            expected = defaults[option]
            if isinstance(expected, int | float):
                assert float(default) == expected, option
            else:
                assert default == str(expected), option
            checked += 1
    assert checked >= 15


def test_the_readme_exit_code_table_is_the_codes() -> None:
    section = CLI_DOC[CLI_DOC.index("## Exit codes") :]
    start = section.index("| Code | Returned by | Meaning |")
    rows = section[start : section.index("\n\n", start)].splitlines()[2:]
    in_readme = [tuple(cell.strip() for cell in row.strip("|").split(" | ")) for row in rows]
    assert in_readme == [
        (str(entry.code), entry.commands, entry.meaning) for entry in exit_codes.TABLE
    ]


def test_each_help_shows_the_codes_its_command_returns() -> None:
    serve = parser().format_help().split("exit codes:")[1]
    assert "  8   cannot listen" in serve and "  3 " not in serve
    assert "  0   success" in serve and "  2   usage" in serve
