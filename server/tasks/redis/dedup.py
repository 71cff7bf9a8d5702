"""The idempotency window shared by replicas: a claim per message id in Redis."""

from __future__ import annotations

import hashlib
from typing import Any

from a2a_grpc.core.errors import FieldViolation, InvalidParamsError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.protocol.dedup import DedupWindow, Key, Outcome
from a2a_grpc.server.tasks.base import Scope
from a2a_grpc.server.tasks.redis.store import RedisTaskStore


def message_digest(message: a2a_pb2.Message) -> str:
    """A fingerprint of a message's content that every process computes alike."""
    return hashlib.blake2b(
        message.SerializeToString(deterministic=True), digest_size=16
    ).hexdigest()


class SharedDedupWindow(DedupWindow):
    """The idempotency window over Redis: this process's window for repeats of runs it holds,
    plus a claim in Redis that decides, across replicas, which delivery runs."""

    def __init__(self, store: RedisTaskStore, *, window: float, capacity: int) -> None:
        super().__init__(window=window, capacity=capacity)
        self.store = store
        self._claims: dict[Key, tuple[str, str]] = {}  # claimed, not yet remembered

    @staticmethod
    def _key_digest(key: Key) -> str:
        joined = "\x00".join(key).encode()
        return hashlib.blake2b(joined, digest_size=16).hexdigest()

    async def claim(self, key: Key, message: a2a_pb2.Message, task_id: str) -> Outcome | None:
        digest = self._key_digest(key)
        content = message_digest(message)
        value = f"{content}|{task_id}"
        existing = await self.store.claim(digest, value, self.window)
        if existing is None:
            self._claims[key] = (digest, value)
            return None
        first_content, _, first_task = existing.partition("|")
        if first_content != content:
            raise InvalidParamsError(
                f"message_id {key[2]!r} was already used for a different "
                "message: mint a new message_id for new content",
                field_violations=[
                    FieldViolation("message.message_id", "already used for different content")
                ],
            )
        return await self.store.outcome(first_task, Scope(key[0], key[1]))

    async def unclaim(self, key: Key) -> None:
        claimed = self._claims.pop(key, None)
        if claimed is not None:
            await self.store.unclaim(*claimed)

    def remember(self, key: Key, message: a2a_pb2.Message, run: Any) -> None:
        self._claims.pop(key, None)
        super().remember(key, message, run)
