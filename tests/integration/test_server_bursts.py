"""Bursts and floods: a caller is served or refused with RESOURCE_EXHAUSTED + RetryInfo, never
cancelled by the server, and one connection's rapid resets do not shed other connections' calls."""

from __future__ import annotations

import asyncio
from collections import Counter

import grpc
import pytest

from tests.integration.conftest import VERSION, Factory, send_request
from tests.integration.test_server_retry_classes import details
from tests.load import rapid_reset

BURST_CALLS = 4000
"""All on one connection, at once: below its stream limit, so every call reaches the server."""


def assert_refused_with_retry_info(error: grpc.aio.AioRpcError) -> None:
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
    info, delay = details(error)
    assert (info.domain, info.reason, info.metadata["retryable"]) == (
        "a2a-grpc",
        "RESOURCE_EXHAUSTED",
        "true",
    )
    assert delay is not None and delay > 0


@pytest.mark.timeout(120)
async def test_a_burst_is_served_or_refused_with_retry_info_never_cancelled(
    make_server: Factory,
) -> None:
    harness = await make_server()
    outcomes: Counter[str] = Counter()
    refusals: list[grpc.aio.AioRpcError] = []

    async def call() -> None:
        try:
            await harness.stub.SendMessage(send_request("hello"), metadata=VERSION, timeout=60)
            outcomes["OK"] += 1
        except grpc.aio.AioRpcError as error:
            outcomes[error.code().name] += 1
            refusals.append(error)

    await asyncio.gather(*(call() for _ in range(BURST_CALLS)))
    assert set(outcomes) <= {"OK", "RESOURCE_EXHAUSTED"}, outcomes
    assert outcomes["OK"] > 0
    for error in refusals:
        assert_refused_with_retry_info(error)


@pytest.mark.timeout(120)
async def test_a_rapid_reset_flood_does_not_shed_other_connections_calls(
    make_server: Factory,
) -> None:
    # A small per-connection limit, and 1,000 streams per write (gRPC parses a write's streams
    # far faster than the server can release them), so that the flooder is throttled however
    # busy this machine is.
    harness = await make_server(max_streams_per_connection=100)
    port = harness.running.port
    running = asyncio.Event()
    running.set()
    calls = asyncio.create_task(rapid_reset.call_while(port, running, callers=4))
    await asyncio.sleep(0.3)
    try:
        flood = await rapid_reset.flood_in_child(port, streams=20_000, seconds=5, batch=1000)
    finally:
        running.clear()
    outcomes = await calls
    assert set(outcomes) == {"OK"}, outcomes
    assert flood.streams > 0
    assert flood.refused > 0 or flood.goaway is not None, flood
