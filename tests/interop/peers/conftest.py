"""Third-party A2A peers as real, pinned child processes, one per test module (scope="module").

- `sdk_http_peer`: the official a2a-sdk 1.3.0 (our dev extras pin it) serving JSON-RPC and
  HTTP+JSON, A2A 1.0 (tests/interop/sdk_http/peer_http_server.py).
- `sdk_http_peer_v03`: the same in the SDK's A2A 0.3 compatibility mode, its card listing only
  0.3 interfaces.
- `sdk03_peer`: the official a2a-sdk 0.3.26, a stock A2A 0.3 agent (its card in 0.3's shape),
  serving JSON-RPC and HTTP+JSON (tests/interop/sdk03/agent_server.py), in its own environment,
  built on first use by tests/interop/sdk03/sdk03_env.py.
- `adk_peer`: a Google ADK 2.13.0 agent with no model, served by ADK's `to_a2a()`
  (tests/interop/adk/agent_server.py), in ADK's own environment, built on first use by
  tests/interop/adk/adk_env.py.

Each child prints one JSON line on stdout once it listens; the fixture waits on that line, never
on the clock. This file imports neither a2a_grpc nor the SDK: the peers are child processes, and
the tests that use them import only a2a_grpc and the standard library (plus httpx).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.interop.adk.adk_env import ADK
from tests.interop.peer_env import NoNetworkError, PeerEnv, PeerEnvError
from tests.interop.sdk03.sdk03_env import SDK03

ROOT = Path(__file__).resolve().parents[3]
ADK_SERVER = ROOT / "tests" / "interop" / "adk" / "agent_server.py"
SDK03_SERVER = ROOT / "tests" / "interop" / "sdk03" / "agent_server.py"


@dataclass(frozen=True)
class PeerProcess:
    """A running peer: its base URL (`http://127.0.0.1:<port>`) and its agent card's URL."""

    name: str
    url: str
    card_url: str
    announced: dict[str, Any]


def _child_env() -> dict[str, str]:
    """Our environment without what would point a child's python at our packages."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def run_peer(name: str, argv: Sequence[str]) -> Iterator[PeerProcess]:
    """Starts `argv` in the repository's root, waits for its JSON line, kills it afterwards."""
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            list(argv),
            cwd=ROOT,
            env=_child_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        try:
            assert process.stdout is not None
            line = process.stdout.readline()  # the child's "serving" line, or EOF if it died
            try:
                announced = json.loads(line)
            except ValueError:
                process.kill()
                process.wait(timeout=30)
                log.seek(0)
                pytest.fail(
                    f"the {name} peer did not start (exit {process.returncode}, stdout "
                    f"{line!r}):\n{log.read().decode(errors='replace')[-4000:]}"
                )
            yield PeerProcess(name, announced["url"], announced["card_url"], announced)
        finally:
            process.kill()
            process.wait(timeout=30)
            if process.stdout is not None:
                process.stdout.close()


@pytest.fixture(scope="module")
def sdk_http_peer() -> Iterator[PeerProcess]:
    """The official SDK's JSON-RPC + HTTP+JSON servers, A2A 1.0, on one 127.0.0.1 port."""
    yield from run_peer(
        "a2a-sdk HTTP",
        [sys.executable, "-m", "tests.interop.sdk_http.peer_http_server", "--protocol", "1.0"],
    )


@pytest.fixture(scope="module")
def sdk_http_peer_v03() -> Iterator[PeerProcess]:
    """The official SDK's HTTP servers in their A2A 0.3 compatibility mode."""
    yield from run_peer(
        "a2a-sdk HTTP (0.3)",
        [sys.executable, "-m", "tests.interop.sdk_http.peer_http_server", "--protocol", "0.3"],
    )


def peer_python(env: PeerEnv, what: str) -> Path:
    """The python of a peer's own environment (`what` names the peer), built on first use. A
    failed pip fails the tests with pip's output; no network at all skips them, saying so (as
    tests/packaging does), unless A2A_GRPC_REQUIRE_PEERS=1 makes that a failure too."""
    try:
        return env.ensure()
    except NoNetworkError as error:
        reason = f"no network for pip: the {what} peer's environment cannot be built: {error}"
        if os.environ.get("A2A_GRPC_REQUIRE_PEERS") == "1":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    except PeerEnvError as error:
        pytest.fail(f"the {what} peer's environment could not be built: {error}", pytrace=False)


@pytest.fixture(scope="module")
def adk_python() -> Path:
    """The python of ADK's own environment, built (about 30 s from an empty pip cache) on first
    use (`peer_python`)."""
    return peer_python(ADK, "ADK")


@pytest.fixture(scope="module")
def adk_peer(adk_python: Path) -> Iterator[PeerProcess]:
    """A Google ADK agent with no model behind ADK's own A2A server (JSON-RPC)."""
    # -I: nothing of ours (PYTHONPATH, the script's folder, user site) on the child's path.
    yield from run_peer("Google ADK", [str(adk_python), "-I", str(ADK_SERVER)])


@pytest.fixture(scope="module")
def sdk03_python() -> Path:
    """The python of the SDK 0.3's own environment, built on first use (`peer_python`)."""
    return peer_python(SDK03, "a2a-sdk 0.3")


@pytest.fixture(scope="module")
def sdk03_peer(sdk03_python: Path) -> Iterator[PeerProcess]:
    """The official SDK 0.3.26's JSON-RPC and HTTP+JSON servers, A2A 0.3, its card in 0.3's
    shape."""
    yield from run_peer("a2a-sdk 0.3", [str(sdk03_python), "-I", str(SDK03_SERVER)])
