"""Reloading bearer tokens and TLS files while the server runs, in process (the SIGHUP path
through `a2a-grpc serve` is in test_serve_reload_and_logs.py)."""

from __future__ import annotations

import ssl
from pathlib import Path

import aiohttp
import grpc
import pytest

from a2a_grpc.generated import a2a_pb2_grpc
from a2a_grpc.server.app import RunningServer
from a2a_grpc.server.transports.http.server import CARD_PATH
from a2a_grpc.server.trust.tls import TlsFiles
from tests.integration.certs import Authority
from tests.integration.conftest import Factory, send_request


async def send_with(running: RunningServer, token: str) -> grpc.StatusCode:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        try:
            await stub.SendMessage(send_request(), metadata=(("authorization", f"Bearer {token}"),))
        except grpc.aio.AioRpcError as exc:
            return exc.code()
        return grpc.StatusCode.OK


async def http_status_with(running: RunningServer, token: str) -> int:
    """The HTTP status of an HTTP+JSON ListTasks with `token`."""
    assert running.http_server is not None
    headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}
    async with (
        aiohttp.ClientSession() as session,
        session.get(running.http_server.base_url + "/tasks", headers=headers) as response,
    ):
        return response.status


async def test_new_tokens_replace_the_old_ones_on_every_transport(make_server: Factory) -> None:
    harness = await make_server(tokens={"old-token": "alice"}, http_port=0)
    running = harness.running
    assert await send_with(running, "old-token") == grpc.StatusCode.OK
    assert await http_status_with(running, "old-token") == 200
    running.reload_tokens({"new-token": "alice"})
    assert await send_with(running, "new-token") == grpc.StatusCode.OK
    assert await send_with(running, "old-token") == grpc.StatusCode.UNAUTHENTICATED
    assert await http_status_with(running, "new-token") == 200
    assert await http_status_with(running, "old-token") == 401


async def test_tokens_cannot_be_emptied_or_added_to_a_server_without_them(
    make_server: Factory,
) -> None:
    harness = await make_server(tokens={"old-token": "alice"})
    with pytest.raises(ValueError, match="at least one token"):
        harness.running.reload_tokens({})
    assert await send_with(harness.running, "old-token") == grpc.StatusCode.OK
    open_server = await make_server()
    with pytest.raises(ValueError, match="started without bearer tokens"):
        open_server.running.reload_tokens({"t": "alice"})


async def tls_send(running: RunningServer, ca: bytes) -> grpc.StatusCode:
    credentials = grpc.ssl_channel_credentials(root_certificates=ca)
    async with grpc.aio.secure_channel(f"127.0.0.1:{running.port}", credentials) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        try:
            await stub.SendMessage(send_request(), timeout=10)
        except grpc.aio.AioRpcError as exc:
            return exc.code()
        return grpc.StatusCode.OK


async def https_card_status(running: RunningServer, ca: bytes) -> int | str:
    context = ssl.create_default_context(cadata=ca.decode())
    assert running.http_server is not None
    url = running.http_server.base_url + CARD_PATH
    async with aiohttp.ClientSession() as session:
        try:
            async with session.get(url, ssl=context) as response:
                return response.status
        except aiohttp.ClientConnectorCertificateError:
            return "certificate refused"


async def test_a_new_certificate_serves_new_handshakes_on_both_ports(
    make_server: Factory,
) -> None:
    first, second = Authority("first CA"), Authority("second CA")
    pem = first.issue("server", server=True)
    harness = await make_server(tls=TlsFiles(pem.certificate, pem.key), http_port=0)
    running = harness.running
    assert await tls_send(running, first.certificate) == grpc.StatusCode.OK
    assert await https_card_status(running, first.certificate) == 200

    renewed = second.issue("server", server=True)
    running.reload_tls(TlsFiles(renewed.certificate, renewed.key))
    assert await tls_send(running, second.certificate) == grpc.StatusCode.OK
    assert await tls_send(running, first.certificate) == grpc.StatusCode.UNAVAILABLE
    assert await https_card_status(running, second.certificate) == 200
    assert await https_card_status(running, first.certificate) == "certificate refused"


async def test_a_mismatched_key_is_refused_and_the_old_certificate_kept(
    make_server: Factory,
) -> None:
    ca = Authority()
    pem, other = ca.issue("server", server=True), ca.issue("other", server=True)
    harness = await make_server(tls=TlsFiles(pem.certificate, pem.key), http_port=0)
    with pytest.raises(ValueError, match="does not match"):
        harness.running.reload_tls(TlsFiles(pem.certificate, other.key))
    broken = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
    with pytest.raises(ValueError, match="--tls-cert"):
        harness.running.reload_tls(TlsFiles(pem.certificate + broken, pem.key))
    with pytest.raises(ValueError, match="cannot be added"):
        harness.running.reload_tls(TlsFiles(pem.certificate, pem.key, client_ca=ca.certificate))
    assert await tls_send(harness.running, ca.certificate) == grpc.StatusCode.OK
    assert await https_card_status(harness.running, ca.certificate) == 200


async def test_a_new_client_ca_decides_which_clients_get_in(
    make_server: Factory, tmp_path: Path
) -> None:
    server_ca, old_clients, new_clients = Authority(), Authority("old"), Authority("new")
    pem = server_ca.issue("server", server=True)
    harness = await make_server(
        tls=TlsFiles(pem.certificate, pem.key, client_ca=old_clients.certificate), http_port=0
    )
    running = harness.running
    running.reload_tls(TlsFiles(pem.certificate, pem.key, client_ca=new_clients.certificate))
    for clients, expected in ((new_clients, 200), (old_clients, "refused")):
        client = clients.issue("alice")
        context = ssl.create_default_context(cadata=server_ca.certificate.decode())
        (tmp_path / "cert.pem").write_bytes(client.certificate)
        (tmp_path / "key.pem").write_bytes(client.key)
        context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
        assert running.http_server is not None
        url = running.http_server.base_url + CARD_PATH
        async with aiohttp.ClientSession() as session:
            try:
                async with session.get(url, ssl=context) as response:
                    status: int | str = response.status
            except aiohttp.ClientError:
                status = "refused"
        assert status == expected, clients
