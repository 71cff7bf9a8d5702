"""`a2a-grpc serve` options that reach ServerConfig, their checks, and the store URL's
password, which no message shows."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from a2a_grpc.core.jose import KeySet
from a2a_grpc.server.cli import parse_args, parser, setup
from a2a_grpc.server.config import STORE_ENV, ServerConfig
from a2a_grpc.server.tasks.registry import redacted_url


def test_max_push_configs_reaches_the_config() -> None:
    assert setup(parser().parse_args([])).config.max_push_configs == 16
    args = parser().parse_args(["--max-push-configs", "3"])
    assert setup(args).config.max_push_configs == 3


def test_max_push_configs_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_push_configs"):
        ServerConfig(max_push_configs=0)


SECRET = "s3cr3t-pw"


def test_replica_options_reach_the_config_with_their_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(STORE_ENV, raising=False)
    config = setup(parser().parse_args([])).config
    assert (config.store, config.task_lease, config.workers, config.reuse_port) == (
        "",
        10.0,
        1,
        False,
    )
    args = parser().parse_args(["--task-lease", "2.5", "--workers", "1"])
    assert setup(args).config.task_lease == 2.5


def test_store_defaults_to_the_environment() -> None:
    environ = {STORE_ENV: "redis://cache.internal:6379/2"}
    assert parse_args([], environ)[0].store == "redis://cache.internal:6379/2"
    assert parse_args(["--store", ""], environ)[0].store == ""


@pytest.mark.parametrize(
    "store",
    [
        "",
        "redis://cache.internal",
        f"redis://:{SECRET}@cache.internal:6379/0",
        f"rediss://agent:{SECRET}@cache.internal:6380/1",
        "unix:///run/redis/redis.sock?db=3",
        "REDIS://cache.internal",
        f"redis+cluster://:{SECRET}@node-1.cache.internal:7000",
        "rediss+cluster://node-1.cache.internal:7000",
        "memory://",
    ],
)
def test_store_urls_that_are_accepted(store: str) -> None:
    assert ServerConfig(store=store).store == store


REGISTERED = (
    "the registered schemes are memory://, redis://, rediss://, unix://, redis+cluster://, "
    "rediss+cluster://"
)
"""How a store URL of an unknown scheme is refused: naming every registered scheme (the
built-in ones here; an installed package's follow them, tests/integration/test_store_plugin.py)."""


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"store": f"http://:{SECRET}@cache.internal"}, "no store is registered for a http://"),
        ({"store": f"cache.internal:{SECRET}"}, "no store is registered for a value without"),
        ({"store": "nosuch://x"}, REGISTERED),
        ({"store": f"unix://:{SECRET}@run/redis.sock"}, "needs the socket's absolute path"),
        ({"store": "memory://tasks"}, "memory:// takes nothing after the scheme"),
        ({"task_lease": 0}, "task_lease must be more than 0 and at most 3600 seconds"),
        ({"task_lease": 3600.5}, "task_lease must be more than 0 and at most 3600 seconds"),
        ({"task_lease": float("nan")}, "task_lease must be more than 0"),
        ({"workers": 0}, "workers must be at least 1"),
        ({"workers": 2}, "workers=2 needs a shared store (--store"),
        ({"workers": 2, "store": "memory://"}, "workers keeping tasks in memory:// would each"),
        ({"workers": 2, "store": "redis://r", "port": 0}, "workers=2 needs a fixed port, not 0"),
        ({"workers": 2, "store": "redis://r", "http_port": 0}, "needs a fixed http_port"),
        ({"workers": 2, "store": "redis://r", "audit_log": "a.log"}, "cannot share one audit_log"),
    ],
)
def test_unusable_replica_settings_say_what_to_fix(settings: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)) as caught:
        ServerConfig(**settings)
    assert SECRET not in str(caught.value)


def test_a_fixed_port_and_http_port_let_workers_share_a_store() -> None:
    config = ServerConfig(workers=4, store="redis://r", port=5000, http_port=5001)
    assert config.workers == 4
    assert ServerConfig(workers=2, store="redis://r", port=5000, http_port=None).workers == 2


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"redis://:{SECRET}@h:6379/0", "redis://:***@h:6379/0"),
        (f"redis://agent:{SECRET}@h/1", "redis://agent:***@h/1"),
        (f"rediss://{SECRET}@h", "rediss://***@h"),  # a lone userinfo may be a password
        (f"redis://:{SECRET}/with@sign@h:1/0", "redis://:***@h:1/0"),  # unescaped / and @
        (f"unix:///run/r.sock?db=0&password={SECRET}", "unix:///run/r.sock?db=0&password=***"),
        (f"unix:///run/r.sock?PASSWORD={SECRET}&db=1", "unix:///run/r.sock?PASSWORD=***&db=1"),
        (f"user:{SECRET}@h", "user:***@h"),  # no scheme
        ("redis://h:6379/0", "redis://h:6379/0"),
        ("", ""),
    ],
)
def test_redacted_url_hides_every_password(url: str, shown: str) -> None:
    assert redacted_url(url) == shown


