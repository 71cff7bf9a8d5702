"""The real `a2a-grpc serve` console script as a child process, for tests of the command itself:
started with the options a test gives, read up to its settings line, stopped with SIGTERM."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

A2A_GRPC = str(Path(sys.executable).with_name("a2a-grpc"))
"""The installed console script (not `python -m`, which would put the cwd on sys.path)."""

SERVING = re.compile(r"serving A2A 1\.0 over gRPC \(\w+\) on (\S+):(\d+)$")
CARD_AT = re.compile(r"agent card at (\S+)/\.well-known/agent-card\.json")


@dataclass
class Served:
    process: subprocess.Popen[str]
    lines: list[str]
    """The start-up lines on stdout, up to and including the settings line."""
    host: str
    port: int
    http_base: str | None
    """`http://host:port` of the HTTP port as bound (None without one)."""
    stderr: str = ""
    """What the process wrote on stderr; read once it has stopped."""

    @property
    def card_line(self) -> str:
        """The start-up line naming the agent and where its card comes from."""
        return next(line for line in self.lines if "; card: " in line)


def run_serve(
    *options: str, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Runs `serve` expected to fail at start-up (with `env` added to this environment); its
    exit code and output."""
    return subprocess.run(
        [A2A_GRPC, "serve", *options],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


@contextlib.contextmanager
def serving(
    *options: str,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    no_drain_delay: bool = True,
) -> Iterator[Served]:
    """`a2a-grpc serve OPTIONS` running until the block ends (then SIGTERM; it must exit 0),
    with `--drain-delay 0` unless OPTIONS set it (or `no_drain_delay` is off), and `env` added
    to this environment."""
    # No drain delay unless the test's options set one (the last one counts).
    first = ["--drain-delay", "0"] if no_drain_delay else []
    process = subprocess.Popen(
        [A2A_GRPC, "serve", *first, *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        lines: list[str] = []
        while not lines or not lines[-1].startswith("a2a-grpc: settings"):
            line = process.stdout.readline()
            if not line:
                raise AssertionError(
                    f"serve exited ({process.wait()}): {''.join(lines)}{process.stderr.read()}"
                )
            lines.append(line.rstrip("\n"))
        serving_line = SERVING.search(lines[0])
        assert serving_line is not None, lines[0]
        card = CARD_AT.search(lines[1])
        served = Served(
            process,
            lines,
            serving_line.group(1),
            int(serving_line.group(2)),
            card.group(1) if card else None,
        )
        yield served
        process.send_signal(signal.SIGTERM)
        _, served.stderr = process.communicate(timeout=30)
        assert process.returncode == 0, served.stderr
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
