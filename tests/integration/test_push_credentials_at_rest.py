"""Push configs' secrets sealed at rest in the shared stores (server/tasks/sealing.py), on a
real redis-server and a real PostgreSQL: the stored row holds neither the token nor the
credentials, Get and List read as always, a real webhook receiver gets the opened credentials,
keys rotate, and a config no key opens is an INTERNAL error naming it and one log line."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from cryptography.fernet import Fernet

from a2a_grpc.cli.main import main as cli_main
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from a2a_grpc.server.tasks.sealing import SEALED_PREFIX, CredentialKeys, PushConfigCodec
from tests.integration.conftest import Factory, Harness, error_reason, send_request
from tests.integration.serve_process import serving
from tests.integration.webhook_receiver import Receiver

TOKEN = "token-5e0c2b"
CREDENTIALS = "credentials-91a4f6"


class Gated:
    """WORKING, then waits for `go`, then COMPLETED."""

    def __init__(self) -> None:
        self.go = asyncio.Event()

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        await events.working()
        await self.go.wait()
        await events.complete()


@pytest.fixture(params=["redis", "cluster", "postgresql"])
def store_url(request: pytest.FixtureRequest) -> str:
    """A fresh shared store: a redis-server of its own, the module's Redis Cluster emptied, or
    a database of its own."""
    if request.param == "redis":
        return str(request.getfixturevalue("redis_server").url)
    if request.param == "cluster":
        cluster = request.getfixturevalue("redis_cluster")
        for node in cluster.nodes:
            node.flushall()
        return str(cluster.url).replace("redis://", "redis+cluster://", 1)
    return str(request.getfixturevalue("postgres_database"))


@pytest.fixture
async def receivers() -> AsyncIterator[list[Receiver]]:
    running = [await Receiver().start(), await Receiver().start()]
    yield running
    for receiver in running:
        await receiver.stop()


def keys(*keys: bytes) -> CredentialKeys:
    return CredentialKeys(list(keys))


async def stored(harness: Harness, task_id: str, config_id: str) -> bytes:
    """The config's bytes as the store holds them, read straight from Redis or PostgreSQL."""
    store: Any = harness.running.handler.store
    if hasattr(store, "keys"):  # Redis
        raw = await store.client.hget(store.keys.push(task_id), config_id)
        assert raw is not None
        return bytes(raw)
    url = harness.running.handler.config.store
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
        cursor = await connection.execute(
            "SELECT body FROM a2a_push_configs WHERE task_id = %s AND config_id = %s",
            (task_id, config_id),
        )
        row = await cursor.fetchone()
    assert row is not None
    return bytes(row[0])


async def start_gated(harness: Harness) -> a2a_pb2.Task:
    configuration = a2a_pb2.SendMessageConfiguration(return_immediately=True)
    return (await harness.stub.SendMessage(send_request(configuration=configuration))).task


async def create(
    harness: Harness, task_id: str, config_id: str, url: str
) -> a2a_pb2.TaskPushNotificationConfig:
    return await harness.stub.CreateTaskPushNotificationConfig(
        a2a_pb2.TaskPushNotificationConfig(
            task_id=task_id,
            id=config_id,
            url=url,
            token=TOKEN,
            authentication=a2a_pb2.AuthenticationInfo(scheme="Bearer", credentials=CREDENTIALS),
        )
    )


