"""The sender's own audit trail: the client records its calls in the server's chained form, and
`a2a-grpc audit match` pairs the two trails by message id and hash."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519

from a2a_grpc.client import A2AClient
from a2a_grpc.client.audit import ClientAuditLog
from a2a_grpc.client.messages import continue_task, user_message
from a2a_grpc.client.signing import MessageSigner
from a2a_grpc.core import exit_codes
from a2a_grpc.core.audit_chain import message_sha256, verify
from a2a_grpc.core.errors import InvalidAgentResponseError, TaskNotFoundError
from a2a_grpc.core.jose import KeySet
from a2a_grpc.generated import a2a_pb2
from tests.integration.conftest import Factory, Harness, send_request
from tests.integration.scripted_agent import Peer, peer, status_event, task
from tests.integration.test_client_cli import answer, stream

__all__ = ["peer"]


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def audit_command(*argv: str) -> tuple[int, str, str]:
    """`a2a-grpc audit ...` as a user runs it."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "a2a_grpc.cli.main",
        "audit",
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 50)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def client_command(*argv: str) -> tuple[int, str, str]:
    """A client command of `a2a-grpc` as a user runs it."""
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


def address(harness: Harness) -> str:
    return f"127.0.0.1:{harness.running.port}"


async def test_both_trails_verify_and_match_with_no_disagreement(
    make_server: Factory, tmp_path: Path
) -> None:
    server_log, client_log = tmp_path / "server.jsonl", tmp_path / "client.jsonl"
    harness = await make_server(audit_log=str(server_log))
    target = address(harness)
    hello = user_message("hello")
    asked = user_message("ask")
    lost = continue_task("nope", "ctx", "answer")
    streamed = user_message("chunks 2")
    replied = user_message("reply hi")
    async with A2AClient.connect(target, audit=str(client_log)) as client:
        task = await client.send_message(hello)
        question = await client.send_message(asked)
        assert isinstance(question, a2a_pb2.Task)
        answer = continue_task(question.id, question.context_id, "yes")
        await client.send_message(answer)
        with pytest.raises(TaskNotFoundError):
            await client.send_message(lost)
        _ = [item async for item in client.send_streaming_message(streamed)]
        await client.send_message(replied)
        with pytest.raises(TaskNotFoundError):
            await client.cancel_task("nope")
        await client.get_task(task.id)  # type: ignore[union-attr]
    await harness.running.stop(0)  # flushes the server's trail

    rows = records(client_log)
    assert verify(client_log).records == len(rows) == 8
    assert {row["target"] for row in rows} == {target}
    sends = [row for row in rows if row["message_id"]]
    assert [row["message_id"] for row in sends] == [
        m.message_id for m in (hello, asked, answer, lost, streamed, replied)
    ]
    assert [row["message_sha256"] for row in sends] == [
        message_sha256(m) for m in (hello, asked, answer, lost, streamed, replied)
    ]
    assert [(row["method"], row["outcome"], row["reason"], row["state"]) for row in rows] == [
        ("SendMessage", "OK", "", "TASK_STATE_COMPLETED"),
        ("SendMessage", "OK", "", "TASK_STATE_INPUT_REQUIRED"),
        ("SendMessage", "OK", "", "TASK_STATE_COMPLETED"),
        ("SendMessage", "NOT_FOUND", "TASK_NOT_FOUND", ""),
        ("SendStreamingMessage", "OK", "", "TASK_STATE_COMPLETED"),
        ("SendMessage", "OK", "", "DIRECT_REPLY"),
        ("CancelTask", "NOT_FOUND", "TASK_NOT_FOUND", ""),
        ("GetTask", "OK", "", "TASK_STATE_COMPLETED"),
    ]
    assert rows[0]["task_id"] == task.id and rows[3]["task_id"] == "nope"  # type: ignore[union-attr]
    assert rows[2]["task_id"] == question.id
    assert all(row["attempts"] == 1 and row["resumed"] == 0 for row in rows)

    code, out, err = await audit_command("verify", str(client_log))
    assert code == 0 and "8 records, chain intact" in out, err
    code, out, err = await audit_command("verify", str(server_log))
    assert code == 0 and "chain intact" in out, err
    code, out, err = await audit_command("match", str(client_log), str(server_log))
    assert code == 0, out + err
    assert "6 client messages, 6 seen by the server, 0 disagreement(s)" in out


