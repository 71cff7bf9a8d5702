"""The idempotency window: what each (tenant, caller, message id) led to, for repeats.

A repeated message id from the same tenant and caller within `window` seconds gets the
original outcome (spec decision §9.7): the run in progress, or once it settled, its task id or
direct reply. The same id with other content is INVALID_PARAMS. The window holds at most
`capacity` ids, oldest first out. Synchronous, on the event loop: the handler looks a message
up and remembers its run without awaiting in between, so concurrent repeats find the first.

`DedupWindow` is one process's window; `SharedDedupWindow` adds, for replicas sharing a store,
a claim per message id there (the store's `claims`) that decides which delivery runs.
`window_for` picks the one a store needs.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from a2a_grpc.core.errors import FieldViolation, InvalidParamsError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.protocol.run import TaskRun
from a2a_grpc.server.tasks.base import Claims, ClaimsWithRoom, Outcome, Scope

__all__ = [
    "DedupWindow",
    "Idempotency",
    "Key",
    "Outcome",
    "SharedDedupWindow",
    "fingerprint",
    "message_digest",
    "window_for",
]

Key = tuple[str, str, str]
"""(tenant, principal, message id)."""


# asyncio.Event.wait() on a set event returns before binding to a loop, so one can be shared.
_ALREADY = asyncio.Event()
_ALREADY.set()


_Settled = tuple[int, float, str, str, str, bytes]
"""What a message id led to once its run settled (the run itself is let go), kept for the whole
window: (fingerprint, accepted at, task id, tenant, owner, the direct reply serialized or b"").
A plain tuple of numbers, strings and bytes, which the garbage collector stops tracking (a
NamedTuple stays tracked: a full collection over 100k of them took 18 ms)."""


class _SettledOutcome:
    """The `Outcome` a repeat of a settled message id gets."""

    __slots__ = ("reply_message", "scope", "task_id")
    started = settled = _ALREADY
    unavailable = None  # a message that was not taken is not kept

    def __init__(self, entry: _Settled) -> None:
        self.task_id = entry[2]
        self.scope = Scope(entry[3], entry[4])
        self.reply_message = a2a_pb2.Message.FromString(entry[5]) if entry[5] else None


@dataclass(slots=True)
class _Delivery:
    """What an accepted message id led to while its run is still going."""

    fingerprint: int
    accepted_at: float
    run: TaskRun


def fingerprint(message: a2a_pb2.Message) -> int:
    """What tells a repeat from new content under a reused message id.

    Python's keyed 64-bit SipHash of the deterministic encoding: the window lives in this
    process only, so the per-process key is no drawback, and a collision would need the same
    sender to reuse one message id within the window (then odds of 2**-64).
    """
    return hash(message.SerializeToString(deterministic=True))


class Idempotency(Protocol):
    """Who runs each message id. `repeat_of`, `remember`, `settle` and `expire` keep this
    process's window (synchronous, on the event loop: a repeat that arrives here while the first
    delivery runs finds its run). `claim` decides, for every process sharing the store, which
    delivery runs; intake asks it for every new message before any check of the task's state,
    so a repeat gets the first delivery's outcome wherever that ran, even once the task it
    answered has finished."""

    reserves_room: bool
    """Whether `claim` can take a new task's room in the store with the claim (`room`)."""

    def repeat_of(self, key: Key, message: a2a_pb2.Message) -> Outcome | None: ...

    async def claim(
        self,
        key: Key,
        message: a2a_pb2.Message,
        task_id: str,
        room: tuple[Scope, int] | None = None,
    ) -> Outcome | None:
        """None when this delivery runs (as task `task_id`: the task it makes, or the one it
        continues); else the outcome of the first delivery. InvalidParamsError when the id was
        used for other content.

        `room` (only where `reserves_room`): the scope and size of the new task the message
        makes, whose room in the store (`TaskStore.reserve`) is then reserved with the claim,
        atomically. A reservation refused raises its error (StoreFullError,
        LiveTaskLimitError) and leaves no claim; one taken is the caller's to use or release."""
        ...

    async def unclaim(self, key: Key) -> None:
        """The claimed delivery was refused before its run started: a retry may run it."""
        ...

    def remember(self, key: Key, message: a2a_pb2.Message, run: TaskRun) -> None: ...

    def settle(self, key: Key, run: TaskRun) -> None: ...

    async def withdraw(self, key: Key, run: TaskRun) -> None:
        """`run` did not take its message (its agent could not work on it now): the id is
        forgotten, on every process sharing the window, so that a repeat runs again."""
        ...

    def expire(self, now: float | None = None) -> None: ...


