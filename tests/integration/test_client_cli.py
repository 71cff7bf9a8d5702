"""The `a2a-grpc` client commands: output, exit codes, and one clear line for every failure."""

from __future__ import annotations

import asyncio
import http.server
import importlib.metadata
import json
import os
import socket
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

from a2a_grpc.client import cli
from a2a_grpc.core.errors import TaskNotFoundError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.app import ServerPlan, start_server
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.trust.tls import TlsFiles
from tests.integration.certs import Authority
from tests.integration.conftest import Factory
from tests.integration.scripted_agent import Peer, abort_with, chunk_event, peer, status_event, task
from tests.integration.test_server_discovery_auth import CallerRecorder

__all__ = ["peer"]

COMPLETED = a2a_pb2.TASK_STATE_COMPLETED


def answer(value: Any) -> Any:
    async def handler(request: Any, context: Any) -> Any:
        return value

    return handler


def stream(*items: Any) -> Any:
    async def handler(request: Any, context: Any) -> AsyncIterator[Any]:
        for item in items:
            yield item

    return handler


async def run(*argv: str) -> int:
    """main() in a thread: it runs its own event loop while the peer serves on ours."""
    return await asyncio.to_thread(cli.main, list(argv))


async def run_process(*argv: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "a2a_grpc.cli.main",
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 50)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def one_clear_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("a2a-grpc: ") and "Traceback" not in stderr
    return lines[0]


def completed_task(text: str = "echo: hi") -> a2a_pb2.Task:
    artifact = a2a_pb2.Artifact(artifact_id="a1", name="echo", parts=[a2a_pb2.Part(text=text)])
    return task(state=COMPLETED, artifacts=[artifact])


async def test_send_blocking_completed(peer: Peer, capsys: pytest.CaptureFixture[str]) -> None:
    peer.agent.handlers["SendMessage"] = answer(a2a_pb2.SendMessageResponse(task=completed_task()))
    assert await run("send", peer.target, "hi", "--data", '{"n": 1}', "--token", "tok") == 0
    out = capsys.readouterr().out
    assert "completed" in out and "artifact echo: echo: hi" in out
    (call,) = peer.agent.calls
    parts = call.request.message.parts
    assert parts[0].text == "hi"
    assert json_format.MessageToDict(parts[1].data) == {"n": 1}
    assert call.metadata["authorization"] == "Bearer tok"


@pytest.mark.parametrize(
    ("state", "code"),
    [
        (a2a_pb2.TASK_STATE_COMPLETED, 0),
        (a2a_pb2.TASK_STATE_FAILED, 3),
        (a2a_pb2.TASK_STATE_REJECTED, 3),
        (a2a_pb2.TASK_STATE_CANCELED, 3),
        (a2a_pb2.TASK_STATE_INPUT_REQUIRED, 4),
        (a2a_pb2.TASK_STATE_AUTH_REQUIRED, 4),
        (a2a_pb2.TASK_STATE_WORKING, 7),  # a blocking send must not return before settling
    ],
)
async def test_exit_code_by_outcome(peer: Peer, state: int, code: int) -> None:
    peer.agent.handlers["SendMessage"] = answer(a2a_pb2.SendMessageResponse(task=task(state=state)))
    peer.agent.handlers["SendStreamingMessage"] = stream(
        a2a_pb2.StreamResponse(task=task()), status_event(state)
    )
    assert await run("send", peer.target, "hi") == code
    if code != 7:  # a stream ending while working is resumed instead
        assert await run("send", peer.target, "hi", "--stream") == code


async def test_direct_answer_exits_0(peer: Peer, capsys: pytest.CaptureFixture[str]) -> None:
    reply = a2a_pb2.Message(
        message_id="r", role=a2a_pb2.ROLE_AGENT, parts=[a2a_pb2.Part(text="yo")]
    )
    peer.agent.handlers["SendMessage"] = answer(a2a_pb2.SendMessageResponse(message=reply))
    assert await run("send", peer.target, "hi") == 0
    assert "agent: yo" in capsys.readouterr().out


