"""README.md and the pages of docs/ as data: their sections, fenced blocks, and how each block
is run.

Conventions (CONTRIBUTING.md, "The README is executable"), the same on every page:
- every fenced block names its language; ```sh, ```console and ```python blocks are run, ```text
  blocks are prose and never run, any other language needs a skip marker;
- a block is marked by an HTML comment on the line before it (blank lines between allowed):
  `<!-- readme-test: skip, REASON -->` (not run, with the reason), `<!-- readme-test: server -->`
  (an sh block of long-running commands, `a2a-grpc serve` or `redis-server` naming their
  `--port`, each started in the background and stopped with Ctrl-C when the section ends) or
  `<!-- readme-test: needs TOOL -->` (run when TOOL is installed, else reported as skipped, and
  with the rest of the section when it is a server block); `server, needs TOOL` is both;
- a ```console block is `$ command` lines (a command goes on over lines ending in a backslash or
  while a quote is open) each followed by the output it prints, where `…` stands for any text
  (and an id abbreviated as `51c5…` for the whole id); a command that exits non-zero shows it,
  with `$ echo $?` and the code, or with an `[exit N]` line after its output;
- in an ```sh block every command must exit 0, except one whose line ends in `# exit N`;
- a ```python block that starts with `# save as NAME` is written to NAME; any other is run.
"""

from __future__ import annotations

import itertools
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

RUN_LANGUAGES = frozenset({"sh", "console", "python"})
PROSE_LANGUAGES = frozenset({"text"})
MARKER = re.compile(r"^<!--\s*readme-test:\s*(?P<body>.*?)\s*-->$")
HEADING = re.compile(r"^(#{1,6})\s+(?P<title>.+?)\s*$")
SAVE_AS = re.compile(r"^#\s*save as\s+(?P<name>\S+)\s*$")
EXIT_COMMENT = re.compile(r"\s+#\s*exit\s+(?P<code>\d+)\s*$")
EXIT_LINE = re.compile(r"^\[exit (?P<code>\d+)\]$")


class ReadmeFormatError(ValueError):
    """A page breaks a convention above; the message names the page and the line."""


@dataclass(frozen=True)
class Block:
    """One fenced block: where it starts (1-based line of the opening fence) and what it says."""

    line: int
    language: str
    text: str
    marker: str = ""

    @property
    def skip_reason(self) -> str | None:
        if not self.marker.startswith("skip"):
            return None
        return self.marker.removeprefix("skip").lstrip(" ,:") or None

    @property
    def is_server(self) -> bool:
        return "server" in self.marker_items

    @property
    def needs(self) -> str | None:
        tools = [x.removeprefix("needs ") for x in self.marker_items if x.startswith("needs ")]
        return tools[0] if tools else None

    @property
    def marker_items(self) -> list[str]:
        """The marker's comma-separated items (none for a skip, whose reason may hold commas)."""
        if not self.marker or self.marker.startswith("skip"):
            return []
        return [item.strip() for item in self.marker.split(",")]

    @property
    def runs(self) -> bool:
        return self.language in RUN_LANGUAGES and self.skip_reason is None


@dataclass
class Section:
    """The blocks under one heading (up to the next heading of any level)."""

    title: str
    line: int
    blocks: list[Block] = field(default_factory=list)

    @property
    def has_server(self) -> bool:
        return any(block.is_server and block.runs for block in self.blocks)


def parse(path: Path, name: str | None = None) -> list[Section]:
    """The page's sections in order, each with its blocks; ReadmeFormatError for a broken
    convention (a block without a language, a marker not followed by a block, an unknown
    marker, a skip without a reason, an unclosed fence), naming the page as `name` (by default
    its file name)."""
    page = name or path.name
    lines = path.read_text(encoding="utf-8").splitlines()
    sections = [Section("(top)", 1)]
    marker: tuple[int, str] | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        number = index + 1
        if line.startswith("```"):
            language = line[3:].strip()
            end = index + 1
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            if end == len(lines):
                raise ReadmeFormatError(f"{page}:{number}: fence never closed")
            if not language:
                raise ReadmeFormatError(
                    f"{page}:{number}: a block without a language; say ```sh, ```console, "
                    "```python (run) or ```text (prose)"
                )
            body = marker[1] if marker else ""
            block = Block(number, language, "\n".join(lines[index + 1 : end]) + "\n", body)
            _check(block, page)
            sections[-1].blocks.append(block)
            marker = None
            index = end + 1
            continue
        found = MARKER.match(line.strip())
        if found:
            if marker is not None:
                raise ReadmeFormatError(f"{page}:{marker[0]}: marker not followed by a block")
            marker = (number, found["body"])
        elif line.strip() and marker is not None:
            raise ReadmeFormatError(f"{page}:{marker[0]}: marker not followed by a block")
        heading = HEADING.match(line)
        if heading:
            sections.append(Section(heading["title"], number))
        index += 1
    if marker is not None:
        raise ReadmeFormatError(f"{page}:{marker[0]}: marker not followed by a block")
    return sections


