"""The chart's Deployment and Service, rendered by helm and run by `podman kube play` on the image
built from this tree: the pod podman makes from them (user, read-only root, arguments as the
chart wrote them) serves a call over gRPC and JSON-RPC and reports ready, and stops cleanly.

podman 4.3 (Debian 12) makes the pod from the Deployment and publishes its container ports on
the host; it accepts the Service but makes nothing of it (the chart tests check that the Service
reaches those ports). It runs no probes without systemd: the test asks /readyz, /healthz and gRPC
Health itself, as the kubelet would. Needs podman, Go and helm (skipped without them)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from pathlib import Path

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.deploy.charts import VALUE_FILES, Renderer
from tests.deploy.containers import IMAGE, STARTED_LINE, Image, Logs, podman, process_uid
from tests.redis_servers import free_ports

pytestmark = pytest.mark.timeout(900)

A2A_GRPC = str(Path(sys.executable).with_name("a2a-grpc"))


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([A2A_GRPC, *args], capture_output=True, text=True, timeout=60)


def test_the_rendered_deployment_runs_with_podman_kube_play(
    image: Image, chart: Renderer, tmp_path: Path
) -> None:
    (default,) = [path for path in VALUE_FILES if path.name == "default-values.yaml"]
    release = f"kp{uuid.uuid4().hex[:8]}"
    grpc_port, http_port = free_ports(2)
    sets: dict[str, object] = {
        "agent.image.repository": IMAGE,
        "agent.image.tag": "dev",
        "agent.module": "a2a_grpc.server.demo_agent:DemoAgent",
        "ports.grpc": grpc_port,
        "ports.http": http_port,
        "advertise": f"127.0.0.1:{grpc_port}",
        "drain.delaySeconds": 1,
        "drain.graceSeconds": 3,
    }
    shown = ("templates/deployment.yaml", "templates/service.yaml")
    rendered = chart.template(default, sets=sets, show_only=shown, release=release)
    assert rendered.returncode == 0, rendered.stderr
    kinds = [obj["kind"] for obj in json.loads(chart.decode(rendered.stdout).stdout)]
    assert sorted(kinds) == ["Deployment", "Service"]
    manifest = tmp_path / "a2a-grpc.yaml"
    manifest.write_text(rendered.stdout)

    played = podman("kube", "play", str(manifest), timeout=300)
    try:
        container = re.search(r"Container:\s*\n([0-9a-f]{64})", played)
        assert container is not None, played
        name = container.group(1)
        logs = Logs(name)
        try:
            logs.wait_for(f"^{STARTED_LINE}")
        finally:
            logs.close()
        (inspected,) = json.loads(podman("container", "inspect", name))
        assert inspected["HostConfig"]["ReadonlyRootfs"] is True
        assert inspected["Config"]["User"] == "10001:10001"
        assert inspected["Config"]["Cmd"][:3] == ["serve", "--host", "0.0.0.0"]
        assert process_uid(name) == 10001

        http = f"http://127.0.0.1:{http_port}"
        ready = httpx.get(f"{http}/readyz")
        assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
        assert httpx.get(f"{http}/healthz").status_code == 200
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            health = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service="lf.a2a.v1.A2AService"), timeout=10
            )
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        sent = cli("send", f"127.0.0.1:{grpc_port}", "hello from the chart")
        assert sent.returncode == 0, sent.stderr
        assert "artifact echo: hello from the chart" in sent.stdout
        over_jsonrpc = cli("send", http, "hello over json-rpc", "--transport", "jsonrpc")
        assert over_jsonrpc.returncode == 0, over_jsonrpc.stderr
        assert "artifact echo: hello over json-rpc" in over_jsonrpc.stdout

        pod = inspected["Pod"]
        podman("pod", "stop", "--time", "30", pod, timeout=120)
        state = json.loads(podman("container", "inspect", "--format", "{{json .State}}", name))
        assert state["ExitCode"] == 0, podman("logs", name)
    finally:
        podman("kube", "down", str(manifest), timeout=120, check=False)
