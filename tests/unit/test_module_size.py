"""No module of the package is over 800 lines: past that, a module holds more than one concern
and a reader cannot keep it in mind (docs/layout.md). One that grows past it is split by
concern, moving code first and changing it after."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("core", "server", "client", "cli")
MAX_LINES = 800


def test_no_module_is_over_800_lines() -> None:
    modules = sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))
    assert len(modules) > 50, "the package's modules were not found"
    sizes = {path.relative_to(ROOT): len(path.read_text().splitlines()) for path in modules}
    over = {str(path): lines for path, lines in sizes.items() if lines > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines (split them by concern): {over}"
