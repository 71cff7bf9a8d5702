"""Matching a client's audit records with a server's: what agrees and what is reported."""

from __future__ import annotations

from typing import Any

from a2a_grpc.core.audit_match import match

HASH = "a" * 64


def call(message_id: str = "m1", **fields: Any) -> dict[str, Any]:
    record = {
        "kind": "call",
        "method": "SendMessage",
        "target": "agent:1",
        "message_id": message_id,
        "message_sha256": HASH,
        "task_id": "t1",
        "state": "TASK_STATE_COMPLETED",
        "outcome": "OK",
        "resumed": 0,
    }
    return record | fields


def request(message_id: str = "m1", **fields: Any) -> dict[str, Any]:
    record = {
        "kind": "request",
        "method": "SendMessage",
        "message_id": message_id,
        "message_sha256": HASH,
        "task_id": "t1",
        "outcome": "OK",
    }
    return record | fields


def outcome(message_id: str = "m1", state: str = "TASK_STATE_COMPLETED") -> dict[str, Any]:
    return {"kind": "outcome", "message_id": message_id, "task_id": "t1", "outcome": state}


def kinds(client: list[dict[str, Any]], server: list[dict[str, Any]], **options: Any) -> list[str]:
    result = match(enumerate(client, 1), enumerate(server, 1), **options)
    return [finding.kind for finding in result.findings]


def test_records_that_agree_report_nothing() -> None:
    result = match([(1, call())], [(1, request()), (2, outcome())])
    assert (result.sent, result.seen, result.findings) == (1, 1, ())


def test_a_message_the_server_never_saw() -> None:
    assert kinds([call()], []) == ["unseen"]
    # It never got there, and the server indeed has no record: a note, not a disagreement.
    result = match([(1, call(outcome="UNAVAILABLE", state=""))], [])
    assert [(f.kind, f.disagrees) for f in result.findings] == [("undelivered", False)]
    assert result.disagreements == ()


def test_other_bytes_under_the_message_id() -> None:
    assert kinds([call()], [request(message_sha256="b" * 64)]) == ["hash"]


def test_outcomes_tasks_and_states_that_differ() -> None:
    # The client gave up waiting; the server did the work.
    assert kinds([call(outcome="DEADLINE_EXCEEDED", state="")], [request()]) == ["outcome"]
    assert kinds([call(task_id="t2")], [request()]) == ["task"]
    assert kinds([call()], [request(), outcome(state="TASK_STATE_FAILED")]) == ["state"]
    # A task the client saw unsettled (return_immediately) is not compared with how it ended.
    assert kinds([call(state="TASK_STATE_WORKING")], [request(), outcome()]) == []


def test_a_repeated_message_id_agrees_with_any_of_its_answers() -> None:
    retried = call(outcome="OK", attempts=2)
    assert kinds([retried], [request(outcome="CANCELLED"), request(outcome="OK")]) == []


def test_a_stream_closed_by_either_side_without_an_error_agrees() -> None:
    streamed = call(method="SendStreamingMessage")
    assert kinds([streamed], [request(method="SendStreamingMessage", outcome="CANCELLED")]) == []
    stopped = call(method="SendStreamingMessage", outcome="CANCELLED")
    assert kinds([stopped], [request(method="SendStreamingMessage", outcome="OK")]) == []
    # A unary call has no such leeway; a resumed stream's first call is not compared.
    assert kinds([call()], [request(outcome="CANCELLED")]) == ["outcome"]
    resumed = call(method="SendStreamingMessage", resumed=1)
    assert kinds([resumed], [request(method="SendStreamingMessage", outcome="UNAVAILABLE")]) == []


def test_only_message_calls_to_the_target_are_matched() -> None:
    client = [call("m1"), call("m2", target="other:1"), call("", method="GetTask")]
    assert kinds(client, [request("m1")], target="agent:1") == []
    result = match(enumerate(client, 1), [(1, request("m1"))])
    assert (result.sent, result.seen) == (2, 1)