async def test_stream_shows_state_questions_and_growing_artifacts(
    peer: Peer, capsys: pytest.CaptureFixture[str]
) -> None:
    peer.agent.handlers["SendStreamingMessage"] = stream(
        a2a_pb2.StreamResponse(task=task(state=a2a_pb2.TASK_STATE_SUBMITTED)),
        status_event(a2a_pb2.TASK_STATE_WORKING, text="on it"),
        chunk_event("Hel"),
        chunk_event("lo", append=True, last_chunk=True),
        status_event(a2a_pb2.TASK_STATE_INPUT_REQUIRED, text="Which language?"),
    )
    assert await run("send", peer.target, "hi", "--stream") == 4
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        "task t1 (context c1)",
        "state: submitted",
        "state: working",
        "agent: on it",
        "artifact a1: Hello",
        "state: input-required",
        "agent asks: Which language?",
        "task t1 input-required",
    ]
    assert "--task-id t1 --context-id c1" in captured.err


async def test_json_lines(peer: Peer, capsys: pytest.CaptureFixture[str]) -> None:
    events = [a2a_pb2.StreamResponse(task=task()), chunk_event("x"), status_event(COMPLETED)]
    peer.agent.handlers["SendStreamingMessage"] = stream(*events)
    assert await run("send", peer.target, "hi", "--stream", "--json") == 0
    lines = capsys.readouterr().out.splitlines()
    parsed = [json_format.Parse(line, a2a_pb2.StreamResponse()) for line in lines]
    assert parsed == events
    assert json.loads(lines[0])["task"]["status"]["state"] == "TASK_STATE_WORKING"


async def test_continuation_and_file_part(peer: Peer, tmp_path: Path) -> None:
    peer.agent.handlers["SendMessage"] = answer(a2a_pb2.SendMessageResponse(task=completed_task()))
    report = tmp_path / "report.pdf"
    report.write_bytes(b"%PDF-1.7")
    argv = ["send", peer.target, "here", "--file", str(report), "--task-id", "t1"]
    assert await run(*argv, "--context-id", "c1") == 0
    message = peer.agent.calls[0].request.message
    assert (message.task_id, message.context_id) == ("t1", "c1")
    raw = message.parts[1]
    assert (raw.raw, raw.filename, raw.media_type) == (b"%PDF-1.7", "report.pdf", "application/pdf")


async def test_get_list_cancel_subscribe(peer: Peer, capsys: pytest.CaptureFixture[str]) -> None:
    peer.agent.handlers["GetTask"] = answer(completed_task())
    peer.agent.handlers["ListTasks"] = answer(
        a2a_pb2.ListTasksResponse(tasks=[task()], page_size=1, total_size=3, next_page_token="p2")
    )
    peer.agent.handlers["CancelTask"] = answer(task(state=a2a_pb2.TASK_STATE_CANCELED))
    peer.agent.handlers["SubscribeToTask"] = stream(
        a2a_pb2.StreamResponse(task=task()), status_event(a2a_pb2.TASK_STATE_FAILED)
    )
    assert await run("get", peer.target, "t1", "--history", "2") == 0
    assert "artifact echo" in capsys.readouterr().out
    assert await run("list", peer.target, "--state", "working", "--page-size", "1") == 0
    out = capsys.readouterr().out
    assert "t1  working" in out and "1 of 3" in out and "--page-token p2" in out
    assert await run("cancel", peer.target, "t1") == 0
    assert "canceled" in capsys.readouterr().out
    assert await run("subscribe", peer.target, "t1") == 3
    get, listing, cancel, subscribe = peer.agent.calls
    assert get.request.history_length == 2
    assert listing.request.status == a2a_pb2.TASK_STATE_WORKING
    assert cancel.request.id == subscribe.request.id == "t1"


