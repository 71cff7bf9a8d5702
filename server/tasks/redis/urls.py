"""The Redis store's URL schemes, as the store registry (tasks/registry.py) names them:

- `redis://[[user]:password@]host[:port][/db]`, `rediss://...` (TLS), `unix:///path/redis.sock`:
  one Redis, or a node of a Redis Cluster, which `start` finds by itself (`REDIS`);
- `redis+cluster://...`, `rediss+cluster://...`: a node of a Redis Cluster, required to be one
  (`start` refuses a single Redis rather than serve it as a Cluster it is not) (`REDIS_CLUSTER`).

Every URL takes redis-py's query parameters (`?ssl_ca_certs=...`, `?password=...`).
"""

from __future__ import annotations

from a2a_grpc.server.tasks.base import (
    StoreFactory,
    StoreKind,
    StoreListener,
    StoreSettings,
    TaskStore,
    Webhooks,
)
from a2a_grpc.server.tasks.redis.store import RedisTaskStore
from a2a_grpc.server.tasks.registry import redacted_url

CLUSTER_SUFFIX = "+cluster"


def redis_url_problem(url: str) -> str | None:
    """Why `url` names no Redis the store can reach (without its password), or None."""
    scheme, _, rest = url.partition("://")
    location = rest.rpartition("@")[2]
    if scheme.lower() == "unix" and not location.startswith("/"):
        return (
            f"a unix:// store URL needs the socket's absolute path, as in "
            f"unix:///run/redis.sock; got {redacted_url(url)!r}"
        )
    return None


def redis_factory(url: str, *, prefix: str = "a2a") -> StoreFactory:
    """The `StoreFactory` of Redis stores on `url`, their keys under `prefix` (servers with
    different prefixes keep apart on one Redis), with the settings' bounds (their byte budget
    aside: Redis's own maxmemory bounds its bytes); `redis+cluster://` and `rediss+cluster://`
    require a Cluster."""
    scheme, sep, rest = url.partition("://")
    cluster = scheme.lower().endswith(CLUSTER_SUFFIX)
    if cluster:
        url = scheme[: -len(CLUSTER_SUFFIX)] + sep + rest

    def make(
        settings: StoreSettings, listener: StoreListener, webhooks: Webhooks | None
    ) -> RedisTaskStore:
        return RedisTaskStore.connect(
            url,
            prefix=prefix,
            cluster=cluster,
            listener=listener,
            webhooks=webhooks,
            max_tasks=settings.max_tasks,
            max_live_per_owner=settings.max_live_per_owner,
            max_live_per_tenant=settings.max_live_per_tenant,
            terminal_ttl=settings.terminal_ttl,
            lease=settings.lease,
            queue_size=settings.queue_size,
            stream_length=settings.replay_length,
            push_credentials=settings.push_credentials,
        )

    return make


def open_redis(
    url: str, settings: StoreSettings, listener: StoreListener, webhooks: Webhooks | None
) -> TaskStore:
    """A Redis store on `url` under the default key prefix (`StoreKind.open`)."""
    return redis_factory(url)(settings, listener, webhooks)


REDIS = StoreKind(open=open_redis, shared=True, check=redis_url_problem)
"""`redis://`, `rediss://`, `unix://`: one Redis (or a Cluster node), shared by replicas."""
REDIS_CLUSTER = StoreKind(open=open_redis, shared=True, check=redis_url_problem)
"""`redis+cluster://`, `rediss+cluster://`: a node of a Redis Cluster, shared by replicas."""
