"""`make bench`: ours against the bare gRPC limit and the official SDK, side by side, one table.

    .venv/bin/python -m tests.load.bench [--quick] [--rounds N] [--duration S] [--python-load]
                                         [--only clients|postgres] [--pg-fsync on|off]

Seven servers run as child processes on 127.0.0.1 (ours with the demo agent, the limit's canned
servicer, the a2a-sdk 1.3.0 echo server, ours again on a Redis task store, "redis", and on a
PostgreSQL database, "postgres", the SDK's server on its own SQL store in that PostgreSQL, "sdk-sql"
(tests.load.sdk_sql_server, in its own environment), and our previous configuration,
"previous": ours as of commit `PREVIOUS`, imported from a copy of that commit's package; each
imports only its own generated code), pinned to CPU 0; every load generator is pinned to CPU 1,
so a server never competes with its load for a core. Rounds go A B C ... G A B C ... G at
concurrency 1, 32 and 256 for blocking SendMessage and the four-event SendStreamingMessage (ours
on Redis: SendMessage only; ours on Redis and on PostgreSQL on a store of `REDIS_MAX_TASKS` so
that it runs full; the SDK on its SQL store at c=32 only); the table shows medians over rounds.
Load comes from ghz when it is installed (`make ghz`; it finds the RPCs through server
reflection, or a descriptor set for the SDK's server), else from tests.load.closed_loop. Then:
time to first event of a stream, SubscribeToTask fan-out, ListTasks page latency at two store
sizes, memory per stored small task; and on Redis, with two replicas A and B of ours on one
redis-server (tests.load.replica_scenarios): an event written on A reaching a SubscribeToTask
stream on B, CancelTask on B reaching a stream on A, and Redis memory per small finished task
(tests.load.redis_memory); the same two replica figures with A and B on one PostgreSQL database,
and the bytes a small finished task takes in it (tests.load.postgres_bytes) beside the bytes per
task of the SDK's table after its rounds. The HTTP bindings at c=32: JSON-RPC SendMessage and
SSE streaming, ours against the SDK's JSON-RPC server (tests.load.sdk_jsonrpc_server: its
Starlette routes under uvicorn), and HTTP+JSON SendMessage (ours), from tests.load.http_load
(aiohttp, pinned to the load CPU like the others). The client side (tests.load.client_cpu, each
client in a child process of its own on the load CPU, against one server of ours on the server
CPU serving gRPC and JSON-RPC): our A2AClient, the SDK's client and a bare loop (a raw-bytes
grpc.aio multicallable; an httpx.AsyncClient POST), blocking SendMessage and the four-event
SendStreamingMessage, on each transport, at c=32, in rounds ours, sdk, bare, ours, ...: the CPU
per call of the client's own process (process_time over a fixed number of calls after a warm-up)
and its req/s. `--only clients` runs that part alone. The targets are checked and printed, never
asserted: the exit status is 0 whenever the harness itself worked. `--quick` runs everything
tiny (a smoke run for CI).

Each Redis measurement starts its own redis-server (tests.redis_servers.RedisServer: no RDB, no
AOF) and pins it, every thread of it, to CPU 0 with the servers. With 2 cores that is the only
placement that keeps CPU 1 to the load generator alone, as for the other rows: the replica and
its Redis share one core, so the redis row is what one core buys with Redis in the path, not
Redis on a machine of its own. With more cores the placement stays the same. The same holds for
PostgreSQL: each PostgreSQL measurement starts its own (tests.postgres_servers.PostgresServer,
with PostgreSQL's production `fsync=on` unless `--pg-fsync off`, where the tests' servers run
`fsync=off`) and pins it, every process of it, to CPU 0. `--only postgres` runs the PostgreSQL
rows alone, beside ours in memory and on Redis.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.load.sdk_sql.sdk_sql_env import SDK_SQL
from tests.postgres_servers import PostgresServer
from tests.redis_servers import RedisServer

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
SERVER_CPU, LOAD_CPU = 0, 1
SERVICE = "lf.a2a.v1.A2AService"
METADATA = '{"a2a-version":"1.0"}'
GHZ_DATA = '{"message":{"messageId":"{{.UUID}}","role":"ROLE_USER","parts":[{"text":"hello"}]}}'
KINDS = ("ours", "previous", "limit", "sdk", "redis", "postgres", "sdk-sql")
SDK_KINDS = ("sdk", "sdk-sql")
"""The SDK's servers: ghz finds their RPCs in a descriptor set, not through reflection."""
PREVIOUS = "3c32e76"
"""Our previous configuration, measured beside ours as "previous": main before the last round
of hot-path work (issue #30's cuts). `--previous REV` names another commit (it must serve
tests/load/servers.py as it is now: the `ServerPlan` API), `--previous ""` leaves it out. Move
it forward when a round of such work lands."""
PACKAGES = ("core", "server", "client", "cli", "generated")
"""The repository folders that install as a2a_grpc.<name>."""
RPCS = {"send": "SendMessage", "stream": "SendStreamingMessage"}
# Ours on Redis runs blocking SendMessage only: the row the Redis/in-memory target reads, and
# 45 s of the full run per RPC added.
KIND_RPCS = {"redis": ("send",)}
KIND_CONCURRENCY = {"sdk-sql": (32,)}
"""The SDK on its SQL store runs at c=32 only: the row the PostgreSQL/SDK target reads."""
REDIS_MAX_TASKS = 20_000
"""The redis row's store size: small enough that it is full after the first round, so that
from then on every new task deletes an old one, as in the in-memory server (100,000 tasks,
full after its first rounds) and in any replica that has run for a while. A replica at
capacity measured 5 % slower than one that is not (1526 against 1609 req/s, 2026-12-01)."""
STORE_MAX_TASKS = REDIS_MAX_TASKS
"""The postgres row's store size, full after the first round for the same reason (the SDK's
store has no bound: its table only grows)."""
POSTGRES_DURABLE = {"fsync": "on", "full_page_writes": "on", "synchronous_commit": "on"}
"""The bench's PostgreSQL keeps PostgreSQL's production defaults (each commit flushed to disk
before it returns), not the test servers' `fsync=off`; `--pg-fsync off` measures without."""
CONCURRENCY = (1, 32, 256)
TTFE_KINDS = {
    "ours": "ours",
    "limit": "limit",
    "sdk": "SDK",
    "postgres": "ours on PostgreSQL",
    "sdk-sql": "SDK on PostgreSQL",
}
"""The servers whose time to first stream event is measured, and their columns."""
LIST_ROUNDS = 5
"""Alternating rounds of the ListTasks page timing, each of `Settings.list_calls` calls."""
HTTP_SERVER_ARGS = {
    "ours": ["tests.load.servers", "ours", "--http"],
    "sdk": ["tests.load.sdk_jsonrpc_server"],
}
HTTP_ROWS = {  # tests.load.http_load's kinds, and the servers that run each
    "jsonrpc-send": ("JSON-RPC SendMessage", ("ours", "sdk")),
    "rest-send": ("HTTP+JSON SendMessage", ("ours",)),
    "jsonrpc-stream": ("JSON-RPC SendStreamingMessage (SSE)", ("ours", "sdk")),
}
HTTP_CONCURRENCY = 32
CLIENTS = ("ours", "sdk", "bare")
"""tests.load.client_cpu's clients: A2AClient, the a2a-sdk 1.3.0 client, a bare loop."""
CLIENT_TRANSPORTS = ("grpc", "jsonrpc")
CLIENT_LABELS = {"grpc": "gRPC", "jsonrpc": "JSON-RPC"}
CLIENT_CONCURRENCY = 32