async def test_agent_error_is_one_line_and_exit_5(
    peer: Peer, capsys: pytest.CaptureFixture[str]
) -> None:
    async def missing(request: Any, context: Any) -> Any:
        await abort_with(context, TaskNotFoundError("task t9 not found"))

    peer.agent.handlers["GetTask"] = missing
    assert await run("get", peer.target, "t9") == 5
    line = one_clear_line(capsys.readouterr().err)
    assert "TaskNotFoundError" in line and "t9" in line


@pytest.mark.parametrize(
    "argv",
    [
        ["send", "not a target", "hi"],
        ["send", "host:99999", "hi"],
        ["send", "ftp://x/card.json", "hi"],
        ["send", "127.0.0.1:1", "hi", "--data", "{oops"],
        ["send", "127.0.0.1:1", "hi", "--file", "/nonexistent/file"],
        ["send", "127.0.0.1:1,localhost:2", "hi"],
        ["send", "127.0.0.1:1,127.0.0.1:2", "hi", "--tls"],
        ["send", "dns:///no port", "hi"],
    ],
    ids=[
        "spaces",
        "port",
        "scheme",
        "data",
        "file",
        "host-name-in-list",
        "tls-list-without-server-name",
        "dns-without-port",
    ],
)
async def test_usage_errors_are_one_line_and_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert await run(*argv) == 2
    one_clear_line(capsys.readouterr().err)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def invocation(on_path: bool, cwd: Path) -> tuple[str, str]:
    """The installed `a2a-grpc` as a path relative to `cwd`, and a PATH that finds it by name
    (as in an activated virtualenv) or not at all."""
    script = Path(sys.executable).parent / "a2a-grpc"
    others = [p for p in os.environ["PATH"].split(os.pathsep) if Path(p) != script.parent]
    path = [str(script.parent), *others] if on_path else others
    return os.path.relpath(script, cwd), os.pathsep.join(path)


@pytest.mark.parametrize("on_path", [True, False])
async def test_reply_hint_names_the_command_as_it_can_be_run(
    peer: Peer, tmp_path: Path, on_path: bool
) -> None:
    """The hint says `a2a-grpc` when PATH finds this very program, else the path it was run by
    (`.venv/bin/a2a-grpc` outside the virtualenv), so it can be pasted as it is."""
    waiting = task(state=a2a_pb2.TASK_STATE_INPUT_REQUIRED)
    peer.agent.handlers["SendMessage"] = answer(a2a_pb2.SendMessageResponse(task=waiting))
    program, path = invocation(on_path, tmp_path)
    process = await asyncio.create_subprocess_exec(
        program,
        "send",
        peer.target,
        "hi",
        cwd=tmp_path,
        env={**os.environ, "PATH": path},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(process.communicate(), 50)
    assert process.returncode == 4
    shown = "a2a-grpc" if on_path else program
    assert err.decode().splitlines()[-1] == (
        f'reply with: {shown} send {peer.target} "..." --task-id t1 --context-id c1'
    )


async def test_process_bad_target() -> None:
    code, out, err = await run_process("send", "no-port-here", "hi")
    assert code == 2 and out == ""
    assert "bad TARGET" in one_clear_line(err)


async def test_process_unreachable_server() -> None:
    code, _, err = await run_process("get", f"127.0.0.1:{free_port()}", "t1")
    assert code == 6
    assert "could not talk" in one_clear_line(err)


async def test_process_deadline(peer: Peer) -> None:
    async def hang(request: Any, context: Any) -> Any:
        await asyncio.Event().wait()

    peer.agent.handlers["SendMessage"] = hang
    code, _, err = await run_process("send", peer.target, "hi", "--timeout", "0.3")
    assert code == 6
    assert "list" in err  # the task, if taken, goes on: where to find it
    assert "DEADLINE_EXCEEDED" in one_clear_line(err)


async def test_process_malformed_response(peer: Peer) -> None:
    peer.agent.handlers["SendMessage"] = answer(b"")
    code, _, err = await run_process("send", peer.target, "hi")
    assert code == 7
    assert "broke the A2A protocol" in one_clear_line(err)


async def test_process_malformed_stream(peer: Peer) -> None:
    peer.agent.handlers["SendStreamingMessage"] = stream(status_event(COMPLETED, task_id="x"))
    code, _, err = await run_process("send", peer.target, "hi", "--stream")
    assert code == 7
    assert "first event" in one_clear_line(err)


async def test_process_non_a2a_failure(peer: Peer) -> None:
    async def broken(request: Any, context: Any) -> Any:
        await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "boom")

    peer.agent.handlers["GetTask"] = broken
    code, _, err = await run_process("get", peer.target, "t1")
    assert code == 5
    assert "FAILED_PRECONDITION" in one_clear_line(err)