async def test_a_tampered_client_trail_fails_verify_and_match(
    make_server: Factory, tmp_path: Path
) -> None:
    server_log, client_log = tmp_path / "server.jsonl", tmp_path / "client.jsonl"
    harness = await make_server(audit_log=str(server_log))
    async with A2AClient.connect(address(harness), audit=str(client_log)) as client:
        for text in ("one", "two", "three"):
            await client.send_message(user_message(text))
    await harness.running.stop(0)

    lines = client_log.read_text().splitlines()
    lines[1] = lines[1].replace('"TASK_STATE_COMPLETED"', '"TASK_STATE_FAILED"')
    client_log.write_text("\n".join(lines) + "\n")
    code, _, err = await audit_command("verify", str(client_log))
    assert code == exit_codes.AUDIT_BROKEN and "line 3" in err and "chain is broken" in err
    code, _, err = await audit_command("match", str(client_log), str(server_log))
    assert code == exit_codes.AUDIT_BROKEN and "chain is broken" in err and "Traceback" not in err


async def test_match_reports_a_message_the_server_got_with_other_bytes(
    make_server: Factory, tmp_path: Path
) -> None:
    server_log, client_log = tmp_path / "server.jsonl", tmp_path / "client.jsonl"
    harness = await make_server(audit_log=str(server_log))
    sent = user_message("the real text")
    async with A2AClient.connect(address(harness), audit=str(client_log)) as client:
        await client.send_message(sent)
    # Someone else sends other content under the same message id; the server records its hash.
    forged = send_request("a forged text", message_id=sent.message_id)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await harness.stub.SendMessage(forged)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    await harness.running.stop(0)

    code, out, err = await audit_command("match", str(client_log), str(server_log))
    assert code == exit_codes.AUDIT_DISAGREE, out + err
    assert f"DISAGREE message {sent.message_id}" in out
    assert f"hash differs: the client sent {message_sha256(sent)}" in out
    assert message_sha256(forged.message) in out
    assert "1 disagreement(s)" in out


async def test_match_reports_messages_the_server_never_saw(
    make_server: Factory, tmp_path: Path
) -> None:
    client_log = tmp_path / "client.jsonl"
    elsewhere_log, server_log = tmp_path / "elsewhere.jsonl", tmp_path / "server.jsonl"
    elsewhere = await make_server(audit_log=str(elsewhere_log))
    server = await make_server(audit_log=str(server_log))
    audit = ClientAuditLog(client_log)  # one trail for two agents
    sent = user_message("to the other agent")
    async with A2AClient.connect(address(elsewhere), audit=audit) as client:
        await client.send_message(sent)
    async with A2AClient.connect(address(server), audit=audit) as client:
        await client.send_message(user_message("to this agent"))
    await audit.aclose()
    await elsewhere.running.stop(0)
    await server.running.stop(0)

    code, out, _ = await audit_command("match", str(client_log), str(server_log))
    assert code == exit_codes.AUDIT_DISAGREE
    assert f"DISAGREE message {sent.message_id} (client line 1): the server has no record" in out
    code, out, _ = await audit_command(
        "match", str(client_log), str(server_log), "--target", address(server)
    )
    assert code == 0 and "1 client messages, 1 seen by the server" in out
    code, out, _ = await audit_command(
        "match", str(client_log), str(server_log), str(elsewhere_log)
    )
    assert code == 0 and "2 client messages, 2 seen by the server" in out


async def test_the_send_command_keeps_a_trail_that_matches_the_servers(
    make_server: Factory, tmp_path: Path
) -> None:
    server_log, client_log = tmp_path / "server.jsonl", tmp_path / "client.jsonl"
    harness = await make_server(audit_log=str(server_log))
    target = address(harness)
    code, _, err = await client_command("send", target, "hello", "--audit-log", str(client_log))
    assert code == 0, err
    code, _, err = await client_command(
        "send", target, "chunks 2", "--stream", "--audit-log", str(client_log)
    )
    assert code == 0, err
    code, _, err = await client_command(
        "send",
        target,
        "x",
        "--task-id",
        "nope",
        "--context-id",
        "c",
        "--audit-log",
        str(client_log),
    )
    assert code == 5, err
    code, _, err = await client_command("get", target, "nope", "--audit-log", str(client_log))
    assert code == 5, err
    await harness.running.stop(0)

    rows = records(client_log)
    assert [(row["method"], row["outcome"]) for row in rows] == [
        ("SendMessage", "OK"),
        ("SendStreamingMessage", "OK"),
        ("SendMessage", "NOT_FOUND"),
        ("GetTask", "NOT_FOUND"),
    ]
    code, out, err = await audit_command("verify", str(client_log))
    assert code == 0 and "4 records, chain intact" in out, err
    code, out, err = await audit_command("match", str(client_log), str(server_log))
    assert code == 0 and "3 client messages, 3 seen by the server, 0 disagreement(s)" in out, err