@dataclass(frozen=True)
class Settings:
    rounds: int
    duration: float
    warmup: float
    fanout_subscribers: int
    fanout_events: int
    fanout_hold: float
    list_sizes: tuple[int, int]
    list_calls: int
    memory_tasks: int
    replica_samples: int
    redis_memory_tasks: int
    python_load: bool
    pg_bytes_tasks: int = 10_000
    """Tasks written for the PostgreSQL bytes-per-task figure."""
    pg_fsync: bool = True
    """The bench's PostgreSQL flushes each commit (production); False: `fsync=off`."""
    client_calls: int = 2000
    """Timed calls per client-side cell (after `client_warmup` untimed ones)."""
    client_warmup: int = 300


FULL = Settings(3, 5.0, 2.0, 100, 1000, 2.0, (1_000, 100_000), 200, 100_000, 200, 100_000, False)
QUICK = Settings(
    1, 0.4, 0.2, 10, 50, 0.5, (1_000, 5_000), 20, 5_000, 20, 10_000, False, 1_000, True, 200, 50
)


@dataclass
class Cell:
    """Every round's figures for one (rpc, concurrency, server)."""

    rps: list[float] = field(default_factory=list)
    p50: list[float] = field(default_factory=list)
    p99: list[float] = field(default_factory=list)
    errors: list[int] = field(default_factory=list)

    def add(self, figures: dict[str, float]) -> None:
        self.rps.append(figures["rps"])
        self.p50.append(figures["p50_ms"])
        self.p99.append(figures["p99_ms"])
        self.errors.append(int(figures["errors"]))

    def median(self, name: str) -> float:
        values: list[float] = list(getattr(self, name))
        return statistics.median(values) if values else 0.0


@dataclass
class ClientCell:
    """Every round's figures for one (transport, rpc, client) of the client side."""

    cpu_us: list[float] = field(default_factory=list)
    rps: list[float] = field(default_factory=list)
    errors: list[int] = field(default_factory=list)

    def add(self, figures: dict[str, float]) -> None:
        self.cpu_us.append(figures["cpu_us_per_call"])
        self.rps.append(figures["rps"])
        self.errors.append(int(figures["errors"]))

    def median(self, name: str) -> float:
        values: list[float] = list(getattr(self, name))
        return statistics.median(values) if values else 0.0


# -- processes ------------------------------------------------------------------------------


def pinned(command: Sequence[str], cpu: int) -> list[str]:
    """`command` on one CPU when the machine has two or more and taskset exists."""
    if (os.cpu_count() or 1) >= 2 and shutil.which("taskset"):
        return ["taskset", "-c", str(cpu), *command]
    return list(command)


