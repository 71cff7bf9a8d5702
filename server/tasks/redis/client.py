"""The Redis client the shared store talks through: redis-py's asyncio client, with every
command issued in one event-loop turn sent as one pipeline, and commands packed by hiredis.

Why coalesce: one redis.asyncio round trip costs this process ~50-80 us of CPU (a pooled
connection taken and given back, a retry wrapper, a read timeout, observability hooks), far
more than the command itself costs Redis. Under load many requests are waiting on Redis at the
same moment, and when one batch of replies arrives their coroutines resume in the same turn and
issue their next commands together: coalesced, they share one round trip (the same idea as
ioredis's auto-pipelining). One batch is in flight at a time; what is issued meanwhile waits
and goes out next (group commit).

A batch is written and read on one pooled connection through redis-py's Connection
(`pack_commands`, `send_packed_command`, `read_response`) and its response callbacks, under one
timeout for the whole batch rather than one per reply, and without the Pipeline object, its
retry wrapper and observability hooks around each batch.

Measured with tests.load.redis_profile (c=32, CPU per blocking send in the replica):
separate calls 561 us; coalesced through redis-py's Pipeline 255-275 us; the batch exchange
here 205 us. Two or four batches in flight instead of one: 286 us.

Under load a batch waits a little before it goes (`linger_after`): when a batch of
`LINGER_FROM` commands or more comes back with commands queued behind it, those wait
`LINGER_PER_COMMAND` per command of the batch that came back, at most `LINGER_MAX`, so that
the callers still busy join them. Fewer, larger batches cost both processes less (a batch's
write, wake-ups and reply reading are paid once), which under load outweighs the wait. A lone
caller, or a few, never wait: their batches stay small.

Semantics are those of separate calls: each command gets its own reply or its own error; a
batch is not a transaction; a connection failure fails every command of its batch, and a
timeout also the commands queued behind it (so no call waits more than about one timeout).
Blocking commands (BLPOP, XREAD BLOCK) must not go through this client, since one would hold
up its whole batch; the store uses none (pub/sub has its own connection).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable, Sequence
from typing import Any, cast

import hiredis
import redis.asyncio as aioredis
import redis.exceptions
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.client import EMPTY_RESPONSE, NEVER_DECODE
from redis.utils import HIREDIS_AVAILABLE

MAX_BATCH = 512
"""Commands in one pipeline at most."""

MAX_IN_FLIGHT = 1
"""Pipelines on their way at once; commands issued meanwhile wait and go out together."""

LINGER_FROM = 8
"""A batch of this many commands or more makes the next one wait (`linger_after`)."""

LINGER_PER_COMMAND = 50e-6
LINGER_MAX = 1e-3


def linger_after(batch_size: int) -> float:
    """Seconds the next batch waits for more commands after a batch of `batch_size`.

    A batch that large means as many callers issue commands together: waiting a little lets
    the ones still busy join the next batch instead of making one of their own. Measured
    (a replica on Redis, one core shared with redis-server, ghz SendMessage, A/B in
    alternating rounds): at c=32 batches per send 0.82 -> 0.45 and 923 -> 1136 req/s (+23 %),
    p50 lower; at c=16 +15 % and at c=256 +7 % (an earlier version of the rule); c=1 to c=8
    never fill a batch of `LINGER_FROM` and do not change. The wait grows with the batch, so
    it never bounds throughput: n callers wait ~n x 50 us per round trip.
    """
    if batch_size < LINGER_FROM:
        return 0.0
    return min(LINGER_MAX, LINGER_PER_COMMAND * batch_size)


_Pending = list[tuple[tuple[Any, ...], dict[str, Any], "asyncio.Future[Any]"]]


def client_options(timeout: float) -> dict[str, Any]:
    """No retries inside the client: a refused call fails within `timeout` and the caller's
    own retry (our client honours RetryInfo) decides."""
    return {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "retry": Retry(NoBackoff(), 0),
        "health_check_interval": 0,
    }


class CoalescingRedis(aioredis.Redis):
    """`redis.asyncio.Redis` whose commands are queued and flushed, once per event-loop turn,
    as one non-transactional pipeline. Everything built on `execute_command` (the command
    methods, registered scripts with their NOSCRIPT reload) goes through the queue; explicit
    `pipeline()`s and `pubsub()` use connections of their own as usual."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending: _Pending = []
        self._flushes: set[asyncio.Task[None]] = set()
        self._batch_timeout: float | None = self.connection_pool.connection_kwargs.get(
            "socket_timeout"
        )
        self._linger = 0.0  # linger_after(the size of the batch on its way)

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        return await self.queue(*args, **options)

    def queue(self, *args: Any, **options: Any) -> asyncio.Future[Any]:
        """Queues one command; the future gets its reply, or its error. Several commands
        queued together need no task each to be awaited (`asyncio.gather` on futures)."""
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[Any] = loop.create_future()
        pending = self._pending
        if not pending and len(self._flushes) < MAX_IN_FLIGHT:
            loop.call_soon(self._flush)  # nothing on its way: no batch to follow, no wait
        pending.append((args, options, reply))
        return reply

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        """Sends what is queued and waits for the batches in flight, then closes: otherwise a
        batch flushed after the close would open a connection nobody closes."""
        while self._pending or self._flushes:
            if not self._flushes:
                self._flush()
            await asyncio.wait(set(self._flushes))
        await super().aclose(close_connection_pool)

    def _flush(self) -> None:
        pending = self._pending
        if not pending:
            return
        self._pending = pending[MAX_BATCH:]
        batch = pending[:MAX_BATCH]
        self._linger = linger_after(len(batch))
        flush = asyncio.get_running_loop().create_task(self._send(batch))
        self._flushes.add(flush)
        flush.add_done_callback(self._flushed)

    def _flushed(self, flush: asyncio.Task[None]) -> None:
        self._flushes.discard(flush)
        if self._linger and self._pending:  # wait for more callers before the next batch
            asyncio.get_running_loop().call_later(self._linger, self._flush)
        else:
            self._flush()  # what queued up while the batches were in flight

    async def _send(self, pending: _Pending) -> None:
        try:
            replies = await self._exchange([(args, options) for args, options, _ in pending])
        except Exception as exc:  # the connection failed: every command of the batch did
            if isinstance(exc, redis.exceptions.TimeoutError):
                # Redis does not answer: what queued up behind this batch fails now rather
                # than after a timeout of its own, so no call waits longer than one timeout.
                pending, self._pending = pending + self._pending, []
            for _, _, reply in pending:
                if not reply.done():
                    reply.set_exception(exc)
            return
        except BaseException:
            for _, _, reply in pending:
                reply.cancel()
            raise
        for (_, _, reply), result in zip(pending, replies, strict=True):
            if reply.done():  # its caller gave up waiting
                continue
            if isinstance(result, Exception):
                reply.set_exception(result)
            else:
                reply.set_result(result)

    async def _exchange(self, commands: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> list[Any]:
        """Writes `commands` at once and reads their replies (a ResponseError in place of the
        reply of a command Redis refused), within one read timeout for the whole batch."""
        pool: Any = self.connection_pool  # redis-py leaves get_connection untyped
        connection = await pool.get_connection()
        callbacks = self.response_callbacks
        replies: list[Any] = []
        try:
            async with asyncio.timeout(self._batch_timeout):
                await connection.send_packed_command(
                    connection.pack_commands([args for args, _ in commands]), check_health=False
                )
                for args, options in commands:
                    try:
                        reply = await connection.read_response(
                            disable_decoding=options.pop(NEVER_DECODE, False), timeout=math.inf
                        )
                    except redis.exceptions.ResponseError as refused:
                        replies.append(options.get(EMPTY_RESPONSE, refused))
                        continue
                    options.pop(EMPTY_RESPONSE, None)
                    options.pop("keys", None)
                    callback = callbacks.get(args[0])
                    replies.append(reply if callback is None else callback(reply, **options))
        except TimeoutError:
            await connection.disconnect(nowait=True)
            raise redis.exceptions.TimeoutError(
                f"Redis did not answer within {self._batch_timeout} s"
            ) from None
        except BaseException:
            await connection.disconnect(nowait=True)
            raise
        finally:
            await pool.release(connection)
        return replies


class _PackedInC:
    """Packs commands with hiredis's C packer (installed for parsing), as redis-py's sync
    client does; its asyncio connections pack in Python. Measured (tests.load.redis_profile,
    A/B): 621-626 -> 554-563 us of CPU per send on Redis, -10 %."""

    def pack_command(self, *args: Any) -> list[bytes]:
        return [_pack_one(args)]

    def pack_commands(self, commands: Iterable[Sequence[Any]]) -> list[bytes]:
        """A batch as one buffer, each command packed by hiredis at once: the store's
        arguments are str, bytes and int, which hiredis takes as they are (redis-py's packer
        first copies each argument through a generator). Measured (tests.load.redis_profile c=32,
        medians of 5, together with the store's direct EVALSHA): 167 -> 146 us per send."""
        return [b"".join([_pack_one(args) for args in commands])]


def _pack_one(args: Sequence[Any]) -> bytes:
    """One command in RESP, packed by hiredis. A command name with a space ("SCRIPT LOAD") is
    split into its words, as redis-py does; an argument hiredis cannot pack is redis-py's
    DataError, as from its own packer. (Written against hiredis itself rather than redis-py's
    HiredisRespSerializer, whose signature and typing change between redis-py releases.)"""
    name = args[0]
    if (isinstance(name, str) and " " in name) or (isinstance(name, bytes) and b" " in name):
        args = (*name.split(), *args[1:])
    try:
        packed: bytes = hiredis.pack_command(tuple(args))
    except TypeError as error:
        raise redis.exceptions.DataError(str(error)) from error
    return packed


def pack_in_c(holder: Any) -> None:
    """Makes a connection pool (or a cluster node) open connections that pack in C."""
    if not HIREDIS_AVAILABLE:
        return
    base = holder.connection_class
    if not issubclass(base, _PackedInC):
        holder.connection_class = type(f"PackedInC{base.__name__}", (_PackedInC, base), {})


def connect(url: str, timeout: float) -> CoalescingRedis:
    """The store's client for the Redis at `url` (not connected until its first command)."""
    client = cast(CoalescingRedis, CoalescingRedis.from_url(url, **client_options(timeout)))
    pack_in_c(client.connection_pool)
    return client
