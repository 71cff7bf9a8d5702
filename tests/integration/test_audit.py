"""The audit trail: a record per request and per task outcome, chained so tampering shows."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from a2a_grpc.core.budget import with_budget
from a2a_grpc.core.canonical import canonical_message_bytes
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.audit import GENESIS, AuditLog, verify
from tests.integration.conftest import Factory, send_request

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
    assert outcome["cost"] == {"amount": "2.0", "currency": "EUR"}
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
    count, head = verify(log)
    assert count == 5 and head != GENESIS
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

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "a2a_grpc.cli.main", "audit", "verify", str(log)],
            capture_output=True,
            text=True,
            timeout=30,
        )

    ok = run()
    assert ok.returncode == 0 and "2 records, chain intact" in ok.stdout
    lines = log.read_text().splitlines()
    log.write_text(lines[0].replace('"t"', '"x"') + "\n" + lines[1] + "\n")
    broken = run()
    assert broken.returncode == 1
    assert "line 2" in broken.stderr and "Traceback" not in broken.stderr
