"""The wheel `python -m build` makes is what users install: it holds the package, its generated
code, its type markers and the license, and nothing of the tests; installed into a fresh virtual
environment outside the repository (its dependencies from the package index, as for a user), its
`a2a-grpc` serves and calls.

Skipped, saying so, only when pip cannot reach the package index (no network)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NETWORK_ERRORS = re.compile(
    r"NewConnectionError|Max retries exceeded|Temporary failure in name resolution|"
    r"Name or service not known|Network is unreachable|No route to host|ConnectTimeout",
)
"""pip's words for an index it could not reach."""
PACKAGES = ("generated", "core", "server", "client", "cli")

pytestmark = pytest.mark.timeout(900)


def _run(
    *argv: str | Path, cwd: Path, what: str, pip: bool = False
) -> subprocess.CompletedProcess[str]:
    """Runs a step; with `pip`, skips the test when it failed for want of network."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    result = subprocess.run(
        [str(arg) for arg in argv], capture_output=True, text=True, cwd=cwd, env=env, timeout=600
    )
    output = result.stdout + result.stderr
    if pip and result.returncode != 0 and NETWORK_ERRORS.search(output):
        pytest.skip(f"no network for pip: {what} could not reach the package index")
    assert result.returncode == 0, f"{what} failed:\n{output[-4000:]}"
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built (isolated, as `python -m build` does) from a copy of this source tree,
    so that the build leaves nothing in the repository."""
    source = tmp_path_factory.mktemp("source") / "a2a-grpc"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "__pycache__", "*.egg-info", "build", "dist", ".*_cache"
        ),
    )
    out = tmp_path_factory.mktemp("dist")
    # As `make dist` builds: the sdist, then the wheel from the sdist; both checked by twine.
    _run(sys.executable, "-m", "build", "--outdir", out, source, cwd=source, what="build", pip=True)
    (built,) = out.glob("a2a_grpc-*.whl")
    (sdist,) = out.glob("a2a_grpc-*.tar.gz")
    twine = Path(sys.executable).parent / "twine"
    checked = _run(twine, "check", "--strict", built, sdist, cwd=source, what="twine check")
    assert checked.stdout.count("PASSED") == 2, checked.stdout
    return built


def test_the_wheel_holds_the_package_and_the_license_and_no_tests(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    for package in PACKAGES:
        assert f"a2a_grpc/{package}/py.typed" in names, package
    for generated in ("a2a_pb2.py", "a2a_pb2.pyi", "a2a_pb2_grpc.py"):
        assert f"a2a_grpc/generated/{generated}" in names
    for page in ("index.html", "console.css", "console.js"):  # `a2a-grpc console`'s page
        assert f"a2a_grpc/cli/console/static/{page}" in names, page
    assert not [name for name in names if name.startswith("tests/") or "/tests/" in name]
    assert all(name.startswith(("a2a_grpc/", "a2a_grpc-")) for name in names), names
    (info,) = {name.split("/")[0] for name in names if ".dist-info/" in name}
    license_text = zipfile.ZipFile(wheel).read(f"{info}/licenses/LICENSE").decode()
    assert license_text == (ROOT / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0" in license_text
    metadata = zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
    assert "License-File: LICENSE" in metadata.splitlines()


def test_the_installed_wheel_serves_and_calls(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True, timeout=300)
    python, a2a_grpc = venv / "bin" / "python", venv / "bin" / "a2a-grpc"
    _run(
        python, "-m", "pip", "install", "--quiet", wheel, cwd=tmp_path, what="pip install", pip=True
    )
    where = _run(
        python,
        "-c",
        "import a2a_grpc.server.cli as m; print(m.__file__)",
        cwd=tmp_path,
        what="import",
    )
    assert where.stdout.startswith(str(venv)), where.stdout  # not this repository's source
    version = _run(a2a_grpc, "--version", cwd=tmp_path, what="a2a-grpc --version")
    assert version.stdout.strip() == "a2a-grpc 0.2.0 (A2A 1.0, 0.3)"
    with subprocess.Popen(
        [
            a2a_grpc,
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--http-port",
            "-1",
            "--drain-delay",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"], "PYTHONUNBUFFERED": "1"},
    ) as server:
        try:
            assert server.stdout is not None
            first = server.stdout.readline()
            assert "serving A2A 1.0 over gRPC" in first, first + server.stderr.read()
            port = int(first.rsplit(":", 1)[1])
            sent = _run(a2a_grpc, "send", f"127.0.0.1:{port}", "hello", cwd=tmp_path, what="send")
            assert "completed" in sent.stdout and "hello" in sent.stdout
        finally:
            server.send_signal(signal.SIGTERM)
            server.communicate(timeout=60)
    assert server.returncode == 0
