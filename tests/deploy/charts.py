"""The chart's tools for the tests: helm (`make helm` builds it into .venv/bin from the Go module
proxy) and kubecheck (tests/deploy/kubecheck, built here with Go), which decodes every rendered
object strictly against the Kubernetes API types.

Both need Go. Without it, or without helm, the tests are skipped, saying so; with
A2A_GRPC_REQUIRE_HELM=1 (CI, which has Go and runs `make tools`) they fail instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "a2a-grpc"
VALUE_FILES = sorted((CHART / "ci").glob("*-values.yaml"))
"""The value files every test renders: default, Redis with 3 replicas, JWT, mTLS, Istio."""
KUBECHECK = Path(__file__).resolve().parent / "kubecheck"
REQUIRE_ENV = "A2A_GRPC_REQUIRE_HELM"
SERVICE_MONITOR_API = "monitoring.coreos.com/v1/ServiceMonitor"


def _missing(reason: str) -> None:
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1 makes this a failure)", pytrace=False)
    pytest.skip(reason)


def helm_path() -> str:
    """.venv/bin/helm (`make helm`), else helm on PATH; skips (or fails) without either."""
    built = Path(sys.prefix) / "bin" / "helm"
    if built.is_file():
        return str(built)
    found = shutil.which("helm")
    if found is None:
        if shutil.which("go") is None:
            _missing("no Go toolchain: helm is built with it (make helm)")
        _missing("helm is not built: run `make helm` (make test does, through make tools)")
    assert found is not None
    return found


def build_kubecheck(out: Path) -> Path:
    """kubecheck built into `out` with its pinned go.mod / go.sum (modules from the proxy)."""
    go = shutil.which("go")
    if go is None:
        _missing("no Go toolchain: kubecheck (tests/deploy/kubecheck) is built with it")
    assert go is not None
    binary = out / "kubecheck"
    result = subprocess.run(
        [go, "build", "-mod=readonly", "-o", str(binary), "."],
        cwd=KUBECHECK,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, f"go build kubecheck failed:\n{result.stderr[-4000:]}"
    return binary


class Renderer:
    """`helm template` of the chart, with each result decoded strictly by kubecheck."""

    def __init__(self, helm: str, kubecheck: Path) -> None:
        self.helm = helm
        self.kubecheck = kubecheck

    def template(
        self,
        *values: Path,
        sets: dict[str, object] | None = None,
        api_versions: tuple[str, ...] = (),
        show_only: tuple[str, ...] = (),
        release: str = "rel",
    ) -> subprocess.CompletedProcess[str]:
        """`helm template` (release `rel` in namespace `shop`); its completed process."""
        argv = [self.helm, "template", release, str(CHART), "--namespace", "shop"]
        for file in values:
            argv += ["--values", str(file)]
        for key, value in (sets or {}).items():
            # strings as they are; numbers and booleans as YAML reads them
            if isinstance(value, str):
                argv += ["--set-string", f"{key}={value}"]
            else:
                argv += ["--set", f"{key}={json.dumps(value)}"]
        for api in api_versions:
            argv += ["--api-versions", api]
        for template in show_only:
            argv += ["--show-only", template]
        return subprocess.run(argv, capture_output=True, text=True, timeout=120)

    def decode(self, manifests: str) -> subprocess.CompletedProcess[str]:
        """kubecheck over `manifests`: exit 0 and the objects as a JSON array, or 1 and why."""
        return subprocess.run(
            [str(self.kubecheck)], input=manifests, capture_output=True, text=True, timeout=120
        )

    def objects(self, *values: Path, **options: Any) -> dict[str, dict[str, Any]]:
        """The rendered objects, each decoded strictly, by kind (one of each is rendered)."""
        rendered = self.template(*values, **options)
        assert rendered.returncode == 0, rendered.stderr
        decoded = self.decode(rendered.stdout)
        assert decoded.returncode == 0, decoded.stderr
        by_kind: dict[str, dict[str, Any]] = {}
        for obj in json.loads(decoded.stdout):
            assert obj["kind"] not in by_kind, f"two {obj['kind']} objects"
            by_kind[obj["kind"]] = obj
        return by_kind
