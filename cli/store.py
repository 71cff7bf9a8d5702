"""`a2a-grpc store migrate [URL]`: brings a PostgreSQL task store's schema to this release's
version, ahead of a rollout (a server also does it on start; see docs/stores.md).

The URL is the one `serve --store` takes (default: $A2A_GRPC_STORE); its password is never
printed. Says the versions before and after in one line. Exit status 0, or 2 with one line on
stderr: no URL, a scheme no store is registered for, a database that cannot be reached, or one
a newer release migrated. Another store (Redis, memory, one a package adds) has no schema this
command migrates: nothing to do (exit 0).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from a2a_grpc.core.exit_codes import OK, USAGE
from a2a_grpc.server.config import STORE_ENV
from a2a_grpc.server.tasks.registry import StoreRegistryError, redacted_url, scheme_of, store_kind

POSTGRES_SCHEMES = ("postgresql", "postgres")


def parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(prog="a2a-grpc store", description="the shared task store")
    commands = command.add_subparsers(dest="command", required=True, metavar="COMMAND")
    migrate = commands.add_parser(
        "migrate",
        help="bring a PostgreSQL store's schema to this release's version",
        description="Bring a PostgreSQL store's schema to this release's version.",
    )
    migrate.add_argument(
        "url",
        nargs="?",
        metavar="URL",
        help=f"the store's postgresql:// URL (default: ${STORE_ENV})",
    )
    return command


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    url = args.url or os.environ.get(STORE_ENV, "")
    if not url:
        print(
            f"a2a-grpc store migrate: give the store's postgresql:// URL (or set ${STORE_ENV})",
            file=sys.stderr,
        )
        return USAGE
    scheme = scheme_of(url)
    if scheme not in POSTGRES_SCHEMES:
        try:
            store_kind(url)
        except StoreRegistryError as exc:
            print(f"a2a-grpc store migrate: {exc}", file=sys.stderr)
            return USAGE
        print(f"{redacted_url(url)}: a {scheme}:// store has no schema to migrate; nothing to do")
        return OK
    try:
        before, after = asyncio.run(_migrate(url))
    except ImportError as exc:
        print(
            f"a2a-grpc store migrate: needs the PostgreSQL driver: pip install "
            f"'a2a-grpc[postgresql]' ({exc})",
            file=sys.stderr,
        )
        return USAGE
    except Exception as exc:  # psycopg's errors, SchemaTooNewError: one line each
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"a2a-grpc store migrate: {redacted_url(url)}: {detail}", file=sys.stderr)
        return USAGE
    if before == after:
        print(f"{redacted_url(url)}: the a2a schema is at version {after}; nothing to do")
    else:
        print(f"{redacted_url(url)}: migrated the a2a schema from version {before} to {after}")
    return OK


async def _migrate(url: str) -> tuple[int, int]:
    import psycopg

    from a2a_grpc.server.tasks.postgres import schema

    async with await psycopg.AsyncConnection.connect(
        url, autocommit=True, connect_timeout=10
    ) as connection:
        return await schema.migrate(connection)