async def test_the_store_holds_no_secret_and_the_webhook_gets_the_credentials(
    make_server: Factory, store_url: str, receivers: list[Receiver]
) -> None:
    agent = Gated()
    harness = await make_server(
        agent=agent,
        store=store_url,
        allow_private_webhooks=True,
        push_credentials=keys(Fernet.generate_key()),
    )
    task = await start_gated(harness)
    created = await create(harness, task.id, "hook", receivers[0].url)
    assert created.authentication.credentials == ""  # write-only, as always

    raw = await stored(harness, task.id, "hook")
    assert TOKEN.encode() not in raw and CREDENTIALS.encode() not in raw
    row = a2a_pb2.TaskPushNotificationConfig.FromString(raw)
    assert row.token.startswith(SEALED_PREFIX)
    assert row.authentication.credentials.startswith(SEALED_PREFIX)
    assert row.url == receivers[0].url

    got = await harness.stub.GetTaskPushNotificationConfig(
        a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=task.id, id="hook")
    )
    listed = await harness.stub.ListTaskPushNotificationConfigs(
        a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id)
    )
    for config in (got, *listed.configs):
        assert (config.id, config.token, config.url) == ("hook", TOKEN, receivers[0].url)
        assert config.authentication.scheme == "Bearer"
        assert config.authentication.credentials == ""

    agent.go.set()
    (delivered,) = await receivers[0].wait_for(1)
    assert delivered.headers["Authorization"] == f"Bearer {CREDENTIALS}"
    assert delivered.headers["X-A2A-Notification-Token"] == TOKEN


