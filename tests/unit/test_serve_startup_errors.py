"""`a2a-grpc serve` refuses a configuration it cannot honour with one line, before it listens."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from a2a_grpc.server import cli
from tests.integration.certs import Authority


def _serve(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(["--port", "0", "--http-port", "-1", *argv])
    err = capsys.readouterr().err
    return code, err


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("a2a-grpc serve: ")
    return lines[0]


@pytest.mark.parametrize("content", ["{}", "", "not json"])
def test_token_file_without_tokens_is_a_start_up_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str
) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(content)
    code, err = _serve(["--auth-tokens", str(tokens)], capsys)
    assert code == 2
    assert "--auth-tokens" in _one_line(err)


def test_mismatched_tls_key_is_a_start_up_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ca = Authority()
    one, other = ca.issue("localhost", server=True), ca.issue("localhost", server=True)
    (tmp_path / "cert.pem").write_bytes(one.certificate)
    (tmp_path / "key.pem").write_bytes(other.key)
    (tmp_path / "junk.pem").write_bytes(b"not a pem")
    args = ["--tls-cert", str(tmp_path / "cert.pem"), "--tls-key"]
    code, err = _serve([*args, str(tmp_path / "key.pem")], capsys)
    assert code == 2
    assert "does not match" in _one_line(err)
    code, err = _serve([*args, str(tmp_path / "junk.pem")], capsys)
    assert code == 2
    assert "--tls-key" in _one_line(err)


def test_tls_chain_with_a_broken_certificate_after_the_first_is_a_start_up_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pem = Authority().issue("localhost", server=True)
    broken = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
    (tmp_path / "chain.pem").write_bytes(pem.certificate + broken)
    (tmp_path / "key.pem").write_bytes(pem.key)
    argv = ["--tls-cert", str(tmp_path / "chain.pem"), "--tls-key", str(tmp_path / "key.pem")]
    code, err = _serve(argv, capsys)
    assert code == 2
    assert "--tls-cert" in _one_line(err)


def test_tls_key_that_ssl_refuses_is_a_start_up_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)  # too small for ssl
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    (tmp_path / "cert.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    argv = ["--tls-cert", str(tmp_path / "cert.pem"), "--tls-key", str(tmp_path / "key.pem")]
    code, err = _serve(argv, capsys)
    assert code == 2
    line = _one_line(err)
    assert "--tls-cert" in line and "too small" in line


SECRET = "s3cr3t-pw"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--workers", "2", "--port", "5000"], "workers=2 needs a shared store"),
        (
            ["--workers", "2", "--port", "0", "--store", f"redis://:{SECRET}@127.0.0.1:1/0"],
            "workers=2 needs a fixed port, not 0",
        ),
        (["--store", f"ftp://u:{SECRET}@host"], "no store is registered for a ftp:// URL"),
        (["--task-lease", "0"], "task_lease must be more than 0"),
    ],
)
def test_replica_options_are_checked_before_anything_listens(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["--http-port", "-1", *argv])
    line = _one_line(capsys.readouterr().err)
    assert code == 2
    assert says in line and SECRET not in line


def test_an_unreachable_store_is_one_line_without_the_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, err = _serve(["--store", f"redis://:{SECRET}@127.0.0.1:1/0"], capsys)
    line = _one_line(err)
    assert code == 2
    assert "cannot reach the task store at redis://:***@127.0.0.1:1/0" in line
    assert SECRET not in line


def test_push_credential_keys_that_are_no_fernet_keys_stop_the_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key_file = tmp_path / "keys"
    key_file.write_text("# one key\nnot-a-key-but-a-secret\n")
    code, err = _serve(["--push-credentials-keys-file", str(key_file)], capsys)
    assert code == 2
    line = _one_line(err)
    assert f"--push-credentials-keys-file {key_file}: key 1 (line 2) is not a Fernet key" in line
    assert "not-a-key-but-a-secret" not in err
    code, err = _serve(["--push-credentials-keys", "s3cret"], capsys)
    assert code == 2
    assert "--push-credentials-keys: key 1 (line 1) is not a Fernet key" in _one_line(err)
    assert "s3cret" not in err
    code, err = _serve(["--push-credentials-keys-file", str(tmp_path / "absent")], capsys)
    assert code == 2
    assert "cannot read it: No such file or directory" in _one_line(err)


@pytest.mark.parametrize("principal", ["cert:alice", "jwt:https://idp|bob", "spiffe://td/x"])
def test_a_token_of_a_reserved_principal_is_a_start_up_error(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    principal: str,
) -> None:
    """A static token may not pass for a certificate's or a JWT's caller: one line, exit 2
    (from the file, or from A2A_GRPC_TOKENS), as a SIGHUP reload refuses it."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(f'{{"s3cret": "{principal}"}}')
    code, err = _serve(["--auth-tokens", str(tokens)], capsys)
    assert code == 2
    line = _one_line(err)
    assert f"--auth-tokens {tokens}: token principals may not start with" in line
    assert repr(principal) in line and "s3cret" not in line
    monkeypatch.setenv("A2A_GRPC_TOKENS", f"s3cret={principal}")
    code, err = _serve([], capsys)
    assert code == 2
    assert "A2A_GRPC_TOKENS: token principals may not start with" in _one_line(err)
