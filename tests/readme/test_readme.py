"""README.md and every page of docs/ are executable: every ```sh, ```console and ```python block
runs as written.

Each section of a page (the blocks under one heading) runs in order, in a fresh directory of its
own, against a fresh `make serve` (started here exactly so), unless the section starts its own
servers with a `<!-- readme-test: server -->` block; a test is named by its page and section.
The one substitution: the pages' ports (500xx, which `make serve` and its examples use, and
Redis's 6379) become free ports here, in the commands and in the output they show alike.
tests/readme/blocks.py has the conventions, the same on every page.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.readme.blocks import (
    SAVE_AS,
    Block,
    ReadmeFormatError,
    Section,
    commands,
    console_steps,
    exit_expectation,
    matches,
    parse,
)
from tests.redis_servers import READY_LINE as REDIS_READY_LINE
from tests.redis_servers import missing_redis_action

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
"""The pages whose examples run: the README, then docs/ in name order."""
VENV = Path(sys.prefix)
"""The virtualenv running the tests (`.venv`, or `make test-latest`'s): the pages' `.venv`."""
VENV_BIN = VENV / "bin"

BLOCK_TIMEOUT = 40.0  # seconds one block may run, at most
# Seconds from a server's start to its ready line, at most: a guard (the line ends the wait).
# On a machine with both cores busy, `serve --workers 2` took over 20 s to import.
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0  # seconds from Ctrl-C (SIGINT) to a server's exit (its grace is 10 s)
PORT_RANGES = (12000, 32000)  # where the pages' ports move to (below 32768, Linux's ephemeral)
README_PORT = re.compile(r"(?<!\d)(500\d\d|6379)(?!\d)")
A2A_READY = "serving A2A 1.0 over gRPC"


def page_name(path: Path) -> str:
    """A page as the tests and their messages name it: its path in the repository."""
    return path.relative_to(REPO).as_posix()


def _load(path: Path) -> tuple[list[Section], str | None]:
    try:
        return parse(path, page_name(path)), None
    except ReadmeFormatError as exc:
        return [], str(exc)


LOADED = {page_name(path): _load(path) for path in PAGES}
SECTIONS = {page: sections for page, (sections, _) in LOADED.items()}
"""Each page's sections, by page name."""


@pytest.mark.parametrize("page", list(LOADED))
def test_page_follows_the_block_conventions(page: str) -> None:
    error = LOADED[page][1]
    assert error is None, error


def test_the_readme_has_examples_that_run() -> None:
    assert any(block.runs for section in SECTIONS["README.md"] for block in section.blocks)


# --- ports ---------------------------------------------------------------------------------------


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _port_map() -> dict[str, str]:
    """A pages' port -> a free port here. 500xx keep their offsets (a server's HTTP port is its
    gRPC port + 1), so they move as one range of 200, picked below the kernel's ephemeral
    ports, where other tests' port-0 servers and outgoing connections never land."""
    used = {
        int(port)
        for sections in SECTIONS.values()
        for section in sections
        for block in section.blocks
        for port in README_PORT.findall(block.text)
    }
    needed = sorted({p for p in used if p != 6379} | {p + 1 for p in used if p != 6379})
    bases = list(range(PORT_RANGES[0], PORT_RANGES[1], 200))
    random.shuffle(bases)
    for base in bases[:50]:
        mapping = {p: base + p - 50000 for p in needed}
        mapping[6379] = base + 150
        if all(_free(port) for port in mapping.values()):
            return {str(k): str(v) for k, v in mapping.items()}
    raise RuntimeError("no free range of ports for the pages' examples")


def substitute(text: str, ports: dict[str, str]) -> str:
    return README_PORT.sub(lambda found: ports[found[1]], text)


def _environment() -> dict[str, str]:
    """What a shell after `source .venv/bin/activate` has, without this machine's A2A settings.
    PYTHONUNBUFFERED keeps stdout and stderr in the order a terminal shows them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("A2A_", "PYTEST"))}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(VENV)
    env["PYTHONUNBUFFERED"] = "1"
    return env


# --- servers -------------------------------------------------------------------------------------


class Background:
    """A long-running command in its own process group; its output is read as it comes."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str], ready: str) -> None:
        self.argv = argv
        self.lines: list[str] = []
        self._ready_text = ready
        self._ready = threading.Event()
        self._stopping = threading.Event()
        """Set once a server says it is shutting down (it then serves out its drain delay)."""
        self.process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            if self._ready_text in line:
                self._ready.set()
            if ": shutting down" in line:
                self._stopping.set()
        self._ready.set()  # end of output: not ready, and never will be
        self._stopping.set()

    def wait_ready(self) -> None:
        self._ready.wait(START_TIMEOUT)
        if self.process.poll() is not None or not any(self._ready_text in x for x in self.lines):
            self.stop()
            pytest.fail(f"{' '.join(self.argv)} did not start:\n{self.output()}")

    def output(self) -> str:
        return "".join(self.lines)

    def stop(self) -> int:
        """Ctrl-C, as in the terminal it runs in, and for an `a2a-grpc serve` a second Ctrl-C
        once it says it is shutting down (which skips its drain delay); SIGKILL if it outlives
        STOP_TIMEOUT."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            if any("serving A2A" in line for line in self.lines):
                self._stopping.wait(STOP_TIMEOUT)
                if self.process.poll() is None:
                    os.killpg(self.process.pid, signal.SIGINT)
        try:
            code = self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            pytest.fail(f"{' '.join(self.argv)} ignored Ctrl-C:\n{self.output()}")
        self._reader.join(STOP_TIMEOUT)
        assert self.process.stdout is not None
        self.process.stdout.close()
        return code


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def _ready_line(command: str) -> str:
    """What the server `command` prints once it serves. Its port must be in the text (a
    default port could not be moved off this machine's)."""
    for program, option, ready in (
        ("redis-server", "--port", REDIS_READY_LINE),
        ("a2a-grpc serve", "--port", A2A_READY),
    ):
        if program in command:
            if option not in command:
                raise ReadmeFormatError(f"{command!r}: name the port ({option})")
            return ready
    raise ReadmeFormatError(f"a server block runs {command!r}: no known ready line")


# --- the runners ---------------------------------------------------------------------------------


class SectionRun:
    """The state of one section of a page: its directory, its servers, its ports."""

    def __init__(
        self,
        section: Section,
        cwd: Path,
        scratch: Path,
        ports: dict[str, str],
        page: str = "README.md",
    ) -> None:
        self.section = section
        self.page = page
        self.cwd = cwd
        self.scratch = scratch
        self.ports = ports
        self.env = _environment()
        self.servers: list[Background] = []
        self.skipped: list[str] = []
        self.halted = False

    def where(self, block: Block) -> str:
        return f"{self.page}:{block.line} ({self.section.title})"

    def start_make_serve(self) -> None:
        port = self.ports["50051"]
        server = Background(
            ["make", "--no-print-directory", "serve", f"PORT={port}"], REPO, self.env, A2A_READY
        )
        self.servers.append(server)
        server.wait_ready()

    def stop_servers(self, check: bool) -> None:
        servers, self.servers = self.servers, []
        for server in reversed(servers):
            code = server.stop()
            if check and server.argv[0] != "make":
                assert code == 0, f"{' '.join(server.argv)} exited {code}:\n{server.output()}"

    def run(self, block: Block) -> None:
        text = substitute(block.text, self.ports)
        if self.halted:
            return
        if block.needs and not self._has(block.needs, block):
            self.halted = block.is_server  # what follows would run against no server
            return
        if block.is_server:
            for command in commands(text):
                server = Background(
                    ["bash", "-c", command], self.cwd, self.env, _ready_line(command)
                )
                self.servers.append(server)
                server.wait_ready()
        elif block.language == "sh":
            self._shell(block, self._sh_script(block, text))
        elif block.language == "console":
            self._console(block, text)
        elif block.language == "python":
            saved = SAVE_AS.match(text.splitlines()[0])
            if saved:
                (self.cwd / saved["name"]).write_text(text)
            else:
                script = self.scratch / f"readme_{block.line}.py"
                script.write_text(text)
                # From stdin, as if pasted into `python`: the current directory is on sys.path.
                self._shell(block, f'python - <"{script}"\n')

    def _has(self, tool: str, block: Block) -> bool:
        if tool == "redis-server":
            action, reason = missing_redis_action()
            if action == "fail":
                pytest.fail(reason)
            if action == "run":
                return True
        elif shutil.which(tool, path=self.env["PATH"]):
            return True
        hint = f" (make {tool})" if (REPO / "Makefile").read_text().count(f"\n{tool}:") else ""
        self.skipped.append(f"{self.where(block)} needs {tool}, not installed{hint}")
        return False

    def _sh_script(self, block: Block, text: str) -> str:
        lines = ["set -o pipefail"]
        for command in commands(text):
            bare, expected = exit_expectation(command)
            first = shlex.quote(command.splitlines()[0])
            lines.append(f"{{\n{bare}\n}}")
            lines.append(
                f'__rc=$?; if [ "$__rc" -ne {expected} ]; then '
                f'echo "exit $__rc, not {expected}:" {first} >&2; exit 97; fi'
            )
        return "\n".join(lines) + "\n"

    def _shell(self, block: Block, script: str) -> None:
        """Runs `script` in bash, in a process group of its own that is killed afterwards, so
        nothing a block leaves behind (or a command that hangs) outlives it."""
        process = subprocess.Popen(
            ["bash", "-c", script],
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            output, _ = process.communicate(timeout=BLOCK_TIMEOUT)
        except subprocess.TimeoutExpired:
            _kill_group(process.pid)
            output, _ = process.communicate()
            pytest.fail(f"{self.where(block)} ran over {BLOCK_TIMEOUT} s:\n{output}")
        _kill_group(process.pid)
        assert process.returncode == 0, (
            f"{self.where(block)} failed (exit {process.returncode}):\n{output}"
            + self._server_logs()
        )

    def _console(self, block: Block, text: str) -> None:
        steps = console_steps(text)
        parts = []
        for index, step in enumerate(steps):
            out = self.scratch / f"out-{block.line}-{index}"
            parts.append(
                f'{{\n{step.command}\n}} >"{out}" 2>&1\n__rc=$?; echo $__rc >"{out}.rc"; '
                "(exit $__rc)"
            )
        self._shell(block, "\n".join(parts) + "\nexit 0\n")
        for index, step in enumerate(steps):
            out = self.scratch / f"out-{block.line}-{index}"
            actual = out.read_text()
            code = int(Path(f"{out}.rc").read_text())
            shown = f"$ {step.command}\n{actual}"
            assert code == (step.exit_code or 0), (
                f"{self.where(block)}: exit {code}, shown {step.exit_code or 0}:\n{shown}"
            )
            assert matches(step.output, actual), (
                f"{self.where(block)}: output differs from what the page shows:\n"
                + "\n".join(step.output)
                + f"\n--- actual ---\n{shown}"
            )

    def _server_logs(self) -> str:
        return "".join(f"\n--- {' '.join(s.argv)} ---\n{s.output()}" for s in self.servers)


def _runnable() -> list[tuple[str, Section]]:
    """Every section that runs a block, with its page, in page order."""
    return [
        (page, section)
        for page, sections in SECTIONS.items()
        for section in sections
        if any(block.runs for block in section.blocks)
    ]


@pytest.fixture(scope="module")
def ports() -> dict[str, str]:
    return _port_map()


@pytest.fixture
def section_run(
    request: pytest.FixtureRequest, tmp_path: Path, ports: dict[str, str]
) -> Iterator[SectionRun]:
    page, section = request.param
    cwd, scratch = tmp_path / "work", tmp_path / "scratch"
    cwd.mkdir()
    scratch.mkdir()
    run = SectionRun(section, cwd, scratch, ports, page)
    try:
        yield run
    finally:
        run.stop_servers(check=False)


@pytest.mark.timeout(300)  # a guard over the section's servers and blocks, each bounded above
@pytest.mark.parametrize(
    "section_run",
    _runnable(),
    ids=[f"{page}::{section.title}" for page, section in _runnable()],
    indirect=True,
)
def test_section_runs_as_written(section_run: SectionRun) -> None:
    section = section_run.section
    if not section.has_server:
        section_run.start_make_serve()
    for block in section.blocks:
        if block.runs:
            section_run.run(block)
    section_run.stop_servers(check=True)
    if section_run.skipped:
        pytest.skip("; ".join(section_run.skipped))
