"""Fair shares of streams (server/protocol/fairness.py) and the call gate that takes them: caps
per principal and per tenant on open streams and on replays, refused at once with
RESOURCE_EXHAUSTED and RetryInfo, given back when a stream ends or its replay caught up."""

from __future__ import annotations

import pytest

from a2a_grpc.core.errors import ResourceExhaustedError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.protocol.fairness import SHARE_RETRY_DELAY, ShareLimits, Shares
from a2a_grpc.server.protocol.gate import CallGate, ServiceParams

LIMITS = ShareLimits(
    streams_per_principal=3, streams_per_tenant=4, replays_per_principal=1, replays_per_tenant=2
)


def test_streams_past_a_principal_s_or_a_tenant_s_cap_are_refused() -> None:
    shares = Shares(LIMITS)
    alice = [shares.take("alice", "t1", replay=False) for _ in range(3)]
    with pytest.raises(ResourceExhaustedError, match="streams open for this caller") as refused:
        shares.take("alice", "t2", replay=False)  # across tenants
    delay = refused.value.retry_delay
    assert delay is not None and 0.5 * SHARE_RETRY_DELAY <= delay <= 1.5 * SHARE_RETRY_DELAY
    shares.take("bob", "t1", replay=False)  # the tenant's fourth
    with pytest.raises(ResourceExhaustedError, match="streams open in tenant 't1'"):
        shares.take("carol", "t1", replay=False)
    shares.take("carol", "t2", replay=False)
    alice[0].release()
    alice[0].release()  # once is enough
    assert shares.open_streams(principal="alice") == 2
    shares.take("alice", "t2", replay=False)


def test_a_replay_holds_its_slot_until_it_caught_up_and_counts_nothing_when_idle() -> None:
    shares = Shares(LIMITS)
    first = shares.take("alice", "t1", replay=True)
    with pytest.raises(ResourceExhaustedError, match="replaying at once for this caller"):
        shares.take("alice", "t1", replay=True)
    shares.take("alice", "t1", replay=False)  # a stream that does not replay is no replay
    bob = shares.take("bob", "t1", replay=True)
    with pytest.raises(ResourceExhaustedError, match="replaying at once in tenant 't1'"):
        shares.take("carol", "t1", replay=True)
    first.replayed()  # caught up: the stream stays open, its replay slot is free
    assert shares.replays(principal="alice") == 0 and shares.open_streams(principal="alice") == 2
    second = shares.take("alice", "t2", replay=True)
    for share in (first, bob, second):
        share.release()
    assert shares.replays(tenant="t1") == 0 and shares.open_streams(tenant="t1") == 1
    # Nothing is kept for a principal or tenant with nothing open.
    assert set(shares._streams) == {"p:alice", "t:t1"} and not shares._replays


async def test_the_gate_refuses_a_resumed_stream_past_the_replay_cap_until_one_caught_up() -> None:
    # Async: a task of its own, so the call's log fields the gate sets stay in its context.
    limits = ShareLimits(streams_per_principal=5, replays_per_principal=1)
    gate = CallGate(max_calls=10, max_streams=10, shares=Shares(limits))
    resumed = ServiceParams("1.0", (), (), last_event_id="7")
    request = a2a_pb2.SubscribeToTaskRequest(id="task-1", tenant="t1")

    first = gate.begin("SubscribeToTask", resumed, "grpc", stream=True)
    context, _ = first.admit()
    first.parsed(request)
    second = gate.begin("SubscribeToTask", resumed, "grpc", stream=True)
    second.admit()
    with pytest.raises(ResourceExhaustedError, match="replaying") as refused:
        second.parsed(request)
    error = second.failed(refused.value)
    assert error.retry_delay is not None and error.retry_delay >= 0.5 * SHARE_RETRY_DELAY
    assert gate.streams == 1
    # The same stream without the id is no replay; a send stream with one is none either.
    plain = gate.begin("SubscribeToTask", ServiceParams("1.0", (), ()), "grpc", stream=True)
    plain.admit()
    plain.parsed(request)
    send = gate.begin("SendStreamingMessage", resumed, "grpc", stream=True)
    send.admit()
    send.parsed(a2a_pb2.SendMessageRequest(tenant="t1"))
    assert context.replay_done is not None
    context.replay_done()  # the first caught up: another may replay
    third = gate.begin("SubscribeToTask", resumed, "grpc", stream=True)
    third.admit()
    third.parsed(request)
    for call in (first, plain, send, third):
        call.ok()
    assert gate.streams == 0 and gate.shares is not None
    assert gate.shares.open_streams(tenant="t1") == 0 and gate.shares.replays(tenant="t1") == 0
