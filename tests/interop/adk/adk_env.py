"""The Google ADK peer's own virtual environment, built from requirements.txt beside this file.

google-adk brings its own a2a-sdk (and the SDK registers the same proto symbols as our generated
code), so it never goes into the project's .venv: it lives in `.venv/peers/adk`, made with
`python -m venv` and `pip install -r requirements.txt` the first time it is needed and reused
after. The stamp file inside it holds the hash of requirements.txt and constraints.txt, so a
changed pin rebuilds it from scratch; `make clean` removes it with .venv.

    .venv/bin/python -m tests.interop.adk.adk_env   # builds it if needed, prints its python

(Not named venv.py: `python -m venv` run from this folder would import it instead of the
standard library's.)

The tests call `ensure_adk_python()` from a fixture, so `make test` builds it on a fresh machine.
A failed pip fails those tests with pip's output; only when pip could not reach the package
index at all (no network) is `NoNetworkError` raised instead, for the tests to skip, saying so.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
VENV = ROOT / ".venv" / "peers" / "adk"
REQUIREMENTS = HERE / "requirements.txt"
CONSTRAINTS = HERE / "constraints.txt"
STAMP = VENV / ".installed"
NETWORK_ERRORS = re.compile(
    r"NewConnectionError|Max retries exceeded|Temporary failure in name resolution|"
    r"Name or service not known|Network is unreachable|No route to host|ConnectTimeout",
)
"""pip's words for an index it could not reach (as tests/packaging/test_wheel.py reads them)."""
PIP_TIMEOUT_S = 900


class AdkVenvError(RuntimeError):
    """Building the ADK environment failed; the message ends with the failing command's output."""


class NoNetworkError(AdkVenvError):
    """pip could not reach the package index."""


def _digest() -> str:
    sha = hashlib.sha256()
    for path in (REQUIREMENTS, CONSTRAINTS):
        sha.update(path.read_bytes())
    return sha.hexdigest()


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _run(argv: list[str], what: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    result = subprocess.run(
        argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=PIP_TIMEOUT_S
    )
    if result.returncode == 0:
        return
    output = (result.stdout + result.stderr)[-6000:]
    error = NoNetworkError if NETWORK_ERRORS.search(output) else AdkVenvError
    raise error(f"{what} failed (exit {result.returncode}):\n{output}")


def ensure_adk_python() -> Path:
    """The ADK environment's python, built first if it is missing or its pins changed."""
    digest = _digest()
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / "adk.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time; the others reuse its result
        if STAMP.is_file() and STAMP.read_text().strip() == digest:
            return _python(VENV)
        shutil.rmtree(VENV, ignore_errors=True)
        _run([sys.executable, "-m", "venv", str(VENV)], "python -m venv")
        pip = [str(_python(VENV)), "-m", "pip", "--disable-pip-version-check", "--quiet"]
        _run([*pip, "install", "-r", str(REQUIREMENTS)], f"pip install -r {REQUIREMENTS.name}")
        STAMP.write_text(digest + "\n")
        return _python(VENV)


if __name__ == "__main__":
    try:
        print(ensure_adk_python())
    except AdkVenvError as error:
        sys.exit(str(error))
