"""The gRPC half of TLS: dynamic server credentials that follow the TLS files' reloads."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import grpc

from a2a_grpc.server.trust.tls import ServerCertificates, TlsFiles


def grpc_credentials(certificates: ServerCertificates) -> grpc.ServerCredentials:
    """Credentials for the gRPC port that follow `certificates.replace`: grpc asks at each
    handshake (on its own threads) whether the configuration changed."""
    seen = certificates.generation

    def fetch() -> grpc.ServerCertificateConfiguration | None:
        nonlocal seen
        generation = certificates.generation
        if generation == seen:
            return None  # grpc keeps the configuration it has
        seen = generation
        return configuration(certificates.files)

    return grpc.dynamic_ssl_server_credentials(
        configuration(certificates.files),
        # grpc takes None for "no change" (its documentation); types-grpcio does not say so.
        cast("Callable[[], grpc.ServerCertificateConfiguration]", fetch),
        require_client_authentication=certificates.files.client_ca is not None,
    )


def configuration(files: TlsFiles) -> grpc.ServerCertificateConfiguration:
    return grpc.ssl_server_certificate_configuration(
        [(files.private_key, files.certificate_chain)], root_certificates=files.client_ca
    )
