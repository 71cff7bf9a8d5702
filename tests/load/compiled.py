"""Does compiling the per-call modules with mypyc pay? Both builds, side by side, one run.

    .venv/bin/python -m tests.load.compiled [--quick] [--rounds N] [--duration S] [--keep DIR]
                                            [--unit]

An experiment tool, not part of `make test` or `make bench`. It copies the package into a
scratch directory laid out as `DIR/a2a_grpc/{core,server,client,cli,generated}`, compiles the
modules in `COMPILED` there with mypyc (the project's pyproject mypy config; `NOT_COMPILED`
says why each other candidate is left interpreted), and runs the compiled build by putting
`PYTHONPATH=DIR` first: the path finder comes before the editable install's finder, so the
copy, its .so files and mypyc's shared `<hash>__mypyc` library win. Each build's environment
is checked (every listed module is a .so in the compiled one, a .py of the work tree in the
interpreted one) before it is measured. Then, in one table:

- instructions per blocking SendMessage (tests.load.instructions under callgrind: deterministic,
  so the machine's load does not move it), both builds;
- ghz throughput, SendMessage and SendStreamingMessage at c=32 and c=256, three servers: ours
  interpreted, ours compiled, the bare gRPC limit (tests.load.servers), in alternating rounds
  (A B C A B C ...), medians over rounds, pinned as in `make bench` (tests.load.bench); with
  each server's CPU per request (its process CPU time over the cell, from /proc);
- the client's CPU per call (tests.load.client_cpu: A2AClient over gRPC, blocking and streaming,
  c=32) on both builds, against one interpreted server, alternating rounds.

It ends with the adopt rule: adopt if compiled SendMessage c=32 ours/limit >= 0.7, or the
instructions cut >= 35 %; else drop. The full run takes ~8 minutes on 2 CPUs (build ~45 s,
four callgrind runs two at a time ~3 minutes, throughput 3 rounds x 12 cells of 5 s, the
client rows). `--quick` is a smoke run of ~4 minutes: the build and the callgrind runs (their
imports alone take ~25 s under valgrind, and the warm-up stays) are most of it whatever the
counts, and its instruction figures are rough (300 requests: about +-5 %, against ~0.1 % at
the full run's 4000). `--keep DIR` builds into DIR and keeps it (then, for instance,
`PYTHONPATH=DIR pytest tests/unit`); `--unit` runs tests/unit on the compiled build first.
Needs gcc (or $CC) and the Python headers, valgrind, and ghz (`make ghz`; without it the
Python closed loop loads the servers).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from tests.load import bench, instructions
from tests.load.bench import (
    PACKAGES,
    ROOT,
    Cell,
    ClientCell,
    LoadGenerator,
    ServerProcess,
    pinned,
    ratio,
)

COMPILED = (
    "core/errors.py",
    "core/event_ids.py",
    "core/ids.py",
    "core/states.py",
    "core/status.py",
    "server/protocol/gate.py",
    "server/protocol/intake.py",
    "server/protocol/outcomes.py",
    "server/protocol/run.py",
    "server/protocol/spend.py",
    "server/protocol/validation.py",
    "server/tasks/changes.py",
    "server/tasks/memory.py",
    "server/tasks/table.py",
    "server/ops/metrics.py",
    "client/retry.py",
)
"""Per-call modules mypyc compiles unchanged and whose compiled build passes tests/unit."""

NOT_COMPILED = {
    "server/protocol/handler.py": "mypyc: async generators are unimplemented (the streaming "
    "RPCs, l.173-294)",
    "server/protocol/dedup.py": "mypyc: Multiple assignment in class bodies not supported "
    "(`started = settled = _ALREADY`, l.58); split in a scratch copy it compiles, but 5 tests "
    "of test_dedup fail: compiled code rejects their duck-typed FakeRun (`TaskRun object "
    "expected`)",
    "server/tasks/broker.py": "mypyc: async generators are unimplemented (l.100)",
    "server/tasks/index.py": "mypyc: Inheriting from most builtin types is unimplemented "
    "(`class _SmallIndex(list[_Key])`, l.81); with @mypyc_attr(native_class=False) in a "
    "scratch copy it builds but segfaults (SIGSEGV in _Py_dict_lookup, list_tasks)",
    "server/agent.py": "mypyc: Inheriting from most builtin types is unimplemented "
    "(`AgentContractError(RuntimeError)`, l.68)",
    "server/demo_agent.py": "mypyc: Multiple assignment in class bodies not supported (l.126)",
    "server/transports/grpc/servicer.py": "mypyc: async generators are unimplemented "
    "(l.59, 66, 168: the streaming RPCs)",
    "client/follow.py": "mypyc: async generators are unimplemented (l.194, 222: follow())",
    "client/reducer.py": "mypyc's type check (mypy with its mypyc option on): Returning Any "
    'from function declared to return "_Payload" (l.136, `type(payload)()`); plain mypy '
    "accepts it",
}
"""Candidates left interpreted, each with the compiler's reason (mypy/mypyc 2.4.1). What a
scratch copy's edit does comes from the first probe (2026-12-02); the edits are not made here:
the experiment compiles product code unchanged."""

BUILDS = ("interpreted", "compiled")
THREE = ("interpreted", "compiled", "limit")
THROUGHPUT_CONCURRENCY = (32, 256)
ADOPT_RATIO = 0.7
ADOPT_CUT = 0.35


def module_name(path: str) -> str:
    return "a2a_grpc." + path.removesuffix(".py").replace("/", ".")


@dataclasses.dataclass(frozen=True)
class Plan:
    settings: bench.Settings
    requests: int
    """Measured requests per callgrind count (after tests.load.instructions' warm-up)."""


FULL = Plan(bench.FULL, 4000)
QUICK = Plan(dataclasses.replace(bench.QUICK, duration=1.0, warmup=0.5), 300)


# -- the compiled build -----------------------------------------------------------------------

_BUILD_SCRIPT = """
import sys
from mypyc.build import mypycify
from setuptools import setup

setup(
    name="a2a_grpc_mypyc_experiment",
    ext_modules=mypycify(sys.argv[1:], opt_level="3"),
    script_args=["build_ext", "--inplace"],
)
"""


def compiler_problem() -> str | None:
    """Why nothing can be built here, or None."""
    compiler = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return f"no C compiler: {compiler!r} is not on PATH (install gcc, or set CC)"
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not headers.exists():
        return f"no Python headers: {headers} is missing (install python3.11-dev)"
    try:
        import mypyc  # noqa: F401
    except ImportError:
        return "mypyc is not installed (it ships with mypy: make install)"
    return None


def build(directory: Path) -> float:
    """Copies the package into `directory` and compiles `COMPILED` in place; seconds taken."""
    problem = compiler_problem()
    if problem:
        sys.exit(f"cannot build the compiled copy: {problem}")
    package = directory / "a2a_grpc"
    if package.exists():
        shutil.rmtree(package)
    for name in PACKAGES:
        ignore = shutil.ignore_patterns("__pycache__", "*.so")
        shutil.copytree(ROOT / name, package / name, ignore=ignore)
    files = [f"a2a_grpc/{path}" for path in COMPILED]
    command = [sys.executable, "-c", _BUILD_SCRIPT, "--config-file", str(ROOT / "pyproject.toml")]
    env = {**os.environ, "MYPYPATH": str(directory)}
    started = time.perf_counter()
    done = subprocess.run(
        [*command, *files], cwd=directory, env=env, capture_output=True, text=True, check=False
    )
    took = time.perf_counter() - started
    if done.returncode != 0:
        output = done.stdout + done.stderr
        errors = [line for line in output.splitlines() if ": error:" in line]
        sys.exit("mypyc build failed:\n" + "\n".join(errors or output.splitlines()[-40:]))
    return took


def environments(directory: Path) -> dict[str, dict[str, str]]:
    """Each build's environment: the interpreted one without PYTHONPATH (the editable install
    of the work tree), the compiled one with the built copy first."""
    interpreted = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return {"interpreted": interpreted, "compiled": {**interpreted, "PYTHONPATH": str(directory)}}


_PROBE = """
import importlib, json, sys
files = {name: importlib.import_module(name).__file__ for name in sys.argv[1:]}
shared = [m.__file__ for name, m in sys.modules.items() if name.endswith("__mypyc")]
print(json.dumps({"files": files, "shared": shared}))
"""


def check(build_name: str, env: Mapping[str, str]) -> str:
    """Where each listed module loads from in this environment; exits unless every one is
    native (compiled) or none is (interpreted). The line printed for the report."""
    names = [module_name(path) for path in COMPILED]
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *names],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"the {build_name} build does not import:\n{done.stderr[-3000:]}")
    probed = json.loads(done.stdout)
    files: dict[str, str] = probed["files"]
    native = [name for name, file in files.items() if file.endswith(".so")]
    expected = len(names) if build_name == "compiled" else 0
    if len(native) != expected:
        wrong = sorted(set(names) - set(native)) if expected else native
        sys.exit(f"{build_name} build: {len(native)}/{len(names)} native, not {expected}: {wrong}")
    where = os.path.commonpath(list(files.values()))
    shared = ", ".join(Path(file).name for file in probed["shared"]) or "no mypyc shared library"
    count = f"{len(native)}/{len(names)}"
    return f"{build_name}: {count} listed modules native, from {where} ({shared})"


