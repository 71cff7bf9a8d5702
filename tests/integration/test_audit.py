"""The audit trail: a record per request and per task outcome, chained so tampering shows."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from a2a_grpc.core import exit_codes
from a2a_grpc.core.budget import with_budget
from a2a_grpc.core.canonical import canonical_message_bytes
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.app import AUDIT_HEALTH_SERVICE
from a2a_grpc.server.trust.audit import GENESIS, AuditLog, verify
from tests.integration.conftest import Factory, send_request
from tests.integration.serve_process import run_serve
from tests.integration.test_server_retry_classes import details

TOKENS = {"alice-token": "alice"}
ALICE = (("authorization", "Bearer alice-token"),)


def records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_requests_and_outcomes_are_recorded(make_server: Factory, tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    harness = await make_server(audit_log=str(log), tokens=TOKENS)
    request = send_request("spend 2", tenant="acme")
    request.message.CopyFrom(with_budget(request.message, "5", "EUR"))
    task = (await harness.stub.SendMessage(request, metadata=ALICE)).task
    with pytest.raises(grpc.aio.AioRpcError):
        await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id="nope", tenant="acme"), metadata=ALICE)
    with pytest.raises(grpc.aio.AioRpcError):
        await harness.stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id))  # no credentials
    _ = [e async for e in harness.stub.SendStreamingMessage(send_request("hi"), metadata=ALICE)]
    await harness.running.stop(0)  # flushes the trail

    rows = records(log)
    outcome = next(r for r in rows if r["kind"] == "outcome" and r["task_id"] == task.id)
    assert outcome["outcome"] == "TASK_STATE_COMPLETED"
    assert outcome["cost"] == {"amount": "2", "currency": "EUR"}
    assert (outcome["principal"], outcome["tenant"]) == ("alice", "acme")
    sent = next(r for r in rows if r["kind"] == "request" and r["method"] == "SendMessage")
    assert sent["task_id"] == task.id and sent["outcome"] == "OK"
    assert sent["message_id"] == request.message.message_id
    assert (
        sent["message_sha256"]
        == hashlib.sha256(canonical_message_bytes(request.message)).hexdigest()
    )
    failed = [r for r in rows if r["method"] == "GetTask"]
    assert [(r["outcome"], r["principal"]) for r in failed] == [
        ("NOT_FOUND", "alice"),
        ("UNAUTHENTICATED", ""),  # refused callers are on the record too
    ]
    streamed = [r for r in rows if r["method"] == "SendStreamingMessage"]
    assert streamed and streamed[0]["outcome"] == "OK"
    assert all(r["time"].endswith("Z") for r in rows)  # type: ignore[union-attr]
    assert verify(log)[0] == len(rows)


async def test_each_outcome_follows_the_request_that_started_its_run(
    make_server: Factory, tmp_path: Path
) -> None:
    log = tmp_path / "audit.jsonl"
    harness = await make_server(audit_log=str(log), tokens=TOKENS)
    sent = [send_request(f"hello {n}") for n in range(3)]
    for request in sent[:2]:  # blocking: the task ends before the call does
        await harness.stub.SendMessage(request, metadata=ALICE)
    _ = [e async for e in harness.stub.SendStreamingMessage(sent[2], metadata=ALICE)]
    await harness.running.stop(0)  # flushes the trail

    rows = records(log)
    for request in sent:
        message_id = request.message.message_id
        kinds = [r["kind"] for r in rows if r["message_id"] == message_id]
        assert kinds == ["request", "outcome"], message_id
    assert verify(log)[0] == len(rows)


def verify_command(log: Path) -> subprocess.CompletedProcess[str]:
    """`a2a-grpc audit verify LOG` as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "a2a_grpc.cli.main", "audit", "verify", str(log)],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_the_chain_detects_changes_insertions_and_deletions(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    trail = AuditLog(log)
    for index in range(5):
        trail.outcome(
            task_id=f"t{index}",
            state="TASK_STATE_COMPLETED",
            principal="p",
            tenant="",
            message_id=f"m{index}",
            cost=None,
        )
    trail.close()
    count, head, torn, _ = verify(log)
    assert count == 5 and head != GENESIS and torn == ()
    good = log.read_text().splitlines()

    # A second writer continues the chain.
    again = AuditLog(log)
    again.outcome(task_id="t5", state="X", principal="p", tenant="", message_id="", cost=None)
    again.close()
    assert verify(log)[0] == 6

    for broken in (
        [good[0], good[1].replace('"t1"', '"tX"'), *good[2:]],  # a changed record
        [good[0], *good[2:]],  # a deleted record
        [good[0], good[1], good[1], *good[2:]],  # a duplicated record
    ):
        log.write_text("\n".join(broken) + "\n")
        with pytest.raises(ValueError, match="chain is broken"):
            verify(log)


def test_audit_verify_command(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    trail = AuditLog(log)
    trail.outcome(task_id="t", state="S", principal="", tenant="", message_id="", cost=None)
    trail.outcome(task_id="u", state="S", principal="", tenant="", message_id="", cost=None)
    trail.close()

    ok = verify_command(log)
    assert ok.returncode == 0 and "2 records, chain intact" in ok.stdout
    lines = log.read_text().splitlines()
    log.write_text(lines[0].replace('"t"', '"x"') + "\n" + lines[1] + "\n")
    broken = verify_command(log)
    assert broken.returncode == exit_codes.AUDIT_BROKEN
    assert "line 2" in broken.stderr and "Traceback" not in broken.stderr


async def watch_audit_health(harness: Any) -> Any:
    stub = health_pb2_grpc.HealthStub(harness.channel)
    return stub.Watch(health_pb2.HealthCheckRequest(service=AUDIT_HEALTH_SERVICE))


async def test_unwritable_trail_is_reported_and_requests_are_still_served(
    make_server: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    # /dev/full fails every write with ENOSPC, like a full disk.
    harness = await make_server(audit_log="/dev/full")
    watch = await watch_audit_health(harness)
    assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
    task = (await harness.stub.SendMessage(send_request())).task
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert (await watch.read()).status == health_pb2.HealthCheckResponse.NOT_SERVING
    assert any(
        r.levelname == "ERROR" and "audit log /dev/full: cannot be written" in r.getMessage()
        for r in caplog.records
    )
    watch.cancel()


async def test_failing_closed_refuses_requests_while_records_cannot_be_written(
    make_server: Factory,
) -> None:
    calls: list[str] = []

    class Recording:
        async def execute(self, context: Any, events: Any) -> None:
            calls.append(context.text())
            await events.complete()

    harness = await make_server(Recording(), audit_log="/dev/full", audit_fail_closed=True)
    watch = await watch_audit_health(harness)
    assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
    await harness.stub.SendMessage(send_request("first"))  # its records cannot be written
    assert (await watch.read()).status == health_pb2.HealthCheckResponse.NOT_SERVING
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await harness.stub.SendMessage(send_request("second"))
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    info, delay = details(caught.value)
    assert (info.reason, info.metadata["retryable"], delay) == ("UNAVAILABLE", "true", 1.0)
    assert calls == ["first"]  # nothing reached the agent
    server_health = health_pb2_grpc.HealthStub(harness.channel)
    overall = await server_health.Check(health_pb2.HealthCheckRequest(service=""))
    assert overall.status == health_pb2.HealthCheckResponse.NOT_SERVING
    watch.cancel()


@pytest.fixture
def small_disk(tmp_path: Path) -> Any:
    """A 256 KiB tmpfs, filled up by `filler`; skipped where mounting is not allowed."""
    mount = tmp_path / "disk"
    mount.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


async def test_records_held_while_the_disk_is_full_are_written_when_space_returns(
    make_server: Factory, small_disk: Path
) -> None:
    log = small_disk / "audit.jsonl"
    filler = small_disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    with contextlib.suppress(OSError):  # ENOSPC: the disk is full
        while os.write(fd, b"x" * 512):
            pass
    os.close(fd)
    harness = await make_server(audit_log=str(log))
    watch = await watch_audit_health(harness)
    assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
    tasks = [(await harness.stub.SendMessage(send_request(f"m{n}"))).task for n in range(5)]
    assert (await watch.read()).status == health_pb2.HealthCheckResponse.NOT_SERVING
    filler.unlink()  # space returns; the writer's next try succeeds
    assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
    watch.cancel()
    await harness.running.stop(0)
    verdict = verify(log)
    rows = records(log)
    assert verdict.records == len(rows) and verdict.torn == ()
    outcomes = {r["task_id"] for r in rows if r["kind"] == "outcome"}
    assert outcomes == {task.id for task in tasks}  # no record was lost


def test_a_torn_last_line_is_fenced_and_verify_says_torn_not_tampered(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    trail = AuditLog(log)
    for index in range(3):
        trail.outcome(
            task_id=f"t{index}", state="S", principal="", tenant="", message_id="", cost=None
        )
    trail.close()
    whole = log.read_bytes()
    log.write_bytes(whole[:-40])  # a crash cut the last write short

    torn_tail = verify_command(log)
    assert torn_tail.returncode == exit_codes.AUDIT_TORN
    assert "2 records, chain intact" in torn_tail.stdout
    assert "torn line(s) 3" in torn_tail.stderr and "not tampering" in torn_tail.stderr

    again = AuditLog(log)  # a restart fences the torn line; new records do not glue onto it
    again.outcome(task_id="t9", state="S", principal="", tenant="", message_id="", cost=None)
    again.close()
    lines = log.read_bytes().splitlines()
    assert len(lines) == 5 and json.loads(lines[3])["kind"] == "fence"
    assert json.loads(lines[4])["task_id"] == "t9"
    assert verify(log) == (4, hashlib.sha256(lines[4]).hexdigest(), (3,), (3,))
    fenced = verify_command(log)  # the crash lost one record and nothing else: it passes
    assert fenced.returncode == exit_codes.OK and "4 records, chain intact" in fenced.stdout
    assert f"{log}: line 3: a write cut short by a crash, fenced when the writer restarted" in (
        fenced.stdout
    )
    assert fenced.stderr == ""

    lines[1] = lines[1].replace(b'"t1"', b'"tX"')  # tampering is still tampering
    log.write_bytes(b"\n".join(lines) + b"\n")
    tampered = verify_command(log)
    assert tampered.returncode == exit_codes.AUDIT_BROKEN and "chain is broken" in tampered.stderr


@pytest.mark.parametrize("where", ["directory", "missing-parent"])
def test_an_unusable_audit_log_path_is_a_one_line_start_up_error(
    tmp_path: Path, where: str
) -> None:
    path = tmp_path if where == "directory" else tmp_path / "no" / "such" / "audit.jsonl"
    result = run_serve("--port", "0", "--http-port", "-1", "--audit-log", str(path))
    assert result.returncode == exit_codes.USAGE
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("a2a-grpc serve: cannot append to the audit")


def test_a_file_that_is_not_an_audit_trail_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("shopping list\nmilk\n")
    result = run_serve("--port", "0", "--http-port", "-1", "--audit-log", str(notes))
    assert result.returncode == exit_codes.USAGE
    (line,) = result.stderr.strip().splitlines()
    assert line == (
        f"a2a-grpc serve: --audit-log: {notes} is not an audit trail (its last line is not an "
        "audit record): name a new file, or an existing trail to append to"
    )
    assert notes.read_text() == "shopping list\nmilk\n"  # untouched
    client = subprocess.run(
        [
            sys.executable,
            "-m",
            "a2a_grpc.cli.main",
            "get",
            "127.0.0.1:1",
            "t1",
            "--audit-log",
            str(notes),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert client.returncode == exit_codes.USAGE and "is not an audit trail" in client.stderr
    # An existing trail, even one whose last write was torn by a crash, is appended to.
    trail = tmp_path / "audit.jsonl"
    AuditLog(trail).close()
    first = AuditLog(trail)
    first.outcome(task_id="t1", state="S", principal="p", tenant="", message_id="", cost=None)
    first.close()
    with trail.open("ab") as file:
        file.write(b'{"kind": "outco')  # torn
    AuditLog(trail).close()


def test_a_long_trail_continues_its_chain_and_a_torn_tail_is_found_from_the_end(
    tmp_path: Path,
) -> None:
    log = tmp_path / "audit.jsonl"
    trail = AuditLog(log)
    for index in range(1500):  # ~500 KiB: the tail is read back in several chunks
        trail.outcome(
            task_id=f"t{index}", state="S", principal="p", tenant="", message_id="", cost=None
        )
    trail.close()
    assert log.stat().st_size > 3 * 64 * 1024
    again = AuditLog(log)
    again.outcome(task_id="last", state="S", principal="", tenant="", message_id="", cost=None)
    again.close()
    assert verify(log).records == 1501
    log.write_bytes(log.read_bytes()[:-10])
    AuditLog(log).close()  # fences the torn line
    assert verify(log).torn == (1501,)
