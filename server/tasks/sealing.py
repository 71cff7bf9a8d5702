"""Push-config secrets sealed at rest: how a durable store writes and reads a push config.

A push config's `token` and `authentication.credentials` open (or vouch for) a webhook, so a
store that keeps configs where others can read them (Redis, PostgreSQL) seals both with Fernet
(AES-128-CBC with HMAC-SHA256; `cryptography`) under the server's keys
(`serve --push-credentials-keys-file`, or `--push-credentials-keys`). The rest of the config
(its URL, scheme, ids) stays readable, so the stores still list and replace configs.

- **Keys.** Fernet keys (`Fernet.generate_key()`, 44 characters of URL-safe base64), one a
  line or separated by commas; blank lines and lines starting with `#` are skipped. The first
  key seals every value written; every key opens (`MultiFernet`). Rotation across replicas
  (docs/push.md): add the new key second and roll the servers out (all open it, none seals
  with it yet), then move it first and roll out again (all seal with it), then drop the old
  key once nothing sealed with it is stored.
- **Stored form.** A sealed value is `SEALED_PREFIX` and the Fernet token, in the field it came
  from; the config stays a valid `TaskPushNotificationConfig`. The prefix starts with the
  record separator (U+001E), which no caller's value can: the token and the credentials are
  HTTP header values, printable ASCII (push_config_rpcs.py checks them). So a value is sealed
  exactly when it starts with the prefix, and values stored in plain text (before keys were
  given) are still read, and sealed when their config is next written.
- **A value no key opens** (its key was dropped, or the store was written under other keys)
  raises `UnreadableCredentialsError` with a message naming the task and the config, never
  the sealed text. The stores' readers decide what it means: delivery skips that webhook (one
  log line), Get and List answer an error naming the config to replace.
- **No keys.** Values are written in plain text; a sealed one cannot be read.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from a2a_grpc.generated import a2a_pb2

__all__ = [
    "SEALED_PREFIX",
    "CredentialKeys",
    "KeyFileError",
    "PushConfigCodec",
    "Resealed",
    "UnreadableCredentialsError",
]

log = logging.getLogger(__name__)

SEALED_PREFIX = "\x1efernet:"
"""What a sealed value starts with: the record separator, which no header value holds, then
the scheme."""
KEYS_OPTION = "--push-credentials-keys"
"""The serve option giving the keys (`--push-credentials-keys-file`: from a file), for
messages."""
NOT_A_KEY = (
    "is not a Fernet key (32 bytes in URL-safe base64, 44 characters: python -c 'from "
    "cryptography.fernet import Fernet; print(Fernet.generate_key().decode())')"
)


class KeyFileError(ValueError):
    """Keys (or their file) that cannot be used; the message says why and which key on which
    line, never a key."""


class UnreadableCredentialsError(Exception):
    """A stored push config holds a sealed value none of the server's keys opens."""

    def __init__(self, task_id: str, config_id: str, reason: str) -> None:
        super().__init__(
            f"push notification config {config_id!r} of task {task_id}: its token or "
            f"credentials cannot be read: {reason}"
        )
        self.task_id = task_id
        self.config_id = config_id


class CredentialKeys:
    """Fernet keys: the first seals, every one opens. Its repr shows how many, never a key."""

    def __init__(self, keys: Sequence[bytes]) -> None:
        """KeyFileError when there is no key or one is not a Fernet key."""
        if not keys:
            raise KeyFileError("no key: give at least one Fernet key")
        fernets = []
        for number, key in enumerate(keys, 1):
            try:
                fernets.append(Fernet(key))
            except ValueError:
                raise KeyFileError(f"key {number} {NOT_A_KEY}") from None
        self._fernet = MultiFernet(fernets)
        self._first = fernets[0]
        self.count = len(fernets)
        """How many keys open values (the first also seals)."""

    @classmethod
    def from_text(cls, text: str, source: str = KEYS_OPTION) -> CredentialKeys:
        """The keys `text` lists, in order: one a line or separated by commas (so one
        environment variable holds several); blank lines and lines starting with `#` skipped.
        KeyFileError starting with `source` and naming the key and its line when there is no
        key or one is bad (never showing it)."""
        keys: list[bytes] = []
        for line_number, line in enumerate(text.splitlines(), 1):
            if line.strip().startswith("#"):
                continue
            for item in line.split(","):
                key = item.strip().encode()
                if not key:
                    continue
                try:
                    Fernet(key)
                except ValueError:
                    raise KeyFileError(
                        f"{source}: key {len(keys) + 1} (line {line_number}) {NOT_A_KEY}"
                    ) from None
                keys.append(key)
        if not keys:
            raise KeyFileError(
                f"{source}: holds no key (Fernet keys, one a line or separated by commas, the "
                "sealing one first; lines starting with # are comments)"
            )
        return cls(keys)

    @classmethod
    def from_file(cls, path: str | Path) -> CredentialKeys:
        """The keys a key file lists (`from_text`); KeyFileError naming the file when it cannot
        be read."""
        source = f"{KEYS_OPTION}-file {path}"
        try:
            text = Path(path).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise KeyFileError(f"{source}: cannot read it: {reason}") from None
        return cls.from_text(text, source)

    def seal(self, value: str) -> str:
        """`value` sealed with the first key, as stored."""
        return SEALED_PREFIX + self._fernet.encrypt(value.encode()).decode()

    def open(self, stored: str) -> str:
        """The value `seal` made `stored` from; InvalidToken when no key opens it."""
        return self._fernet.decrypt(stored[len(SEALED_PREFIX) :].encode()).decode()

    def sealed_with_first(self, stored: str) -> bool:
        """Whether `stored` (a sealed value) is sealed with the first key."""
        try:
            self._first.decrypt(stored[len(SEALED_PREFIX) :].encode())
        except InvalidToken:
            return False
        return True

    def __repr__(self) -> str:
        return f"CredentialKeys({self.count} keys)"