def unit_tests(env: Mapping[str, str]) -> int:
    command = [sys.executable, "-m", "pytest", "tests/unit", "-q", "-p", "no:cacheprovider"]
    # Its output goes to stderr with the progress lines: stdout is the report alone.
    return subprocess.run(command, cwd=ROOT, env=env, stdout=sys.stderr, check=False).returncode


# -- the measurements -------------------------------------------------------------------------


def instruction_counts(
    plan: Plan, envs: Mapping[str, Mapping[str, str]], scratch: Path
) -> dict[str, float]:
    """Instructions per blocking SendMessage in each build: the two counts of each (warm-up
    alone, warm-up plus `plan.requests`) run two at a time; they are deterministic."""
    jobs: dict[tuple[str, int], concurrent.futures.Future[int]] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for name in BUILDS:
            (scratch / name).mkdir()
            for requests in (0, plan.requests):
                jobs[(name, requests)] = pool.submit(
                    instructions._count, requests, 2000, scratch / name, env=envs[name]
                )
    return {
        name: (jobs[(name, plan.requests)].result() - jobs[(name, 0)].result()) / plan.requests
        for name in BUILDS
    }


@contextlib.contextmanager
def three_servers(envs: Mapping[str, Mapping[str, str]]) -> Iterator[dict[str, ServerProcess]]:
    """Ours interpreted, ours compiled, the limit (interpreted: it runs none of our logic)."""
    with contextlib.ExitStack() as stack:
        started: dict[str, ServerProcess] = {}
        for name in THREE:
            kind = "limit" if name == "limit" else "ours"
            env = envs["interpreted" if name == "limit" else name]
            started[name] = ServerProcess(name, ["tests.load.servers", kind], env=env)
            stack.callback(started[name].stop)
        yield started


