"""Push configs' secrets sealed at rest (server/tasks/sealing.py): the key file, the codec both
durable stores write and read configs with, rotation, and a value no key opens. No sockets; the
stores' own tests (tests/integration/test_push_credentials_at_rest.py) read the raw rows."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from a2a_grpc.cli.store import main as store_main
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.sealing import (
    SEALED_PREFIX,
    CredentialKeys,
    KeyFileError,
    PushConfigCodec,
    UnreadableCredentialsError,
)

TOKEN = "token-3f9c1a"
CREDENTIALS = "credentials-8b2d7e"


def config(**fields: object) -> a2a_pb2.TaskPushNotificationConfig:
    defaults: dict[str, object] = {
        "id": "c1",
        "task_id": "t1",
        "url": "https://hooks.example/a",
        "token": TOKEN,
        "authentication": a2a_pb2.AuthenticationInfo(scheme="Bearer", credentials=CREDENTIALS),
    }
    return a2a_pb2.TaskPushNotificationConfig(**{**defaults, **fields})  # type: ignore[arg-type]


def key_file(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "keys"
    path.write_text("\n".join(lines) + "\n")
    return path


def new_key() -> str:
    return Fernet.generate_key().decode()


def test_a_sealed_config_holds_neither_secret_and_reads_back_as_written() -> None:
    codec = PushConfigCodec(CredentialKeys([new_key().encode()]))
    raw = codec.encode(config())
    assert TOKEN.encode() not in raw and CREDENTIALS.encode() not in raw
    stored = a2a_pb2.TaskPushNotificationConfig.FromString(raw)
    assert stored.token.startswith(SEALED_PREFIX)
    assert stored.authentication.credentials.startswith(SEALED_PREFIX)
    # The rest stays readable: the stores list and replace configs by it.
    assert (stored.url, stored.authentication.scheme) == (config().url, "Bearer")
    assert codec.decode(raw) == config()


def test_empty_secrets_stay_empty_and_without_keys_nothing_is_sealed() -> None:
    sealing = PushConfigCodec(CredentialKeys([new_key().encode()]))
    bare = config(token="", authentication=None)
    assert sealing.encode(bare) == bare.SerializeToString()
    plain = PushConfigCodec(None)
    assert plain.encode(config()) == config().SerializeToString()
    assert plain.decode(config().SerializeToString()) == config()


def test_a_config_stored_in_plain_text_before_the_key_is_still_read() -> None:
    codec = PushConfigCodec(CredentialKeys([new_key().encode()]))
    assert codec.decode(config().SerializeToString()) == config()


def test_rotation_the_first_key_seals_and_every_key_opens(tmp_path: Path) -> None:
    old, new = new_key(), new_key()
    before = PushConfigCodec(CredentialKeys.from_file(key_file(tmp_path, old)))
    sealed_by_old = before.encode(config())
    rotated = PushConfigCodec(CredentialKeys.from_file(key_file(tmp_path, new, old)))
    assert rotated.decode(sealed_by_old) == config()
    sealed_by_new = rotated.encode(config(id="c2"))
    assert PushConfigCodec(CredentialKeys([new.encode()])).decode(sealed_by_new) == config(id="c2")
    with pytest.raises(UnreadableCredentialsError):
        before.decode(sealed_by_new)


def test_a_value_no_key_opens_is_a_clear_error_without_the_sealed_text() -> None:
    raw = PushConfigCodec(CredentialKeys([new_key().encode()])).encode(config())
    sealed = a2a_pb2.TaskPushNotificationConfig.FromString(raw).token
    with pytest.raises(UnreadableCredentialsError) as raised:
        PushConfigCodec(CredentialKeys([new_key().encode()])).decode(raw)
    message = str(raised.value)
    assert "'c1' of task t1" in message
    assert "none of the server's 1 keys (--push-credentials-keys[-file]) opens it" in message
    assert sealed.removeprefix(SEALED_PREFIX) not in message
    assert (raised.value.task_id, raised.value.config_id) == ("t1", "c1")
    with pytest.raises(UnreadableCredentialsError, match="this server has no key"):
        PushConfigCodec(None).decode(raw)


def test_delivery_leaves_out_a_config_no_key_opens_with_one_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    foreign = PushConfigCodec(CredentialKeys([new_key().encode()])).encode(config(id="lost"))
    codec = PushConfigCodec(CredentialKeys([new_key().encode()]))
    kept = codec.encode(config(id="kept"))
    with caplog.at_level(logging.WARNING, logger="a2a_grpc.server.tasks.sealing"):
        deliverable = codec.decode_deliverable([foreign, kept])
        for _ in range(3):  # the task's next events: delivered to the same configs
            assert [c.id for c in codec.decode_deliverable([foreign, kept])] == ["kept"]
    assert [c.id for c in deliverable] == ["kept"]
    assert deliverable[0].authentication.credentials == CREDENTIALS
    (record,) = caplog.records
    assert "'lost' of task t1" in record.getMessage()
    assert "its webhook is not called" in record.getMessage()
    other = PushConfigCodec(CredentialKeys([new_key().encode()])).encode(config(id="lost-too"))
    with caplog.at_level(logging.WARNING, logger="a2a_grpc.server.tasks.sealing"):
        codec.decode_deliverable([other, foreign])
    assert ["'lost-too' of task t1" in r.getMessage() for r in caplog.records] == [False, True]


def test_keys_come_one_a_line_or_comma_separated_comments_skipped(tmp_path: Path) -> None:
    first, second, third = new_key(), new_key(), new_key()
    path = key_file(tmp_path, "# sealing key", first, "", f"{second}, {third}")
    keys = CredentialKeys.from_file(path)
    assert keys.count == 3
    assert repr(keys) == "CredentialKeys(3 keys)"
    assert CredentialKeys.from_text(f"{first},{second}").count == 2
    # The first seals: what it sealed opens with it alone.
    sealed = keys.seal("value")
    assert CredentialKeys([first.encode()]).open(sealed) == "value"


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        ((), "holds no key"),
        (("# only a comment",), "holds no key"),
        (("not-a-fernet-key-but-a-secret",), "key 1 (line 1) is not a Fernet key"),
        (("# first", "", "x" * 44), "key 1 (line 3) is not a Fernet key"),
    ],
)
def test_an_unusable_key_file_says_why_without_its_content(
    tmp_path: Path, lines: tuple[str, ...], expected: str
) -> None:
    path = key_file(tmp_path, *lines)
    with pytest.raises(KeyFileError) as raised:
        CredentialKeys.from_file(path)
    message = str(raised.value)
    assert message.startswith(f"--push-credentials-keys-file {path}: ")
    assert expected in message
    for line in lines:
        if line and not line.startswith("#"):
            assert line not in message


def test_a_bad_key_among_good_ones_is_named_by_its_place() -> None:
    with pytest.raises(KeyFileError) as raised:
        CredentialKeys.from_text(f"{new_key()},secret-not-a-key")
    message = str(raised.value)
    assert message.startswith("--push-credentials-keys: key 2 (line 1) is not a Fernet key")
    assert "secret-not-a-key" not in message


def test_a_key_file_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "absent"
    with pytest.raises(KeyFileError, match=f"{missing}: cannot read it: No such file"):
        CredentialKeys.from_file(missing)


def test_store_reseal_needs_a_url_keys_and_a_store_that_seals(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("A2A_GRPC_STORE", "A2A_GRPC_PUSH_CREDENTIALS_KEYS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("A2A_GRPC_PUSH_CREDENTIALS_KEYS_FILE", raising=False)

    def reseal(*args: str) -> tuple[int, str]:
        code = store_main(["reseal", *args])
        out, err = capsys.readouterr()
        assert out == ""
        (line,) = err.strip().splitlines()
        return code, line

    assert reseal() == (2, "a2a-grpc store reseal: give the store's URL (or set $A2A_GRPC_STORE)")
    code, line = reseal("redis://127.0.0.1:1")
    assert code == 2 and "give the keys: --push-credentials-keys-file FILE" in line
    code, line = reseal("redis://127.0.0.1:1", "--push-credentials-keys", "s3cret")
    assert code == 2 and "--push-credentials-keys: key 1 (line 1) is not a Fernet key" in line
    assert "s3cret" not in line
    code, line = reseal("memory://", f"--push-credentials-keys={new_key()}")
    assert code == 2 and "only a Redis or PostgreSQL store keeps push configs sealed" in line
