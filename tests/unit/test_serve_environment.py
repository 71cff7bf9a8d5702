"""`serve`'s options from the environment (server/environment.py): the names, the values as
each kind of option takes them, files, flags winning, errors naming the variable, the variables
nobody reads, and the docs' table made from the parser. No sockets."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from a2a_grpc.server import environment
from a2a_grpc.server.cli import config_from_args, parse_args, parser, setup
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.environment import SettingError, variable_name, variables
from a2a_grpc.server.startup import StartupSummary, startup_lines
from tests import doc_tables

VARIABLES = {variable.name: variable for variable in variables(parser())}


def parsed(environ: dict[str, str], *argv: str) -> argparse.Namespace:
    args, _ = parse_args(list(argv), environ)
    return args


def test_the_docs_table_is_the_parsers() -> None:
    assert doc_tables.committed("serve-environment") == environment.table(parser()), (
        "docs/server.md's table of environment variables is stale: run `make doc-tables`"
    )


def test_every_documented_option_has_one_variable_named_by_the_rule() -> None:
    documented = [
        action
        for action in parser()._actions  # argparse has no public list of a parser's options
        if action.help != argparse.SUPPRESS and action.dest != "help"
    ]
    assert len(VARIABLES) == len(documented)
    assert variable_name("--max-tasks") == "A2A_GRPC_MAX_TASKS"
    assert variable_name("--card-v03-fields") == "A2A_GRPC_CARD_V03_FIELDS"
    assert VARIABLES["A2A_GRPC_METRICS"].option == "--metrics"
    assert VARIABLES["A2A_GRPC_COMPAT_03"].option == "--no-compat-03"
    assert "A2A_GRPC_WORKER_INDEX" not in VARIABLES  # hidden: set by the supervisor alone
    # Every option taking a value that is not a file's path has a file form; an option named
    # --X-file has taken the file form of --X, and means the same (the store URL from a file).
    for name, variable in VARIABLES.items():
        if variable.option.endswith("-file"):
            assert name.removesuffix("_FILE") in VARIABLES, name
        has_file_form = not variable.is_flag and not variable.names_a_file
        assert (variable.file_name is not None) == has_file_form, name
    assert VARIABLES["A2A_GRPC_TLS_CERT"].names_a_file
    assert VARIABLES["A2A_GRPC_JWKS"].names_a_file  # URL|FILE
    assert VARIABLES["A2A_GRPC_JWT_AUDIENCE"].file_name == "A2A_GRPC_JWT_AUDIENCE_FILE"


def test_values_are_converted_as_the_command_line_converts_them(tmp_path: Path) -> None:
    args = parsed(
        {
            "A2A_GRPC_PORT": "0",
            "A2A_GRPC_MAX_TASKS": "1234",
            "A2A_GRPC_TASK_TTL": "2.5",
            "A2A_GRPC_HOST": "[::1]",
            "A2A_GRPC_BINDINGS": "grpc, JSONRPC",
            "A2A_GRPC_TRUST_DOMAIN": "a.example, b.example,a.example",
            "A2A_GRPC_LOG_LEVEL": "warning",
            "A2A_GRPC_ADVERTISE": "agent.example:443",
            "A2A_GRPC_TRUSTED_SIGNER_CARDS": "https://peer.example",
        }
    )
    assert (args.port, args.max_tasks, args.task_ttl) == (0, 1234, 2.5)
    assert args.host == "::1"  # the --host converter ran
    assert args.bindings == ("grpc", "jsonrpc")
    assert args.trust_domain == ("a.example", "b.example")  # the option's own item splitting
    assert (args.log_level, args.advertise) == ("warning", "agent.example:443")
    assert args.trusted_signer_cards == ("https://peer.example/.well-known/agent-card.json",)


@pytest.mark.parametrize(
    ("text", "on"),
    [
        *[("true", True), ("TRUE", True), ("1", True), ("yes", True), ("On", True)],
        *[("false", False), ("False", False), ("0", False), ("no", False), ("off", False)],
    ],
)
def test_on_off_options_take_true_or_false_in_any_spelling(text: str, on: bool) -> None:
    args = parsed(
        {
            "A2A_GRPC_TRUST_XFCC": text,  # store_true
            "A2A_GRPC_METRICS": text,  # --metrics / --no-metrics
            "A2A_GRPC_COMPAT_03": text,  # --no-compat-03: named for what it turns on
        }
    )
    assert (args.trust_xfcc, args.metrics, args.compat_03) == (on, on, on)


def test_a_file_form_of_a_file_option_is_refused_with_the_name_to_use() -> None:
    with pytest.raises(SettingError) as refused:
        parsed({"A2A_GRPC_TLS_CERT_FILE": "/certs/tls.crt"})
    assert str(refused.value) == (
        "A2A_GRPC_TLS_CERT_FILE is not read: A2A_GRPC_TLS_CERT names the file itself "
        "(--tls-cert PEM)"
    )


def test_the_negative_spelling_is_refused_with_the_name_to_use() -> None:
    with pytest.raises(SettingError, match="A2A_GRPC_NO_COMPAT_03 is not read: set "):
        parsed({"A2A_GRPC_NO_COMPAT_03": "true"})
    with pytest.raises(SettingError, match="set A2A_GRPC_METRICS=false instead"):
        parsed({"A2A_GRPC_NO_METRICS": "1"})


def test_an_empty_variable_is_unset() -> None:
    defaults = parsed({})
    args = parsed({"A2A_GRPC_MAX_TASKS": "", "A2A_GRPC_METRICS": "", "A2A_GRPC_STORE": ""})
    assert args == defaults


@pytest.mark.parametrize(
    ("environ", "says"),
    [
        ({"A2A_GRPC_MAX_TASKS": "ten"}, "A2A_GRPC_MAX_TASKS: invalid int value: 'ten'"),
        ({"A2A_GRPC_DRAIN_DELAY": "5s"}, "A2A_GRPC_DRAIN_DELAY: invalid float value: '5s'"),
        ({"A2A_GRPC_LOG_LEVEL": "loud"}, "A2A_GRPC_LOG_LEVEL: 'loud' is not one of debug, "),
        ({"A2A_GRPC_METRICS": "maybe"}, "A2A_GRPC_METRICS: expected true or false, got 'maybe'"),
        ({"A2A_GRPC_TRUSTED_SIGNER_CARDS": "ftp://x"}, "A2A_GRPC_TRUSTED_SIGNER_CARDS: "),
        (
            {"A2A_GRPC_MAX_TASKS": "1", "A2A_GRPC_MAX_TASKS_FILE": "/f"},
            "A2A_GRPC_MAX_TASKS and A2A_GRPC_MAX_TASKS_FILE are both set: set one",
        ),
        (
            {"A2A_GRPC_STORE": "redis://a", "A2A_GRPC_STORE_FILE": "/f"},
            "A2A_GRPC_STORE and A2A_GRPC_STORE_FILE give one setting two ways: set one",
        ),
        (
            {"A2A_GRPC_JWT_AUDIENCE_FILE": "/no/such/file"},
            "A2A_GRPC_JWT_AUDIENCE_FILE: cannot read /no/such/file: No such file",
        ),
    ],
)
def test_a_bad_variable_is_an_error_naming_it(environ: dict[str, str], says: str) -> None:
    with pytest.raises(SettingError) as refused:
        parsed(environ)
    assert str(refused.value).startswith(says)


def test_a_value_can_come_from_a_file(tmp_path: Path) -> None:
    audience = tmp_path / "audience"
    audience.write_text("a2a://echo\n")
    tasks = tmp_path / "tasks"
    tasks.write_text("  77 \n")
    args, read = parse_args(
        [],
        {"A2A_GRPC_JWT_AUDIENCE_FILE": str(audience), "A2A_GRPC_MAX_TASKS_FILE": str(tasks)},
    )
    assert (args.jwt_audience, args.max_tasks) == ("a2a://echo", 77)
    assert read.sources == {
        "jwt_audience": "A2A_GRPC_JWT_AUDIENCE_FILE",
        "max_tasks": "A2A_GRPC_MAX_TASKS_FILE",
    }
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(SettingError, match=f"A2A_GRPC_JWT_ISSUER_FILE: {empty} is empty"):
        parsed({"A2A_GRPC_JWT_ISSUER_FILE": str(empty)})
    with pytest.raises(SettingError, match="A2A_GRPC_MAX_TASKS_FILE: invalid int value: 'x'"):
        tasks.write_text("x")
        parsed({"A2A_GRPC_MAX_TASKS_FILE": str(tasks)})


def test_the_command_line_wins(tmp_path: Path) -> None:
    environ = {
        "A2A_GRPC_MAX_TASKS": "5",
        "A2A_GRPC_TASK_TTL": "9",
        "A2A_GRPC_TRUST_DOMAIN": "env.example",
        "A2A_GRPC_METRICS": "false",
        "A2A_GRPC_STORE": "redis://from-the-environment",
    }
    store_file = tmp_path / "store"
    store_file.write_text("redis://from-a-file\n")
    args, read = parse_args(
        [
            "--max-t",  # an abbreviation counts as the option
            "7",
            "--trust-domain",
            "flag.example",
            "--metrics",
            "--store-file",
            str(store_file),
        ],
        environ,
    )
    assert (args.max_tasks, args.task_ttl, args.metrics) == (7, 9.0, True)
    assert args.trust_domain == ("flag.example",)  # replaced, not extended
    # --store-file hides A2A_GRPC_STORE too: one setting, two ways to give it.
    assert (args.store, args.store_file) == ("", str(store_file))
    assert config_from_args(args).store == "redis://from-a-file"
    assert read.sources == {"task_ttl": "A2A_GRPC_TASK_TTL"}
    # A flag given its default value still wins.
    assert parsed(environ, "--max-tasks", "100000").max_tasks == 100000


def test_the_store_url_from_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "store-url"
    secret.write_text("redis://:s3cret@cache.internal:6379/1\n")
    args = parser().parse_args(["--store-file", str(secret)])
    assert config_from_args(args).store == "redis://:s3cret@cache.internal:6379/1"
    both = parser().parse_args(["--store", "redis://x", "--store-file", str(secret)])
    with pytest.raises(ValueError, match="--store and --store-file give one setting two ways"):
        config_from_args(both)
    secret.write_text(" \n")
    with pytest.raises(ValueError, match="is empty: it must hold the store URL"):
        config_from_args(args)
    with pytest.raises(ValueError, match="--store-file /no/such: No such file"):
        config_from_args(parser().parse_args(["--store-file", "/no/such"]))


def test_variables_nobody_reads_are_reported_once_with_a_guess() -> None:
    _, read = parse_args(
        [],
        {
            "A2A_GRPC_MAX_TASK": "5",
            "A2A_GRPC_SOMETHING_ELSE": "x",
            "A2A_GRPC_REQUIRE_REDIS": "1",  # the test suite's switch
            "A2A_GRPC_TOKENS": "t=alice",  # bearer tokens, read by the authenticator
            "A2A_GRPC_REQUIRE_SIGNED_MESSAGES": "true",  # an option, though REQUIRE_
            "A2A_GRPC_WORKER_INDEX": "2",  # hidden: the supervisor passes it as a flag
            "OTHER": "1",
        },
    )
    assert read.unread == [
        "A2A_GRPC_MAX_TASK is set but names no serve option, so it is not read (did you mean "
        "A2A_GRPC_MAX_TASKS?)",
        "A2A_GRPC_SOMETHING_ELSE is set but names no serve option, so it is not read",
        "A2A_GRPC_WORKER_INDEX is set but names no serve option, so it is not read (did you "
        "mean A2A_GRPC_WORKERS?)",
    ]
    assert read.values == {"require_signed_messages": True}


def test_errors_about_a_setting_name_the_variable_that_set_it() -> None:
    args, read = parse_args([], {"A2A_GRPC_TASK_LEASE": "0", "A2A_GRPC_PORT": "0"})
    with pytest.raises(ValueError) as refused:
        setup(args, read)
    message = str(refused.value)
    assert "task_lease must be more than 0" in message
    assert read.blame(message) == " (set by A2A_GRPC_TASK_LEASE)"
    assert read.blame("--store-file x: No such file") == ""
    _, read = parse_args([], {"A2A_GRPC_STORE": "redis://r"})
    assert read.blame("--store-file x: No such file") == ""  # --store is not --store-file
    assert read.blame("cannot reach --store redis://r") == " (set by A2A_GRPC_STORE)"


def test_the_start_up_lines_name_the_variables_never_their_values() -> None:
    config = ServerConfig(port=50051, http_port=None, max_store_bytes=1000)
    summary = StartupSummary(
        config=config,
        address="127.0.0.1:50051",
        tls=False,
        http_base=None,
        interfaces=(("GRPC", "1.0", "127.0.0.1:50051"),),
        advertised_grpc="127.0.0.1:50051",
        agent="a2a_grpc.server.demo_agent.DemoAgent",
        card_source="demo",
    )
    assert not any("environment" in line for line in startup_lines(summary))
    lines = startup_lines(
        dataclasses.replace(summary, from_environment=("A2A_GRPC_STORE", "A2A_GRPC_MAX_TASKS"))
    )
    at = next(i for i, line in enumerate(lines) if line.startswith("settings "))
    assert lines[at - 1] == "options set by the environment: A2A_GRPC_MAX_TASKS, A2A_GRPC_STORE"


def test_push_credential_keys_come_from_the_variable_or_its_file(tmp_path: Path) -> None:
    first, second = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    args, read = parse_args([], {"A2A_GRPC_PUSH_CREDENTIALS_KEYS": f"{first},{second}"})
    keys = setup(args, read).plan.push_credentials
    assert keys is not None and keys.count == 2
    key_file = tmp_path / "keys"
    key_file.write_text(f"# the sealing key first\n{second}\n{first}\n")
    args, read = parse_args([], {"A2A_GRPC_PUSH_CREDENTIALS_KEYS_FILE": str(key_file)})
    assert args.push_credentials_keys_file == str(key_file)
    keys = setup(args, read).plan.push_credentials
    assert keys is not None and keys.count == 2
    assert read.sources == {"push_credentials_keys_file": "A2A_GRPC_PUSH_CREDENTIALS_KEYS_FILE"}
    # One setting, two ways: either flag hides both variables, both variables are an error.
    environ = {
        "A2A_GRPC_PUSH_CREDENTIALS_KEYS": first,
        "A2A_GRPC_PUSH_CREDENTIALS_KEYS_FILE": str(key_file),
    }
    with pytest.raises(SettingError, match="give one setting two ways"):
        parse_args([], environ)
    args = parsed(environ, f"--push-credentials-keys={second}")
    assert (args.push_credentials_keys, args.push_credentials_keys_file) == (second, None)
    # No server keeps them without being asked to.
    args, read = parse_args([], {})
    assert setup(args, read).plan.push_credentials is None