async def test_process_internal_without_an_a2a_error_is_a_lost_stream(peer: Peer) -> None:
    """UNKNOWN or INTERNAL with no A2A error in it is what gRPC reports for a stream a proxy
    reset (client/errors.py): could not talk, not the agent's answer."""

    async def broken(request: Any, context: Any) -> Any:
        await context.abort(grpc.StatusCode.INTERNAL, "Stream removed")

    peer.agent.handlers["GetTask"] = broken
    code, _, err = await run_process("get", peer.target, "t1")
    assert code == 6
    assert "could not talk to the agent (INTERNAL): Stream removed" in one_clear_line(err)


@pytest.fixture
def http_server(peer: Peer) -> Iterator[str]:
    """An HTTP server publishing an agent card whose GRPC interface is the peer."""
    card = {
        "name": "scripted",
        "description": "a test peer",
        "version": "1",
        "supportedInterfaces": [
            {"url": "http://nowhere/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {
                "url": peer.target,
                "protocolBinding": "GRPC",
                "protocolVersion": "1.0",
                "tenant": "acme",
            },
        ],
        "capabilities": {"streaming": True},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "echo", "name": "Echo", "description": "echoes", "tags": ["x"]}],
    }
    body = json.dumps(card).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != "/.well-known/agent-card.json":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("cache-control", "max-age=60")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


async def test_card_url_target_follows_the_cards_order_and_tenant(
    peer: Peer, http_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The card lists JSON-RPC (unreachable) first: the card's order picks it (spec §8.3.2),
    # and --transport grpc picks the card's GRPC interface and its tenant instead.
    peer.agent.handlers["SendMessage"] = answer(a2a_pb2.SendMessageResponse(task=completed_task()))
    code, _, err = await run_process("send", http_server, "hi", "--timeout", "5")
    assert code == 6 and "nowhere" in one_clear_line(err)
    assert await run("send", http_server, "hi", "--transport", "grpc") == 0
    assert peer.agent.calls[0].request.tenant == "acme"
    capsys.readouterr()
    assert await run("card", http_server) == 0
    out = capsys.readouterr().out
    assert "scripted 1: a test peer" in out and f"GRPC 1.0 {peer.target} tenant acme" in out
    assert "uses: JSONRPC 1.0 http://nowhere/rpc" in out
    assert await run("card", http_server, "--transport", "grpc") == 0
    assert f"uses: GRPC 1.0 {peer.target}" in capsys.readouterr().out
    assert await run("card", http_server, "--transport", "http+json") == 0
    assert "uses: nothing: agent 'scripted' offers no interface" in capsys.readouterr().out
    code, _, err = await run_process("send", http_server, "hi", "--transport", "http+json")
    line = one_clear_line(err)
    assert code == 6 and "offers no interface this client can use" in line
    assert "JSONRPC 1.0 at http://nowhere/rpc" in line and f"GRPC 1.0 at {peer.target}" in line
    code, _, err = await run_process("card", http_server + "/missing.json")
    assert code == 6 and "HTTP 404" in one_clear_line(err)


async def test_transport_other_than_grpc_needs_a_card_url(peer: Peer) -> None:
    code, _, err = await run_process("get", peer.target, "t1", "--transport", "jsonrpc")
    assert code == 2 and "needs the URL of an agent card" in one_clear_line(err)


async def test_process_stdout_closed_early(peer: Peer) -> None:
    peer.agent.handlers["SendStreamingMessage"] = stream(
        a2a_pb2.StreamResponse(task=task()),
        *[chunk_event("x" * 1000, append=True) for _ in range(200)],
        status_event(COMPLETED),
    )
    read, write = socket.socketpair()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "a2a_grpc.cli.main",
        "send",
        peer.target,
        "hi",
        "--stream",
        "--json",
        stdout=write.fileno(),
        stderr=asyncio.subprocess.PIPE,
    )
    write.close()
    read.close()  # the reader is gone before the first line is written
    _, err = await asyncio.wait_for(process.communicate(), 50)
    assert process.returncode == 141
    assert err.decode() == ""


