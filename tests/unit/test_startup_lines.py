"""The start-up lines of `serve` (server/startup.py), from summaries written by hand: no
server, no sockets."""

from __future__ import annotations

import dataclasses
import re

import pytest

from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.startup import (
    StartupSummary,
    settings_line,
    shutdown_plan,
    startup_lines,
    startup_report,
)

CONFIG = ServerConfig(port=50051, http_port=50052, max_store_bytes=1000)
SUMMARY = StartupSummary(
    config=CONFIG,
    address="127.0.0.1:50051",
    tls=False,
    http_base="http://127.0.0.1:50052",
    interfaces=(
        ("GRPC", "1.0", "127.0.0.1:50051"),
        ("JSONRPC", "1.0", "http://127.0.0.1:50052/"),
        ("HTTP+JSON", "1.0", "http://127.0.0.1:50052"),
        ("GRPC", "0.3", "127.0.0.1:50051"),
    ),
    advertised_grpc="127.0.0.1:50051",
    agent="a2a_grpc.server.demo_agent.DemoAgent",
    card_source="demo",
)


def test_the_lines_of_a_plain_server() -> None:
    assert startup_lines(SUMMARY) == [
        "serving A2A 1.0 over gRPC (plaintext) on 127.0.0.1:50051",
        "agent card at http://127.0.0.1:50052/.well-known/agent-card.json; "
        "JSON-RPC at http://127.0.0.1:50052/; HTTP+JSON at http://127.0.0.1:50052",
        "agent a2a_grpc.server.demo_agent.DemoAgent; card: demo, listing "
        "GRPC 127.0.0.1:50051, JSONRPC http://127.0.0.1:50052/, "
        "HTTP+JSON http://127.0.0.1:50052, GRPC 0.3 127.0.0.1:50051",
        settings_line(CONFIG),
        "no authentication configured: every caller is served as the same anonymous principal",
        "A2A 0.3 callers are served on the same port (a2a.v1.A2AService; off: --no-compat-03)",
        shutdown_plan(CONFIG),
    ]
    assert not any(line.warning for line in startup_report(SUMMARY))


def test_the_settings_line_names_every_field_and_hides_the_store_password() -> None:
    config = dataclasses.replace(CONFIG, store="redis://:s3cret@redis:6379/0")
    line = settings_line(config)
    assert line.startswith("settings host=127.0.0.1, port=50051, max_tasks=100000, ")
    names = re.findall(r"(?:^|, )([a-z0-9_]+)=", line.removeprefix("settings "))
    assert names == [field.name for field in dataclasses.fields(ServerConfig)]
    assert "max_live_tasks_per_principal=10000" in line  # the effective value, not None
    assert "store=redis://:***@redis:6379/0" in line and "s3cret" not in line
    assert "store=memory" in settings_line(CONFIG)


def test_without_an_http_port_and_with_tls() -> None:
    summary = dataclasses.replace(
        SUMMARY,
        config=dataclasses.replace(CONFIG, http_port=None),
        tls=True,
        http_base=None,
        interfaces=(("GRPC", "1.0", "localhost:50051"),),
    )
    lines = startup_lines(summary)
    assert lines[0] == "serving A2A 1.0 over gRPC (TLS) on 127.0.0.1:50051"
    assert lines[1] == "agent card (not served over HTTP)"
    assert lines[2].endswith("card: demo, listing GRPC localhost:50051")


def test_the_http_line_names_only_the_bindings_served() -> None:
    config = dataclasses.replace(CONFIG, bindings=("grpc", "jsonrpc"))
    line = startup_lines(dataclasses.replace(SUMMARY, config=config))[1]
    assert line.endswith("; JSON-RPC at http://127.0.0.1:50052/")


@pytest.mark.parametrize(
    ("tokens", "certificates", "line"),
    [
        (True, False, "authentication required: bearer token"),
        (False, True, "authentication required: client certificate"),
        (
            True,
            True,
            "authentication required: a client certificate and a bearer token on every call "
            "(the token names the principal)",
        ),
    ],
)
def test_the_authentication_line(tokens: bool, certificates: bool, line: str) -> None:
    summary = dataclasses.replace(SUMMARY, bearer_tokens=tokens, client_certificates=certificates)
    assert line in startup_lines(summary)


def test_telemetry_and_the_03_lines() -> None:
    config = dataclasses.replace(CONFIG, card_v03_fields=True, drain_delay=0)
    lines = startup_lines(dataclasses.replace(SUMMARY, config=config, telemetry="tracing on"))
    assert lines[3:5] == ["tracing on", settings_line(config)]
    assert lines[-2].startswith("the HTTP card also carries A2A 0.3's fields")
    assert lines[-1] == shutdown_plan(config)
    assert "NOT_SERVING and GOAWAY at once" in lines[-1]
    off = dataclasses.replace(config, compat_03=False, card_v03_fields=False)
    assert not any(
        "0.3" in line for line in startup_lines(dataclasses.replace(SUMMARY, config=off))[3:]
    )


def test_a_wildcard_host_without_advertise_is_warned_about_after_the_agent_line() -> None:
    config = dataclasses.replace(CONFIG, host="0.0.0.0")
    report = startup_report(dataclasses.replace(SUMMARY, config=config, advertised_grpc="vm:1"))
    warnings = [index for index, line in enumerate(report) if line.warning]
    assert warnings == [3]
    assert report[3].text == (
        "listening on 0.0.0.0 (every interface) without --advertise: the card lists vm:1, "
        "this machine's host name; set --advertise HOST:PORT to the address clients reach"
    )
    advertised = dataclasses.replace(config, advertise="a2a.example:443")
    assert not any(
        line.warning for line in startup_report(dataclasses.replace(SUMMARY, config=advertised))
    )


def test_a_shared_store_keeping_push_secrets_in_plain_text_warns_once() -> None:
    plain = dataclasses.replace(SUMMARY, push_configs_stored=True)
    warnings = [line.text for line in startup_report(plain) if line.warning]
    assert warnings == [
        "push configs' token and credentials are stored in plain text in the task store: "
        "whoever reads the store reads them; give --push-credentials-keys-file FILE to seal "
        "them (see docs/push.md, Secrets at rest)"
    ]
    sealed = dataclasses.replace(SUMMARY, push_configs_stored=True, push_credential_keys=2)
    assert not any(line.warning for line in startup_report(sealed))
    assert (
        "push configs' token and credentials are sealed in the store with the first of 2 "
        "keys of --push-credentials-keys[-file]"
    ) in startup_lines(sealed)
    unused = dataclasses.replace(SUMMARY, push_credential_keys=1)
    assert not any(line.warning for line in startup_report(unused))
    lines = startup_lines(unused)
    assert any(line.startswith("--push-credentials-keys[-file] is not used") for line in lines)