def test_the_config_repr_hides_the_store_password() -> None:
    config = ServerConfig(store=f"redis://:{SECRET}@h/0")
    assert SECRET not in repr(config)
    assert "store='redis://:***@h/0'" in repr(config)


def test_worker_flags_go_together_and_make_a_port_sharing_worker() -> None:
    with pytest.raises(ValueError, match="--worker-index and --worker-lifeline go together"):
        setup(parser().parse_args(["--worker-index", "1"]))
    worker = setup(parser().parse_args(["--worker-index", "2", "--worker-lifeline", "7"]))
    assert worker.config.reuse_port and (worker.worker_index, worker.lifeline) == (2, 7)
    assert "--worker-index" not in parser().format_help()  # internal: set by the supervisor


def test_http_port_sets_the_http_port() -> None:
    assert (
        setup(parser().parse_args(["--port", "7000", "--http-port", "7100"])).config.http_port
        == 7100
    )
    assert setup(parser().parse_args(["--http-port", "-1"])).config.http_port is None


def test_the_http_port_defaults_to_the_grpc_port_plus_one() -> None:
    assert setup(parser().parse_args(["--port", "7000"])).config.http_port == 7001
    assert setup(parser().parse_args(["--port", "0"])).config.http_port == 0


def test_bindings_are_parsed_and_checked() -> None:
    assert setup(parser().parse_args([])).config.bindings == ("grpc", "jsonrpc", "http+json")
    args = parser().parse_args(["--bindings", "GRPC, jsonrpc,grpc"])
    config = setup(args).config
    assert config.bindings == ("grpc", "jsonrpc")
    assert config.http_bindings == ("JSONRPC",)
    off = setup(parser().parse_args(["--http-port", "-1"])).config
    assert off.http_bindings == ()
    with pytest.raises(ValueError, match="must include grpc"):
        setup(parser().parse_args(["--bindings", "jsonrpc"]))
    with pytest.raises(ValueError, match=r"unknown binding.*'rest'"):
        setup(parser().parse_args(["--bindings", "grpc,rest"]))


def test_signer_card_options_reach_the_config(tmp_path: Path) -> None:
    jwks = tmp_path / "keys.json"
    key = Ed25519PrivateKey.generate()
    jwks.write_text(json.dumps(KeySet.of_private_keys({"k": key}).to_jwks()))
    args = parser().parse_args(
        [
            "--trusted-signer-cards",
            "https://A.example, http://127.0.0.1:8001/cards/a.json,https://a.example:443",
            "--signer-card-timeout",
            "2",
            "--require-signed-messages",
            "--publish-signing-keys",
            str(jwks),
            "--signer-card-keys",
            str(jwks),
        ]
    )
    loaded = setup(args)
    assert loaded.config.trusted_signer_cards == (
        "https://a.example/.well-known/agent-card.json",
        "http://127.0.0.1:8001/cards/a.json",
    )
    assert loaded.config.signer_card_timeout == 2.0
    assert loaded.plan.signing_keys is not None and list(loaded.plan.signing_keys) == ["k"]
    assert loaded.plan.signer_card_keys is not None


def test_unusable_signer_card_options_say_what_to_fix(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["--trusted-signer-cards", "a.example"])
    assert "not an http(s) URL: 'a.example'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--signer-card-keys needs --trusted-signer-cards"):
        setup(parser().parse_args(["--signer-card-keys", "x.json"]))
    with pytest.raises(ValueError, match="needs --signature-keys or --trusted-signer-cards"):
        setup(parser().parse_args(["--require-signed-messages"]))
    with pytest.raises(ValueError, match=re.escape("--publish-signing-keys missing.json")):
        setup(parser().parse_args(["--publish-signing-keys", "missing.json"]))
    with pytest.raises(ValueError, match="signer_card_timeout must be positive"):
        setup(parser().parse_args(["--signer-card-timeout", "0"]))


def test_metrics_are_on_unless_turned_off() -> None:
    assert setup(parser().parse_args([])).config.metrics is True
    assert setup(parser().parse_args(["--no-metrics"])).config.metrics is False


def test_a2a_0_3_callers_are_served_unless_no_compat_03() -> None:
    assert setup(parser().parse_args([])).config.compat_03
    assert not setup(parser().parse_args(["--no-compat-03"])).config.compat_03


def test_the_names_before_the_first_release_are_gone() -> None:
    """0.2.0 dropped the pre-release names (CHANGELOG.md, Upgrading)."""
    with pytest.raises(TypeError, match="card_port"):
        ServerConfig(card_port=0)  # type: ignore[call-arg]
    with pytest.raises(SystemExit):
        parser().parse_args(["--card-port", "7100"])
