"""Tables in docs/ made from the code, each between two marker comments:

    <!-- generated: NAME (make doc-tables) -->
    ...
    <!-- end: NAME -->

`make doc-tables` (`python -m tests.doc_tables`) writes them; tests/unit/test_serve_help.py (the
options) and test_serve_environment.py (the variables) fail when a committed one differs from
what the code makes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from a2a_grpc.server import environment
from a2a_grpc.server.options import options_table
from a2a_grpc.server.settings import SETTINGS, parser

DOCS = Path(__file__).resolve().parents[1] / "docs"
TABLES: dict[str, tuple[Path, Callable[[], str]]] = {
    "serve-options": (DOCS / "server.md", lambda: options_table(SETTINGS)),
    "serve-environment": (DOCS / "server.md", lambda: environment.table(parser())),
}
"""Each table's name: the page it is on, and what makes it."""


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- generated: {name} (make doc-tables) -->\n", f"<!-- end: {name} -->"


def committed(name: str) -> str:
    """The table `name` as its page has it now (without the markers and the final newline)."""
    path, _ = TABLES[name]
    text = path.read_text()
    begin, end = _markers(name)
    if begin not in text or end not in text:
        raise AssertionError(f"{path} has no markers for the table {name!r}")
    return text[text.index(begin) + len(begin) : text.index(end)].removesuffix("\n")


def write() -> list[Path]:
    """Writes every table into its page; returns the pages that changed."""
    changed = []
    for name, (path, make) in TABLES.items():
        old = committed(name)
        new = make()
        if old != new:
            begin, end = _markers(name)
            text = path.read_text()
            path.write_text(
                text.replace(
                    f"{begin}{old}\n{end}" if old else f"{begin}{end}", f"{begin}{new}\n{end}"
                )
            )
            changed.append(path)
    return changed


if __name__ == "__main__":
    for page in write():
        print(f"wrote {page}")