@dataclass
class Resealed:
    """What re-sealing a store's push configs did (`a2a-grpc store reseal`)."""

    resealed: int = 0
    """Configs written again, sealed with the first key."""
    current: int = 0
    """Configs sealed with the first key already, or without a secret."""
    changed: int = 0
    """Configs a server replaced while they were being resealed (left as it wrote them)."""
    unreadable: list[str] = field(default_factory=list)
    """One line per config no key opens (left as stored)."""

    def count(self, outcome: bool | None) -> None:
        """Counts one config: resealed (True), replaced meanwhile (False), current (None)."""
        if outcome is None:
            self.current += 1
        elif outcome:
            self.resealed += 1
        else:
            self.changed += 1


WARNED_CONFIGS = 1024
"""Unreadable configs a codec remembers having warned about: a config met again after this
many others is warned about again (bounded memory against a store full of them)."""


class PushConfigCodec:
    """A push config as a durable store keeps it (bytes) and back, its secrets sealed with
    `keys` (None: kept as written)."""

    def __init__(self, keys: CredentialKeys | None) -> None:
        self.keys = keys
        self._warned: OrderedDict[tuple[str, str], None] = OrderedDict()
        """The unreadable configs delivery has warned about (the latest WARNED_CONFIGS)."""

    def encode(self, config: a2a_pb2.TaskPushNotificationConfig) -> bytes:
        """The bytes to store: the config with its token and credentials sealed (when there
        are keys and they are not empty). `config` is not changed."""
        keys = self.keys
        if keys is None or not (config.token or config.authentication.credentials):
            return config.SerializeToString()
        stored = a2a_pb2.TaskPushNotificationConfig()
        stored.CopyFrom(config)
        if stored.token:
            stored.token = keys.seal(stored.token)
        if stored.authentication.credentials:
            stored.authentication.credentials = keys.seal(stored.authentication.credentials)
        return stored.SerializeToString()

    def decode(self, raw: bytes) -> a2a_pb2.TaskPushNotificationConfig:
        """The config `encode` stored as `raw`, its secrets opened; UnreadableCredentialsError
        when one is sealed and no key opens it (or there are no keys)."""
        config = a2a_pb2.TaskPushNotificationConfig.FromString(raw)
        if config.token.startswith(SEALED_PREFIX):
            config.token = self._open(config, config.token)
        credentials = config.authentication.credentials
        if credentials.startswith(SEALED_PREFIX):
            config.authentication.credentials = self._open(config, credentials)
        return config

    def decode_deliverable(self, raws: Sequence[bytes]) -> list[a2a_pb2.TaskPushNotificationConfig]:
        """The configs of `raws` that can be delivered to: one whose secrets cannot be opened
        is left out (its webhook is not called: calling it without its credentials, or with
        sealed text, would be wrong either way), with one warning saying which the first time
        this codec meets it, not one for each of its task's events."""
        configs = []
        for raw in raws:
            try:
                configs.append(self.decode(raw))
            except UnreadableCredentialsError as exc:
                self._warn_once(exc)
        return configs

    def _warn_once(self, exc: UnreadableCredentialsError) -> None:
        config = (exc.task_id, exc.config_id)
        if config in self._warned:
            return
        self._warned[config] = None
        if len(self._warned) > WARNED_CONFIGS:
            self._warned.popitem(last=False)
        log.warning("%s; its webhook is not called", exc)

    def resealed(self, raw: bytes) -> bytes | None:
        """`raw` written again with every secret sealed with the first key, or None when it is
        so already (or has no secret); UnreadableCredentialsError as `decode`. Needs keys."""
        keys = self.keys
        assert keys is not None, "resealing needs keys"
        stored = a2a_pb2.TaskPushNotificationConfig.FromString(raw)
        secrets = [s for s in (stored.token, stored.authentication.credentials) if s]
        current = all(s.startswith(SEALED_PREFIX) and keys.sealed_with_first(s) for s in secrets)
        return None if current else self.encode(self.decode(raw))

    def _open(self, config: a2a_pb2.TaskPushNotificationConfig, stored: str) -> str:
        keys = self.keys
        if keys is None:
            reason = f"it is sealed, and this server has no key ({KEYS_OPTION}[-file])"
            raise UnreadableCredentialsError(config.task_id, config.id, reason)
        try:
            return keys.open(stored)
        except (InvalidToken, UnicodeDecodeError):
            reason = (
                f"none of the server's {keys.count} keys ({KEYS_OPTION}[-file]) opens it (was "
                "the key that sealed it dropped?); create the config again to replace it"
            )
            raise UnreadableCredentialsError(config.task_id, config.id, reason) from None
