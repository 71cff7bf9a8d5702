"""The Helm chart (deploy/helm/a2a-grpc): `helm lint --strict` and `helm template` over the value
files in its ci/ folder, every rendered object decoded strictly against the Kubernetes API types
(kubecheck), and what the objects must say for the server to run and drain as
docs/operations.md describes. Needs Go and helm (tests/deploy/charts.py)."""

from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from a2a_grpc.core.release import version
from a2a_grpc.server.cli import config_from_args, parse_args
from tests.deploy.charts import CHART, ROOT, SERVICE_MONITOR_API, VALUE_FILES, Renderer

pytestmark = pytest.mark.timeout(600)

NAMES = [path.name.removesuffix("-values.yaml") for path in VALUE_FILES]


def _values(path: Path) -> str:
    return path.name.removesuffix("-values.yaml")


def _container(objects: dict[str, dict[str, Any]]) -> dict[str, Any]:
    (container,) = objects["Deployment"]["spec"]["template"]["spec"]["containers"]
    return container


def _option(args: list[str], name: str) -> list[str]:
    """Every value `args` gives the option `name`."""
    return [args[i + 1] for i, arg in enumerate(args[:-1]) if arg == name]


def test_the_value_files_are_the_five_the_docs_name() -> None:
    assert NAMES == ["default", "istio", "jwt", "mtls", "redis"]


def _schema_values(schema: dict[str, Any], prefix: str = "") -> list[str]:
    """The values values.schema.json names, down to the objects it leaves open."""
    names = []
    for name, member in schema.get("properties", {}).items():
        if member.get("type") == "object" and "properties" in member:
            names += _schema_values(member, f"{prefix}{name}.")
        else:
            names.append(prefix + name)
    return names


def test_the_docs_table_names_every_value_the_schema_allows() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    page = (ROOT / "docs" / "deploy.md").read_text()
    table = page.split("### Values", 1)[1].split("\n\n", 2)[1]
    documented = [
        name
        for row in table.splitlines()[2:]
        for name in re.findall(r"`([^`]+)`", row.split("|")[1])
    ]
    assert sorted(documented) == sorted(set(_schema_values(schema)) - {"global"})


def test_the_chart_follows_the_project_version() -> None:
    chart = (CHART / "Chart.yaml").read_text()
    assert f"\nversion: {version()}\n" in chart
    assert f'\nappVersion: "{version()}"\n' in chart