async def test_keys_rotate_and_a_config_no_key_opens_is_named_not_delivered(
    make_server: Factory,
    store_url: str,
    receivers: list[Receiver],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two servers on one store: the first still has only the old key, the second has the new
    key first and the old one second (a rotation half rolled out)."""
    old, new = Fernet.generate_key(), Fernet.generate_key()
    agent = Gated()
    before = await make_server(
        agent=agent, store=store_url, allow_private_webhooks=True, push_credentials=keys(old)
    )
    rotated = await make_server(
        agent=Gated(),
        store=store_url,
        allow_private_webhooks=True,
        push_credentials=keys(new, old),
    )
    task = await start_gated(before)  # runs on `before`, which delivers its events
    await create(before, task.id, "sealed-by-old", receivers[0].url)
    await create(rotated, task.id, "sealed-by-new", receivers[1].url)

    # The new key seals what the rotated server writes; the old key still opens the rest.
    by_old = await stored(rotated, task.id, "sealed-by-old")
    by_new = await stored(rotated, task.id, "sealed-by-new")
    assert PushConfigCodec(keys(old)).decode(by_old).authentication.credentials == CREDENTIALS
    assert PushConfigCodec(keys(new)).decode(by_new).authentication.credentials == CREDENTIALS
    listed = await rotated.stub.ListTaskPushNotificationConfigs(
        a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id)
    )
    assert [(c.id, c.token) for c in listed.configs] == [
        ("sealed-by-new", TOKEN),
        ("sealed-by-old", TOKEN),
    ]

    # The server without the new key cannot read what it sealed: a clear error, no crash.
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await before.stub.GetTaskPushNotificationConfig(
            a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=task.id, id="sealed-by-new")
        )
    assert raised.value.code() == grpc.StatusCode.INTERNAL
    assert error_reason(raised.value) == "INTERNAL_ERROR"
    details = raised.value.details() or ""
    assert "'sealed-by-new'" in details and "create it again" in details
    assert SEALED_PREFIX not in details and "gAAAA" not in details
    with pytest.raises(grpc.aio.AioRpcError) as listing:
        await before.stub.ListTaskPushNotificationConfigs(
            a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
    assert listing.value.code() == grpc.StatusCode.INTERNAL

    # It delivers the task's events (it runs the task): to the config it can open, with its
    # credentials; the other is left out, with one log line naming it.
    with caplog.at_level(logging.WARNING, logger="a2a_grpc.server.tasks.sealing"):
        agent.go.set()
        (delivered,) = await receivers[0].wait_for(1)
    assert delivered.headers["Authorization"] == f"Bearer {CREDENTIALS}"
    lines = [r.getMessage() for r in caplog.records if r.name == "a2a_grpc.server.tasks.sealing"]
    assert len(lines) == 1
    assert "'sealed-by-new' of task" in lines[0] and "its webhook is not called" in lines[0]
    assert receivers[1].attempts == 0


async def reseal(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`a2a-grpc store reseal ARGS` (its own event loop, in a thread): status, stdout, stderr."""
    code = await asyncio.to_thread(cli_main, ["store", "reseal", *args])
    out, err = capsys.readouterr()
    return code, out, err


async def test_store_reseal_seals_every_config_with_the_first_key(
    make_server: Factory,
    store_url: str,
    receivers: list[Receiver],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    old, new, foreign = Fernet.generate_key(), Fernet.generate_key(), Fernet.generate_key()
    shared: dict[str, Any] = {"store": store_url, "allow_private_webhooks": True}
    sealing = await make_server(agent=Gated(), push_credentials=keys(old), **shared)
    plain = await make_server(agent=Gated(), **shared)
    elsewhere = await make_server(agent=Gated(), push_credentials=keys(foreign), **shared)
    task = await start_gated(sealing)
    url = receivers[0].url
    await create(sealing, task.id, "by-old", url)
    await create(plain, task.id, "in-plain-text", url)
    await create(elsewhere, task.id, "by-foreign", url)
    await sealing.stub.CreateTaskPushNotificationConfig(
        a2a_pb2.TaskPushNotificationConfig(task_id=task.id, id="no-secret", url=url)
    )
    assert CREDENTIALS.encode() in await stored(plain, task.id, "in-plain-text")

    rotated = f"{new.decode()},{old.decode()}"
    code, out, err = await reseal(capsys, store_url, f"--push-credentials-keys={rotated}")
    assert code == 2, err
    assert out.strip().endswith(
        ": sealed 2 push configs again with the first of 2 keys; 1 were already (or hold no "
        "secret); 0 were replaced meanwhile by a server (left as it wrote them)"
    )
    (unreadable,) = err.strip().splitlines()
    assert unreadable.startswith("a2a-grpc store reseal: push notification config 'by-foreign'")
    for config_id in ("by-old", "in-plain-text"):
        raw = await stored(sealing, task.id, config_id)
        assert CREDENTIALS.encode() not in raw and TOKEN.encode() not in raw
        opened = PushConfigCodec(keys(new)).decode(raw)  # the new key alone opens it now
        assert (opened.token, opened.authentication.credentials) == (TOKEN, CREDENTIALS)

    await sealing.stub.DeleteTaskPushNotificationConfig(
        a2a_pb2.DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="by-foreign")
    )
    key_file = tmp_path / "push-keys"
    key_file.write_text(f"{new.decode()}\n{old.decode()}\n")
    monkeypatch.setenv("A2A_GRPC_PUSH_CREDENTIALS_KEYS_FILE", str(key_file))
    code, out, err = await reseal(capsys, store_url)
    assert (code, err) == (0, "")
    assert ": sealed 0 push configs again with the first of 2 keys; 3 were already" in out
    code, out, err = await reseal(capsys, "redis://:pw@127.0.0.1:1")  # nothing listens there
    assert code == 2 and out == ""
    assert err.startswith("a2a-grpc store reseal: redis://:***@127.0.0.1:1: ")
    assert len(err.strip().splitlines()) == 1


def test_serve_on_a_shared_store_warns_once_without_keys(redis_server: Any, tmp_path: Path) -> None:
    warning = "push configs' token and credentials are stored in plain text in the task store"
    options = ("--port", "0", "--http-port", "-1", "--store", redis_server.url)
    with serving(*options) as plain:
        pass
    assert plain.stderr.count(warning) == 1, plain.stderr
    key_file = tmp_path / "push-keys"
    key_file.write_text(Fernet.generate_key().decode() + "\n")
    env = {"A2A_GRPC_PUSH_CREDENTIALS_KEYS_FILE": str(key_file)}
    with serving(*options, env=env) as sealed:
        pass
    assert warning not in sealed.stderr
    assert "A2A_GRPC_PUSH_CREDENTIALS_KEYS_FILE" in sealed.lines[-2]  # set by the environment
