"""Where `serve` listens and what its card lists: --advertise, wildcards, IPv6, bind failures."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import httpx
import pytest
from google.protobuf import json_format

from a2a_grpc.client import A2AClient
from a2a_grpc.core import exit_codes
from a2a_grpc.generated import a2a_pb2
from tests.integration.serve_process import A2A_GRPC, run_serve, serving


def _interfaces(card_url_base: str | None) -> dict[str, str]:
    assert card_url_base is not None
    response = httpx.get(f"{card_url_base}/.well-known/agent-card.json", timeout=10)
    response.raise_for_status()
    card = json_format.Parse(response.text, a2a_pb2.AgentCard(), ignore_unknown_fields=True)
    return {i.protocol_binding: i.url for i in card.supported_interfaces}


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("a2a-grpc serve: ")
    return lines[0]


@pytest.mark.skipif(not _has_ipv6_loopback(), reason="this machine has no IPv6 loopback (::1)")
@pytest.mark.parametrize(
    "options", [("--host", "::1"), ("--host", "::", "--advertise", "[::1]")], ids=["::1", "::"]
)
async def test_serving_on_ipv6(options: tuple[str, ...]) -> None:
    with serving(*options, "--port", "0", "--http-port", "0") as served:
        assert served.host == f"[{options[1]}]"
        address = f"[::1]:{served.port}"
        assert served.http_base is not None
        http_base = served.http_base.replace("[::]", "[::1]")
        assert http_base.startswith("http://[::1]:")
        assert _interfaces(http_base) == {
            "GRPC": address,
            "JSONRPC": http_base + "/",
            "HTTP+JSON": http_base,
        }
        async with A2AClient.connect(address, timeout=10) as client:
            task = await client.send_message(
                a2a_pb2.Message(role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text="hi")])
            )
        assert isinstance(task, a2a_pb2.Task)
        assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED


def test_the_card_lists_the_advertised_addresses() -> None:
    options = ("--host", "127.0.0.1", "--port", "0", "--advertise", "agent.example.com:443")
    with serving(*options) as served:
        http_port = served.http_base.rsplit(":", 1)[1] if served.http_base else ""
        assert _interfaces(served.http_base) == {
            "GRPC": "agent.example.com:443",
            "JSONRPC": f"http://agent.example.com:{http_port}/",
            "HTTP+JSON": f"http://agent.example.com:{http_port}",
        }
        assert "listing GRPC agent.example.com:443, JSONRPC http://agent.example.com:" in (
            served.card_line
        )
        assert served.card_line.endswith(", GRPC 0.3 agent.example.com:443")
    with serving(
        *options[:4],
        "--advertise",
        "[2001:db8::7]",
        "--advertise-http",
        "https://agent.example.com/a2a/",
    ) as served:
        assert _interfaces(served.http_base) == {
            "GRPC": f"[2001:db8::7]:{served.port}",
            "JSONRPC": "https://agent.example.com/a2a/",
            "HTTP+JSON": "https://agent.example.com/a2a",
        }


def test_a_wildcard_without_advertise_warns_and_lists_the_host_name() -> None:
    with serving("--host", "0.0.0.0", "--port", "0") as served:
        address = f"{socket.gethostname()}:{served.port}"
        assert _interfaces(served.http_base.replace("0.0.0.0", "127.0.0.1"))["GRPC"] == address
    assert "without --advertise: the card lists " + address in served.stderr
    with serving("--host", "0.0.0.0", "--port", "0", "--advertise", "10.1.2.3") as served:
        pass
    assert "without --advertise" not in served.stderr


def test_a_non_local_address_is_said_to_be_not_local() -> None:
    result = run_serve("--host", "192.0.2.1", "--port", "0")  # TEST-NET-1: never local
    assert result.returncode == exit_codes.CANNOT_LISTEN
    assert "cannot listen on 192.0.2.1:0: the address is not local" in _one_line(result)


def test_an_http_port_in_use_is_said_to_be_in_use() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = run_serve("--host", "127.0.0.1", "--port", "0", "--http-port", str(port))
    assert result.returncode == exit_codes.CANNOT_LISTEN
    assert _one_line(result) == (
        f"a2a-grpc serve: cannot listen on 127.0.0.1:{port}: the port is in use (another "
        "process listens on it) (the HTTP port)"
    )


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--advertise", "grpc://host:1", "expected HOST:PORT"),
        ("--advertise", "host:99999", "the port must be a number from 1 to 65535"),
        ("--advertise", "[::1", "expected HOST:PORT or [IPV6]:PORT"),
        ("--advertise-http", "ftp://host", "expected an http:// or https:// URL"),
    ],
)
def test_a_bad_advertised_address_is_a_start_up_error(
    option: str, value: str, says: str, tmp_path: Path
) -> None:
    result = run_serve("--port", "0", option, value, cwd=tmp_path)
    assert result.returncode == exit_codes.USAGE
    assert says in _one_line(result)


def test_the_serve_help_names_every_address_option() -> None:
    result = subprocess.run([A2A_GRPC, "serve", "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    assert "--advertise HOST[:PORT]" in result.stdout and "--advertise-http URL" in result.stdout


def test_the_start_up_line_lists_the_interfaces_the_card_lists(tmp_path: Path) -> None:
    """A --card file with interfaces of its own: the line names those, not the listen address."""
    card = {
        "name": "Filed",
        "description": "d",
        "version": "1",
        "defaultInputModes": ["*/*"],
        "defaultOutputModes": ["*/*"],
        "skills": [{"id": "s", "name": "s", "description": "d", "tags": ["t"]}],
        "supportedInterfaces": [
            {"url": "mesh.example:7443", "protocolBinding": "GRPC", "protocolVersion": "1.0"}
        ],
    }
    (tmp_path / "card.json").write_text(json.dumps(card))
    options = ("--port", "0", "--bindings", "grpc", "--card", str(tmp_path / "card.json"))
    with serving(*options) as served:
        assert served.card_line.endswith(
            "listing GRPC mesh.example:7443, GRPC 0.3 mesh.example:7443"
        ), served.card_line
        assert f":{served.port}" not in served.card_line