def _check(block: Block, page: str) -> None:
    where = f"{page}:{block.line}"
    if not all(item == "server" or item.startswith("needs ") for item in block.marker_items):
        raise ReadmeFormatError(
            f"{where}: unknown marker {block.marker!r}; use 'skip, REASON', 'server' or "
            "'needs TOOL'"
        )
    if block.marker.startswith("skip") and block.skip_reason is None:
        raise ReadmeFormatError(f"{where}: a skipped block needs a reason: 'skip, REASON'")
    known = RUN_LANGUAGES | PROSE_LANGUAGES
    if block.language not in known and block.skip_reason is None:
        raise ReadmeFormatError(
            f"{where}: ```{block.language} is not run; mark it "
            "'<!-- readme-test: skip, REASON -->' or use one of " + ", ".join(sorted(known))
        )
    if block.is_server and block.language != "sh":
        raise ReadmeFormatError(f"{where}: a server block must be ```sh")


# --- shell text ----------------------------------------------------------------------------------


def _complete(command: str) -> bool:
    """Whether `command` is a whole shell command: no trailing backslash, no open quote."""
    if command.endswith("\\"):
        return False
    try:
        shlex.split(command, comments=True)
    except ValueError:  # "No closing quotation"
        return False
    return True


def commands(text: str) -> list[str]:
    """The commands of an sh block, comments and blank lines left out, continuations joined."""
    found: list[str] = []
    pending: list[str] = []
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending.append(line)
        joined = "\n".join(pending)
        if _complete(joined):
            found.append(joined)
            pending = []
    if pending:
        raise ReadmeFormatError(f"unfinished command: {' '.join(pending)!r}")
    return found


@dataclass
class Step:
    """One `$ command` of a console block, the output shown after it and its exit code (None:
    not shown, so it must be 0; `$ echo $?` shows the code of the command before it)."""

    command: str
    output: list[str] = field(default_factory=list)
    exit_code: int | None = None


def console_steps(text: str) -> list[Step]:
    """The `$ ` commands of a console block with what each shows."""
    steps: list[Step] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.startswith("$ "):
            if not steps:
                raise ReadmeFormatError(f"console output before any command: {line!r}")
            exit_line = EXIT_LINE.match(line.strip())
            if exit_line:
                steps[-1].exit_code = int(exit_line["code"])
            else:
                steps[-1].output.append(line)
            index += 1
            continue
        pending = [line[2:]]
        index += 1
        while not _complete("\n".join(pending)) and index < len(lines):
            pending.append(lines[index])
            index += 1
        steps.append(Step("\n".join(pending)))
    for before, after in itertools.pairwise(steps):
        if after.command.strip() == "echo $?" and len(after.output) == 1:
            before.exit_code = int(after.output[0])
    for step in steps:
        while step.output and not step.output[-1].strip():
            step.output.pop()
    return steps


def output_pattern(expected: list[str]) -> re.Pattern[str]:
    """A pattern for output shown as `expected`: each line whole, `…` any text on its line
    (with the hex digits before it, which abbreviate an id)."""
    lines = []
    for line in expected:
        pieces = re.split(r"[0-9a-f]*…", line.rstrip())
        lines.append("[^\n]*?".join(re.escape(piece) for piece in pieces))
    return re.compile("\n".join(lines))


def matches(expected: list[str], actual: str) -> bool:
    """Whether the command's `actual` output (trailing spaces of lines ignored) is as shown."""
    text = "\n".join(line.rstrip() for line in actual.rstrip("\n").splitlines())
    return output_pattern(expected).fullmatch(text) is not None


def exit_expectation(command: str) -> tuple[str, int]:
    """An sh command without its `# exit N` comment, and N (0 when there is none)."""
    found = EXIT_COMMENT.search(command)
    if found is None:
        return command, 0
    return command[: found.start()], int(found["code"])