async def test_send_states_a_budget_and_prints_the_cost(
    make_server: Factory, capsys: pytest.CaptureFixture[str]
) -> None:
    harness = await make_server()
    target = harness.running.address
    code = await run("send", target, "spend 0.02", "--budget", "0.10", "--currency", "EUR")
    assert code == 0
    assert "cost 0.02 EUR (budget 0.10 EUR)" in capsys.readouterr().out
    assert await run("send", target, "spend 0.02", "--stream") == 0  # no budget: still a cost
    assert "cost 0.02 USD" in capsys.readouterr().out
    assert await run("send", target, "spend 0.50", "--budget", "0.10") == 3  # REJECTED
    assert "over_budget" in capsys.readouterr().out
    assert await run("send", target, "hi", "--budget", "lots") == 2
    assert "--budget 'lots'" in capsys.readouterr().err


async def test_help_lists_serve_audit_and_keys_and_version_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = await run_process("--help")
    assert code == 0
    commands = out.split("positional arguments:")[1]
    assert "serve" in commands and "audit" in commands and "send" in commands
    assert "keys new --kid KID" in commands
    code, out, _ = await run_process("--version")
    # The version comes from the package metadata alone; the protocols are those served.
    assert code == 0, out
    assert out.strip() == f"a2a-grpc {importlib.metadata.version('a2a-grpc')} (A2A 1.0, 0.3)"


INPUT_REQUIRED = a2a_pb2.TASK_STATE_INPUT_REQUIRED


def continuation_as_the_js_sdk_opens_it() -> Any:
    """A continuation stream as the official JS SDK's server sends it: the task as it was
    (still INPUT_REQUIRED, the question in its status) first, then what the answer brought.
    The scripted gRPC peer sends exactly these events on the real socket."""

    async def handler(request: Any, context: Any) -> AsyncIterator[Any]:
        asked = task(state=INPUT_REQUIRED)
        asked.status.message.CopyFrom(
            a2a_pb2.Message(
                message_id="q", role=a2a_pb2.ROLE_AGENT, parts=[a2a_pb2.Part(text="colour?")]
            )
        )
        yield a2a_pb2.StreamResponse(task=asked)
        yield status_event(a2a_pb2.TASK_STATE_WORKING)
        yield chunk_event("green it is", last_chunk=True)
        yield status_event(COMPLETED)

    return handler


