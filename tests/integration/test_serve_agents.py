"""`serve --agent` by file path and by module on the current directory, the card derived from the
agent's class, and the README's "Writing an agent" example run exactly as written."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import httpx
import pytest

from a2a_grpc.client import A2AClient
from a2a_grpc.core import exit_codes
from a2a_grpc.generated import a2a_pb2
from tests.integration.serve_process import A2A_GRPC, run_serve, serving

README = Path(__file__).resolve().parents[2] / "README.md"
LOCAL = ("--host", "127.0.0.1", "--port", "0")  # after the README's own --port: the last wins


def _writing_an_agent() -> tuple[str, str, list[str]]:
    """From the README's "Writing an agent": the file name, its code and the two commands (the
    `serve` of its sh block, the `send` of its console example)."""
    text = README.read_text()
    section = text[text.index("### Writing an agent") :]
    section = section[: section.index("\n### ", 1)]
    code = re.search(r"```python\n# save as (\S+)\n(.*?)```", section, re.S)
    serve = re.search(r"```sh\n(a2a-grpc serve .*?)\n```", section, re.S)
    send = re.search(r"```console\n\$ (a2a-grpc send .*?)\n", section)
    assert code and serve and send, "the README's agent example lost its shape"
    return code.group(1), code.group(2), [serve.group(1), send.group(1)]


def _card(base: str | None) -> a2a_pb2.AgentCard:
    assert base is not None
    from google.protobuf import json_format

    response = httpx.get(f"{base}/.well-known/agent-card.json", timeout=10)
    response.raise_for_status()
    return json_format.Parse(response.text, a2a_pb2.AgentCard(), ignore_unknown_fields=True)


def test_the_readme_agent_runs_as_written(tmp_path: Path) -> None:
    name, code, (serve, send) = _writing_an_agent()
    (tmp_path / name).write_text(code)
    serve_argv, send_argv = shlex.split(serve), shlex.split(send)
    assert serve_argv[:2] == ["a2a-grpc", "serve"] and send_argv[:2] == ["a2a-grpc", "send"]
    with serving(*serve_argv[2:], *LOCAL, cwd=tmp_path) as served:
        spec = serve_argv[serve_argv.index("--agent") + 1]
        assert f"card: derived from {spec}," in served.card_line
        card = _card(served.http_base)
        assert card.name == "Shouter"
        assert card.description == "Answers every message in capital letters."
        assert [(s.id, s.description, list(s.examples)) for s in card.skills] == [
            ("shout", "Repeats your text in capitals.", ["hello"])
        ]
        assert card.supported_interfaces[0].url == f"127.0.0.1:{served.port}"
        # The README's second command, at the port this server got.
        target = send_argv[2].replace(":50051", f":{served.port}")
        result = subprocess.run(
            [A2A_GRPC, "send", target, *send_argv[3:]],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert result.returncode == exit_codes.OK, result.stderr
        assert "HELLO" in result.stdout


PACKAGE_AGENT = """
from a2a_grpc.server.agent import Skill


class Counter:
    name = "Word counter"
    description = "Counts the words of a message."
    version = "2.1.0"
    skills = [Skill("count", name="Count words", tags=("text",)), Skill("noop")]
    input_modes = ["text/plain"]

    async def execute(self, context, events):
        await events.reply(str(len(context.text().split())))
"""


async def test_a_module_in_the_current_directory_is_found(tmp_path: Path) -> None:
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "agents.py").write_text(PACKAGE_AGENT)
    with serving("--agent", "mypkg.agents:Counter", *LOCAL, cwd=tmp_path) as served:
        assert "card: derived from mypkg.agents:Counter," in served.card_line
        card = _card(served.http_base)
        assert (card.name, card.description, card.version) == (
            "Word counter",
            "Counts the words of a message.",
            "2.1.0",
        )
        assert [(s.id, s.name, list(s.tags)) for s in card.skills] == [
            ("count", "Count words", ["text"]),
            ("noop", "noop", ["noop"]),
        ]
        assert list(card.default_input_modes) == ["text/plain"]
        async with A2AClient.connect(f"127.0.0.1:{served.port}", timeout=10) as client:
            answer = await client.send_message(
                a2a_pb2.Message(role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text="one two")])
            )
        assert isinstance(answer, a2a_pb2.Message) and answer.parts[0].text == "2"


def test_the_start_up_line_names_a_card_file_or_the_demo(tmp_path: Path) -> None:
    with serving(*LOCAL) as served:
        assert "agent a2a_grpc.server.demo_agent.DemoAgent; card: demo," in served.card_line
    card_file = tmp_path / "card.json"
    card_file.write_text(
        '{"name": "Filed", "description": "d", "version": "1", "defaultInputModes": ["*/*"],'
        ' "defaultOutputModes": ["*/*"], "skills": [{"id": "s", "name": "s", "description": "d",'
        ' "tags": ["t"]}]}'
    )
    (tmp_path / "counter.py").write_text(PACKAGE_AGENT)
    options = ("--agent", "counter.py:Counter", "--card", str(card_file), *LOCAL)
    with serving(*options, cwd=tmp_path) as served:
        assert f"agent counter.Counter; card: {card_file}," in served.card_line
        assert _card(served.http_base).name == "Filed"


@pytest.mark.parametrize(
    ("files", "spec", "says"),
    [
        ({}, "missing.py:Agent", "no such file"),
        ({}, "nosuchmodule:Agent", "no module named 'nosuchmodule'"),
        ({"a.py": "class Other: ...\n"}, "a.py:Agent", "has no attribute 'Agent'"),
        ({"b.py": "import not_installed_anywhere\n"}, "b.py:A", "No module named"),
        ({"c.py": "x = 1\n"}, "c.py:x", "x is a int, not an agent"),
        ({"d.py": "class A:\n    pass\n"}, "d.py:A", "has no execute(context, events)"),
        (
            {"g.py": "class A:\n    def execute(self, c, e): ...\n"},
            "g.py:A",
            "A.execute is a plain function: declare it `async def execute(self, context, events)`",
        ),
        ({"e.py": "class A:\n    def __init__(self, x): ...\n"}, "e.py:A", "calling A() failed"),
        (
            {"f.py": "class A:\n    skills = ['x']\n    async def execute(self, c, e): ...\n"},
            "f.py:A",
            "`skills[0]` must be a Skill",
        ),
        ({}, "nocolon", "expected MODULE:ATTR"),
    ],
)
def test_a_bad_agent_is_one_line_and_exit_2(
    tmp_path: Path, files: dict[str, str], spec: str, says: str
) -> None:
    for name, content in files.items():
        (tmp_path / name).write_text(content)
    result = run_serve("--agent", spec, *LOCAL, cwd=tmp_path)
    assert result.returncode == exit_codes.USAGE
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"a2a-grpc serve: --agent {spec!r}: ") and says in lines[0]
