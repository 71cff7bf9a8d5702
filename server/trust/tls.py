"""The server's TLS files, and the certificates it serves with them: swappable while it runs.

`ServerCertificates` gives aiohttp one SSL context whose SNI callback, called on every handshake
(with or without a server name), moves the connection to the newest context, and counts its
`generation`, which gRPC's dynamic credentials follow (transports/grpc/tls.py). `replace` swaps
both; the connections already open keep the certificate they were made with.
"""

from __future__ import annotations

import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization


@dataclass(frozen=True)
class TlsFiles:
    """PEM contents for TLS; with `client_ca`, clients must present a certificate it signed."""

    certificate_chain: bytes
    private_key: bytes
    client_ca: bytes | None = None

    def check(self) -> None:
        """ValueError naming the problem when the files cannot serve TLS: not PEM (any
        certificate of the chain), or a key that does not belong to the chain's first
        certificate (grpc would only fail to bind), or what ssl refuses."""
        try:
            certificate = x509.load_pem_x509_certificate(self.certificate_chain)
        except ValueError:
            raise ValueError("--tls-cert is not a PEM certificate") from None
        try:  # every certificate of the chain, not only the first: ssl would fail on a bad one
            x509.load_pem_x509_certificates(self.certificate_chain)
        except ValueError:
            raise ValueError(
                "--tls-cert holds a certificate that is not valid PEM after its first one"
            ) from None
        try:
            key = serialization.load_pem_private_key(self.private_key, password=None)
        except (ValueError, TypeError):
            raise ValueError("--tls-key is not an unencrypted PEM private key") from None
        if _public_bytes(key.public_key()) != _public_bytes(certificate.public_key()):
            raise ValueError(
                "--tls-key does not match --tls-cert: the key belongs to another certificate"
            )
        if self.client_ca is not None:
            try:
                x509.load_pem_x509_certificates(self.client_ca)
            except ValueError:
                raise ValueError("--client-ca is not a PEM certificate bundle") from None
        self.ssl_context()  # what ssl itself refuses (a key too small for its security level)

    def ssl_context(self) -> ssl.SSLContext:
        """The same certificate for the HTTP port (card, JSON-RPC, HTTP+JSON), with the same
        client certificate requirement as gRPC; ValueError naming what ssl refuses."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        # The ssl module loads a chain from files only: a private directory, gone at once.
        with tempfile.TemporaryDirectory() as directory:
            chain, key = Path(directory, "chain.pem"), Path(directory, "key.pem")
            chain.write_bytes(self.certificate_chain)
            key.touch(mode=0o600)
            key.write_bytes(self.private_key)
            try:
                context.load_cert_chain(chain, key)
            except ssl.SSLError as exc:
                raise ValueError(f"--tls-cert and --tls-key: ssl refuses them: {exc}") from None
        if self.client_ca is not None:
            try:
                context.load_verify_locations(cadata=self.client_ca.decode())
            except ssl.SSLError as exc:
                raise ValueError(f"--client-ca: ssl refuses it: {exc}") from None
            context.verify_mode = ssl.CERT_REQUIRED
        return context


def _public_bytes(key: Any) -> bytes:
    return bytes(
        key.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


class ServerCertificates:
    """The certificate, key and client CA the server presents and checks, for gRPC and HTTP.

    Whether clients must present a certificate (a client CA) is fixed at start: grpc sets it
    once for the port, so `replace` can change the client CA but not add or remove it.
    """

    def __init__(self, files: TlsFiles) -> None:
        files.check()
        self.files = files
        self.generation = 0
        """Counts `replace`s: grpc's credentials rebuild their configuration when it moves."""
        self._served = files.ssl_context()
        self._current = self._served
        self._served.sni_callback = self._choose

    @property
    def ssl_context(self) -> ssl.SSLContext:
        """The context to serve HTTPS with; it follows `replace`."""
        return self._served

    def replace(self, files: TlsFiles) -> None:
        """New handshakes use `files` from now on; ValueError naming the problem (and nothing
        changes) when they cannot serve TLS or would add or remove the client CA."""
        files.check()
        if (files.client_ca is None) != (self.files.client_ca is None):
            raise ValueError(
                "--client-ca cannot be added or removed while the server runs; restart it"
            )
        context = files.ssl_context()
        self._current = context
        self.files = files
        self.generation += 1  # after `files`: a reader that sees the new count reads new files

    def _choose(self, connection: Any, server_name: str | None, context: ssl.SSLContext) -> None:
        if self._current is not context:
            connection.context = self._current
