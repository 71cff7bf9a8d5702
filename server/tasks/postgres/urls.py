"""The PostgreSQL store's URL schemes, as the store registry (tasks/registry.py) names them:
`postgresql://` and `postgres://`, libpq's URLs (`postgresql://[user[:password]@][host][:port]
/database[?param=value]`, a Unix socket as `?host=/run/postgresql`, TLS as `?sslmode=...`).

The driver (psycopg) comes with the `postgresql` extra: this module imports the store only when
a store is opened, and a URL's check says how to install the driver when it is missing.
"""

from __future__ import annotations

import importlib.util

from a2a_grpc.server.tasks.base import (
    StoreFactory,
    StoreKind,
    StoreListener,
    StoreSettings,
    TaskStore,
    Webhooks,
)

DRIVER_MISSING = (
    "a postgresql:// store needs the PostgreSQL driver: pip install 'a2a-grpc[postgresql]'"
)


def postgres_url_problem(url: str) -> str | None:
    """Why `url` cannot serve here (the driver is not installed), or None."""
    if importlib.util.find_spec("psycopg") is None:
        return DRIVER_MISSING
    return None


def postgres_factory(url: str, *, migrate: bool = True) -> StoreFactory:
    """The `StoreFactory` of PostgreSQL stores on `url`, with the settings' bounds (the byte
    budget aside: the database's disk bounds its bytes). `migrate`: `start` brings the schema
    to this release's version (else it must be there: `a2a-grpc store migrate`)."""

    def make(
        settings: StoreSettings, listener: StoreListener, webhooks: Webhooks | None
    ) -> TaskStore:
        from a2a_grpc.server.tasks.postgres.store import PostgresTaskStore

        return PostgresTaskStore.connect(
            url,
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
            migrate=migrate,
        )

    return make


def open_postgres(
    url: str, settings: StoreSettings, listener: StoreListener, webhooks: Webhooks | None
) -> TaskStore:
    """A PostgreSQL store on `url` (`StoreKind.open`)."""
    return postgres_factory(url)(settings, listener, webhooks)


POSTGRES = StoreKind(open=open_postgres, shared=True, check=postgres_url_problem)
"""`postgresql://`, `postgres://`: one PostgreSQL database, shared by replicas."""
