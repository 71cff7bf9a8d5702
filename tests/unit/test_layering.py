"""The package's parts depend one way, and no module imports another that imports it back.

`RULES` names each part (a dotted name under `a2a_grpc`) and the parts it imports directly; it
may also use what those import, and nothing else. A module belongs to the longest part its
name starts with, so a module at the top of `server/` without a rule of its own is part of the
assembly (`server`: app, compose, cli, settings, ...). The rules hold for every import a module
makes, directly or through other modules, typing-only (`if TYPE_CHECKING:`) and function-local
ones included: tests/unit/import_graph.py reads them with `ast` and imports nothing.

`ORDER` is the order the rules make, from the bottom; the parts of one layer never import one
another. A new package gets a rule here (a test says so) and a row in CONTRIBUTING.md's table.

Besides the order: below the transports the server imports no grpc and no aiohttp itself (the
transports translate between the wire and the core errors; `core/errors.py` names grpc's
status codes, so this holds for a module's own imports), and nothing imports the official SDK
(`a2a`), whose generated code registers the same protobuf symbols as ours.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.import_graph import (
    FOLDERS,
    Graph,
    Rules,
    cycles,
    import_graph,
    our_sources,
    reached,
)

ROOT = Path(__file__).resolve().parents[2]

RULES = Rules(
    {
        "generated": (),
        "core": ("generated",),
        "client": ("core",),
        # The agent API, and the parts behind the protocol: each needs only core.
        "server.agent": ("core",),
        "server.tasks": ("core",),  # the store contract (base), the fan-out, the index
        "server.push": ("core",),
        "server.trust": ("core",),
        "server.addresses": ("core",),
        "server.demo_agent": ("server.agent",),
        # The store URL's check asks the store registry (tasks/registry.py).
        "server.config": ("server.addresses", "server.push", "server.tasks", "server.trust"),
        # The stores themselves: the assembly builds them, the protocol takes them as
        # collaborators through tasks/base.py's contract.
        "server.tasks.table": ("server.tasks",),
        "server.tasks.memory": ("server.tasks.table",),
        "server.tasks.redis": ("server.tasks",),
        "server.tasks.postgres": ("server.tasks",),
        "server.card": ("server.demo_agent", "server.trust"),
        "server.protocol": (
            "server.agent",
            "server.config",
            "server.tasks",
            "server.push",
            "server.trust",
        ),
        # Metrics, logs and the span exporter read the protocol; what the call gate needs of
        # them (somewhere to count calls) is a Protocol of the gate's.
        "server.ops": ("server.protocol",),
        "server.transports": ("server.ops", "server.card"),
        "server": (
            "server.transports",
            "server.tasks.memory",
            "server.tasks.redis",
            "server.tasks.postgres",
        ),
        "cli": ("server", "client"),
    }
)
ORDER = [
    ["generated"],
    ["core"],
    # The client sits beside the whole server: no rule leads from one to the other.
    ["client", "server.addresses", "server.agent", "server.push", "server.tasks", "server.trust"],
    [
        "server.config",
        "server.demo_agent",
        "server.tasks.postgres",
        "server.tasks.redis",
        "server.tasks.table",
    ],
    ["server.card", "server.protocol", "server.tasks.memory"],
    ["server.ops"],
    ["server.transports"],
    ["server"],
    ["cli"],
]
WIRE = ("grpc", "grpc_health", "grpc_reflection", "aiohttp")
"""The wire's libraries: only the server's transports and its assembly import them."""
WIRE_UNITS = ("server.transports", "server")
SDK = "a2a"


@pytest.fixture(scope="module")
def graph() -> Graph:
    return import_graph(our_sources(ROOT))


def test_every_part_depends_only_on_the_parts_below_it(graph: Graph) -> None:
    violations = RULES.violations(graph.ours)
    assert not violations, "imports against RULES:\n" + "\n".join(violations)


def test_no_module_imports_one_that_imports_it_back(graph: Graph) -> None:
    """No import cycle between any two modules, typing-only and function-local ones too."""
    found = [" -> ".join(cycle) for cycle in cycles(graph.ours)]
    assert not found, "import cycles:\n" + "\n".join(found)


def test_the_rules_make_the_order() -> None:
    assert cycles({unit: set(below) for unit, below in RULES.may_import.items()}) == []
    assert RULES.layers() == ORDER
    assert "client" not in RULES.below["server"] and "server" not in RULES.below["client"]


def test_every_package_has_a_rule() -> None:
    """Each folder of the package and each package of `server/` has a rule (a package below
    those has its parent's unless it has its own, as `tasks/redis`), and each rule names a
    package or a module that exists."""
    packages = {*FOLDERS, *(f"server.{path.parent.name}" for path in ROOT.glob("server/*/*.py"))}
    assert packages - set(RULES.may_import) == set()
    stale = {
        unit
        for unit in RULES.may_import
        if not (ROOT / unit.replace(".", "/") / "__init__.py").is_file()
        and not (ROOT / f"{unit.replace('.', '/')}.py").is_file()
    }
    assert stale == set()


def test_only_the_transports_and_the_assembly_touch_the_wire(graph: Graph) -> None:
    server = {name for name in graph.others if name.startswith("a2a_grpc.server")}
    assert len(server) > 50, "the server's modules were not found"
    touching = {
        name: sorted(graph.others[name] & set(WIRE))
        for name in server
        if RULES.unit_of(name) not in WIRE_UNITS and graph.others[name] & set(WIRE)
    }
    assert touching == {}


def test_nothing_imports_the_official_sdk(graph: Graph) -> None:
    assert {name for name, others in graph.others.items() if SDK in others} == set()


# The checker itself, on small made-up packages.


def made_up(**sources: str) -> Graph:
    """A graph of `a2a_grpc.<name>` modules (`server__protocol__gate` is
    `a2a_grpc.server.protocol.gate`)."""
    return import_graph(
        {f"a2a_grpc.{name.replace('__', '.')}": text for name, text in sources.items()}
    )


def test_the_walk_sees_every_kind_of_import() -> None:
    graph = made_up(
        server__protocol__handler="from a2a_grpc.server.protocol import intake\nimport grpc\n",
        server__protocol__intake=(
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from a2a_grpc.server.protocol.calls import CallContext\n"
            "def later():\n"
            "    import a2a_grpc.server.ops.metrics\n"
            "    from .. import config\n"
        ),
        server__protocol__calls="",
        server__protocol="",
        server__ops__metrics="",
        server__ops="",
        server__config="",
        server="RunningServer = 1\n",
        server__app="from a2a_grpc.server import RunningServer\n",
    )
    assert graph.ours["a2a_grpc.server.protocol.handler"] == {"a2a_grpc.server.protocol.intake"}
    assert graph.others["a2a_grpc.server.protocol.handler"] == {"grpc"}
    assert graph.ours["a2a_grpc.server.protocol.intake"] == {
        "a2a_grpc.server.protocol.calls",
        "a2a_grpc.server.ops.metrics",
        "a2a_grpc.server.config",
    }
    assert graph.ours["a2a_grpc.server.app"] == {"a2a_grpc.server"}


def test_the_walk_refuses_an_import_of_ours_that_names_no_module() -> None:
    with pytest.raises(LookupError, match=r"a2a_grpc\.server\.gone"):
        made_up(server__app="import a2a_grpc.server.gone\n", server="")


def test_an_indirect_violation_is_found_with_its_path() -> None:
    """protocol -> config -> transports: the protocol's own imports name no transport."""
    graph = made_up(
        server__protocol__handler="from a2a_grpc.server.config import ServerConfig\n",
        server__config="def check():\n    from a2a_grpc.server.transports import addresses\n",
        server__transports__addresses="",
    )
    rules = Rules(
        {"server.protocol": ("server.config",), "server.config": (), "server.transports": ()}
    )
    assert (
        "a2a_grpc.server.protocol.handler -> a2a_grpc.server.config"
        " -> a2a_grpc.server.transports.addresses"
        " (server.protocol may not depend on server.transports)"
    ) in rules.violations(graph.ours)
    allowed = Rules({**rules.may_import, "server.config": ("server.transports",)})
    assert allowed.violations(graph.ours) == []


def test_a_module_without_a_part_is_refused() -> None:
    graph = made_up(server__ops__metrics="")
    with pytest.raises(LookupError, match="give its package a rule"):
        Rules({"server.protocol": ()}).violations(graph.ours)


def test_a_typing_only_cycle_is_found_and_named() -> None:
    graph = made_up(
        server__ops__metrics=(
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from a2a_grpc.server.protocol.gate import CallGate\n"
        ),
        server__protocol__gate="from a2a_grpc.server.ops.metrics import RpcMetrics\n",
        server__protocol__handler="from a2a_grpc.server.protocol import gate\n",
    )
    assert cycles(graph.ours) == [
        [
            "a2a_grpc.server.ops.metrics",
            "a2a_grpc.server.protocol.gate",
            "a2a_grpc.server.ops.metrics",
        ]
    ]


def test_each_group_of_modules_in_a_cycle_is_named_once() -> None:
    graph = {
        "a": {"b"},
        "b": {"c"},
        "c": {"a", "d"},
        "d": {"e"},
        "e": {"d"},
        "f": {"f"},
        "g": {"a"},
    }
    assert cycles(graph) == [["a", "b", "c", "a"], ["d", "e", "d"], ["f", "f"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_reached_gives_a_shortest_path_to_each_module() -> None:
    graph = {"a": {"b", "c"}, "b": {"d"}, "c": {"b"}, "d": set()}
    assert reached(graph, "a") == {"b": ["a", "b"], "c": ["a", "c"], "d": ["a", "b", "d"]}
