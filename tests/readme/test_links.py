"""Every relative link of the README, the pages of docs/ and CONTRIBUTING.md leads somewhere: to a
file that exists and, for a `#anchor`, to a heading of that file (as GitHub names it). And the
README's map of docs/ lists every page, so none is left unreachable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.readme.test_readme import PAGES, REPO, page_name

LINKED = [*PAGES, REPO / "CONTRIBUTING.md"]
LINK = re.compile(r"\[[^\]]*\]\((?P<target>[^)\s]+)\)")
FENCE = re.compile(r"^```")
HEADING = re.compile(r"^#{1,6}\s+(?P<title>.+?)\s*$")
CODE_SPAN = re.compile(r"`[^`]*`")


def _prose(path: Path) -> list[tuple[int, str]]:
    """The page's lines outside fenced blocks, with their numbers."""
    lines, fenced = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def slug(title: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to `-`."""
    text = title.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a page's headings (a repeated one gets -1, -2, ... as on GitHub)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in _prose(path):
        heading = HEADING.match(line)
        if heading:
            base = slug(heading["title"])
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """The page's relative links (not inside code), with their lines."""
    found = []
    for number, line in _prose(path):
        for link in LINK.finditer(CODE_SPAN.sub("", line)):
            target = link["target"]
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                found.append((number, target))
    return found


@pytest.mark.parametrize("path", LINKED, ids=page_name)
def test_every_relative_link_leads_to_a_file_and_heading(path: Path) -> None:
    broken = []
    for number, target in links(path):
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        where = f"{page_name(path)}:{number}: {target}"
        if not linked.exists():
            broken.append(f"{where}: no such file")
        elif anchor and anchor not in anchors(linked):
            broken.append(f"{where}: no heading #{anchor} in {linked.relative_to(REPO)}")
    assert not broken, "\n".join(broken)


def test_the_readme_maps_every_docs_page() -> None:
    linked = {target.partition("#")[0] for _, target in links(REPO / "README.md")}
    pages = {page_name(path) for path in PAGES[1:]}
    assert pages <= linked, f"the README's map of docs/ misses {sorted(pages - linked)}"


def test_slugs_are_githubs() -> None:
    assert slug("A2A 0.3 callers") == "a2a-03-callers"
    assert slug("Metrics, reload and logs") == "metrics-reload-and-logs"
    assert slug("JSON-RPC and HTTP+JSON") == "json-rpc-and-httpjson"
    assert slug("Signed messages and the audit trail, step by step") == (
        "signed-messages-and-the-audit-trail-step-by-step"
    )