def process_cpu(pid: int) -> float | None:
    """User + system CPU seconds of a process, every thread; None without /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class MeteredLoad(LoadGenerator):
    """The bench's load generator, also reading the server's CPU time around each measured
    run: server CPU per request, which the VM's other load moves less than req/s does."""

    def __init__(
        self, ghz: str | None, protoset: Path | None, pids: Mapping[str, int], duration: float
    ) -> None:
        super().__init__(ghz, protoset)
        self.pids = pids  # target -> server pid (taskset execs, so the pid is the server's)
        self.duration = duration  # runs of another length are warm-ups: not recorded
        self.cpu_us: dict[tuple[str, str, int], list[float]] = {}

    def run(
        self, target: str, rpc: str, concurrency: int, duration: float, *, reflection: bool = True
    ) -> dict[str, float]:
        before = process_cpu(self.pids[target])
        figures = super().run(target, rpc, concurrency, duration, reflection=reflection)
        after = process_cpu(self.pids[target])
        calls = figures["rps"] * duration
        if duration == self.duration and before is not None and after is not None and calls:
            key = (target, rpc, concurrency)
            self.cpu_us.setdefault(key, []).append((after - before) / calls * 1e6)
        return figures


def client_cost(
    settings: bench.Settings, envs: Mapping[str, Mapping[str, str]]
) -> dict[tuple[str, str], ClientCell]:
    """Our A2AClient over gRPC at c=32 in each build, against one interpreted server; rounds
    go interpreted, compiled, interpreted, ..."""
    cells: dict[tuple[str, str], ClientCell] = {}
    server = ServerProcess("clients", ["tests.load.servers", "ours"], env=envs["interpreted"])
    try:
        for round_number in range(settings.rounds):
            for rpc in bench.RPCS:
                for name in BUILDS:
                    command = [sys.executable, "-m", "tests.load.client_cpu", "--client", "ours"]
                    command += ["--transport", "grpc", "--target", server.target]
                    command += ["--calls", str(settings.client_calls)]
                    command += ["--warmup", str(settings.client_warmup)]
                    command += ["-c", str(bench.CLIENT_CONCURRENCY)]
                    command += ["--stream"] if rpc == "stream" else []
                    figures = bench.run_json(
                        pinned(command, bench.LOAD_CPU), timeout=600, env=envs[name]
                    )
                    cells.setdefault((rpc, name), ClientCell()).add(figures)
                    print(
                        f"  round {round_number + 1} client {bench.RPCS[rpc]} {name} build: "
                        f"{figures['cpu_us_per_call']:.0f} us CPU/call, {figures['rps']:.0f} "
                        f"req/s, errors {int(figures['errors'])}",
                        file=sys.stderr,
                        flush=True,
                    )
    finally:
        server.stop()
    return cells


