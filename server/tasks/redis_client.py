"""The Redis client the shared store talks through: redis-py's asyncio client, with every
command issued in one event-loop turn sent as one pipeline, and commands packed by hiredis.

Why coalesce: one redis.asyncio round trip costs this process ~50-80 us of CPU (a pooled
connection taken and given back, a retry wrapper, a read timeout, observability hooks), far
more than the command itself costs Redis. Under load many requests are waiting on Redis at the
same moment, and when one batch of replies arrives their coroutines resume in the same turn and
issue their next commands together: coalesced, they share one round trip (the same idea as
ioredis's auto-pipelining). Measured with tests.load.redis_profile (c=32): see the commit that
introduced this module.

Semantics are those of separate calls: each command gets its own reply or its own error
(`raise_on_error=False`); a batch is not a transaction; a connection failure fails every
command of its batch, and a timeout also the commands queued behind it (so no call waits more
than about one timeout). Blocking commands (BLPOP, XREAD BLOCK) must not go through this client,
since one would hold up its whole batch; the store uses none (pub/sub has its own connection).
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import redis.asyncio as aioredis
import redis.exceptions
from redis.asyncio.client import Pipeline
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.connection import HiredisRespSerializer
from redis.utils import HIREDIS_AVAILABLE

MAX_BATCH = 512
"""Commands in one pipeline at most."""

MAX_IN_FLIGHT = 1
"""Pipelines on their way at once; commands issued meanwhile wait and go out together."""

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

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        return await self.queue(*args, **options)

    def queue(self, *args: Any, **options: Any) -> asyncio.Future[Any]:
        """Queues one command; the future gets its reply, or its error. Several commands
        queued together need no task each to be awaited (`asyncio.gather` on futures)."""
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[Any] = loop.create_future()
        pending = self._pending
        if not pending and len(self._flushes) < MAX_IN_FLIGHT:
            loop.call_soon(self._flush)
        pending.append((args, options, reply))
        return reply

    def _flush(self) -> None:
        pending = self._pending
        if not pending:
            return
        self._pending = pending[MAX_BATCH:]
        flush = asyncio.get_running_loop().create_task(self._send(pending[:MAX_BATCH]))
        self._flushes.add(flush)
        flush.add_done_callback(self._flushed)

    def _flushed(self, flush: asyncio.Task[None]) -> None:
        self._flushes.discard(flush)
        self._flush()  # what queued up while the batches were in flight

    async def _send(self, pending: _Pending) -> None:
        pipe = Pipeline(self.connection_pool, self.response_callbacks, False, None)
        pipe.command_stack = [(args, options) for args, options, _ in pending]
        try:
            replies = await pipe.execute(raise_on_error=False)
        except Exception as exc:  # the connection failed: every command of the batch did
            if isinstance(exc, (TimeoutError, redis.exceptions.TimeoutError)):
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


class _PackedInC:
    """Packs commands with hiredis's C packer (installed for parsing), as redis-py's sync
    client does; its asyncio connections pack in Python. Measured (tests.load.redis_profile,
    A/B): 621-626 -> 554-563 us of CPU per send on Redis, -10 %."""

    _packer = HiredisRespSerializer()

    def pack_command(self, *args: Any) -> list[bytes]:
        packed: list[bytes] = self._packer.pack(*args)
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
