"""Which of our modules import which, read from the source with `ast` (nothing is imported):
the checker behind test_layering.py, apart from its rules so that its own tests can feed it
small made-up packages.

Every import statement counts, wherever it is: at the top, under `if TYPE_CHECKING:`, inside a
function or a `try`. An edge goes to the module an import names: `from a2a_grpc.x import y` is
an edge to `a2a_grpc.x.y` when that is a module, else to `a2a_grpc.x`; `import a2a_grpc.x.y` is
an edge to `a2a_grpc.x.y`. The packages above the module imported are not edges (Python runs
their `__init__` first, but ours only declare or re-export); a module that takes a name from a
package's `__init__` does have an edge to it. What is imported by name at run time
(`importlib`, entry points) is not seen.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

PACKAGE = "a2a_grpc"
FOLDERS = ("generated", "core", "server", "client", "cli")
"""The repository's folders that install as `a2a_grpc.<folder>`."""


class Graph(NamedTuple):
    ours: dict[str, set[str]]
    """Each of our modules -> the modules of ours it imports (never itself)."""
    others: dict[str, set[str]]
    """Each of our modules -> the top-level names of other distributions it imports."""


def module_name(relative: Path) -> str:
    """`server/protocol/gate.py` -> `a2a_grpc.server.protocol.gate` (a package: its folder)."""
    parts = relative.with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((PACKAGE, *parts))


def our_sources(root: Path) -> dict[str, str]:
    """Every module of the package under `root` (the repository) -> its source."""
    return {
        module_name(path.relative_to(root)): path.read_text()
        for folder in FOLDERS
        for path in sorted((root / folder).rglob("*.py"))
    }


def import_graph(sources: Mapping[str, str]) -> Graph:
    """The imports of the modules `sources` holds (name -> source). A name with modules below
    it is a package (its relative imports start from itself)."""
    known = set(sources)
    packages = {name.rsplit(".", 1)[0] for name in known if "." in name}
    ours: dict[str, set[str]] = {}
    others: dict[str, set[str]] = {}
    for name, source in sources.items():
        here = name if name in packages else name.rpartition(".")[0]
        targets: set[str] = set()
        outside: set[str] = set()
        for imported, owner in _imported_names(ast.parse(source, name), here):
            target = imported if imported in known else owner if owner in known else None
            if target is None and imported.split(".")[0] == PACKAGE:
                raise LookupError(f"{name} imports {imported}, which is none of our modules")
            if target is None:
                outside.add(imported.split(".")[0])
            elif target != name:
                targets.add(target)
        ours[name] = targets
        others[name] = outside
    return Graph(ours, others)


def _imported_names(tree: ast.AST, here: str) -> Iterable[tuple[str, str | None]]:
    """Every dotted name an import statement of `tree` names, with the module that defines it
    when it may be a name rather than a module: `from m import a` is (`m.a`, `m`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                start = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join([*start, *([base] if base else [])])
            for alias in node.names:
                yield (base, None) if alias.name == "*" else (f"{base}.{alias.name}", base)


def reached(graph: Mapping[str, set[str]], start: str) -> dict[str, list[str]]:
    """Every module `start` imports, directly or through others -> one shortest import path
    to it (`[start, ..., module]`)."""
    paths = {start: [start]}
    queue = deque([start])
    while queue:
        current = queue.popleft()
        for target in sorted(graph.get(current, ())):
            if target not in paths:
                paths[target] = [*paths[current], target]
                queue.append(target)
    del paths[start]
    return paths


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One import cycle (`[a, b, ..., a]`, a shortest one through the first module in name
    order) per group of modules that import one another, directly or not; [] when the graph
    has none. A module listed as importing itself is a cycle too."""
    edges = {node: sorted(set(targets)) for node, targets in graph.items()}
    found = []
    for group in _strongly_connected(edges):
        first = min(group)
        if len(group) > 1 or first in edges[first]:
            found.append(_shortest_cycle(edges, first, group))
    return sorted(found)


def _strongly_connected(edges: Mapping[str, list[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components, iteratively (no recursion limit to meet)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, position = work.pop()
            if position == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            targets = edges.get(node, [])
            if position < len(targets):
                work.append((node, position + 1))
                target = targets[position]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                groups.append(group)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return groups


def _shortest_cycle(edges: Mapping[str, list[str]], first: str, group: set[str]) -> list[str]:
    paths = {first: [first]}
    queue = deque([first])
    while queue:
        current = queue.popleft()
        for target in edges.get(current, []):
            if target == first:
                return [*paths[current], first]
            if target in group and target not in paths:
                paths[target] = [*paths[current], target]
                queue.append(target)
    raise AssertionError(f"{first} is in a group of modules but on no cycle")  # unreachable


class Rules:
    """What each part of the package may depend on.

    `may_import` maps a unit to the units below it that it imports directly. A unit is a
    dotted name under the package (`server.protocol`); a module belongs to the longest unit
    its name starts with (`a2a_grpc.server.protocol.gate` to `server.protocol`), and every
    module must belong to one. A module may reach, directly or through any chain of imports,
    the modules of its own unit and of every unit its unit's rule leads to, directly or not.
    """

    def __init__(self, may_import: Mapping[str, tuple[str, ...]]) -> None:
        self.may_import = dict(may_import)
        self.below = {unit: _closure(self.may_import, unit) for unit in self.may_import}

    def layers(self) -> list[list[str]]:
        """The units by height, from the bottom: a unit sits just above the highest unit its
        rule names (so one layer's units never import one another), each layer sorted."""
        height: dict[str, int] = {}
        for unit in sorted(self.may_import, key=lambda unit: len(self.below[unit])):
            height[unit] = 1 + max((height[below] for below in self.may_import[unit]), default=-1)
        return [
            sorted(unit for unit in height if height[unit] == level)
            for level in range(max(height.values()) + 1)
        ]

    def unit_of(self, module: str) -> str:
        relative = module.removeprefix(f"{PACKAGE}.")
        parts = relative.split(".")
        for end in range(len(parts), 0, -1):
            candidate = ".".join(parts[:end])
            if candidate in self.may_import:
                return candidate
        raise LookupError(f"{module} belongs to no unit: give its package a rule")

    def violations(self, graph: Mapping[str, set[str]]) -> list[str]:
        """Each module's first import path to each unit its rule does not let it reach,
        shortest first: `a -> b -> c (server.protocol may not depend on server.transports)`."""
        found = []
        for module in sorted(graph):
            unit = self.unit_of(module)
            allowed = {unit, *self.below[unit]}
            reported = set()
            for target, path in sorted(reached(graph, module).items(), key=_by_length):
                target_unit = self.unit_of(target)
                if target_unit not in allowed and target_unit not in reported:
                    reported.add(target_unit)
                    found.append(f"{' -> '.join(path)} ({unit} may not depend on {target_unit})")
        return found


def _by_length(item: tuple[str, list[str]]) -> tuple[int, str]:
    return len(item[1]), item[0]


def _closure(may_import: Mapping[str, tuple[str, ...]], unit: str) -> set[str]:
    below: set[str] = set()
    pending = list(may_import[unit])
    while pending:
        current = pending.pop()
        if current not in below:
            below.add(current)
            pending.extend(may_import[current])
    return below