async def test_a_continuation_opening_with_the_interrupted_task_is_read_to_its_end(
    peer: Peer, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: the opening snapshot of the task as it was (INPUT_REQUIRED) was read as the
    stream's end, so `send --stream --task-id` stopped after one event with exit 4."""
    peer.agent.handlers["SendStreamingMessage"] = continuation_as_the_js_sdk_opens_it()
    argv = ("send", "--stream", "--task-id", "t1", "--context-id", "c1", peer.target, "green")
    assert await run(*argv) == 0
    out = capsys.readouterr().out
    assert "green it is" in out and "COMPLETED" in out.upper()
    (call,) = peer.agent.calls_to("SendStreamingMessage")
    assert call.request.message.task_id == "t1"


async def test_a_continuation_that_ends_interrupted_again_still_stops_there(
    peer: Peer, capsys: pytest.CaptureFixture[str]
) -> None:
    async def handler(request: Any, context: Any) -> AsyncIterator[Any]:
        yield a2a_pb2.StreamResponse(task=task(state=INPUT_REQUIRED))
        yield status_event(a2a_pb2.TASK_STATE_WORKING)
        yield status_event(INPUT_REQUIRED, text="and the size?")
        await (
            asyncio.Event().wait()
        )  # the JS SDK closes here; a stream that stays open is read no further

    peer.agent.handlers["SendStreamingMessage"] = handler
    argv = ("send", "--stream", "--task-id", "t1", "--context-id", "c1", peer.target, "green")
    assert await run(*argv) == cli.EXIT_TASK_WAITING
    assert "and the size?" in capsys.readouterr().out


@pytest.fixture
async def tls_agent(tmp_path: Path) -> AsyncIterator[tuple[str, Path, CallerRecorder]]:
    """Our server with TLS on both ports, asking for client certificates (mutual TLS): its card
    URL, a directory with ca.pem, alice.pem and alice.key, and the agent (it notes callers)."""
    ca = Authority()
    server_pem = ca.issue("localhost", server=True)
    alice = ca.issue("alice")
    (tmp_path / "ca.pem").write_bytes(ca.certificate)
    (tmp_path / "alice.pem").write_bytes(alice.certificate)
    (tmp_path / "alice.key").write_bytes(alice.key)
    agent = CallerRecorder()
    running = await start_server(
        ServerPlan(
            ServerConfig(host="127.0.0.1", port=0, http_port=0, shutdown_grace=0.1, drain_delay=0),
            agent,
            tls=TlsFiles(server_pem.certificate, server_pem.key, client_ca=ca.certificate),
        )
    )
    assert running.card_url is not None and running.card_url.startswith("https://")
    yield running.card_url, tmp_path, agent
    await running.stop(0)


@pytest.mark.parametrize("transport", ["grpc", "jsonrpc", "http+json"])
async def test_tls_options_apply_to_the_card_fetch_and_every_call(
    tls_agent: tuple[str, Path, CallerRecorder], transport: str
) -> None:
    url, files, agent = tls_agent
    origin = url.removesuffix("/.well-known/agent-card.json")
    tls = ("--ca", str(files / "ca.pem"), "--cert", str(files / "alice.pem"))
    tls += ("--key", str(files / "alice.key"))
    code, out, err = await run_process("send", origin, "hello", *tls, "--transport", transport)
    assert code == 0, err
    assert agent.callers == ["cert:alice"]  # the client certificate reached the agent's side
    code, out, _ = await run_process("card", origin, *tls, "--transport", transport)
    binding = {"grpc": "GRPC", "jsonrpc": "JSONRPC", "http+json": "HTTP+JSON"}[transport]
    assert code == 0 and f"uses: {binding} 1.0" in out


async def test_without_the_ca_the_card_fetch_fails_verification(
    tls_agent: tuple[str, Path, CallerRecorder],
) -> None:
    url, _, _ = tls_agent
    code, _, err = await run_process("send", url, "hello", "--timeout", "5")
    assert code == 6 and "CERTIFICATE_VERIFY_FAILED" in one_clear_line(err)


async def test_the_reply_hint_keeps_the_transport(
    make_server: Factory, capsys: pytest.CaptureFixture[str]
) -> None:
    harness = await make_server(http_port=0)
    assert harness.running.card_url is not None
    assert await run("send", harness.running.card_url, "ask", "--transport", "http+json") == 4
    err = capsys.readouterr().err
    assert f'send {harness.running.card_url} --transport http+json "..." --task-id' in err


async def test_list_names_the_valid_states(capsys: pytest.CaptureFixture[str]) -> None:
    assert await run("list", "127.0.0.1:1", "--state", "bogus") == cli.EXIT_USAGE
    line = one_clear_line(capsys.readouterr().err)
    assert "unknown --state 'bogus': use one of submitted, working, completed" in line
    assert "input-required" in line and "unspecified" not in line


async def test_currency_goes_with_a_budget(capsys: pytest.CaptureFixture[str]) -> None:
    assert await run("send", "127.0.0.1:1", "hi", "--currency", "EUR") == cli.EXIT_USAGE
    assert "--currency goes with --budget" in one_clear_line(capsys.readouterr().err)


async def test_a_budget_requests_the_budget_extension(peer: Peer) -> None:
    from a2a_grpc.core.budget import BUDGET_EXTENSION

    peer.agent.handlers["SendMessage"] = answer(a2a_pb2.SendMessageResponse(task=completed_task()))
    assert await run("send", peer.target, "hi", "--budget", "0.10") == 0
    (call,) = peer.agent.calls_to("SendMessage")
    assert BUDGET_EXTENSION in call.metadata["a2a-extensions"].split(",")
    assert await run("send", peer.target, "hi") == 0
    assert "a2a-extensions" not in peer.agent.calls_to("SendMessage")[1].metadata


async def test_a_retryable_agent_error_has_its_own_exit_code(
    peer: Peer, capsys: pytest.CaptureFixture[str]
) -> None:
    from a2a_grpc.core.errors import ResourceExhaustedError

    async def full(request: Any, context: Any) -> Any:
        await abort_with(context, ResourceExhaustedError("too many live tasks", retry_delay=1))

    peer.agent.handlers["GetTask"] = full
    assert await run("get", peer.target, "t1") == cli.EXIT_AGENT_BUSY == 13
    assert "ResourceExhaustedError" in one_clear_line(capsys.readouterr().err)


async def test_a_stream_that_times_out_says_how_to_reach_its_task(
    peer: Peer, capsys: pytest.CaptureFixture[str]
) -> None:
    async def working_forever(request: Any, context: Any) -> AsyncIterator[Any]:
        yield a2a_pb2.StreamResponse(task=task(state=a2a_pb2.TASK_STATE_WORKING))
        await asyncio.Event().wait()

    peer.agent.handlers["SendStreamingMessage"] = working_forever
    code = await run("send", peer.target, "hi", "--stream", "--timeout", "0.5")
    assert code == cli.EXIT_COULD_NOT_TALK
    captured = capsys.readouterr()
    assert "task t1 (context c1)" in captured.out  # its id, as soon as it was known
    line = one_clear_line(captured.err)
    assert "task t1 goes on (working)" in line
    assert f"a2a-grpc subscribe {peer.target} t1" in line
    assert f"a2a-grpc cancel {peer.target} t1" in line


async def test_plaintext_against_a_tls_server_is_one_line_with_a_hint() -> None:
    ca = Authority()
    server_pem = ca.issue("localhost", server=True)
    running = await start_server(
        ServerPlan(
            ServerConfig(
                host="127.0.0.1", port=0, http_port=None, shutdown_grace=0.1, drain_delay=0
            ),
            CallerRecorder(),
            tls=TlsFiles(server_pem.certificate, server_pem.key),
        )
    )
    try:
        code, _, err = await run_process("get", running.address, "t1", "--timeout", "5")
    finally:
        await running.stop(0)
    assert code == cli.EXIT_COULD_NOT_TALK
    assert "add --tls" in one_clear_line(err)  # and no gRPC log line before it
