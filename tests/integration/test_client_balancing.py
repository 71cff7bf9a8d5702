"""One client, several servers: an address list or a dns: name is balanced with round_robin,
and an address that is gone is skipped (a call that meets it is retried on UNAVAILABLE)."""

from __future__ import annotations

import asyncio

import pytest

from a2a_grpc.client import A2AClient, ChannelOptions, TlsConfig, cli
from a2a_grpc.client.messages import user_message
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from a2a_grpc.server.app import ServerPlan, start_server
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.trust.tls import TlsFiles
from tests.integration.certs import Authority
from tests.integration.conftest import Factory, Harness

CALLS = 20


class Counting:
    """Completes every task at once and counts the runs: which server a call reached."""

    def __init__(self) -> None:
        self.calls = 0

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        self.calls += 1
        await events.complete()


async def _two_servers(make_server: Factory) -> tuple[Counting, Harness, Counting, Harness]:
    first, second = Counting(), Counting()
    return first, await make_server(first), second, await make_server(second)


async def _send(client: A2AClient, calls: int) -> None:
    for _ in range(calls):
        task = await client.send_message(user_message("hi"), timeout=20)
        assert isinstance(task, a2a_pb2.Task)
        assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED


def _both(one: Harness, other: Harness) -> str:
    return f"127.0.0.1:{one.running.port},127.0.0.1:{other.running.port}"


async def test_a_list_of_targets_spreads_calls_over_every_server(make_server: Factory) -> None:
    first, one, second, other = await _two_servers(make_server)
    async with A2AClient.connect(_both(one, other)) as client:
        await _send(client, CALLS)
    assert first.calls + second.calls == CALLS
    assert first.calls > 0 and second.calls > 0, (first.calls, second.calls)


async def test_pick_first_on_a_list_keeps_to_the_first_server(make_server: Factory) -> None:
    first, one, second, other = await _two_servers(make_server)
    options = ChannelOptions(lb_policy="pick_first")
    async with A2AClient.connect(_both(one, other), channel_options=options) as client:
        await _send(client, CALLS)
    assert (first.calls, second.calls) == (CALLS, 0)


async def test_calls_go_on_through_the_other_server_when_one_stops(make_server: Factory) -> None:
    first, one, second, other = await _two_servers(make_server)
    async with A2AClient.connect(_both(one, other)) as client:
        await _send(client, CALLS)
        assert first.calls > 0 and second.calls > 0  # both connected and in the rotation
        await one.running.stop(0)
        before = second.calls
        await _send(client, CALLS)
    assert second.calls - before == CALLS


async def test_a_dns_name_skips_the_addresses_nobody_listens_on(make_server: Factory) -> None:
    # localhost may also resolve to ::1, where the server (127.0.0.1) does not listen.
    agent = Counting()
    harness = await make_server(agent)
    async with A2AClient.connect(f"dns:///localhost:{harness.running.port}") as client:
        await _send(client, 3)
    assert agent.calls == 3


def test_a_list_with_a_host_name_is_refused_before_any_channel_opens() -> None:
    with pytest.raises(ValueError, match="dns:///localhost:2"):
        A2AClient.connect("127.0.0.1:1,localhost:2")


async def test_the_command_line_takes_a_list_a_dns_name_and_a_policy(make_server: Factory) -> None:
    first, one, second, other = await _two_servers(make_server)
    targets = [_both(one, other), f"dns:///localhost:{one.running.port}"]
    for argv in (
        ["send", targets[0], "hi"],
        ["send", targets[0], "hi", "--lb-policy", "pick_first"],
        ["send", targets[1], "hi"],
    ):
        # main() runs its own event loop, in a thread, while the servers serve on this one.
        assert await asyncio.to_thread(cli.main, argv) == 0, argv
    assert first.calls + second.calls == 3


async def test_tls_to_a_list_checks_every_server_against_the_name_given() -> None:
    ca = Authority()
    pem = ca.issue("localhost", server=True)  # valid for localhost, not for the list itself
    tls = TlsFiles(pem.certificate, pem.key)
    config = ServerConfig(
        host="127.0.0.1", port=0, http_port=None, shutdown_grace=0.1, drain_delay=0
    )
    agents = [Counting(), Counting()]
    servers = [await start_server(ServerPlan(config, agent, tls=tls)) for agent in agents]
    try:
        target = ",".join(f"127.0.0.1:{server.port}" for server in servers)
        trust = TlsConfig(root_certificates=ca.certificate, server_name_override="localhost")
        async with A2AClient.connect(target, tls=trust) as client:
            await _send(client, CALLS)
    finally:
        for server in servers:
            await server.stop(0)
    assert all(agent.calls > 0 for agent in agents), [agent.calls for agent in agents]
