"""`a2a-grpc keys new --kid KID`: a message-signing key pair, without hand-work.

Writes the private key as PKCS#8 PEM (mode 0600; never over an existing file) and adds the public
key, as a JWK with `kid`, `use: "sig"` and `alg`, to a JWKS file: a new file, or an existing one
(so that during a rotation the card can publish the old and the new key side by side; a kid
already in it is refused). The PEM is what `a2a-grpc send --sign-key` and `MessageSigner` sign
with; the JWKS is what `serve --publish-signing-keys` puts on the card (or what a recipient's
`serve --signature-keys` trusts). Exit status 0, or 2 with one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from a2a_grpc.core.jose import KeyFormatError, PrivateKey, load_jwks, public_jwk

ALGORITHMS = ("EdDSA", "ES256")


def parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(
        prog="a2a-grpc keys", description="message-signing keys (signed-messages extension)"
    )
    commands = command.add_subparsers(dest="command", required=True, metavar="COMMAND")
    new = commands.add_parser(
        "new",
        help="write a private key PEM and add its public key to a JWKS",
        description="Write a private key PEM and add its public key to a JWKS file.",
    )
    new.add_argument("--kid", required=True, help="the key id signatures will name")
    new.add_argument(
        "--alg",
        choices=ALGORITHMS,
        default="EdDSA",
        help="EdDSA (Ed25519) or ES256 (P-256) (%(default)s)",
    )
    new.add_argument("--key", metavar="PEM", help="private key file to write (default: KID.pem)")
    new.add_argument(
        "--jwks",
        metavar="FILE",
        help="JWKS file to create or add the public key to (default: KID.jwks.json)",
    )
    return command


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    try:
        key_path, jwks_path = new_key(args.kid, args.alg, args.key, args.jwks)
    except ValueError as exc:
        print(f"a2a-grpc keys: {exc}", file=sys.stderr)
        return 2
    print(f"private key {key_path} (keep it secret), public key {args.kid!r} in {jwks_path}")
    return 0


def new_key(kid: str, alg: str, key_file: str | None, jwks_file: str | None) -> tuple[Path, Path]:
    """Makes the key pair as the module docstring says; returns (PEM path, JWKS path).

    ValueError naming the problem: an empty kid, an existing PEM, a JWKS that is not one or
    already holds `kid`, a file that cannot be written. Nothing is written then.
    """
    if not kid.strip():
        raise ValueError("--kid must not be empty")
    key_path = Path(key_file or f"{kid}.pem")
    jwks_path = Path(jwks_file or f"{kid}.jwks.json")
    if key_path.exists():
        raise ValueError(f"{key_path} exists; choose another --key (keys are never overwritten)")
    keys: list[object] = []
    if jwks_path.exists():
        try:
            existing = load_jwks(jwks_path)
        except KeyFormatError as exc:
            raise ValueError(f"--jwks {jwks_path}: {exc}") from None
        if kid in existing:
            raise ValueError(f"{jwks_path} already holds a key with kid {kid!r}")
        keys = list(existing.to_jwks()["keys"])
    private: PrivateKey = (
        Ed25519PrivateKey.generate() if alg == "EdDSA" else ec.generate_private_key(ec.SECP256R1())
    )
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    document = {"keys": [*keys, public_jwk(private, kid)]}
    try:
        descriptor = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as file:
            file.write(pem)
    except OSError as exc:
        raise ValueError(f"cannot write {key_path}: {exc.strerror}") from None
    try:
        staged = jwks_path.with_name(jwks_path.name + ".tmp")
        staged.write_text(json.dumps(document, indent=2) + "\n")
        staged.replace(jwks_path)  # whole or not at all
    except OSError as exc:
        key_path.unlink(missing_ok=True)
        raise ValueError(f"cannot write {jwks_path}: {exc.strerror}") from None
    return key_path, jwks_path