# -- the report -------------------------------------------------------------------------------


def table(
    counts: dict[str, float],
    cells: dict[tuple[str, int, str], Cell],
    server_cpu: dict[tuple[str, int, str], float],
    clients: dict[tuple[str, str], ClientCell],
) -> list[str]:
    lines = [
        "| measurement | interpreted | compiled | compiled/interpreted | limit "
        "| interpreted/limit | compiled/limit |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]

    def row(label: str, values: dict[str, float], digits: int, limit: bool = False) -> None:
        shown = [f"{values[name]:,.{digits}f}" for name in BUILDS]
        ratios = [ratio(values["compiled"], values["interpreted"])]
        if limit:
            shown_limit = f"{values['limit']:,.{digits}f}"
            ratios += [shown_limit, *(ratio(values[name], values["limit"]) for name in BUILDS)]
        else:
            ratios += ["", "", ""]
        lines.append(f"| {label} | " + " | ".join(shown + ratios) + " |")

    row("instructions per blocking SendMessage (callgrind)", counts, 0)
    for rpc, label in bench.RPCS.items():
        for concurrency in THROUGHPUT_CONCURRENCY:
            where = f"{label} c={concurrency}"
            mine = {name: cells[(rpc, concurrency, name)] for name in THREE}
            row(f"{where} req/s", {n: c.median("rps") for n, c in mine.items()}, 0, True)
            row(f"{where} p50 ms", {n: c.median("p50") for n, c in mine.items()}, 2, True)
            row(f"{where} p99 ms", {n: c.median("p99") for n, c in mine.items()}, 2, True)
            row(f"{where} errors", {n: float(sum(c.errors)) for n, c in mine.items()}, 0, True)
            if all((rpc, concurrency, name) in server_cpu for name in THREE):
                used = {name: server_cpu[(rpc, concurrency, name)] for name in THREE}
                row(f"{where} server CPU us/request", used, 0, True)
    for rpc, label in bench.RPCS.items():
        mine_clients = {name: clients[(rpc, name)] for name in BUILDS}
        where = f"client {label} gRPC c={bench.CLIENT_CONCURRENCY}"
        row(f"{where} CPU us/call", {n: c.median("cpu_us") for n, c in mine_clients.items()}, 0)
        row(f"{where} req/s", {n: c.median("rps") for n, c in mine_clients.items()}, 0)
    return lines


def adopt_rule(counts: dict[str, float], cells: dict[tuple[str, int, str], Cell]) -> list[str]:
    compiled = cells[("send", 32, "compiled")].median("rps")
    limit = cells[("send", 32, "limit")].median("rps")
    versus_limit = compiled / limit if limit else 0.0
    cut = 1 - counts["compiled"] / counts["interpreted"]
    by_ratio, by_cut = versus_limit >= ADOPT_RATIO, cut >= ADOPT_CUT
    return [
        "adopt rule: adopt if compiled SendMessage c=32 ours/limit >= "
        f"{ADOPT_RATIO}, or the instructions cut >= {ADOPT_CUT:.0%}; else drop",
        f"- {'PASS' if by_ratio else 'FAIL'} compiled SendMessage c=32 ours/limit: "
        f"{versus_limit:.2f}",
        f"- {'PASS' if by_cut else 'FAIL'} instructions cut: {cut:.1%} "
        f"({counts['interpreted']:,.0f} -> {counts['compiled']:,.0f})",
        f"decision: {'ADOPT' if by_ratio or by_cut else 'DROP'}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny counts: a smoke run")
    parser.add_argument("--rounds", type=int, help="throughput and client rounds")
    parser.add_argument("--duration", type=float, help="seconds per throughput cell")
    parser.add_argument("--keep", type=Path, help="build into this directory and keep it")
    parser.add_argument("--unit", action="store_true", help="run tests/unit on the compiled build")
    args = parser.parse_args()
    base = QUICK if args.quick else FULL
    settings = dataclasses.replace(
        base.settings,
        rounds=args.rounds or base.settings.rounds,
        duration=args.duration or base.settings.duration,
    )
    plan = dataclasses.replace(base, settings=settings)
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (e.g. apt-get install valgrind)")
    keep = args.keep.resolve() if args.keep else None
    os.chdir(ROOT)  # the callgrind child runs `-m tests.load.instructions` from here
    started = time.time()
    with contextlib.ExitStack() as stack:
        if keep:
            keep.mkdir(parents=True, exist_ok=True)
            directory = keep
        else:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        print(f"building {len(COMPILED)} modules with mypyc in {directory} ...", file=sys.stderr)
        build_seconds = build(directory)
        print(f"built in {build_seconds:.1f} s", file=sys.stderr, flush=True)
        envs = environments(directory)
        checked = [check(name, envs[name]) for name in BUILDS]
        for line in checked:
            print(line, file=sys.stderr, flush=True)
        if args.unit:
            print("tests/unit on the compiled build:", file=sys.stderr, flush=True)
            if unit_tests(envs["compiled"]) != 0:
                sys.exit("tests/unit fails on the compiled build")
        print(f"callgrind, {plan.requests} requests per build ...", file=sys.stderr, flush=True)
        counts = instruction_counts(plan, envs, scratch)
        ghz = bench.find_ghz()
        protoset = bench.build_protoset(scratch) if ghz else None
        with three_servers(envs) as started_servers:
            targets = {name: server.target for name, server in started_servers.items()}
            pids = {server.target: server.process.pid for server in started_servers.values()}
            load = MeteredLoad(ghz, protoset, pids, settings.duration)
            print(f"throughput, load generator: {load.name}", file=sys.stderr, flush=True)
            cells = bench.throughput(load, settings, targets, THROUGHPUT_CONCURRENCY)
        server_cpu = {
            (rpc, concurrency, name): statistics.median(values)
            for name, target in targets.items()
            for (measured, rpc, concurrency), values in load.cpu_us.items()
            if measured == target
        }
        clients = client_cost(settings, envs)
    report = [
        f"machine: {bench.machine()}",
        f"build: mypyc {len(COMPILED)} modules in {build_seconds:.1f} s; " + "; ".join(checked),
        "compiled: " + ", ".join(COMPILED),
        "not compiled: " + "; ".join(f"{path} ({why})" for path, why in NOT_COMPILED.items()),
        f"instructions: {plan.requests} requests after {instructions.WARMUP_REQUESTS} warm-up, "
        "store of 2000, per build",
        f"throughput: {load.name}; {bench.pinning()}; {settings.rounds} round(s) of "
        f"{settings.duration:g} s per cell, servers in turn interpreted, compiled, limit; "
        "medians over rounds; server CPU us/request: the server process's CPU (/proc, every "
        "thread) over a cell / (req/s x duration)",
        f"client: A2AClient, {settings.client_calls} calls per cell after "
        f"{settings.client_warmup}, CPU of the client's own process, one interpreted server",
        "",
        *table(counts, cells, server_cpu, clients),
        "",
        *adopt_rule(counts, cells),
        "",
        f"took {time.time() - started:.0f} s",
    ]
    print("\n".join(report), flush=True)


if __name__ == "__main__":
    main()
