"""The Redis test fixtures themselves: real servers and a real cluster, driven by redis-py."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as redis
from redis.asyncio.cluster import RedisCluster as ClusterClient
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from tests import redis_servers
from tests.redis_servers import (
    RedisCluster,
    RedisServer,
    RedisServerFactory,
    RedisStartError,
    missing_redis_action,
    require_redis,
)


@pytest.fixture
async def cluster_client(redis_cluster: RedisCluster) -> AsyncIterator[ClusterClient]:
    client = ClusterClient.from_url(redis_cluster.url, decode_responses=True)
    # Loads the slot map now. Commands would do it on first use, but get_node_from_key and
    # pubsub() read the map without loading it (SlotNotCoveredError / KeyError, redis-py 8.1).
    await client.initialize()
    yield client
    await client.aclose()


async def test_a_started_server_answers_ping(redis_server: RedisServer) -> None:
    assert redis_server.url == f"redis://127.0.0.1:{redis_server.port}/0"
    assert redis_server.dir.is_dir()
    client = redis.from_url(redis_server.url)
    try:
        assert await client.ping() is True
    finally:
        await client.aclose()


@pytest.mark.parametrize("down", ["stop", "kill"])
async def test_aof_restart_keeps_acknowledged_writes(
    make_redis_server: RedisServerFactory, down: str
) -> None:
    server = make_redis_server(appendonly=True)
    port, directory = server.port, server.dir
    client = redis.from_url(server.url, decode_responses=True)
    try:
        await client.set("a2a:task:1", "working")
        getattr(server, down)()  # SIGTERM, or SIGKILL: appendfsync always loses nothing
        server.restart()
        assert (server.port, server.dir) == (port, directory)
        server.wait_for_log("DB loaded from append only file")
    finally:
        await client.aclose()
    # A new client: from_url clients do not retry (redis-py 8.1), so the pooled connection that
    # died with the first process would fail one command.
    client = redis.from_url(server.url, decode_responses=True)
    try:
        assert await client.get("a2a:task:1") == "working"
    finally:
        await client.aclose()


async def test_a_killed_server_refuses_connections_at_once(redis_server: RedisServer) -> None:
    redis_server.kill()
    # One attempt, said outright: redis-py 8.1's Redis(...) retries 10 times by default, its
    # from_url not at all. A refused connect is ConnectionError at once; a connect that hung
    # for socket_connect_timeout would be TimeoutError, which is not a ConnectionError.
    client = redis.from_url(
        redis_server.url, socket_connect_timeout=5, retry=Retry(NoBackoff(), retries=0)
    )
    try:
        with pytest.raises(redis.ConnectionError):
            await client.ping()
    finally:
        await client.aclose()


def test_a_taken_port_is_retried_with_another(
    make_redis_server: RedisServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        picks = [[taken, taken]]
        real = redis_servers.free_ports
        monkeypatch.setattr(
            redis_servers, "free_ports", lambda n: picks.pop() if picks else real(n)
        )
        server = make_redis_server()
        assert server.port != taken
        assert server.cli("PING").strip() == "PONG"
        with pytest.raises(RedisStartError, match="already in use"):
            make_redis_server(port=taken)  # a fixed port is not retried


def test_shared_redis_can_be_emptied(shared_redis: RedisServer) -> None:
    shared_redis.cli("SET", "leftover", "1")
    shared_redis.flushall()
    assert shared_redis.cli("DBSIZE").strip() == "0"


async def test_the_cluster_is_ok_and_spreads_keys(
    redis_cluster: RedisCluster, cluster_client: ClusterClient
) -> None:
    assert redis_cluster.url == redis_cluster.urls[0]
    for node in redis_cluster.nodes:
        assert "cluster_state:ok" in node.cli("CLUSTER", "INFO")
    keys = [f"a2a:task:{n}" for n in range(12)]
    assert len({cluster_client.keyslot(key) for key in keys}) == len(keys)
    owners = {getattr(cluster_client.get_node_from_key(key), "port", None) for key in keys}
    assert None not in owners and len(owners) > 1, f"owners of twelve keys: {owners}"
    for key in keys:
        await cluster_client.set(key, key[::-1])
    assert [await cluster_client.get(key) for key in keys] == [key[::-1] for key in keys]


async def test_hash_tagged_keys_share_a_lua_script(cluster_client: ClusterClient) -> None:
    keys = ["a2a:{t1}:a", "a2a:{t1}:b"]
    assert cluster_client.keyslot(keys[0]) == cluster_client.keyslot(keys[1])
    swap = (
        "redis.call('SET', KEYS[1], ARGV[1]); redis.call('SET', KEYS[2], ARGV[2]);"
        " return {redis.call('GET', KEYS[2]), redis.call('GET', KEYS[1])}"
    )
    assert await cluster_client.eval(swap, 2, *keys, "x", "y") == ["y", "x"]
    # register_script: EVALSHA, after SCRIPT LOAD on a NOSCRIPT reply, routed by the keys' slot.
    script = cluster_client.register_script(swap)
    assert await script(keys=keys, args=["p", "q"]) == ["q", "p"]
    assert await cluster_client.mget(keys) == ["p", "q"]


async def test_cluster_pubsub_delivers(cluster_client: ClusterClient) -> None:
    pubsub = cluster_client.pubsub()
    try:
        await pubsub.subscribe("a2a:{t1}:events")
        subscribed = await pubsub.get_message(timeout=5)
        assert subscribed is not None and subscribed["type"] == "subscribe"
        assert await cluster_client.publish("a2a:{t1}:events", "hello") >= 1
        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=5)
        assert message is not None and message["data"] == "hello"
    finally:
        await pubsub.aclose()


@pytest.mark.parametrize(
    ("environ", "action"),
    [
        ({}, "skip"),
        ({"A2A_GRPC_REQUIRE_REDIS": "1"}, "fail"),
        ({"A2A_GRPC_REQUIRE_REDIS": "0"}, "skip"),
    ],
)
def test_missing_binaries_skip_or_fail(
    tmp_path: Path, environ: dict[str, str], action: str
) -> None:
    no_redis = os.pathsep.join([str(tmp_path), os.path.dirname(sys.executable)])
    decided, reason = missing_redis_action(no_redis, environ)
    assert decided == action
    assert reason.startswith("redis-server and redis-cli not installed: apt-get install -y")
    outcome = pytest.fail.Exception if action == "fail" else pytest.skip.Exception
    with pytest.raises(outcome, match="apt-get install -y redis-server"):
        require_redis(no_redis, environ)


@pytest.mark.redis
def test_redis_on_path_runs() -> None:
    require_redis()  # returns: the marker would have skipped this test without the binaries
    assert missing_redis_action(None, {"A2A_GRPC_REQUIRE_REDIS": "1"}) == ("run", "")
