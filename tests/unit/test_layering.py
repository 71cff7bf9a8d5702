"""The layers import one way: generated <- core <- {server, client} <- cli (no sockets).

Server and client never import each other. The server's protocol core (handler, run, store,
broker, dedup, validation, agent API) imports no grpc and none of the server's transport modules:
transport errors are translated in the servicer, and the handler raises core errors.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = {
    "generated": ("a2a_grpc.generated",),
    "core": ("a2a_grpc.core", "a2a_grpc.generated"),
    "client": ("a2a_grpc.client", "a2a_grpc.core", "a2a_grpc.generated"),
    "server": ("a2a_grpc.server", "a2a_grpc.core", "a2a_grpc.generated"),
    "cli": ("a2a_grpc.cli", "a2a_grpc.server", "a2a_grpc.client", "a2a_grpc.core"),
}
PROTOCOL_CORE = (
    "tasks/changes",
    "tasks/redis/backend",
    "tasks/redis/claims",
    "tasks/redis/deliveries",
    "tasks/redis/eviction",
    "tasks/redis/keys",
    "tasks/redis/leases",
    "tasks/redis/reads",
    "tasks/redis/room",
    "tasks/redis/store",
    "tasks/redis/events",
    "tasks/redis/push",
    "protocol/handler",
    "compose",
    "protocol/run",
    "tasks/base",
    "tasks/memory",
    "tasks/table",
    "tasks/index",
    "tasks/broker",
    "protocol/dedup",
    "protocol/validation",
    "agent",
    "trust/signers",
)
TRANSPORT = (
    "a2a_grpc.server.trust.auth",
    "a2a_grpc.server.transports.grpc.servicer",
    "a2a_grpc.server.app",
    "a2a_grpc.server.transports.http.bindings",
    "a2a_grpc.server.transports.http.server",
)


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            if node.module.startswith("a2a_grpc."):  # from a2a_grpc.server.protocol import run
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def modules_of(layer: str) -> list[Path]:
    return sorted(path for path in (ROOT / layer).rglob("*.py") if path.name != "__init__.py")


@pytest.mark.parametrize(
    ("layer", "path"),
    [(layer, path) for layer in LAYERS for path in modules_of(layer)],
    ids=lambda value: value if isinstance(value, str) else value.name,
)
def test_each_layer_imports_only_the_layers_below_it(layer: str, path: Path) -> None:
    ours = {name for name in imported_modules(path) if name.split(".")[0] in ("a2a_grpc", "a2a")}
    assert {name for name in ours if not name.startswith(LAYERS[layer])} == set()


@pytest.mark.parametrize("name", PROTOCOL_CORE)
def test_the_protocol_core_imports_no_grpc_and_no_transport(name: str) -> None:
    imports = imported_modules(ROOT / "server" / f"{name}.py")
    assert {module for module in imports if module.split(".")[0] == "grpc"} == set()
    assert {module for module in imports if module.startswith(TRANSPORT)} == set()


TASKS_MAY_NOT_IMPORT = (
    "a2a_grpc.server.protocol",
    "a2a_grpc.server.push",
    "a2a_grpc.server.transports",
    "grpc",
    "aiohttp",
)
"""The task stores sit below the protocol, the webhooks and the transports: what they need of
those (an outcome, claims, a webhook dispatcher) is a Protocol in tasks/base.py."""


@pytest.mark.parametrize(
    "path",
    sorted((ROOT / "server" / "tasks").rglob("*.py")),
    ids=lambda path: str(path.relative_to(ROOT / "server")),
)
def test_the_task_stores_import_nothing_above_them(path: Path) -> None:
    imports = imported_modules(path)
    assert {name for name in imports if name.startswith(TASKS_MAY_NOT_IMPORT)} == set()


def test_the_handler_imports_no_concrete_store() -> None:
    """The handler takes its store, dedup window and push service; compose.py builds them."""
    concrete = (
        "a2a_grpc.server.tasks.memory",
        "a2a_grpc.server.tasks.table",
        "a2a_grpc.server.tasks.broker",
        "a2a_grpc.server.tasks.redis",
    )
    imports = imported_modules(ROOT / "server" / "protocol" / "handler.py")
    assert {name for name in imports if name.startswith(concrete)} == set()


def test_the_walk_sees_imports() -> None:
    assert "a2a_grpc.core.errors" in imported_modules(ROOT / "client" / "errors.py")
    assert "a2a_grpc.server.protocol.validation" in imported_modules(
        ROOT / "server" / "protocol" / "handler.py"
    )
