"""The container image (Containerfile), built once per session by `make image` and run with
podman as a restricted pod would run it: a read-only root file system with no tmpfs, every
capability dropped, no new privileges. Our CLI calls it over gRPC and JSON-RPC, the probes
answer, and `podman stop` (SIGTERM) drains it: NOT_SERVING first, running work finished, exit 0
within the drain delay and the grace. Skipped without podman (tests/deploy/containers.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.deploy.containers import (
    STARTED_LINE,
    Image,
    Logs,
    container_name,
    podman,
    podman_path,
    process_uid,
    removed_afterwards,
)
from tests.redis_servers import free_ports

pytestmark = pytest.mark.timeout(900)

A2A_GRPC = str(Path(sys.executable).with_name("a2a-grpc"))
IMAGE_BYTES_BOUND = 315_000_000
"""Measured 290 MB (docs/deploy.md) on the debootstrapped debian:bookworm-slim CI builds on."""
OWN_LAYERS_BOUND = 150_000_000
"""Measured 136 MB: python3 and CA certificates from Debian, and the virtual environment (86 MB,
of which psycopg's binary wheel with its own libpq is 14 MB)."""
DRAIN_DELAY, SHUTDOWN_GRACE = 5, 8
STOP_MARGIN = 5
"""Seconds beyond the two phases that podman and the process may take to stop."""
RESTRICTED = (
    "--read-only",
    "--read-only-tmpfs=false",
    "--cap-drop=ALL",
    "--security-opt=no-new-privileges",
)
"""As a pod with the chart's security context runs: a read-only root and no tmpfs, no
capabilities, no privilege escalation."""


@dataclass
class Running:
    name: str
    grpc: str
    """`127.0.0.1:PORT`, published to the container's 50051."""
    http: str
    """`http://127.0.0.1:PORT`, published to the container's 50052."""
    logs: Logs


@pytest.fixture
def running(image: Image) -> Iterator[Running]:
    """The image's entry point serving on every interface of its own network namespace, its
    two ports published on 127.0.0.1; returns once the start-up lines are out."""
    name = container_name("a2a-grpc-image")
    grpc_port, http_port = free_ports(2)
    with removed_afterwards(name):
        podman(
            "run",
            "--detach",
            "--name",
            name,
            *RESTRICTED,
            "--publish",
            f"127.0.0.1:{grpc_port}:50051",
            "--publish",
            f"127.0.0.1:{http_port}:50052",
            image.ref,
            "serve",
            "--host",
            "0.0.0.0",
            "--advertise",
            f"127.0.0.1:{grpc_port}",
            "--advertise-http",
            f"http://127.0.0.1:{http_port}",
            "--drain-delay",
            str(DRAIN_DELAY),
            "--shutdown-grace",
            str(SHUTDOWN_GRACE),
        )
        logs = Logs(name)
        try:
            logs.wait_for(f"^{STARTED_LINE}")
            yield Running(name, f"127.0.0.1:{grpc_port}", f"http://127.0.0.1:{http_port}", logs)
        finally:
            logs.close()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([A2A_GRPC, *args], capture_output=True, text=True, timeout=60)


def test_the_image_runs_serve_as_a_non_root_user(image: Image) -> None:
    config = image.config["Config"]
    assert config["Entrypoint"] == ["/opt/a2a-grpc/bin/a2a-grpc"]
    assert config["Cmd"] == ["serve", "--host", "0.0.0.0"]
    assert set(config["ExposedPorts"]) == {"50051/tcp", "50052/tcp"}
    assert config["User"] == "10001:10001"
    assert config.get("StopSignal", "SIGTERM") == "SIGTERM"


def test_the_image_size_holds_its_bound(image: Image) -> None:
    size = int(image.config["Size"])
    assert size <= IMAGE_BYTES_BOUND, f"{size / 1e6:.0f} MB"
    assert size - image.base_size <= OWN_LAYERS_BOUND, f"{(size - image.base_size) / 1e6:.0f} MB"


def test_no_build_tool_is_left_in_the_image(image: Image) -> None:
    """No pip, setuptools, wheel or build in the virtual environment or the system Python, and
    no compiler or make; the package and its version are there."""
    probe = (
        "import importlib.util, json, shutil, sys\n"
        "from a2a_grpc.core.release import version\n"
        "print(json.dumps({'modules': [m for m in ('pip', 'setuptools', 'wheel', 'build')"
        " if importlib.util.find_spec(m)], 'tools': [t for t in ('pip', 'pip3', 'gcc', 'cc',"
        " 'make') if shutil.which(t)], 'version': version(),"
        " 'prefix': sys.prefix}))\n"
    )
    found = json.loads(
        podman(
            "run",
            "--rm",
            "--network=none",
            "--read-only",
            "--entrypoint",
            "/opt/a2a-grpc/bin/python",
            image.ref,
            "-c",
            probe,
        )
    )
    assert found["modules"] == [] and found["tools"] == []
    assert found["prefix"] == "/opt/a2a-grpc"
    system = podman(
        "run",
        "--rm",
        "--network=none",
        "--entrypoint",
        "/usr/bin/python3",
        image.ref,
        "-c",
        "import importlib.util as u; print([m for m in ('pip', 'setuptools') if u.find_spec(m)])",
    )
    assert system.strip() == "[]"
    assert found["version"] == cli("--version").stdout.split()[1]


def test_the_container_serves_both_bindings_and_answers_probes(running: Running) -> None:
    assert process_uid(running.name) == 10001  # the kernel's view: not root
    sent = cli("send", running.grpc, "hello")
    assert sent.returncode == 0, sent.stderr
    assert "completed" in sent.stdout and "artifact echo: hello" in sent.stdout
    over_jsonrpc = cli("send", running.http, "hello json", "--transport", "jsonrpc")
    assert over_jsonrpc.returncode == 0, over_jsonrpc.stderr
    assert "artifact echo: hello json" in over_jsonrpc.stdout
    ready = httpx.get(f"{running.http}/readyz")
    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
    assert httpx.get(f"{running.http}/healthz").status_code == 200
    card = httpx.get(f"{running.http}/.well-known/agent-card.json").json()
    urls = {i["protocolBinding"]: i["url"] for i in card["supportedInterfaces"]}
    assert urls["GRPC"] == running.grpc and urls["JSONRPC"] == f"{running.http}/"


def test_podman_stop_drains_and_exits_0(running: Running) -> None:
    """SIGTERM reaches the server (PID 1): /readyz says 503 while the drain delay lasts, a task
    running at the stop finishes, and the container exits 0 well before podman would kill it."""
    task = subprocess.Popen(
        # working past the drain delay: it finishes in the grace that follows
        [A2A_GRPC, "send", "--stream", running.grpc, f"slow {DRAIN_DELAY + 2}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert task.stdout is not None
        while (line := task.stdout.readline()) and line.strip() != "state: working":
            pass
        assert line.strip() == "state: working", task.communicate(timeout=60)
        started = time.monotonic()
        stop = subprocess.Popen(
            [podman_path(), "stop", "--time", "60", running.name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        running.logs.wait_for("shutting down: NOT_SERVING")
        draining = httpx.get(f"{running.http}/readyz")
        assert draining.status_code == 503, draining.text
        assert httpx.get(f"{running.http}/healthz").status_code == 200
        running.logs.wait_for(f"draining: GOAWAY .* running work gets {SHUTDOWN_GRACE} s")
        rest, _ = task.communicate(timeout=60)
        assert "state: completed" in rest, rest  # the running task finished in the grace
        _, stop_errors = stop.communicate(timeout=90)
        seconds = time.monotonic() - started
        assert stop.returncode == 0, stop_errors
    finally:
        if task.poll() is None:
            task.kill()
            task.communicate()
    state = json.loads(podman("inspect", "--format", "{{json .State}}", running.name))
    assert state["ExitCode"] == 0, running.logs.lines[-20:]
    assert seconds < DRAIN_DELAY + SHUTDOWN_GRACE + STOP_MARGIN, seconds


SHOUT = """\
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents


class Shouter:
    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        await events.add_artifact([a2a_pb2.Part(text=context.text().upper())], name="loud")
        await events.complete()
"""


def test_an_agent_module_in_app_is_served(image: Image, tmp_path: Path) -> None:
    """`serve --agent MODULE:ATTR` finds a module in the working directory, /app, where an
    image built FROM this one copies its agent (docs/deploy.md)."""
    (tmp_path / "shout.py").write_text(SHOUT)
    name = container_name("a2a-grpc-agent")
    (grpc_port,) = free_ports(1)
    with removed_afterwards(name):
        podman(
            "run",
            "--detach",
            "--name",
            name,
            *RESTRICTED,
            "--volume",
            f"{tmp_path / 'shout.py'}:/app/shout.py:ro",
            "--publish",
            f"127.0.0.1:{grpc_port}:50051",
            image.ref,
            "serve",
            "--host",
            "0.0.0.0",
            "--http-port",
            "-1",
            "--agent",
            "shout:Shouter",
        )
        logs = Logs(name)
        try:
            assert "agent shout.Shouter;" in logs.wait_for(r"^a2a-grpc: agent \S+; card")
            logs.wait_for(f"^{STARTED_LINE}")
        finally:
            logs.close()
        sent = cli("send", f"127.0.0.1:{grpc_port}", "quiet please")
        assert sent.returncode == 0, sent.stderr
        assert "artifact loud: QUIET PLEASE" in sent.stdout
