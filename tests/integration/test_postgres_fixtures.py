"""The PostgreSQL test fixtures themselves: real servers from Debian's binaries, driven by
psycopg."""

from __future__ import annotations

import asyncio
import socket
import struct

import psycopg
import pytest

from tests import postgres_servers
from tests.postgres_servers import (
    PostgresServer,
    PostgresServerFactory,
    PostgresStartError,
    missing_postgres_action,
)
from tests.redis_servers import free_ports


async def test_a_started_server_answers_over_tcp_and_its_socket(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.url()
    assert url == f"postgresql://postgres@127.0.0.1:{postgres_server.port}/postgres"
    async with await psycopg.AsyncConnection.connect(url) as connection:
        cursor = await connection.execute("SELECT current_user, inet_server_addr()::text")
        assert await cursor.fetchone() == ("postgres", "127.0.0.1/32")
    assert postgres_server.psql("SELECT 1").strip() == "1"  # psql uses the Unix socket


@pytest.mark.parametrize("mode", ["fast", "immediate"])
async def test_a_restart_keeps_committed_rows(
    postgres_server: PostgresServer, mode: postgres_servers.StopMode
) -> None:
    port, directory = postgres_server.port, postgres_server.dir
    async with await psycopg.AsyncConnection.connect(postgres_server.url()) as connection:
        await connection.execute("CREATE TABLE t (state text)")
        await connection.execute("INSERT INTO t VALUES ('working')")
        await connection.commit()
    postgres_server.restart(mode)  # "immediate": recovery from the write-ahead log
    assert (postgres_server.port, postgres_server.dir) == (port, directory)
    assert postgres_server.psql("SELECT state FROM t").strip() == "working"


async def test_a_stopped_server_refuses_connections_at_once(
    postgres_server: PostgresServer,
) -> None:
    postgres_server.kill()
    with pytest.raises(psycopg.OperationalError, match="refused"):
        await psycopg.AsyncConnection.connect(postgres_server.url(), connect_timeout=5)


async def test_a_paused_server_takes_connections_but_does_not_answer(
    postgres_server: PostgresServer,
) -> None:
    postgres_server.pause()
    try:
        # The kernel still accepts the connection; the server never answers its SSLRequest.
        reader, writer = await asyncio.open_connection("127.0.0.1", postgres_server.port)
        writer.write(struct.pack("!ii", 8, 80877103))
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):
                await reader.read(1)
        writer.close()
    finally:
        postgres_server.resume()
    async with await psycopg.AsyncConnection.connect(postgres_server.url()) as connection:
        assert await (await connection.execute("SELECT 1")).fetchone() == (1,)


def test_each_test_gets_a_database_of_its_own(
    postgres_database: str, shared_postgres: PostgresServer
) -> None:
    name = postgres_database.rpartition("/")[2]
    listed = shared_postgres.psql("SELECT datname FROM pg_database").split()
    assert name in listed
    assert postgres_database == shared_postgres.url(name)


def test_a_taken_port_is_retried_with_another(
    make_postgres_server: PostgresServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        picks = [[taken]]
        monkeypatch.setattr(
            postgres_servers, "free_ports", lambda n: picks.pop() if picks else free_ports(n)
        )
        server = make_postgres_server()
        assert server.port != taken
        with pytest.raises(PostgresStartError, match="already in use"):
            make_postgres_server(port=taken)  # a fixed port is not retried


@pytest.mark.postgres
def test_missing_binaries_skip_or_fail_as_the_environment_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert missing_postgres_action(environ={})[0] == "run"  # installed here (the marker)
    monkeypatch.setattr(postgres_servers, "binary_dir", lambda path=None: None)
    action, reason = missing_postgres_action(environ={})
    assert action == "skip" and "apt-get install -y postgresql" in reason
    action, reason = missing_postgres_action(environ={"A2A_GRPC_REQUIRE_POSTGRES": "1"})
    assert action == "fail" and "A2A_GRPC_REQUIRE_POSTGRES=1" in reason
