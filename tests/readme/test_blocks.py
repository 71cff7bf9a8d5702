"""The README test's own rules: how blocks are parsed and judged, and that a block that does not
do what the README shows fails (a harness that could not fail would prove nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.readme.blocks import (
    Block,
    ReadmeFormatError,
    Section,
    commands,
    console_steps,
    exit_expectation,
    matches,
    parse,
)
from tests.readme.test_readme import SectionRun


def readme(tmp_path: Path, text: str) -> list[Section]:
    path = tmp_path / "README.md"
    path.write_text(text)
    return parse(path)


def test_sections_blocks_and_markers(tmp_path: Path) -> None:
    sections = readme(
        tmp_path,
        "# T\n\n## One\n\n```sh\necho hi\n```\n\n<!-- readme-test: skip, takes 10 minutes -->\n"
        "```sh\nmake bench\n```\n\n### Two\n<!-- readme-test: server, needs redis-server -->\n\n"
        "```sh\nredis-server --port 6379\n```\n```text\nprose\n```\n",
    )
    assert [s.title for s in sections] == ["(top)", "T", "One", "Two"]
    one, two = sections[2].blocks, sections[3].blocks
    assert [b.runs for b in one] == [True, False]
    assert one[1].skip_reason == "takes 10 minutes"
    assert two[0].is_server and two[0].needs == "redis-server" and two[0].runs
    assert not two[1].runs and sections[3].has_server


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("```\nls\n```\n", "without a language"),
        ("```yaml\na: 1\n```\n", "is not run"),
        ("<!-- readme-test: skip -->\n```sh\nls\n```\n", "needs a reason"),
        ("<!-- readme-test: sometimes -->\n```sh\nls\n```\n", "unknown marker"),
        ("<!-- readme-test: skip, x -->\ntext\n```sh\nls\n```\n", "not followed by a block"),
        ("<!-- readme-test: server -->\n```console\n$ ls\n```\n", "must be ```sh"),
        ("```sh\nls\n", "never closed"),
    ],
)
def test_broken_conventions_are_named(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(ReadmeFormatError, match=problem):
        readme(tmp_path, text)


def test_sh_commands_join_continuations_and_open_quotes() -> None:
    text = '# a comment\nB=x   # trailing\ncurl a \\\n  b\necho \'{"a":1,\n  "b":2}\'\n'
    assert commands(text) == ["B=x   # trailing", "curl a \\\n  b", 'echo \'{"a":1,\n  "b":2}\'']
    assert exit_expectation("a2a-grpc get x nope   # exit 5") == ("a2a-grpc get x nope", 5)
    assert exit_expectation("echo '# exit 5 is text'") == ("echo '# exit 5 is text'", 0)


def test_console_steps_output_and_exit_codes() -> None:
    steps = console_steps(
        "$ a2a-grpc send t ask\ntask 1… (context 9…): input-required\n$ echo $?\n4\n"
        "$ a2a-grpc get t nope\na2a-grpc: …\n[exit 5]\n$ true\n"
    )
    assert [s.command for s in steps] == [
        "a2a-grpc send t ask",
        "echo $?",
        "a2a-grpc get t nope",
        "true",
    ]
    assert [s.exit_code for s in steps] == [4, None, 5, None]
    assert steps[2].output == ["a2a-grpc: …"]


def test_output_matching() -> None:
    shown = ["task 51c5… (context …): completed", "artifact echo: hello"]
    assert matches(shown, "task 8a74-66e9 (context f180-6e02): completed\nartifact echo: hello\n")
    assert not matches(shown, "task 8a74 (context f180): failed\nartifact echo: hello\n")
    assert not matches(shown, "task 8a74 (context f180): completed\n")
    assert not matches(shown, "task a (context b): completed\nartifact echo: hello\nmore\n")
    assert not matches(["a … b"], "a x\ny b")  # `…` stays on its line


@pytest.fixture
def run(tmp_path: Path) -> SectionRun:
    cwd, scratch = tmp_path / "work", tmp_path / "scratch"
    cwd.mkdir()
    scratch.mkdir()
    return SectionRun(Section("t", 1), cwd, scratch, {})


def test_blocks_that_do_as_shown_pass(run: SectionRun) -> None:
    run.run(Block(1, "sh", "X=1\necho $X > x.txt\nfalse   # exit 1\n"))
    run.run(Block(2, "console", "$ cat x.txt\n1\n$ grep -q 2 x.txt\n[exit 1]\n$ echo $?\n1\n"))
    run.run(Block(3, "python", "# save as m.py\nVALUE = 7\n"))
    run.run(Block(4, "python", "import m\nassert m.VALUE == 7\n"))  # the saved file is importable


@pytest.mark.parametrize(
    "block",
    [
        Block(1, "sh", "true\nfalse\ntrue\n"),  # an sh command that fails
        Block(1, "sh", "true   # exit 3\n"),  # one that was to fail, and did not
        Block(1, "console", "$ false\n"),  # a non-zero exit not shown
        Block(1, "console", "$ false\n[exit 2]\n"),  # another exit than shown
        Block(1, "console", "$ echo hello\nhallo\n"),  # another output than shown
        Block(1, "python", "raise SystemExit(1)\n"),  # a script that fails
    ],
)
def test_blocks_that_do_otherwise_fail(run: SectionRun, block: Block) -> None:
    with pytest.raises(AssertionError):
        run.run(block)
