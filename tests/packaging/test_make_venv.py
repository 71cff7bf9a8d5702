"""`make install`'s virtualenv: made by a supported Python, and made again when an earlier try
left one by an unsupported or broken interpreter (it used to be reused, and failed again)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STUB = "#!/bin/sh\nexit 1\n"
"""An interpreter that refuses everything, as one too old to run the version check does."""


def make_venv(venv: Path, python: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-C",
            str(REPO),
            "venv",
            f"VENV={venv}",
            f"PYTHON={python}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def stub(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(STUB)
    path.chmod(0o755)
    return path


def test_a_venv_left_by_an_unsupported_python_is_made_again(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    stub(venv / "bin" / "python")
    result = make_venv(venv, sys.executable)
    assert result.returncode == 0, result.stderr
    assert "was made by an unsupported or broken Python; making it again" in result.stderr
    version = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sys; print(sys.version_info >= (3, 11))"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert version.stdout.strip() == "True"
    again = make_venv(venv, sys.executable)  # a good one is kept
    assert again.returncode == 0 and again.stderr == ""


def test_an_unsupported_python_is_named_and_nothing_is_made(tmp_path: Path) -> None:
    old = stub(tmp_path / "python3.9")
    result = make_venv(tmp_path / "venv", str(old))
    assert result.returncode == 2
    assert f"{old} is not Python 3.11 or newer; name one: make install PYTHON=python3.11" in (
        result.stderr
    )
    assert not (tmp_path / "venv").exists()
