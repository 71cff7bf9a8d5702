"""Files the client follows without sockets: token files and TLS files, what counts as a change,
and what a change caught half made keeps."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from a2a_grpc.client import CredentialsError, TlsConfig, TokenFile
from a2a_grpc.client.credentials import file_signature, racy
from tests.integration.certs import Authority


def age(path: Path, seconds: int = 10) -> None:
    """Sets the file's mtime `seconds` back, out of the window where a signature is not trusted."""
    then = os.stat(path).st_mtime_ns - seconds * 1_000_000_000
    os.utime(path, ns=(then, then))


async def test_a_token_file_gives_an_authorization_entry(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("  abc.def.ghi\n")
    assert await TokenFile(path).metadata() == (("authorization", "Bearer abc.def.ghi"),)
    assert "abc" not in repr(TokenFile(path))


def test_a_fresh_file_is_racy_and_an_old_one_is_not(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("x")
    assert racy(file_signature(path))
    age(path)
    assert not racy(file_signature(path)) and not racy(None)


def test_a_token_file_that_is_not_text_is_named(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(CredentialsError, match=f"the token file {path} is not UTF-8"):
        TokenFile(path).token()


class Files:
    def __init__(self, directory: Path) -> None:
        self.ca = Authority()
        self.ca_file, self.cert, self.key = (directory / n for n in ("ca.pem", "c.pem", "c.key"))
        self.ca_file.write_bytes(self.ca.certificate)

    def issue(self, name: str) -> tuple[bytes, bytes]:
        pem = self.ca.issue(name)
        self.cert.write_bytes(pem.certificate)
        self.key.write_bytes(pem.key)
        return pem.certificate, pem.key

    def config(self, **kwargs: bool) -> TlsConfig:
        return TlsConfig.from_files(self.ca_file, self.cert, self.key, **kwargs)


def test_an_unchanged_tls_config_is_itself(tmp_path: Path) -> None:
    files = Files(tmp_path)
    files.issue("alice")
    for path in (files.ca_file, files.cert, files.key):
        age(path)
    config = files.config()
    assert config.current() is config


def test_rotated_tls_files_make_a_new_config(tmp_path: Path) -> None:
    files = Files(tmp_path)
    files.issue("alice")
    config = files.config()
    certificate, key = files.issue("bob")
    fresh = config.current()
    assert fresh != config
    assert fresh.client_certificate == certificate and fresh.client_key == key
    assert fresh.current() == fresh  # the same bytes again: an equal config


def test_a_half_written_rotation_keeps_the_old_config(tmp_path: Path) -> None:
    files = Files(tmp_path)
    files.issue("alice")
    config = files.config()
    files.cert.write_bytes(files.ca.issue("bob").certificate)  # its key not written yet
    assert config.current() is config
    files.key.write_bytes(b"")  # truncated, mid-rewrite
    assert config.current() is config
    files.key.unlink()  # missing for a moment
    assert config.current() is config


def test_watch_false_reads_once(tmp_path: Path) -> None:
    files = Files(tmp_path)
    files.issue("alice")
    config = files.config(watch=False)
    files.issue("bob")
    assert config.paths is None and config.current() is config