async def test_an_audit_log_the_command_cannot_write_is_one_clear_line(
    make_server: Factory, tmp_path: Path
) -> None:
    harness = await make_server()
    target = address(harness)
    code, out, err = await client_command("send", target, "hi", "--audit-log", str(tmp_path))
    assert code == 2 and out == ""  # nothing was sent
    assert err.startswith("a2a-grpc: cannot append to the audit log") and err.count("\n") == 1
    # /dev/full opens but every write fails (a full disk): the call succeeds, the record cannot
    # be kept, and the command says so instead of exiting 0.
    code, out, err = await client_command("send", target, "hi", "--audit-log", "/dev/full")
    assert code == exit_codes.AUDIT_INCOMPLETE and "completed" in out
    assert err.startswith("a2a-grpc: the audit log /dev/full could not be written")
    assert err.count("\n") == 1  # one line, not the writer's log records too


async def test_a_client_with_an_audit_path_it_cannot_open_raises(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError):
        A2AClient.connect("127.0.0.1:1", audit=tmp_path)


async def test_a_retried_send_is_one_record_counting_its_attempts(
    peer: Peer, tmp_path: Path
) -> None:
    failures = [2]

    async def flaky(request: Any, context: Any) -> Any:
        if failures[0]:
            failures[0] -= 1
            await context.abort(grpc.StatusCode.UNAVAILABLE, "restarting")
        return a2a_pb2.SendMessageResponse(task=task(state=a2a_pb2.TASK_STATE_COMPLETED))

    peer.agent.handlers["SendMessage"] = flaky
    log = tmp_path / "client.jsonl"
    client = peer.client(audit=log)
    await client.send_message(user_message("x"))
    await client.close()
    [row] = records(log)
    assert (row["outcome"], row["attempts"], row["state"]) == ("OK", 3, "TASK_STATE_COMPLETED")
    ids = {call.request.message.message_id for call in peer.agent.calls_to("SendMessage")}
    assert ids == {row["message_id"]}


async def test_failures_the_client_finds_itself_are_recorded_as_such(
    peer: Peer, tmp_path: Path
) -> None:
    peer.agent.handlers["SendMessage"] = answer(a2a_pb2.SendMessageResponse(task=task(task_id="")))
    peer.agent.handlers["SendStreamingMessage"] = stream(
        a2a_pb2.StreamResponse(task=task()), status_event(a2a_pb2.TASK_STATE_WORKING)
    )
    log = tmp_path / "client.jsonl"
    client = peer.client(audit=log)
    with pytest.raises(InvalidAgentResponseError):
        await client.send_message(user_message("no task id"))
    events = client.send_streaming_message(user_message("stream"))
    async for _ in events:
        break  # the caller stops reading
    await events.aclose()  # type: ignore[attr-defined]
    await client.close()
    rows = records(log)
    assert [(r["method"], r["outcome"], r["reason"], r["state"]) for r in rows] == [
        ("SendMessage", "INVALID_AGENT_RESPONSE", "INVALID_AGENT_RESPONSE", ""),
        ("SendStreamingMessage", "CANCELLED", "", "TASK_STATE_WORKING"),
    ]
    assert rows[1]["task_id"] == "t1"


async def test_a_signed_message_hashes_alike_on_both_sides(
    make_server: Factory, tmp_path: Path
) -> None:
    key = ed25519.Ed25519PrivateKey.generate()
    keys = KeySet.of_private_keys({"k1": key})
    server_log, client_log = tmp_path / "server.jsonl", tmp_path / "client.jsonl"
    harness = await make_server(
        audit_log=str(server_log), signature_keys=keys, require_signed_messages=True
    )
    signer = MessageSigner(key, "k1")
    async with A2AClient.connect(address(harness), audit=client_log, signer=signer) as client:
        await client.send_message(user_message("signed"))
    await harness.running.stop(0)
    [row] = records(client_log)
    assert row["outcome"] == "OK"  # the server verified the signature it hashed with the message
    code, out, err = await audit_command("match", str(client_log), str(server_log))
    assert code == 0 and "1 seen by the server, 0 disagreement(s)" in out, out + err


async def test_a_torn_client_trail_is_fenced_and_reported_as_fenced(tmp_path: Path) -> None:
    log = tmp_path / "client.jsonl"
    for text in ("one", "two"):
        trail = ClientAuditLog(log)
        trail.call(
            method="SendMessage", target="t", tenant="", outcome="OK", message=user_message(text)
        )
        await trail.aclose()
    log.write_bytes(log.read_bytes()[:-20])  # a crash cut the last write short
    await ClientAuditLog(log).aclose()  # opening again fences the torn line
    assert json.loads(log.read_text().splitlines()[-1])["kind"] == "fence"
    code, out, err = await audit_command("verify", str(log))
    assert code == exit_codes.OK and "2 records, chain intact" in out and err == ""
    assert "line 2: a write cut short by a crash, fenced when the writer restarted" in out
