"""Whether Redis itself answers, asked apart from this process's own traffic to it.

A store call can time out while Redis is idle: this server is behind, not Redis (its event loop
is backlogged, or a large batch of replies holds its one command connection). Taking that for an
outage would turn the store's health off, end every stream it feeds and fail readiness, and so
make the backlog worse. The probe asks Redis with a PING on a connection of its own, from a
thread of its own, timed there: its answer waits behind neither the event loop nor the command
connection, so only a Redis that does not answer it within the store's timeout is down.
"""

from __future__ import annotations

import asyncio
import contextlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry


class HealthProbe:
    """PINGs the Redis at `url` on its own connection and thread; `answers()` says whether it
    answered within `timeout` seconds."""

    def __init__(self, url: str, timeout: float) -> None:
        self.url = url
        self.timeout = timeout
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="a2a-redis-probe")
        self._client: Any = None  # made in the probe's thread, on first use

    async def answers(self) -> bool:
        """Whether Redis answered a PING within the timeout (measured in the probe's thread)."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._ping)

    def _ping(self) -> bool:
        try:
            if self._client is None:
                self._client = redis.Redis.from_url(
                    self.url,
                    socket_timeout=self.timeout,
                    socket_connect_timeout=self.timeout,
                    retry=Retry(NoBackoff(), 0),
                    health_check_interval=0,
                    max_connections=1,
                )
            return bool(self._client.ping())
        except Exception:  # refused, timed out, or any other way of not answering
            return False

    def close(self) -> None:
        """Closes its connection once a PING under way is done; never waits."""
        self._executor.submit(self._close)
        self._executor.shutdown(wait=False)

    def _close(self) -> None:
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
