"""The client depends on core and generated only: never on the server, never on the SDK."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CLIENT = Path(__file__).resolve().parents[2] / "client"


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", sorted(CLIENT.glob("*.py")), ids=lambda p: p.name)
def test_client_imports_only_core_and_generated(path: Path) -> None:
    ours = {name for name in imported_modules(path) if name.split(".")[0] in ("a2a_grpc", "a2a")}
    allowed = ("a2a_grpc.client", "a2a_grpc.core", "a2a_grpc.generated")
    assert {name for name in ours if not name.startswith(allowed)} == set()


def test_the_walk_sees_imports() -> None:
    assert "a2a_grpc.core.errors" in imported_modules(CLIENT / "errors.py")
