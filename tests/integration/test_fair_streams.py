"""Fair streams (issue #40): per-principal and per-tenant caps on open streams and on replays,
refused at once with RESOURCE_EXHAUSTED and RetryInfo (429 over HTTP), and a bounded replay
storm during which another caller is still served promptly.

The storm (`tests.load.replay_storm`, whose full size is a load test) runs against our server
in a child process, in memory: one principal resumes STORM_STREAMS SubscribeToTask streams at
once, each replaying the last 1,000 events of a long task, with `--max-replays-per-principal`
4, while another caller, in a process of its own, sends blocking SendMessage calls one after
another. Measured (tests/load/RESULTS.md, 2026-12-07, a 2-core machine at load average ~28):
before the caps and the paced replays, this storm took 26 s and held one of the other
caller's calls for 8.1 s; with them, it is over in 0.6 s and the other caller's slowest call
took 5 ms. OTHER_CALLER_BOUND is far above the second and below the first.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import aiohttp
import grpc
import pytest

from a2a_grpc.core.event_ids import LAST_EVENT_ID_HEADER, LAST_EVENT_ID_KEY, event_id
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from tests.integration.conftest import VERSION, Factory, Held, collect, send_request
from tests.integration.test_server_bursts import assert_refused_with_retry_info
from tests.load.replay_storm import server_child, storm

STORM_STREAMS = 400
"""Resumed streams of one principal, at once: a hundred times its replay cap."""
STORM_REPLAY_CAP = 4
OTHER_CALLER_BOUND = 3.0
"""Seconds the other caller's slowest call may take during the storm, and the slowest refusal
may take to come."""


class BigChunks:
    """A task of `count` artifact chunks of `size` bytes each, then COMPLETED: a replay of it is
    far larger than any socket buffer."""

    def __init__(self, count: int = 600, size: int = 16 * 1024) -> None:
        self.count = count
        self.size = size

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        await events.working()
        artifact_id = None
        for index in range(self.count):
            artifact_id = await events.add_artifact(
                [a2a_pb2.Part(text="x" * self.size)],
                artifact_id=artifact_id,
                append=index > 0,
                last_chunk=index == self.count - 1,
            )
        await events.complete()


async def test_streams_past_a_principal_s_or_a_tenant_s_share_are_refused_at_once(
    make_server: Factory,
) -> None:
    held = Held()
    harness = await make_server(
        held,
        tokens={"a": "alice", "b": "bob", "c": "carol"},
        max_open_streams_per_principal=2,
        max_open_streams_per_tenant=3,
    )

    def stream(token: str, tenant: str) -> Any:
        return harness.stub.SendStreamingMessage(
            send_request("hold", tenant=tenant),
            metadata=(*VERSION, ("authorization", f"Bearer {token}")),
        )

    open_streams = [stream("a", "acme"), stream("a", "acme"), stream("b", "acme")]
    for opened in open_streams:
        await opened.read()  # the Task: open, and held WORKING
    refused = [stream("a", "other"), stream("c", "acme")]  # alice's third; acme's fourth
    for call, why in zip(refused, ("for this caller", "in tenant 'acme'"), strict=True):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call.read()
        assert_refused_with_retry_info(caught.value)
        assert why in (caught.value.details() or "")
    served = stream("c", "other")  # another caller in another tenant
    assert (await served.read()).HasField("task")
    held.go.set()
    for opened in (*open_streams, served):
        events = await collect(opened)
        assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
    # Their slots are free again: alice may open two more.
    again = [stream("a", "acme") for _ in range(2)]
    for opened in again:
        assert (await collect(opened))[-1].status_update.status.state == (
            a2a_pb2.TASK_STATE_COMPLETED
        )


async def test_a_resumed_stream_past_the_replay_cap_is_refused_until_one_caught_up(
    make_server: Factory,
) -> None:
    agent = BigChunks()
    harness = await make_server(agent, http_port=0, max_replays_per_principal=1)
    assert harness.running.http_server is not None
    events = await collect(harness.stub.SendStreamingMessage(send_request("go"), metadata=VERSION))
    task_id = events[0].task.id
    after = event_id(events[1])
    assert after is not None
    # The first replay, over HTTP from a socket that reads nothing past the headers: its ~10
    # MiB cannot all be written, so it holds its replay slot.
    loop = asyncio.get_running_loop()
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await loop.sock_connect(sock, ("127.0.0.1", harness.running.http_server.port))
        head = (
            f"GET /tasks/{task_id}:subscribe HTTP/1.1\r\nHost: test\r\nConnection: close\r\n"
            f"A2A-Version: 1.0\r\n{LAST_EVENT_ID_HEADER}: {after}\r\n"
            "Accept: text/event-stream\r\n\r\n"
        )
        await loop.sock_sendall(sock, head.encode())
        headers = b""
        while not headers.endswith(b"\r\n\r\n"):  # the headers, byte by byte, and no more
            byte = await loop.sock_recv(sock, 1)
            assert byte, f"connection closed after {headers!r}"
            headers += byte
        assert headers.startswith(b"HTTP/1.1 200"), headers
        # A second replay of the same caller is refused at once, over gRPC and over HTTP.
        resumed = (*VERSION, (LAST_EVENT_ID_KEY, after))
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await collect(
                harness.stub.SubscribeToTask(
                    a2a_pb2.SubscribeToTaskRequest(id=task_id), metadata=resumed
                )
            )
        assert_refused_with_retry_info(caught.value)
        assert "replaying at once for this caller" in (caught.value.details() or "")
        base = f"http://127.0.0.1:{harness.running.http_server.port}"
        async with (
            aiohttp.ClientSession() as http,
            http.get(
                f"{base}/tasks/{task_id}:subscribe",
                headers={"A2A-Version": "1.0", LAST_EVENT_ID_HEADER: after},
            ) as response,
        ):
            assert response.status == 429
            assert "replaying at once" in await response.text()
        # Now the first stream is read to its end: once it caught up, another replay runs.
        while await loop.sock_recv(sock, 1 << 16):
            pass
    replayed = await collect(
        harness.stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=task_id), metadata=resumed)
    )
    assert len(replayed) == len(events) - 2  # every event after the WORKING one
    assert replayed[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


@pytest.mark.timeout(300)
async def test_another_caller_is_served_within_a_bound_while_a_replay_storm_runs() -> None:
    config = ("--config", f"max_replays_per_principal={STORM_REPLAY_CAP}")
    async with server_child("--agent", "burst", *config) as child:
        result = await storm(
            f"127.0.0.1:{child.port}", streams=STORM_STREAMS, events=1000, baseline_calls=5
        )
    summary = result.summary()
    # Every stream was served in full or refused at once, with RetryInfo; none hung.
    assert not result.failed and result.never_served == 0, summary
    refused = result.refused["RESOURCE_EXHAUSTED with RetryInfo"]
    assert result.served + refused == STORM_STREAMS, summary
    assert result.served >= STORM_REPLAY_CAP and refused > 0, summary
    assert max(result.refusal_seconds) <= OTHER_CALLER_BOUND, summary
    # The other caller went on being served, promptly.
    assert result.other_during and not result.other_errors, summary
    assert max(result.other_during) <= OTHER_CALLER_BOUND, summary