@pytest.mark.parametrize("values", VALUE_FILES, ids=NAMES)
def test_helm_lint_strict_passes(chart: Renderer, values: Path) -> None:
    result = subprocess.run(
        [chart.helm, "lint", "--strict", str(CHART), "--values", str(values)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("values", VALUE_FILES, ids=NAMES)
@pytest.mark.parametrize("monitoring", [False, True], ids=["plain", "prometheus-operator"])
def test_every_rendered_object_decodes_strictly(
    chart: Renderer, values: Path, monitoring: bool
) -> None:
    objects = chart.objects(values, api_versions=(SERVICE_MONITOR_API,) if monitoring else ())
    expected = {"Deployment", "Service", "PodDisruptionBudget", "ServiceAccount"}
    assert set(objects) == expected | ({"ServiceMonitor"} if monitoring else set())


@pytest.mark.parametrize("values", VALUE_FILES, ids=NAMES)
def test_the_deployment_drains_as_documented(chart: Renderer, values: Path) -> None:
    objects = chart.objects(values)
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    container = _container(objects)
    args = container["args"]
    delay = float(_option(args, "--drain-delay")[0])
    grace = float(_option(args, "--shutdown-grace")[0])
    assert (delay, grace) == (5.0, 10.0)
    # Kubernetes waits longer than both phases (+ 10 s for a --workers supervisor).
    margin = 10 + (10 if _option(args, "--workers") else 0)
    assert pod["terminationGracePeriodSeconds"] == math.ceil(delay + grace) + margin
    readiness, liveness = container["readinessProbe"], container["livenessProbe"]
    # A stopping pod fails readiness well within the drain delay.
    assert readiness["periodSeconds"] * readiness["failureThreshold"] < delay
    if _values(values) == "mtls":
        # The kubelet has no client certificate: a TCP connect, on the gRPC port.
        assert readiness["tcpSocket"] == liveness["tcpSocket"] == {"port": "grpc"}
    else:
        scheme = "HTTPS" if _option(args, "--tls-cert") else "HTTP"
        assert readiness["httpGet"] == {"path": "/readyz", "port": "http", "scheme": scheme}
        assert liveness["httpGet"] == {"path": "/healthz", "port": "http", "scheme": scheme}
    assert "preStop" not in container.get("lifecycle", {})  # the drain delay is the preStop


@pytest.mark.parametrize("values", VALUE_FILES, ids=NAMES)
def test_the_pod_runs_as_a_non_root_user_on_a_read_only_root(chart: Renderer, values: Path) -> None:
    objects = chart.objects(values)
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    container = _container(objects)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001  # the image's user
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert set(container["resources"]["requests"]) == {"cpu", "memory"}
    assert pod["automountServiceAccountToken"] is False
    # No $<SERVICE>_PORT variables, which would land on the server's own A2A_GRPC_* names.
    assert pod["enableServiceLinks"] is False


@pytest.mark.parametrize("values", VALUE_FILES, ids=NAMES)
def test_the_service_names_its_protocols_and_reaches_the_container(
    chart: Renderer, values: Path
) -> None:
    objects = chart.objects(values)
    container = _container(objects)
    service = objects["Service"]["spec"]
    tls = bool(_option(container["args"], "--tls-cert"))
    assert [(p["name"], p["appProtocol"]) for p in service["ports"]] == [
        ("grpc", "tls" if tls else "grpc"),
        ("http", "https" if tls else "http"),
    ]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"grpc": 50051, "http": 50052}
    for port in service["ports"]:
        assert port["targetPort"] in ports and port["port"] == ports[port["targetPort"]]
    pod_labels = objects["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert service["selector"].items() <= pod_labels.items()
    pdb = objects["PodDisruptionBudget"]["spec"]
    assert pdb["maxUnavailable"] == 1
    assert pdb["selector"]["matchLabels"].items() <= pod_labels.items()


@pytest.mark.parametrize("values", VALUE_FILES, ids=NAMES)
def test_the_arguments_are_ones_serve_accepts(chart: Renderer, values: Path) -> None:
    """The rendered command line and environment (a Secret's value stands in for itself), read
    by `serve`'s own parsing and made into its config: a misspelt or renamed option, or a
    variable it would refuse, fails here, not in the cluster."""
    container = _container(chart.objects(values))
    environ = {
        env["name"]: env.get("value", "redis://redis.shop.svc:6379/0")
        for env in container.get("env", [])
    }
    args = container["args"]
    assert args[0] == "serve"
    parsed, _ = parse_args(args[1:], environ)
    config = config_from_args(parsed)
    assert (config.host, config.port, config.http_port) == ("0.0.0.0", 50051, 50052)
    assert config.advertise == "rel-a2a-grpc.shop.svc:50051"
    assert config.store == environ.get("A2A_GRPC_STORE", "")  # "": in memory


def test_values_reach_serve_as_options(chart: Renderer) -> None:
    by_file = {_values(path): _container(chart.objects(path)) for path in VALUE_FILES}
    default = by_file["default"]["args"]
    assert default[:3] == ["serve", "--host", "0.0.0.0"]
    assert not _option(default, "--agent") and "env" not in by_file["default"]
    assert by_file["default"]["image"] == f"localhost/a2a-grpc:{version()}"

    redis = by_file["redis"]
    assert _option(redis["args"], "--workers") == ["2"]
    (store,) = redis["env"]
    assert store == {
        "name": "A2A_GRPC_STORE",
        "valueFrom": {"secretKeyRef": {"name": "a2a-grpc-redis", "key": "url"}},
    }

    jwt = by_file["jwt"]
    assert jwt["image"] == "registry.example/shop/echo-agent:1.4.0"
    assert _option(jwt["args"], "--agent") == ["echo_agent:EchoAgent"]
    assert _option(jwt["args"], "--oidc-issuer") == ["https://kubernetes.default.svc.cluster.local"]
    assert _option(jwt["args"], "--jwt-audience") == ["a2a://echo"]
    assert _option(jwt["args"], "--jwt-algorithms") == ["RS256,ES256"]
    assert _option(jwt["args"], "--auth-tokens") == ["/etc/a2a-grpc/tokens/tokens.json"]
    assert {"name": "tokens", "mountPath": "/etc/a2a-grpc/tokens", "readOnly": True} in jwt[
        "volumeMounts"
    ]

    mtls = by_file["mtls"]["args"]
    assert _option(mtls, "--tls-cert") == ["/etc/a2a-grpc/tls/tls.crt"]
    assert _option(mtls, "--tls-key") == ["/etc/a2a-grpc/tls/tls.key"]
    assert _option(mtls, "--client-ca") == ["/etc/a2a-grpc/client-ca/ca.crt"]
    assert _option(mtls, "--trust-domain") == ["example.org"]

    istio = by_file["istio"]["args"]
    assert "--trust-xfcc" in istio and _option(istio, "--trust-domain") == ["cluster.local"]


def test_secrets_are_mounted_from_the_secrets_named(chart: Renderer) -> None:
    (mtls,) = [path for path in VALUE_FILES if _values(path) == "mtls"]
    pod = chart.objects(mtls)["Deployment"]["spec"]["template"]["spec"]
    volumes = {volume["name"]: volume["secret"] for volume in pod["volumes"]}
    assert volumes["tls"]["secretName"] == volumes["client-ca"]["secretName"] == "a2a-grpc-tls"
    assert [item["key"] for item in volumes["tls"]["items"]] == ["tls.crt", "tls.key"]
    assert all(volume["defaultMode"] == 0o440 for volume in volumes.values())


def test_a_service_monitor_only_where_prometheus_operator_is(chart: Renderer) -> None:
    (default,) = [path for path in VALUE_FILES if _values(path) == "default"]
    assert "ServiceMonitor" not in chart.objects(default)
    monitor = chart.objects(default, api_versions=(SERVICE_MONITOR_API,))["ServiceMonitor"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint == {"port": "http", "path": "/metrics", "interval": "30s", "scheme": "HTTP"}
    off = chart.objects(
        default, api_versions=(SERVICE_MONITOR_API,), sets={"metrics.enabled": False}
    )
    assert "ServiceMonitor" not in off
    assert "--no-metrics" in _container(off)["args"]


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (
            {"replicaCount": 3},
            "replicaCount 3 needs the Redis store (store.redis.existingSecret): with tasks in "
            "memory, each replica would answer TASK_NOT_FOUND for the others' tasks",
        ),
        ({"workers": 2}, "workers 2 needs the Redis store (store.redis.existingSecret)"),
        (
            {"terminationGracePeriodSeconds": 15},
            "terminationGracePeriodSeconds 15 must be more than drain.delaySeconds + "
            "drain.graceSeconds (15): Kubernetes would kill the server before it drained",
        ),
        ({"auth.mtls.enabled": True}, "auth.mtls.enabled needs tls.existingSecret"),
        ({"auth.jwt.oidcIssuer": "https://idp.example"}, "auth.jwt.audience is required"),
        ({"auth.trustDomains[0]": "example.org"}, "auth.trustDomains needs auth.mtls.enabled"),
        ({"replicas": 3}, "additional properties 'replicas' not allowed"),
    ],
    ids=[
        "replicas-in-memory",
        "workers-in-memory",
        "short-grace",
        "mtls-without-tls",
        "jwt-without-audience",
        "trust-domains-alone",
        "unknown-value",
    ],
)
def test_settings_that_cannot_work_are_refused(
    chart: Renderer, sets: dict[str, object], message: str
) -> None:
    rendered = chart.template(sets=sets)
    assert rendered.returncode != 0
    assert message in rendered.stderr


def test_a_longer_grace_is_kept_and_the_redis_store_allows_replicas(chart: Renderer) -> None:
    objects = chart.objects(
        sets={
            "replicaCount": 3,
            "store.redis.existingSecret": "redis-url",
            "terminationGracePeriodSeconds": 60,
        }
    )
    assert objects["Deployment"]["spec"]["replicas"] == 3
    assert objects["Deployment"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 60


def test_kubecheck_refuses_unknown_fields_and_kinds(chart: Renderer) -> None:
    rendered = chart.template(show_only=("templates/service.yaml",))
    assert rendered.returncode == 0, rendered.stderr
    misspelt = rendered.stdout.replace("appProtocol: grpc", "appProtcol: grpc")
    refused = chart.decode(misspelt)
    assert refused.returncode == 1
    assert 'unknown field "spec.ports[0].appProtcol"' in refused.stderr
    assert re.search(r'document 1 \(v1 Service "rel-a2a-grpc"\)', refused.stderr)
    unknown = chart.decode("apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\n")
    assert unknown.returncode == 1 and 'no kind "Gadget"' in unknown.stderr
    twice = chart.decode("apiVersion: v1\nkind: Service\nmetadata: {name: a, name: b}\n")
    assert twice.returncode == 1
    accepted = chart.decode(rendered.stdout)
    assert accepted.returncode == 0 and json.loads(accepted.stdout)[0]["kind"] == "Service"