class DedupWindow:
    """Message ids seen within the last `window` seconds, at most `capacity` of them, in this
    process only: the window of a store no other process sees (`TaskStore.claims` is None)."""

    def __init__(
        self, *, window: float, capacity: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.window = window
        self.capacity = capacity
        self._clock = clock
        # Oldest first. An OrderedDict because entries leave from the front (a plain dict's
        # first key gets slower with every entry deleted before it; see the store's queues).
        self._entries: OrderedDict[Key, _Delivery | _Settled] = OrderedDict()
        # When the oldest entry seen last falls out of the window (-inf: not known, look at the
        # next call). Entries are accepted in clock order, so none falls out earlier: one
        # dropped for capacity only brings a younger one to the front.
        self._next_expiry = -math.inf

    def __len__(self) -> int:
        return len(self._entries)

    def repeat_of(self, key: Key, message: a2a_pb2.Message) -> Outcome | None:
        """The outcome of an earlier delivery of this message id, or None for a new message.

        InvalidParamsError when the id was used for different content.
        """
        entry = self._entries.get(key)
        if entry is None:
            return None
        first = entry.fingerprint if isinstance(entry, _Delivery) else entry[0]
        if first != fingerprint(message):
            raise InvalidParamsError(
                f"message_id {key[2]!r} was already used for a different "
                "message: mint a new message_id for new content",
                field_violations=[
                    FieldViolation("message.message_id", "already used for different content")
                ],
            )
        return entry.run if isinstance(entry, _Delivery) else _SettledOutcome(entry)

    reserves_room = False

    async def claim(
        self,
        key: Key,
        message: a2a_pb2.Message,
        task_id: str,
        room: tuple[Scope, int] | None = None,
    ) -> Outcome | None:
        """This process's window again: the delivery's checks may have awaited (a signer's
        card) since `repeat_of`, and a repeat that arrived meanwhile may have started first.
        No process but this one sees the store, so nothing else can have run the id."""
        return self.repeat_of(key, message)

    async def unclaim(self, key: Key) -> None:
        pass

    def remember(self, key: Key, message: a2a_pb2.Message, run: TaskRun) -> None:
        """Records that this message id started `run`; forgets the ids that fell out."""
        now = self._clock()
        self._entries[key] = _Delivery(fingerprint(message), now, run)
        self.expire(now)

    def settle(self, key: Key, run: TaskRun) -> None:
        """`run` settled: keep its outcome, let the run go."""
        entry = self._entries.get(key)
        if isinstance(entry, _Delivery) and entry.run is run:
            reply = run.reply_message
            self._entries[key] = (
                entry.fingerprint,
                entry.accepted_at,
                run.task_id,
                run.scope.tenant,
                run.scope.owner,
                b"" if reply is None else reply.SerializeToString(),
            )

    async def withdraw(self, key: Key, run: TaskRun) -> None:
        self.forget(key, run)

    def forget(self, key: Key, run: TaskRun) -> None:
        """Forgets the id, if `run` is what it led to here."""
        entry = self._entries.get(key)
        if isinstance(entry, _Delivery) and entry.run is run:
            del self._entries[key]

    def expire(self, now: float | None = None) -> None:
        """Forgets ids older than the window, and the oldest beyond `capacity`."""
        now = self._clock() if now is None else now
        entries = self._entries
        while len(entries) > self.capacity:
            entries.popitem(last=False)  # the oldest
        if now < self._next_expiry:
            return  # nothing is old enough yet: the oldest entry is not read (~3k instructions)
        horizon = now - self.window
        while entries:
            accepted_at = _accepted_at(entries)
            if accepted_at > horizon:
                self._next_expiry = accepted_at + self.window
                return
            entries.popitem(last=False)
        self._next_expiry = -math.inf


def _accepted_at(entries: OrderedDict[Key, _Delivery | _Settled]) -> float:
    """When the oldest entry was accepted."""
    oldest = next(iter(entries.values()))
    return oldest.accepted_at if isinstance(oldest, _Delivery) else oldest[1]


def message_digest(message: a2a_pb2.Message) -> str:
    """A fingerprint of a message's content that every process computes alike."""
    return hashlib.blake2b(
        message.SerializeToString(deterministic=True), digest_size=16
    ).hexdigest()


_CLAIM_ATTEMPTS = 3
"""Claims a delivery makes of its message id while earlier deliveries are withdrawn under it."""


class SharedDedupWindow(DedupWindow):
    """The idempotency window shared by replicas: this process's window for repeats of runs it
    holds, plus a claim in the shared store (`claims`, e.g. in Redis) that decides, across
    replicas, which delivery runs."""

    def __init__(self, claims: Claims, *, window: float, capacity: int) -> None:
        super().__init__(window=window, capacity=capacity)
        self.claims = claims
        self._claimed: dict[Key, tuple[str, str]] = {}  # claimed, not yet remembered
        self._with_room = claims if isinstance(claims, ClaimsWithRoom) else None
        self.reserves_room = self._with_room is not None

    @staticmethod
    def _key_digest(key: Key) -> str:
        joined = "\x00".join(key).encode()
        return hashlib.blake2b(joined, digest_size=16).hexdigest()

    async def claim(
        self,
        key: Key,
        message: a2a_pb2.Message,
        task_id: str,
        room: tuple[Scope, int] | None = None,
    ) -> Outcome | None:
        digest = self._key_digest(key)
        content = message_digest(message)
        value = f"{content}|{task_id}"
        outcome: Outcome | None = None
        # The first delivery may be withdrawn between its claim seen here and its outcome
        # followed (`Claims.outcome` says so): its id was given back, so this delivery claims
        # it again and runs, as it would have a moment later. Bounded: a run withdrawn over
        # and over is answered with its refusal.
        for _ in range(_CLAIM_ATTEMPTS):
            if room is None:
                existing = await self.claims.claim(digest, value, self.window)
            else:
                assert self._with_room is not None, "room given to claims that cannot take it"
                existing = await self._with_room.claim_with_room(
                    digest, value, self.window, room[0], room[1], task_id
                )
            if existing is None:
                self._claimed[key] = (digest, value)
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
            outcome = await self.claims.outcome(
                first_task, Scope(key[0], key[1]), key[2], (digest, existing)
            )
            if not (outcome.settled.is_set() and outcome.unavailable is not None):
                return outcome
        assert outcome is not None
        return outcome

    async def unclaim(self, key: Key) -> None:
        claimed = self._claimed.pop(key, None)
        if claimed is not None:
            await self.claims.unclaim(*claimed)

    def remember(self, key: Key, message: a2a_pb2.Message, run: Any) -> None:
        self._claimed.pop(key, None)
        super().remember(key, message, run)

    async def withdraw(self, key: Key, run: TaskRun) -> None:
        self.forget(key, run)
        value = f"{message_digest(run.context.message)}|{run.task_id}"
        await self.claims.unclaim(self._key_digest(key), value)


def window_for(claims: Claims | None, *, window: float, capacity: int) -> DedupWindow:
    """The idempotency window over a store whose message-id claims are `claims`
    (`TaskStore.claims`): shared through them when other processes see the store, this
    process's alone when it has none."""
    if claims is None:
        return DedupWindow(window=window, capacity=capacity)
    return SharedDedupWindow(claims, window=window, capacity=capacity)
