"""Fixtures for every test directory: real Redis servers (see tests/redis_servers.py) and real
PostgreSQL servers (tests/postgres_servers.py).

Without `redis-server` / `redis-cli` on PATH, a test that uses the Redis fixtures, or is marked
`@pytest.mark.redis`, is skipped with the install command as the reason; with
A2A_GRPC_REQUIRE_REDIS=1 (CI) it fails instead. Tests using the fixtures get the `redis` marker
themselves, so `pytest -m "not redis"` leaves them out. The same for PostgreSQL: the `postgres`
marker, Debian's `postgresql` binaries, A2A_GRPC_REQUIRE_POSTGRES=1.

This file must not import a2a_grpc: tests/interop/sdk_client runs under it too, in a process
where the official SDK owns the lf.a2a.v1 proto symbols.
"""

from __future__ import annotations

import os

# The tests start real servers (redis-server, postgres, nginx, replicas) with fork and exec from
# a process that runs gRPC. gRPC's own fork handlers, on by default in grpcio, restart its
# event-engine threads in the child between fork and exec: once in a full run under load such a
# thread ran Python in the child and crashed it (SIGSEGV in an "event_engine" thread, so a
# postgres "exited with -11 before it was ready" with no log). Nothing here uses gRPC in a forked
# child, so the handlers stay off; set before anything imports grpc.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from collections.abc import Iterator
from typing import Any

import pytest

from tests.postgres_servers import PostgresServer, PostgresServerFactory, require_postgres
from tests.redis_servers import RedisCluster, RedisServer, RedisServerFactory, require_redis

REDIS_FIXTURES = frozenset({"redis_server", "make_redis_server", "shared_redis", "redis_cluster"})
POSTGRES_FIXTURES = frozenset(
    {"postgres_server", "make_postgres_server", "shared_postgres", "postgres_database"}
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if REDIS_FIXTURES.intersection(fixtures):
            item.add_marker(pytest.mark.redis)
        if POSTGRES_FIXTURES.intersection(fixtures):
            item.add_marker(pytest.mark.postgres)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("redis") is not None:
        require_redis()
    if item.get_closest_marker("postgres") is not None:
        require_postgres()


@pytest.fixture
def make_redis_server() -> Iterator[RedisServerFactory]:
    """A factory: `make_redis_server(appendonly=True, extra_args=[...])` takes `RedisServer`'s
    keyword arguments and returns a started server; every server it made is closed (stopped,
    directory deleted) after the test."""
    require_redis()
    made: list[RedisServer] = []

    def make(**options: Any) -> RedisServer:
        server = RedisServer(**options)
        made.append(server)
        return server.start()

    yield make
    for server in made:
        server.close()


@pytest.fixture
def redis_server(make_redis_server: RedisServerFactory) -> RedisServer:
    """A fresh, empty redis-server (no persistence) for this test alone."""
    return make_redis_server()


@pytest.fixture(scope="session")
def shared_redis() -> Iterator[RedisServer]:
    """One redis-server (no persistence) for the whole session. Tests that need it empty call
    `shared_redis.flushall()` first; tests must not stop or restart it."""
    require_redis()
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="module")
def redis_cluster() -> Iterator[RedisCluster]:
    """A 3-master Redis Cluster, all slots assigned, shared by the tests of one module (about
    2 s to form). Tests must not stop its nodes."""
    require_redis()
    with RedisCluster() as cluster:
        yield cluster


@pytest.fixture
def make_postgres_server() -> Iterator[PostgresServerFactory]:
    """A factory: `make_postgres_server(extra_settings={...})` takes `PostgresServer`'s keyword
    arguments and returns a started server; every server it made is closed after the test."""
    require_postgres()
    made: list[PostgresServer] = []

    def make(**options: Any) -> PostgresServer:
        server = PostgresServer(**options)
        made.append(server)
        return server.start()

    yield make
    for server in made:
        server.close()


@pytest.fixture
def postgres_server(make_postgres_server: PostgresServerFactory) -> PostgresServer:
    """A fresh PostgreSQL server for this test alone (it may stop, restart or pause it)."""
    return make_postgres_server()


@pytest.fixture(scope="session")
def shared_postgres() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the whole session; tests take a database of their own
    (`postgres_database`) and must not stop or restart it."""
    require_postgres()
    with PostgresServer() as server:
        yield server


@pytest.fixture
def postgres_database(shared_postgres: PostgresServer) -> str:
    """The URL of a new, empty database on the session's server, for this test alone."""
    return shared_postgres.create_database()
