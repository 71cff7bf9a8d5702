"""The image's locks (requirements/runtime.txt, requirements/build.txt) pin what the tests run
with: every package at the version requirements/lock.txt pins, each with hashes, and
runtime.txt every runtime dependency the package declares. `make lock` writes all three."""

from __future__ import annotations

import re
from importlib.metadata import requires
from pathlib import Path

import pytest

REQUIREMENTS = Path(__file__).resolve().parents[2] / "requirements"
PIN = re.compile(r"^(?P<name>[A-Za-z0-9._-]+)==(?P<version>[^\s;]+)( ;[^\n]*)? \\$", re.MULTILINE)
"""A requirement: `name==version`, maybe an environment marker; its hashes on the next lines."""


def _pins(name: str) -> dict[str, str]:
    text = (REQUIREMENTS / name).read_text()
    pins = {m["name"].lower().replace("_", "-"): m["version"] for m in PIN.finditer(text)}
    assert pins, name
    requirements = [line for line in text.splitlines() if line and line[0] not in " #"]
    assert len(requirements) == len(pins), name  # every requirement is pinned
    assert text.count("--hash=sha256:") >= len(pins), name
    return pins


@pytest.mark.parametrize("lock", ["runtime.txt", "build.txt"])
def test_the_image_locks_pin_the_versions_the_tests_run_with(lock: str) -> None:
    everything = _pins("lock.txt")
    pinned = _pins(lock)
    assert {name: everything.get(name) for name in pinned} == pinned


def test_the_runtime_lock_holds_every_runtime_dependency_and_no_dev_tool() -> None:
    pinned = _pins("runtime.txt")
    declared = {
        re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")
        for requirement in requires("a2a-grpc") or []
        if "extra ==" not in requirement
    }
    assert declared and declared <= set(pinned), declared - set(pinned)
    assert not {"pytest", "mypy", "ruff", "setuptools", "pip", "grpcio-tools"} & set(pinned)
    assert set(_pins("build.txt")) == {"pip", "setuptools"}
