"""The store's coalescing Redis client (server/tasks/redis/client.py) on a real redis-server:
commands of one event-loop turn share one pipeline, and each still gets its own reply or error."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.exceptions

from a2a_grpc.server.tasks.redis import client as redis_client
from a2a_grpc.server.tasks.redis.client import CoalescingRedis
from tests.redis_servers import RedisServer


@pytest.fixture
async def client(redis_server: RedisServer) -> AsyncIterator[CoalescingRedis]:
    client = redis_client.connect(redis_server.url, timeout=1.0)
    yield client
    await client.aclose()


async def test_commands_of_one_turn_share_one_connection_in_order(
    client: CoalescingRedis,
) -> None:
    ids = await asyncio.gather(*(client.client_id() for _ in range(20)))
    assert len(set(ids)) == 1  # one pipeline; separate calls would each take a pooled one
    counts = await asyncio.gather(*(client.incr("a2a:test:n") for _ in range(50)))
    assert counts == list(range(1, 51))


async def test_each_command_gets_its_own_error(client: CoalescingRedis) -> None:
    results = await asyncio.gather(
        client.set("a2a:test:k", "v"),
        client.lpush("a2a:test:k", "x"),  # WRONGTYPE: a string is no list
        client.get("a2a:test:k"),
        return_exceptions=True,
    )
    assert results[0] is True
    assert isinstance(results[1], redis.exceptions.ResponseError)
    assert "WRONGTYPE" in str(results[1])
    assert results[2] == b"v"


async def test_a_registered_script_reloads_after_redis_forgot_it(client: CoalescingRedis) -> None:
    script = client.register_script("return ARGV[1] .. ARGV[1]")
    assert await script(keys=[], args=["ab"]) == b"abab"
    await client.script_flush()
    replies = await asyncio.gather(*(script(keys=[], args=[str(n)]) for n in range(5)))
    assert replies == [f"{n}{n}".encode() for n in range(5)]


async def test_a_redis_that_does_not_answer_fails_what_waits_behind_too(
    client: CoalescingRedis, redis_server: RedisServer
) -> None:
    assert await client.ping() is True
    redis_server.pause()  # SIGSTOP: the connection stays open, nothing answers
    try:
        first = client.queue("GET", "a2a:test:a")
        await asyncio.sleep(0)  # let the first batch go out
        behind = client.queue("GET", "a2a:test:b")
        results = await asyncio.gather(first, behind, return_exceptions=True)
    finally:
        redis_server.resume()
    assert all(isinstance(result, redis.exceptions.TimeoutError) for result in results), results
    assert results[1] is results[0]  # failed by the first batch's timeout, not one of its own
    assert await client.ping() is True


async def test_closing_sends_what_is_queued_and_leaves_no_connection_open(
    redis_server: RedisServer,
) -> None:
    client = redis_client.connect(redis_server.url, timeout=1.0)
    await client.set("a2a:test:k", "v")
    queued = client.queue("GET", "a2a:test:k")  # not sent yet: it goes out on the next turn
    await client.aclose()
    assert await queued == b"v"
    connections = redis_server.cli("CLIENT", "LIST").splitlines()
    assert len(connections) == 1, connections  # only the redis-cli asking


async def test_commands_behind_a_large_batch_wait_for_the_busy_callers(
    client: CoalescingRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under load (a batch of LINGER_FROM commands or more came back with commands queued
    behind it) the next batch waits `linger_after` that batch's size; a lone caller's commands
    go at once. Every command still gets its own reply."""
    loop = asyncio.get_running_loop()
    waits: list[float] = []
    call_later = loop.call_later

    def recording_call_later(delay: float, callback: Any, *args: Any) -> asyncio.TimerHandle:
        if getattr(callback, "__func__", None) is CoalescingRedis._flush:
            waits.append(delay)
        return call_later(delay, callback, *args)

    monkeypatch.setattr(loop, "call_later", recording_call_later)
    callers = redis_client.LINGER_FROM + 2

    async def caller(number: int) -> list[int]:
        return [await client.incr(f"a2a:test:c{number}") for _ in range(3)]

    counts = await asyncio.gather(*(caller(number) for number in range(callers)))
    assert counts == [[1, 2, 3]] * callers
    # The second and third rounds queued behind a batch of `callers` commands.
    assert waits == [redis_client.linger_after(callers)] * 2
    waits.clear()
    assert [await client.incr("a2a:test:lone") for _ in range(3)] == [1, 2, 3]
    assert waits == []


def test_the_wait_grows_with_the_batch_up_to_a_bound() -> None:
    assert redis_client.linger_after(1) == 0.0
    assert redis_client.linger_after(redis_client.LINGER_FROM - 1) == 0.0
    first = redis_client.linger_after(redis_client.LINGER_FROM)
    assert 0.0 < first < redis_client.linger_after(redis_client.LINGER_FROM * 2)
    assert redis_client.linger_after(10_000) == redis_client.LINGER_MAX
