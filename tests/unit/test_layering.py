"""The layers import one way: generated <- core <- {server, client} <- cli (no sockets).

Server and client never import each other. Inside the server, one rule per package (no lists
of modules): protocol, tasks, push and trust import no grpc, no aiohttp, no transport and not
the assembly (app); the transports translate between the wire and the protocol's core errors.
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
SERVER = ROOT / "server"
NO_WIRE = ("grpc", "aiohttp", "a2a_grpc.server.transports", "a2a_grpc.server.app")
"""What the server's inner packages never import: the wire, and who assembles the server."""
CONCRETE_STORES = (
    "a2a_grpc.server.tasks.memory",
    "a2a_grpc.server.tasks.table",
    "a2a_grpc.server.tasks.redis",
)
"""The stores themselves: compose.py builds them, the protocol takes them as collaborators."""
PACKAGE_RULES: dict[str, tuple[str, ...]] = {
    "protocol": (*NO_WIRE, *CONCRETE_STORES),
    # Below the protocol and the webhooks: what the stores need of those (an outcome, claims,
    # a webhook dispatcher) is a Protocol in tasks/base.py.
    "tasks": (*NO_WIRE, "a2a_grpc.server.protocol", "a2a_grpc.server.push"),
    "push": NO_WIRE,
    "trust": NO_WIRE,
}
"""Per package of server/: the import prefixes none of its modules may use."""


def imported_modules(path: Path, *, typing_only_too: bool = True) -> set[str]:
    """The modules `path` imports (`from a2a_grpc.x import y` also names `a2a_grpc.x.y`); with
    `typing_only_too` off, not those under `if TYPE_CHECKING:`, which never run."""
    tree = ast.parse(path.read_text(), str(path))
    skipped = set()
    if not typing_only_too:
        skipped = {
            id(node)
            for block in ast.walk(tree)
            if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
            for child in block.body
            for node in ast.walk(child)
        }
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
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


def package_modules() -> list[tuple[str, Path]]:
    return [
        (package, path)
        for package in PACKAGE_RULES
        for path in sorted((SERVER / package).rglob("*.py"))
    ]


@pytest.mark.parametrize(
    ("package", "path"),
    package_modules(),
    ids=lambda value: value if isinstance(value, str) else str(value.relative_to(SERVER)),
)
def test_each_server_package_keeps_its_rule(package: str, path: Path) -> None:
    forbidden = PACKAGE_RULES[package]
    imports = imported_modules(path)
    assert {name for name in imports if name.startswith(forbidden)} == set()


def test_every_server_package_has_a_rule_or_is_a_transport() -> None:
    packages = {path.parent.name for path in SERVER.glob("*/__init__.py")}
    assert packages == {*PACKAGE_RULES, "ops", "transports"}


def test_the_walk_sees_imports() -> None:
    assert "a2a_grpc.core.errors" in imported_modules(ROOT / "client" / "errors.py")
    assert "a2a_grpc.server.protocol.validation" in imported_modules(
        ROOT / "server" / "protocol" / "handler.py"
    )


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(("a2a_grpc", *parts[: -1 if parts[-1] == "__init__" else None]))


def test_no_server_module_imports_its_importer_back() -> None:
    """No import cycle among the server's modules (typing-only imports aside): a helper never
    imports the module that owns it."""
    paths = {module_name(path): path for path in SERVER.rglob("*.py")}
    graph = {
        name: {
            target
            for target in imported_modules(path, typing_only_too=False)
            if target in paths and target != name
        }
        for name, path in paths.items()
    }
    for name in graph:
        if paths[name].name == "__init__.py":
            continue  # a package's __init__ re-exports what it declares
        stack, seen = [(name, [name])], {name}
        while stack:
            current, trail = stack.pop()
            for target in graph[current]:
                assert target != name, " -> ".join([*trail, target])
                if target not in seen and paths[target].name != "__init__.py":
                    seen.add(target)
                    stack.append((target, [*trail, target]))
