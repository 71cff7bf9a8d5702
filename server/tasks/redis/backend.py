"""One Redis as the task store's parts use it: the client (and its cluster switch), the key
names, the scripts, and health. Every part of the Redis store (store.py, room.py, reads.py,
eviction.py, deliveries.py, leases.py, claims.py, events.py, push.py) takes a `RedisBackend`,
as redis-py's `Lock` takes a client; the backend knows none of them.

Contract: every Redis round trip goes through `call` (or `run_script` / `batch`), bounded by
`timeout`: a refused or slow call raises StoreUnavailableError and turns `healthy` off until a
probe gets through again (then the hooks given to `after_outage` run); a write Redis refuses at
its `maxmemory` raises StoreFullError. A call that only timed out turns `healthy` off only when
Redis does not answer the health probe either (probe.py: its own connection and thread), so
this server's own backlog is never taken for Redis being down. Before `start`, a failure is
`start`'s error, not an outage. The failures are logged under the store's logger name
(`a2a_grpc.server.tasks.redis.store`), as they always were.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import redis.asyncio as aioredis
import redis.exceptions
from redis.asyncio.cluster import RedisCluster

from a2a_grpc.core.failure_log import FailureLog
from a2a_grpc.core.ids import new_id
from a2a_grpc.server.tasks.base import StoreFullError, StoreUnavailableError
from a2a_grpc.server.tasks.redis import client as redis_client
from a2a_grpc.server.tasks.redis import scripts as redis_scripts
from a2a_grpc.server.tasks.redis.keys import Keys
from a2a_grpc.server.tasks.redis.probe import HealthProbe

STORE_LOGGER = "a2a_grpc.server.tasks.redis.store"
"""The logger of the store's outages, leases and reaps (what operators' log filters name)."""

log = logging.getLogger(STORE_LOGGER)

T = TypeVar("T")

REDIS_ERRORS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)
"""What a Redis that is down, restarting or unreachable raises (BusyLoadingError is a
ConnectionError)."""

ScriptCall = tuple[str, list[str], list[Any]]
"""(script name, keys, arguments)."""


class RedisBackend:
    """The client, keys, scripts and health of one Redis (see the module docstring); `connect`
    builds one from a URL."""

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        timeout: float = 2.0,
        prefix: str = "a2a",
        replica_id: str | None = None,
        url: str | None = None,
        on_health: Callable[[bool], None] | None = None,
        cluster: bool = False,
    ) -> None:
        # Typed Any: redis-py's command stubs return unions of every RESP shape; the shapes
        # used here are fixed by the commands and scripts.
        self.client: Any = client
        self.keys = Keys(prefix)
        self.timeout = timeout
        self.replica_id = replica_id or new_id()
        self.pubsub_client: Any = client
        """Where the event reader subscribes: `client`, or on a Cluster one node of it (a
        PUBLISH reaches the subscribers of every node)."""
        self.url = url
        """The URL `connect` was given: `start` switches to a Cluster client when the server
        there is a Cluster node."""
        self.on_health = on_health
        """Called with False when Redis stops answering and True when it answers again."""
        self.cluster_required = cluster
        """`start` refuses a Redis at `url` that is not a Cluster node (redis+cluster://)."""
        self.healthy = True
        self._scripts = self._register(client)
        self._coalescing = isinstance(client, redis_client.CoalescingRedis)
        self.on_cluster = isinstance(client, RedisCluster)
        self.started = False
        self.closing = False
        """Set as the store closes (or is abandoned): the probe and the lease keeper stop."""
        self._probe: asyncio.Task[None] | None = None
        self._after_outage: list[Callable[[], None]] = []
        self.outage = FailureLog(log, "the task store (Redis)")
        """Its failed round trips, logged quietly and counted (`a2a_store_failures_total`)."""
        self.probe = None if url is None else HealthProbe(url, timeout)
        """Asks Redis apart from this process's traffic whether it answers, when a call timed
        out (None without a URL: a timeout is then an outage)."""
        self.behind = FailureLog(log, "calls to the task store (Redis)")
        """Calls that timed out while Redis answered the probe: this server is behind."""
        self._checking: asyncio.Task[None] | None = None

    @classmethod
    def connect(cls, url: str, *, timeout: float = 2.0, **options: Any) -> RedisBackend:
        """A backend on the Redis at `url` (redis://, rediss://, unix://; password in the URL).

        No retries inside the client: a refused call fails within `timeout` and the caller's
        own retry (our client honours RetryInfo) decides.
        """
        return cls(redis_client.connect(url, timeout), timeout=timeout, url=url, **options)

    def after_outage(self, hook: Callable[[], None]) -> None:
        """Runs `hook` each time Redis answers again after an outage (e.g. the event reader
        reconnects: its streams may have missed events)."""
        self._after_outage.append(hook)

    @staticmethod
    def _register(client: Any) -> dict[str, Any]:
        names = (
            "WRITE", "EMIT", "SNAPSHOT", "RESERVE", "SETTLE", "INDEX", "CLAIM", "UNCLAIM",
            "HEARTBEAT", "PUSH_CHANGE", "STOP", "UNINDEX", "BATCH", "FORGET", "REPLAY",
            "NOTICE", "RESEAL",
        )  # fmt: skip
        return {name: client.register_script(getattr(redis_scripts, name)) for name in names}

    async def start(self) -> None:
        """Checks that Redis answers (StoreUnavailableError otherwise) and switches to a
        Cluster client when there is one (ValueError when a Cluster is required and the Redis
        at `url` is none); from now on a failure is an outage."""
        await self.call(self.client.ping())
        await self._use_cluster_if_there_is_one()
        self.started = True

    async def _use_cluster_if_there_is_one(self) -> None:
        """Switches to a Cluster client when `url` names a Cluster node: every key then goes to
        the node of its slot (all keys of one script share a slot). The node in the URL stays
        the pub/sub connection."""
        if self.url is None or self.client is not self.pubsub_client:
            return
        info = await self.call(self.client.info("cluster"))
        if not info.get("cluster_enabled"):
            if self.cluster_required:
                raise ValueError(
                    "the Redis there is not a Cluster node (cluster_enabled:0): name a single "
                    "Redis with redis:// (or rediss://), a node of a Cluster with redis+cluster://"
                )
            return
        cluster = RedisCluster.from_url(self.url, **redis_client.client_options(self.timeout))
        await self.call(cluster.initialize())
        for node in cluster.get_nodes():
            redis_client.pack_in_c(node)
        self.client = cluster
        self._scripts = self._register(cluster)
        self._coalescing = False
        self.on_cluster = True

    # -- round trips ----------------------------------------------------------------------

    async def call(self, awaitable: Awaitable[T]) -> T:
        """One Redis round trip, bounded by `timeout` (the client's connect and read timeouts:
        an asyncio.timeout around each call as well cost 6 % of a send's CPU);
        StoreUnavailableError when it fails; StoreFullError when Redis refuses a write at its
        `maxmemory` (the store's only byte bound: see base.py)."""
        try:
            result = await awaitable
        except redis.exceptions.OutOfMemoryError as exc:  # maxmemory with noeviction: it answers
            raise StoreFullError(
                "the task store (Redis) is at its maxmemory and refuses writes; retry later"
            ) from exc
        except redis.exceptions.AuthenticationError as exc:  # a ConnectionError, but not "down"
            self.report_failure(f"refuses the credentials in its URL ({exc})")
            raise StoreUnavailableError(
                f"the task store (Redis) refused the credentials in its URL: {exc}"
            ) from exc
        except (*REDIS_ERRORS, TimeoutError) as exc:
            problem = f"does not answer ({type(exc).__name__}: {exc})"
            if isinstance(exc, TimeoutError | redis.exceptions.TimeoutError) and self.healthy:
                self._check_health(problem)  # this server may be behind, not Redis down
            else:
                self.report_failure(problem)
            raise StoreUnavailableError(
                f"the task store (Redis) did not answer: {type(exc).__name__}; retry shortly"
            ) from exc
        if not self.healthy:
            self.set_healthy(True)
        elif self.behind.failing:
            self.behind.recovered("answer in time again")
        return result

    async def run_script(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """One of scripts.py's scripts; loaded into Redis again when Redis lost it."""
        client = self.client
        if self._coalescing:
            # Queued as EVALSHA directly, without redis-py's Script call around it (measured,
            # tests.load.redis_profile c=32, medians of 5, with hiredis packing the batch:
            # 167 -> 146 us per send on Redis).
            script = self._scripts[name]
            try:
                return await self.call(client.queue("EVALSHA", script.sha, len(keys), *keys, *args))
            except redis.exceptions.NoScriptError:
                pass  # Redis restarted (it keeps no scripts): the Script call loads it
        return await self.call(self._scripts[name](keys=list(keys), args=list(args)))

    async def batch(self, calls: list[ScriptCall]) -> list[Any]:
        """WRITEs of one task, then the INDEX and SETTLE that go with them, in this order: their
        replies. The parts after a WRITE that was refused do not run (their replies are 0).

        On a standalone Redis the parts run as one script (BATCH): one command instead of two
        to four, and atomic (measured, tests.load.redis_profile c=32: CPU per send on Redis
        205 -> 174 us). A Cluster refuses a script whose keys span slots: there the WRITEs go
        first, one after another, and the rest together after them, each atomic, the batch
        not (the index tolerates that: see `reads.list_page`)."""
        if self.on_cluster:
            replies: list[Any] = []
            for name, call_keys, call_args in calls:
                if name != "WRITE":
                    break
                replies.append(reply := await self.run_script(name, call_keys, call_args))
                if reply[0] != 1:
                    return [*replies, *(0 for _ in calls[len(replies) :])]
            rest = calls[len(replies) :]
            return [*replies, *await asyncio.gather(*(self.run_script(*call) for call in rest))]
        keys: list[str] = []
        header: list[Any] = [len(calls)]
        args: list[Any] = []
        for name, call_keys, call_args in calls:
            header += (name, len(call_keys), len(call_args))
            keys += call_keys
            args += call_args
        args[:0] = header
        return list(await self.run_script("BATCH", keys, args))

    # -- health ---------------------------------------------------------------------------

    def report_failure(self, problem: str) -> None:
        """A round trip failed (`problem` says how): counted and logged quietly (`outage`: one
        WARNING as the outage starts, at most one line a minute while it lasts), and health
        turns off until Redis answers again."""
        if not self.started:
            return  # before start(), a failure is start()'s error, not an outage
        self.outage.failed(f"{problem}; calls fail with UNAVAILABLE")
        self.set_healthy(False)

    def _check_health(self, problem: str) -> None:
        """A call timed out: an outage only when Redis does not answer the probe either (one
        check at a time; the calls that time out meanwhile wait for its verdict)."""
        if not self.started:
            return
        if self.probe is None:
            self.report_failure(problem)
            return
        if self._checking is None or self._checking.done():
            self._checking = asyncio.get_running_loop().create_task(self._probe_after(problem))

    async def _probe_after(self, problem: str) -> None:
        probe = self.probe
        assert probe is not None
        if await probe.answers():
            self.behind.failed(
                "some timed out while Redis answers its health check at once: this server is "
                "behind (its event loop, or its command connection, is backlogged); those calls "
                "fail with UNAVAILABLE"
            )
        else:
            self.report_failure(problem)

    def set_healthy(self, healthy: bool) -> None:
        if healthy == self.healthy or not self.started:
            return  # before start(), a failure is start()'s error, not a health change
        self.healthy = healthy
        if healthy:
            self.outage.recovered("answers again")
        else:
            if self._probe is None or self._probe.done():
                self._probe = asyncio.get_running_loop().create_task(self._recover())
        if self.on_health is not None:
            self.on_health(healthy)

    async def _recover(self) -> None:
        """Pings until Redis answers (there is no event to wait on for a server coming back),
        then runs the `after_outage` hooks."""
        while not self.healthy and not self.closing:
            with contextlib.suppress(StoreUnavailableError):
                await self.call(self.client.ping())
            if not self.healthy:
                await asyncio.sleep(min(1.0, self.timeout / 2))
        for hook in self._after_outage:
            hook()

    def stop_probe(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
        if self._checking is not None:
            self._checking.cancel()

    async def close(self) -> None:
        """Closes the clients (the parts using them have stopped)."""
        await self.client.aclose()
        if self.pubsub_client is not self.client:
            await self.pubsub_client.aclose()
        if self.probe is not None:
            self.probe.close()
