"""A third-party peer's own virtual environment, built from the pinned requirements.txt (and its
constraints.txt, a `pip freeze` lock) in the peer's folder.

A peer that brings its own a2a-sdk (Google ADK, the official SDK 0.3) never goes into the
project's .venv (the SDK registers the same proto symbols as our generated code, and each
generation pins its own): it lives in `.venv/peers/<name>`, made with `python -m venv` and
`pip install -r requirements.txt` the first time it is needed and reused after. The stamp file
inside it holds the hash of requirements.txt and constraints.txt, so a changed pin rebuilds it
from scratch; `make clean` removes it with .venv.

The tests build it from a fixture, so `make test` builds it on a fresh machine (`make peers`
does it ahead of time). A failed pip fails those tests with pip's output; only when pip could
not reach the package index at all (no network) is `NoNetworkError` raised instead, for the
tests to skip, saying so (`peer_python_or_skip`; a failure with A2A_GRPC_REQUIRE_PEERS=1).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / ".venv" / "peers"
NETWORK_ERRORS = re.compile(
    r"NewConnectionError|Max retries exceeded|Temporary failure in name resolution|"
    r"Name or service not known|Network is unreachable|No route to host|ConnectTimeout",
)
"""pip's words for an index it could not reach (as tests/packaging/test_wheel.py reads them)."""
PIP_TIMEOUT_S = 900


class PeerEnvError(RuntimeError):
    """Building a peer's environment failed; the message ends with the failing command's
    output."""


class NoNetworkError(PeerEnvError):
    """pip could not reach the package index."""


@dataclass(frozen=True)
class PeerEnv:
    """The environment `.venv/peers/<name>`, built from `folder`'s requirements.txt and
    constraints.txt."""

    name: str
    folder: Path

    @property
    def venv(self) -> Path:
        return PEERS / self.name

    @property
    def requirements(self) -> Path:
        return self.folder / "requirements.txt"

    @property
    def constraints(self) -> Path:
        return self.folder / "constraints.txt"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def digest(self) -> str:
        sha = hashlib.sha256()
        for path in (self.requirements, self.constraints):
            sha.update(path.read_bytes())
        return sha.hexdigest()

    def ensure(self) -> Path:
        """The environment's python, built first if it is missing or its pins changed."""
        digest = self.digest()
        stamp = self.venv / ".installed"
        PEERS.mkdir(parents=True, exist_ok=True)
        with open(PEERS / f"{self.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time; the others reuse its result
            if stamp.is_file() and stamp.read_text().strip() == digest:
                return self.python
            shutil.rmtree(self.venv, ignore_errors=True)
            _run([sys.executable, "-m", "venv", str(self.venv)], "python -m venv")
            pip = [str(self.python), "-m", "pip", "--disable-pip-version-check", "--quiet"]
            _run(
                [*pip, "install", "-r", str(self.requirements)],
                f"pip install -r {self.requirements.relative_to(ROOT)}",
            )
            stamp.write_text(digest + "\n")
            return self.python


def _run(argv: list[str], what: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    result = subprocess.run(
        argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=PIP_TIMEOUT_S
    )
    if result.returncode == 0:
        return
    output = (result.stdout + result.stderr)[-6000:]
    error = NoNetworkError if NETWORK_ERRORS.search(output) else PeerEnvError
    raise error(f"{what} failed (exit {result.returncode}):\n{output}")


def main(env: PeerEnv) -> None:
    """`python -m` entry of a peer's env module: builds it if needed, prints its python."""
    try:
        print(env.ensure())
    except PeerEnvError as error:
        sys.exit(str(error))