class ServerProcess:
    """A benchmark server in its own process; `port` once it printed `PORT <n>` (and
    `http_port` if it printed `PORT <grpc> <http>`)."""

    def __init__(
        self,
        name: str,
        module_args: Sequence[str],
        env: Mapping[str, str] | None = None,
        python: str = PYTHON,
    ) -> None:
        self.name = name
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            pinned([python, "-m", *module_args], SERVER_CPU),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env=env,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().split()
        if len(line) not in (2, 3) or line[0] != "PORT":
            self._end()
            self._log.seek(0)
            log = self._log.read().decode()[-3000:]
            self.stop()
            raise RuntimeError(f"{name} did not start:\n{log}")
        self.port = int(line[1])
        self.http_port = int(line[2]) if len(line) == 3 else None

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self._end()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._log.close()

    def _end(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


SERVER_ARGS = {
    "ours": ["tests.load.servers", "ours"],
    "limit": ["tests.load.servers", "limit"],
    "sdk": ["tests.load.sdk_echo_server"],
}


@contextlib.contextmanager
def servers(
    kinds: dict[str, Sequence[str]],
    envs: Mapping[str, Mapping[str, str]] | None = None,
    pythons: Mapping[str, str] | None = None,
) -> Iterator[dict[str, ServerProcess]]:
    """The servers of `kinds` (module arguments), each with its environment in `envs` and its
    interpreter in `pythons` if any (default: this one)."""
    started: dict[str, ServerProcess] = {}
    try:
        for name, module_args in kinds.items():
            python = (pythons or {}).get(name, PYTHON)
            started[name] = ServerProcess(name, module_args, (envs or {}).get(name), python)
        yield started
    finally:
        for server in started.values():
            server.stop()


def previous_build(revision: str, directory: Path) -> dict[str, str]:
    """The package as it was at `revision`, laid out under `directory` as `a2a_grpc/...`; returns
    the environment that makes a server import it (PYTHONPATH first: the path finder comes before
    the editable install's)."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", revision, *PACKAGES],
        capture_output=True,
        check=False,
    )
    if archive.returncode != 0:
        raise SystemExit(f"--previous {revision}: {archive.stderr.decode().strip()}")
    source = directory / "source"
    source.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True)
    package = directory / "a2a_grpc"
    package.mkdir()
    (package / "__init__.py").touch()
    for name in PACKAGES:
        (source / name).rename(package / name)
    return {**os.environ, "PYTHONPATH": str(directory)}


@contextlib.contextmanager
def redis_server() -> Iterator[RedisServer]:
    """A fresh redis-server, every thread of it pinned to the servers' CPU (see the docstring)."""
    redis = RedisServer().start()
    try:
        if pinned(["x"], SERVER_CPU)[0] == "taskset":
            info = redis.cli("INFO", "server")
            pid = next(line.split(":")[1] for line in info.split() if line.startswith("process_id"))
            command = ["taskset", "-a", "-p", "-c", str(SERVER_CPU), pid]
            subprocess.run(command, check=True, capture_output=True)
        yield redis
    finally:
        redis.close()


@contextlib.contextmanager
def postgres_server(fsync: bool = True) -> Iterator[PostgresServer]:
    """A fresh PostgreSQL (tests.postgres_servers), with PostgreSQL's production durability
    unless `fsync` is off, its postmaster and every process it forks pinned to the servers'
    CPU as redis-server is."""
    settings = POSTGRES_DURABLE if fsync else {"fsync": "off", "full_page_writes": "off"}
    server = PostgresServer(extra_settings=settings).start()
    try:
        if pinned(["x"], SERVER_CPU)[0] == "taskset":
            for pid in server._processes():  # the backends to come are forked from these
                command = ["taskset", "-a", "-p", "-c", str(SERVER_CPU), str(pid)]
                subprocess.run(command, check=True, capture_output=True)
        yield server
    finally:
        server.close()


def sdk_sql_bytes(url: str) -> dict[str, float]:
    """The SDK's `tasks` table (heap, TOAST, indexes; after VACUUM) per row it holds."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("VACUUM ANALYZE tasks")
        row = connection.execute(
            "SELECT pg_total_relation_size('tasks'), (SELECT count(*) FROM tasks)"
        ).fetchone()
    assert row is not None
    size, count = int(row[0]), int(row[1])
    return {"tasks": count, "bytes_per_task": size / count if count else 0.0}


def run_json(
    command: Sequence[str], timeout: float, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False, env=env
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# -- load generators ------------------------------------------------------------------------


def find_ghz() -> str | None:
    local = Path(PYTHON).parent / "ghz"
    return str(local) if local.exists() else shutil.which("ghz")


def build_protoset(directory: Path) -> Path:
    """For ghz against the SDK's server: its stock grpcio-reflection cannot resolve an RPC's
    symbol, so ghz reads a descriptor set compiled from proto/a2a.proto with the pinned
    grpcio-tools instead (ours and the limit answer it through reflection)."""
    import google.api
    import grpc_tools

    out = directory / "a2a.protoset"
    well_known = Path(grpc_tools.__file__).parent / "_proto"
    googleapis = Path(next(iter(google.api.__path__))).parent.parent
    subprocess.run(
        [
            PYTHON,
            "-m",
            "grpc_tools.protoc",
            f"-I{ROOT / 'proto'}",
            f"-I{well_known}",
            f"-I{googleapis}",
            "--include_imports",
            f"--descriptor_set_out={out}",
            str(ROOT / "proto" / "a2a.proto"),
        ],
        check=True,
    )
    return out


class LoadGenerator:
    """ghz when available, else the Python closed loop; both pinned to the load CPU."""

    def __init__(self, ghz: str | None, protoset: Path | None) -> None:
        self.ghz = ghz
        self.protoset = protoset

    @property
    def name(self) -> str:
        return "ghz" if self.ghz else "python closed loop (tests.load.closed_loop)"

    def run(
        self, target: str, rpc: str, concurrency: int, duration: float, *, reflection: bool = True
    ) -> dict[str, float]:
        """One closed-loop run. ghz finds the RPC through the server's reflection, or, with
        `reflection=False` (the SDK's stock grpcio-reflection cannot resolve a method's
        symbol), in a descriptor set compiled from proto/a2a.proto."""
        if self.ghz is None or self.protoset is None:
            command = [PYTHON, "-m", "tests.load.closed_loop", target, rpc]
            command += ["-c", str(concurrency), "-d", str(duration)]
            return run_json(pinned(command, LOAD_CPU), timeout=duration + 120)
        return self._ghz(target, rpc, concurrency, duration, reflection)

    def _ghz(
        self, target: str, rpc: str, concurrency: int, duration: float, reflection: bool
    ) -> dict[str, float]:
        assert self.ghz is not None and self.protoset is not None
        schema = [] if reflection else ["--protoset", str(self.protoset)]
        command = [
            self.ghz,
            "--insecure",
            *schema,
            "--call",
            f"{SERVICE}.{RPCS[rpc]}",
            "-d",
            GHZ_DATA,
            "-m",
            METADATA,
            "-c",
            str(concurrency),
            "-z",
            f"{int(duration * 1000)}ms",
            "--duration-stop",
            "ignore",
            "--cpus",
            "1",
            "--format",
            "json",
            target,
        ]
        report = run_json(pinned(command, LOAD_CPU), timeout=duration + 120)
        latencies = {
            int(item["percentage"]): item["latency"] / 1e6
            for item in report.get("latencyDistribution") or []  # type: ignore[attr-defined]
        }
        statuses: dict[str, int] = report.get("statusCodeDistribution") or {}  # type: ignore[assignment]
        count = int(report["count"])
        return {
            "rps": report["rps"],
            "p50_ms": latencies.get(50, 0.0),
            "p99_ms": latencies.get(99, 0.0),
            "errors": count - statuses.get("OK", 0),
        }


# -- the measurements -----------------------------------------------------------------------


FAILED_CELL = {"rps": 0.0, "p50_ms": 0.0, "p99_ms": 0.0, "errors": 1}
"""A cell whose load generator could not run (a starved server answered nothing in its
deadline): no throughput, one error, and the run goes on."""


def throughput(
    load: LoadGenerator,
    settings: Settings,
    targets: dict[str, str],
    concurrencies: Sequence[int] = CONCURRENCY,
) -> dict[tuple[str, int, str], Cell]:
    cells: dict[tuple[str, int, str], Cell] = {}
    for name, target in targets.items():  # warm every server up (imports, caches, allocators)
        for rpc in KIND_RPCS.get(name, RPCS):
            load.run(target, rpc, 32, settings.warmup, reflection=name not in SDK_KINDS)
    for round_number in range(settings.rounds):
        for rpc in RPCS:
            for concurrency in concurrencies:
                for name, target in targets.items():  # A B C D, then again next round
                    if rpc not in KIND_RPCS.get(name, RPCS):
                        continue
                    if concurrency not in KIND_CONCURRENCY.get(name, concurrencies):
                        continue
                    try:
                        figures = load.run(
                            target,
                            rpc,
                            concurrency,
                            settings.duration,
                            reflection=name not in SDK_KINDS,
                        )
                    except RuntimeError as failed:  # e.g. ghz found no RPC in its deadline
                        print(f"  {name}: the load generator failed: {failed}", file=sys.stderr)
                        figures = FAILED_CELL
                    cells.setdefault((rpc, concurrency, name), Cell()).add(figures)
                    print(
                        f"  round {round_number + 1} {RPCS[rpc]} c={concurrency} {name}: "
                        f"{figures['rps']:.0f} req/s, p99 {figures['p99_ms']:.2f} ms, "
                        f"errors {int(figures['errors'])}",
                        file=sys.stderr,
                        flush=True,
                    )
    return cells


def http_throughput(settings: Settings) -> dict[tuple[str, str], Cell]:
    """The HTTP bindings at c=32: ours (the HTTP port of tests.load.servers) and the SDK's
    JSON-RPC server (tests.load.sdk_jsonrpc_server), in alternating rounds like the gRPC
    rows, loaded by tests.load.http_load pinned to the load CPU."""

    def run(target: str, kind: str, duration: float) -> dict[str, float]:
        command = [PYTHON, "-m", "tests.load.http_load", f"http://{target}", kind]
        command += ["-c", str(HTTP_CONCURRENCY), "-d", str(duration)]
        return run_json(pinned(command, LOAD_CPU), timeout=duration + 120)

    cells: dict[tuple[str, str], Cell] = {}
    with servers(HTTP_SERVER_ARGS) as started:
        for kind, (_, names) in HTTP_ROWS.items():
            for name in names:
                run(started[name].target, kind, settings.warmup)
        for round_number in range(settings.rounds):
            for kind, (label, names) in HTTP_ROWS.items():
                for name in names:
                    figures = run(started[name].target, kind, settings.duration)
                    cells.setdefault((kind, name), Cell()).add(figures)
                    print(
                        f"  round {round_number + 1} {label} c={HTTP_CONCURRENCY} {name}: "
                        f"{figures['rps']:.0f} req/s, p99 {figures['p99_ms']:.2f} ms, "
                        f"errors {int(figures['errors'])}",
                        file=sys.stderr,
                        flush=True,
                    )
    return cells


def http_table(cells: dict[tuple[str, str], Cell]) -> list[str]:
    lines = [
        "| HTTP binding, RPC | c | server | req/s | p50 ms | p99 ms | errors | ours/SDK req/s |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for kind, (label, names) in HTTP_ROWS.items():
        for name in names:
            cell = cells[(kind, name)]
            versus = ""
            if name == "ours" and (kind, "sdk") in cells:
                versus = ratio(cell.median("rps"), cells[(kind, "sdk")].median("rps"))
            lines.append(
                f"| {label} | {HTTP_CONCURRENCY} | {name} | {cell.median('rps'):.0f} "
                f"| {cell.median('p50'):.2f} | {cell.median('p99'):.2f} | {sum(cell.errors)} "
                f"| {versus} |"
            )
    return lines


def client_cost(settings: Settings) -> dict[tuple[str, str, str], ClientCell]:
    """The client side: each client (tests.load.client_cpu) in a child process of its own on
    the load CPU, against one server of ours (gRPC and JSON-RPC) on the server CPU; rounds go
    ours, sdk, bare, ours, ... per cell; medians over rounds."""
    cells: dict[tuple[str, str, str], ClientCell] = {}
    with servers({"clients": ["tests.load.servers", "ours", "--both"]}) as started:
        server = started["clients"]
        targets = {"grpc": server.target, "jsonrpc": f"http://127.0.0.1:{server.http_port}"}
        for round_number in range(settings.rounds):
            for transport in CLIENT_TRANSPORTS:
                for rpc in RPCS:
                    for client in CLIENTS:
                        command = [PYTHON, "-m", "tests.load.client_cpu", "--client", client]
                        command += ["--transport", transport, "--target", targets[transport]]
                        command += ["--calls", str(settings.client_calls)]
                        command += ["--warmup", str(settings.client_warmup)]
                        command += ["-c", str(CLIENT_CONCURRENCY)]
                        command += ["--stream"] if rpc == "stream" else []
                        figures = run_json(pinned(command, LOAD_CPU), timeout=600)
                        cells.setdefault((transport, rpc, client), ClientCell()).add(figures)
                        print(
                            f"  round {round_number + 1} client {CLIENT_LABELS[transport]} "
                            f"{RPCS[rpc]} {client}: {figures['cpu_us_per_call']:.0f} us CPU/call, "
                            f"{figures['rps']:.0f} req/s, errors {int(figures['errors'])}",
                            file=sys.stderr,
                            flush=True,
                        )
    return cells


def client_table(cells: dict[tuple[str, str, str], ClientCell]) -> list[str]:
    lines = [
        "| client side, RPC | transport | client | CPU us/call | req/s | c | errors "
        "| ours/SDK CPU | ours/bare CPU |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for transport in CLIENT_TRANSPORTS:
        for rpc in RPCS:
            ours = cells[(transport, rpc, "ours")].median("cpu_us")
            for client in CLIENTS:
                cell = cells[(transport, rpc, client)]
                ratios = ["", ""]
                if client == "ours":
                    ratios = [
                        ratio(ours, cells[(transport, rpc, "sdk")].median("cpu_us")),
                        ratio(ours, cells[(transport, rpc, "bare")].median("cpu_us")),
                    ]
                lines.append(
                    f"| {RPCS[rpc]} | {CLIENT_LABELS[transport]} | {client} "
                    f"| {cell.median('cpu_us'):.0f} | {cell.median('rps'):.0f} "
                    f"| {CLIENT_CONCURRENCY} | {sum(cell.errors)} | " + " | ".join(ratios) + " |"
                )
    return lines


def client_verdicts(cells: dict[tuple[str, str, str], ClientCell]) -> list[str]:
    """The client side's targets: ours <= 0.6 x the SDK's CPU per call, <= 1.2 x bare."""
    checks: list[tuple[str, float, bool]] = []
    for transport in CLIENT_TRANSPORTS:
        for rpc in RPCS:
            ours = cells[(transport, rpc, "ours")].median("cpu_us")
            sdk = cells[(transport, rpc, "sdk")].median("cpu_us")
            bare = cells[(transport, rpc, "bare")].median("cpu_us")
            where = f"{CLIENT_LABELS[transport]} {RPCS[rpc]}"
            checks.append(
                (f"client CPU/call {where} ours/SDK <= 0.6", ours / sdk, ours <= 0.6 * sdk)
            )
            checks.append(
                (f"client CPU/call {where} ours/bare <= 1.2", ours / bare, ours <= 1.2 * bare)
            )
    return [f"- {'PASS' if ok else 'FAIL'} {label}: {value:.2f}" for label, value, ok in checks]


def first_event(settings: Settings, targets: dict[str, str]) -> dict[str, float]:
    """Time to first event of SendStreamingMessage at concurrency 1 (Python client)."""
    figures: dict[str, float] = {}
    for name, target in targets.items():
        command = [PYTHON, "-m", "tests.load.closed_loop", target, "stream", "-c", "1"]
        command += ["-d", str(max(1.0, settings.duration))]
        figures[name] = run_json(pinned(command, LOAD_CPU), timeout=120)["ttfe_p50_ms"]
    return figures


def fanout(settings: Settings) -> dict[str, float]:
    with servers({"burst": ["tests.load.servers", "ours", "--agent", "burst"]}) as started:
        command = [PYTHON, "-m", "tests.load.scenarios", "fanout", started["burst"].target]
        command += ["--subscribers", str(settings.fanout_subscribers)]
        command += ["--events", str(settings.fanout_events), "--hold", str(settings.fanout_hold)]
        return run_json(pinned(command, LOAD_CPU), timeout=300)


def list_latency(settings: Settings) -> dict[int, dict[str, float]]:
    """ListTasks first-page latency on a store of each size: both servers run at once and are
    timed in alternating rounds (medians over rounds), so that the VM's speed drifting during
    the measurement does not read as a difference between the sizes."""
    started_servers = {
        str(size): ["tests.load.servers", "ours", "--preload", str(size)]
        for size in settings.list_sizes
    }
    rounds: dict[int, list[dict[str, float]]] = {size: [] for size in settings.list_sizes}
    with servers(started_servers) as started:
        for _ in range(LIST_ROUNDS):
            for size in settings.list_sizes:
                command = [PYTHON, "-m", "tests.load.scenarios", "list", started[str(size)].target]
                command += ["--calls", str(settings.list_calls)]
                rounds[size].append(run_json(pinned(command, LOAD_CPU), timeout=300))
    return {
        size: {
            name: statistics.median(figures[name] for figures in measured) for name in measured[0]
        }
        for size, measured in rounds.items()
    }


def audit_cost(load: LoadGenerator, settings: Settings, scratch: Path) -> dict[str, float]:
    """SendMessage at c=32 on our server with the audit trail off and on, alternating rounds."""
    kinds = {
        "off": ["tests.load.servers", "ours"],
        "on": ["tests.load.servers", "ours", "--audit-log", str(scratch / "audit.jsonl")],
    }
    rps: dict[str, list[float]] = {"off": [], "on": []}
    with servers(kinds) as started:
        for server in started.values():
            load.run(server.target, "send", 32, settings.warmup)
        for _ in range(settings.rounds):
            for name, server in started.items():
                rps[name].append(load.run(server.target, "send", 32, settings.duration)["rps"])
    return {name: statistics.median(values) for name, values in rps.items()}


def memory(settings: Settings) -> dict[str, float]:
    command = [PYTHON, "-m", "tests.load.store_memory", str(settings.memory_tasks), "--json"]
    return run_json(command, timeout=900)


def replica_latency(settings: Settings, store: str = "redis") -> dict[str, dict[str, float]]:
    """Replicas A and B on one Redis (or one PostgreSQL database: `store="postgres"`):
    SubscribeToTask on B sees A's event; CancelTask on B reaches A's stream
    (tests.load.replica_scenarios)."""
    figures: dict[str, dict[str, float]] = {}
    with contextlib.ExitStack() as stack:
        if store == "postgres":
            url = stack.enter_context(postgres_server(settings.pg_fsync)).create_database("a2a")
        else:
            url = stack.enter_context(redis_server()).url
        args = ["tests.load.servers", "ours", "--store", url, "--agent", "hold"]
        started = stack.enter_context(servers({"A": args, "B": args}))
        for scenario in ("subscribe", "cancel"):
            command = [PYTHON, "-m", "tests.load.replica_scenarios", scenario]
            command += [started["A"].target, started["B"].target, url]
            command += ["--samples", str(settings.replica_samples)]
            figures[scenario] = run_json(pinned(command, LOAD_CPU), timeout=600)
    return figures


def postgres_bytes(settings: Settings) -> dict[str, Any]:
    """Bytes per small finished task in the PostgreSQL store's tables
    (tests.load.postgres_bytes)."""
    command = [PYTHON, "-m", "tests.load.postgres_bytes", str(settings.pg_bytes_tasks), "--json"]
    return run_json(pinned(command, LOAD_CPU), timeout=1800)


def redis_memory(settings: Settings) -> dict[str, Any]:
    with redis_server() as redis:
        command = [PYTHON, "-m", "tests.load.redis_memory", redis.url]
        command += [str(settings.redis_memory_tasks)]
        return run_json(pinned(command, LOAD_CPU), timeout=1800)


# -- the report -----------------------------------------------------------------------------


def ratio(numerator: float, denominator: float) -> str:
    return f"{numerator / denominator:.2f}" if denominator else "-"


def throughput_table(cells: dict[tuple[str, int, str], Cell]) -> list[str]:
    """The gRPC rows. "ours/SDK" is ours in memory against the SDK in memory, and ours on
    PostgreSQL against the SDK on its SQL store (the same PostgreSQL); "store/in-memory" is ours
    on Redis or PostgreSQL against ours in memory."""
    lines = [
        "| RPC | c | server | req/s | p50 ms | p99 ms | errors | ours/limit req/s "
        "| ours/SDK req/s | ours/limit p99 | store/in-memory req/s | ours/previous req/s |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def versus(cell: Cell, rpc: str, concurrency: int, name: str, field: str = "rps") -> str:
        other = cells.get((rpc, concurrency, name))
        return "" if other is None else ratio(cell.median(field), other.median(field))

    for rpc in RPCS:
        for concurrency in CONCURRENCY:
            for name in KINDS:
                cell = cells.get((rpc, concurrency, name))
                if cell is None:  # a server that does not run this RPC
                    continue
                ratios = ["", "", "", "", ""]
                if name == "ours":
                    ratios = [
                        versus(cell, rpc, concurrency, "limit"),
                        versus(cell, rpc, concurrency, "sdk"),
                        versus(cell, rpc, concurrency, "limit", "p99"),
                        "",
                        versus(cell, rpc, concurrency, "previous"),
                    ]
                elif name == "redis":
                    ratios = ["", "", "", versus(cell, rpc, concurrency, "ours"), ""]
                elif name == "postgres":
                    ratios[1] = versus(cell, rpc, concurrency, "sdk-sql")
                    ratios[3] = versus(cell, rpc, concurrency, "ours")
                lines.append(
                    f"| {RPCS[rpc]} | {concurrency} | {name} | {cell.median('rps'):.0f} "
                    f"| {cell.median('p50'):.2f} | {cell.median('p99'):.2f} "
                    f"| {sum(cell.errors)} | " + " | ".join(ratios) + " |"
                )
    return lines


def verdicts(
    cells: dict[tuple[str, int, str], Cell],
    list_figures: dict[int, dict[str, float]],
    memory_figures: dict[str, float],
    replicas: dict[str, dict[str, float]],
    redis_kib: float,
    http_cells: dict[tuple[str, str], Cell],
) -> list[str]:
    def rps(rpc: str, name: str) -> float:
        return cells[(rpc, 32, name)].median("rps")

    send, stream, limit_send = rps("send", "ours"), rps("stream", "ours"), rps("send", "limit")
    p99 = cells[("send", 32, "ours")].median("p99")
    limit_p99 = cells[("send", 32, "limit")].median("p99")
    small, large = sorted(list_figures)
    list_change = list_figures[large]["p50_ms"] / list_figures[small]["p50_ms"] - 1
    errors_256 = sum(sum(cells[(rpc, 256, "ours")].errors) for rpc in RPCS)
    store_kib = memory_figures["store_kib"]
    on_redis = rps("send", "redis") / send if send else 0.0
    subscribe_p50, cancel_p99 = replicas["subscribe"]["p50_ms"], replicas["cancel"]["p99_ms"]
    jsonrpc = http_cells[("jsonrpc-send", "ours")].median("rps")
    jsonrpc_sdk = http_cells[("jsonrpc-send", "sdk")].median("rps")
    jsonrpc_vs_sdk = jsonrpc / jsonrpc_sdk if jsonrpc_sdk else 0.0
    checks = [
        ("SendMessage c=32 ours/limit >= 0.6 (aim 0.8)", send / limit_send,
         send >= 0.6 * limit_send),
        ("SendMessage c=32 ours/SDK >= 5", send / rps("send", "sdk"),
         send >= 5 * rps("send", "sdk")),
        ("SendStreamingMessage c=32 ours/limit >= 0.6", stream / rps("stream", "limit"),
         stream >= 0.6 * rps("stream", "limit")),
        ("SendMessage p99 c=32 ours/limit <= 2", p99 / limit_p99, p99 <= 2 * limit_p99),
        ("KiB per stored small task <= 4 (store)", store_kib, store_kib <= 4),
        (f"ListTasks page p50 change {small} -> {large} tasks within +-20 %", list_change,
         abs(list_change) <= 0.2),
        ("errors at c=256 (ours) == 0", errors_256, errors_256 == 0),
        ("SendMessage c=32 ours on Redis / in-memory >= 0.5", on_redis, on_redis >= 0.5),
        ("SubscribeToTask on B, time to first event from A p50 ms <= 2", subscribe_p50,
         subscribe_p50 <= 2),
        ("CancelTask on B -> CANCELED on A's stream p99 ms <= 100", cancel_p99,
         cancel_p99 <= 100),
        ("Redis KiB per small finished task <= 4", redis_kib, redis_kib <= 4),
        ("JSON-RPC SendMessage c=32 ours/SDK >= 3", jsonrpc_vs_sdk, jsonrpc_vs_sdk >= 3),
    ]  # fmt: skip
    return [f"- {'PASS' if ok else 'FAIL'} {label}: {value:.2f}" for label, value, ok in checks]


def ttfe_table(ttfe: Mapping[str, float]) -> list[str]:
    names = [name for name in TTFE_KINDS if name in ttfe]
    return [
        "| measurement | " + " | ".join(TTFE_KINDS[name] for name in names) + " |",
        "|---|" + "---:|" * len(names),
        "| time to first stream event, p50 ms (c=1, Python client) | "
        + " | ".join(f"{ttfe[name]:.2f}" for name in names)
        + " |",
    ]


def postgres_lines(
    replicas: dict[str, dict[str, float]], stored: dict[str, Any], sdk_bytes: dict[str, float]
) -> list[str]:
    """The PostgreSQL rows beside the throughput table: two replicas on one database, and what
    a task takes in the database, ours against the SDK's store."""
    subscribe, cancel = replicas["subscribe"], replicas["cancel"]
    tables = stored["bytes_per_task_by_table"]
    return [
        f"| ours on PostgreSQL: replicas A and B, one database, {int(subscribe['samples'])} "
        "samples each | p50 ms | p99 ms |",
        "|---|---:|---:|",
        "| SubscribeToTask on B, time to first event: client's release -> the event A writes "
        f"arrives on B's stream | {subscribe['p50_ms']:.2f} | {subscribe['p99_ms']:.2f} |",
        "| the same, from the agent's emit on A (its timestamp) "
        f"| {subscribe['emit_p50_ms']:.2f} | {subscribe['emit_p99_ms']:.2f} |",
        "| CancelTask sent to B -> CANCELED on a SubscribeToTask stream on A "
        f"| {cancel['p50_ms']:.2f} | {cancel['p99_ms']:.2f} |",
        "",
        "| on PostgreSQL | figure |",
        "|---|---:|",
        f"| ours: KiB per small finished task at {stored['tasks']} tasks (task, events, "
        f"claims, indexes; after VACUUM) | {stored['bytes_per_task'] / 1024:.2f} |",
        "| of which, bytes per task: "
        + ", ".join(f"{table} {value:.0f}" for table, value in tables.items())
        + " | |",
        f"| SDK DatabaseTaskStore: KiB per task of its `tasks` table after the bench "
        f"({sdk_bytes['tasks']:.0f} tasks, indexes included) "
        f"| {sdk_bytes['bytes_per_task'] / 1024:.2f} |",
    ]


def postgres_verdicts(
    cells: dict[tuple[str, int, str], Cell], replicas: dict[str, dict[str, float]]
) -> list[str]:
    """The PostgreSQL store's targets (issue #39)."""

    def served(name: str, rpc: str) -> float:
        """req/s of a cell none of whose calls failed, else 0 (ghz counts failed calls too)."""
        cell = cells[(rpc, 32, name)]
        return cell.median("rps") if sum(cell.errors) == 0 else 0.0

    checks: list[tuple[str, float, bool]] = []
    for rpc in RPCS:
        postgres, memory, sdk = (served(name, rpc) for name in ("postgres", "ours", "sdk-sql"))
        checks.append(
            (f"{RPCS[rpc]} c=32 ours on PostgreSQL / in-memory >= 0.35",
             postgres / memory if memory else 0.0, postgres >= 0.35 * memory > 0)
        )  # fmt: skip
        checks.append(
            (f"{RPCS[rpc]} c=32 ours on PostgreSQL / SDK on its SQL store >= 5",
             postgres / sdk if sdk else 0.0, postgres >= 5 * sdk > 0)
        )  # fmt: skip
    subscribe_p50, cancel_p99 = replicas["subscribe"]["p50_ms"], replicas["cancel"]["p99_ms"]
    checks += [
        ("PostgreSQL: SubscribeToTask on B, time to first event from A p50 ms <= 5",
         subscribe_p50, subscribe_p50 <= 5),
        ("PostgreSQL: CancelTask on B -> CANCELED on A's stream p99 ms <= 100", cancel_p99,
         cancel_p99 <= 100),
    ]  # fmt: skip
    return [f"- {'PASS' if ok else 'FAIL'} {label}: {value:.2f}" for label, value, ok in checks]


def postgres_report(
    load: LoadGenerator,
    settings: Settings,
    cells: dict[tuple[str, int, str], Cell],
    ttfe: Mapping[str, float],
    sdk_bytes: dict[str, float],
    started: float,
) -> list[str]:
    """`--only postgres`: the throughput rows of ours in memory, on Redis and on PostgreSQL and
    of the SDK on its SQL store, then the PostgreSQL rows."""
    replicas = replica_latency(settings, "postgres")
    stored = postgres_bytes(settings)
    return [
        f"machine: {machine()}",
        f"load: {load.name}; {pinning()}; {settings.rounds} round(s) of "
        f"{settings.duration:g} s per cell, medians over rounds",
        f"PostgreSQL: {postgres_durability(settings)}",
        "",
        *throughput_table(cells),
        "",
        *ttfe_table(ttfe),
        "",
        *postgres_lines(replicas, stored, sdk_bytes),
        "",
        "targets (checked, never asserted):",
        *postgres_verdicts(cells, replicas),
        "",
        f"took {time.time() - started:.0f} s",
    ]


def postgres_durability(settings: Settings) -> str:
    if settings.pg_fsync:
        return "fsync=on, synchronous_commit=on (its production defaults)"
    return "fsync=off (each commit's WAL reaches the OS, not the disk, before it returns)"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as info:
        cpu = next((line.split(":", 1)[1].strip() for line in info if "model name" in line), cpu)
    with contextlib.suppress(OSError), open("/proc/meminfo") as info:
        total_kib = int(info.readline().split()[1])
        return f"{os.cpu_count()} CPUs ({cpu}), {total_kib / 2**20:.0f} GiB, {platform.platform()}"
    return f"{os.cpu_count()} CPUs ({cpu}), {platform.platform()}"


def pinning() -> str:
    if pinned(["x"], 0)[0] == "taskset":
        return (
            f"servers, redis-server and PostgreSQL on CPU {SERVER_CPU}, load generators and "
            f"clients on "
            f"CPU {LOAD_CPU} (taskset)"
        )
    return "not pinned (fewer than 2 CPUs or no taskset)"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny counts: a smoke run")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--duration", type=float, help="seconds per measured cell")
    parser.add_argument("--python-load", action="store_true", help="never use ghz")
    parser.add_argument(
        "--only",
        choices=("clients", "postgres"),
        help="run this part alone (postgres: the PostgreSQL rows, beside in-memory and Redis)",
    )
    parser.add_argument(
        "--pg-fsync",
        choices=("on", "off"),
        default="on",
        help="the bench's PostgreSQL flushes each commit (on: its production default)",
    )
    parser.add_argument(
        "--previous",
        default=PREVIOUS,
        metavar="REV",
        help=f'our previous configuration, measured beside ours (default {PREVIOUS}; "": none)',
    )
    args = parser.parse_args(argv)
    base = QUICK if args.quick else FULL
    settings = dataclasses.replace(
        base,
        rounds=args.rounds or base.rounds,
        duration=args.duration or base.duration,
        python_load=args.python_load,
        pg_fsync=args.pg_fsync == "on",
    )
    started = time.time()
    if args.only == "clients":
        cells = client_cost(settings)
        report = [
            f"machine: {machine()}",
            f"{pinning()}; {settings.rounds} round(s) of {settings.client_calls} calls per "
            f"cell after {settings.client_warmup}, medians over rounds",
            "",
            *client_table(cells),
            "",
            "targets (checked, never asserted):",
            *client_verdicts(cells),
            "",
            f"took {time.time() - started:.0f} s",
        ]
        print("\n".join(report), flush=True)
        return
    with tempfile.TemporaryDirectory() as scratch:
        ghz = None if settings.python_load else find_ghz()
        load = LoadGenerator(ghz, build_protoset(Path(scratch)) if ghz else None)
        print(f"load generator: {load.name}", file=sys.stderr, flush=True)
        sdk_python = str(SDK_SQL.ensure())
        with redis_server() as redis, postgres_server(settings.pg_fsync) as postgres:
            redis_args = ["tests.load.servers", "ours", "--store", redis.url]
            redis_args += ["--config", f"max_tasks={REDIS_MAX_TASKS}"]
            postgres_args = ["tests.load.servers", "ours", "--store"]
            postgres_args += [postgres.create_database("a2a")]
            postgres_args += ["--config", f"max_tasks={STORE_MAX_TASKS}"]
            sdk_url = postgres.create_database("sdk")
            kinds = {
                **SERVER_ARGS,
                "redis": redis_args,
                "postgres": postgres_args,
                "sdk-sql": ["tests.load.sdk_sql_server", sdk_url],
            }
            if args.only == "postgres":
                kinds = {name: kinds[name] for name in ("ours", "redis", "postgres", "sdk-sql")}
            envs = {}
            if args.previous and args.only is None:
                kinds["previous"] = SERVER_ARGS["ours"]
                envs["previous"] = previous_build(args.previous, Path(scratch) / "previous")
            kinds = {name: kinds[name] for name in KINDS if name in kinds}  # the rounds' order
            with servers(kinds, envs, {"sdk-sql": sdk_python}) as started_servers:
                targets = {name: server.target for name, server in started_servers.items()}
                cells = throughput(load, settings, targets)
                ttfe = first_event(settings, {n: targets[n] for n in TTFE_KINDS if n in targets})
            sdk_bytes = sdk_sql_bytes(sdk_url)
        if args.only == "postgres":
            print("\n".join(postgres_report(load, settings, cells, ttfe, sdk_bytes, started)))
            return
        audit_figures = audit_cost(load, settings, Path(scratch))
    http_cells = http_throughput(settings)
    client_cells = client_cost(settings)
    fanout_figures = fanout(settings)
    list_figures = list_latency(settings)
    memory_figures = memory(settings)
    replicas = replica_latency(settings)
    redis_figures = redis_memory(settings)
    postgres_replicas = replica_latency(settings, "postgres")
    postgres_figures = postgres_bytes(settings)
    small, large = sorted(list_figures)
    subscribe, cancel = replicas["subscribe"], replicas["cancel"]
    redis_kib = redis_figures["kib_per_task"]
    by_kind = redis_figures["bytes_per_task_by_kind"]
    report = [
        f"machine: {machine()}",
        f"load: {load.name}; {pinning()}; {settings.rounds} round(s) of "
        f"{settings.duration:g} s per cell, medians over rounds",
        "previous: " + (f"ours as of commit {args.previous}" if args.previous else "not measured"),
        f"PostgreSQL: {postgres_durability(settings)}",
        "",
        *throughput_table(cells),
        "",
        *http_table(http_cells),
        "",
        f"client side: {settings.client_calls} calls per cell after {settings.client_warmup}, "
        "CPU of the client's own process",
        "",
        *client_table(client_cells),
        "",
        *ttfe_table(ttfe),
        "",
        "| ours only | figure |",
        "|---|---:|",
        f"| SubscribeToTask fan-out: 1 task, {int(fanout_figures['subscribers'])} subscribers, "
        f"{int(fanout_figures['events_per_task'])} events each: events delivered/s "
        f"| {fanout_figures['events_per_s']:.0f} |",
        f"| fan-out: streams that missed events / errors "
        f"| {int(fanout_figures['incomplete_streams'])} / {int(fanout_figures['errors'])} |",
        f"| ListTasks first page (50 tasks) p50 ms at {small} tasks "
        f"| {list_figures[small]['p50_ms']:.3f} |",
        f"| ListTasks first page (50 tasks) p50 ms at {large} tasks "
        f"| {list_figures[large]['p50_ms']:.3f} |",
        f"| SendMessage c=32 req/s, audit trail off / on "
        f"| {audit_figures['off']:.0f} / {audit_figures['on']:.0f} |",
        f"| KiB per stored small task at {settings.memory_tasks} tasks, store "
        f"| {memory_figures['store_kib']:.2f} |",
        f"| KiB per small task at {settings.memory_tasks} tasks, through the server "
        f"(with its idempotency record) | {memory_figures['server_kib']:.2f} |",
        "",
        f"| ours on Redis: replicas A and B, one redis-server, {int(subscribe['samples'])} "
        "samples each | p50 ms | p99 ms |",
        "|---|---:|---:|",
        "| SubscribeToTask on B, time to first event: client's release -> the event A writes "
        f"arrives on B's stream | {subscribe['p50_ms']:.2f} | {subscribe['p99_ms']:.2f} |",
        "| the same, from the agent's emit on A (its timestamp) "
        f"| {subscribe['emit_p50_ms']:.2f} | {subscribe['emit_p99_ms']:.2f} |",
        "| CancelTask sent to B -> CANCELED on a SubscribeToTask stream on A "
        f"| {cancel['p50_ms']:.2f} | {cancel['p99_ms']:.2f} |",
        "",
        "| ours on Redis | figure |",
        "|---|---:|",
        f"| Redis used_memory KiB per small finished task at {redis_figures['tasks']} tasks "
        f"(through the handler: task, events, indexes, message-id claim) | {redis_kib:.2f} |",
        "| of which, bytes per task: "
        + ", ".join(f"{kind} {value}" for kind, value in by_kind.items())
        + " | |",
        "",
        *postgres_lines(postgres_replicas, postgres_figures, sdk_bytes),
        "",
        "targets (checked, never asserted):",
        *verdicts(cells, list_figures, memory_figures, replicas, redis_kib, http_cells),
        *postgres_verdicts(cells, postgres_replicas),
        *client_verdicts(client_cells),
        "",
        f"took {time.time() - started:.0f} s",
    ]
    print("\n".join(report), flush=True)


if __name__ == "__main__":
    main()
