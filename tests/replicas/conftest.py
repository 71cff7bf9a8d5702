"""Replica tests: several `a2a-grpc serve --store URL` processes on one real store, started per
test: a redis-server, or a PostgreSQL server (`store` fixture, over both where the test is
store-generic). The replicas' agent is steered through a redis-server in either case."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest
import redis.asyncio as aioredis

from tests.postgres_servers import PostgresServer
from tests.redis_servers import RedisServer
from tests.replicas.harness import Replica, start_replica

StartReplica = Callable[..., Awaitable[Replica]]


@dataclass
class StoreServer:
    """The store the replicas share, and how a test takes it down and brings it back."""

    kind: str
    url: str
    kill: Callable[[], None]
    """A crash: Redis SIGKILLed, PostgreSQL's immediate shutdown; connections are refused."""
    start: Callable[[], object]
    """Back on the same address (Redis without persistence comes back empty)."""


@pytest.fixture(params=["redis", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, redis_server: RedisServer) -> StoreServer:
    if request.param == "redis":
        return StoreServer("redis", redis_server.url, redis_server.kill, redis_server.restart)
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return StoreServer("postgres", server.url(), server.kill, server.start)


@pytest.fixture
async def replicas(redis_server: RedisServer, store: StoreServer) -> AsyncIterator[StartReplica]:
    started: list[Replica] = []

    async def start(*options: str, url: str | None = None) -> Replica:
        replica = await start_replica(redis_server.url, *options, store=url or store.url)
        started.append(replica)
        return replica

    yield start
    for replica in started:
        await replica.kill()


@pytest.fixture
async def redis(redis_server: RedisServer) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(redis_server.url)
    yield client
    await client.aclose()
