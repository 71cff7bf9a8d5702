"""Replica tests: several `a2a-grpc serve --store redis://...` processes on one real
redis-server, started per test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import redis.asyncio as aioredis

from tests.redis_servers import RedisServer
from tests.replicas.harness import Replica, start_replica

StartReplica = Callable[..., Awaitable[Replica]]


@pytest.fixture
async def replicas(redis_server: RedisServer) -> AsyncIterator[StartReplica]:
    started: list[Replica] = []

    async def start(*options: str, url: str | None = None) -> Replica:
        replica = await start_replica(url or redis_server.url, *options)
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
