"""`a2a-grpc store migrate [URL]`: brings a PostgreSQL task store's schema to this release's
version, ahead of a rollout (a server also does it on start; see docs/stores.md).
`a2a-grpc store reseal [URL]`: seals every push config's secrets in a Redis or PostgreSQL store
with the first of the keys given, so that the others can be dropped (docs/push.md, Secrets at
rest).

The URL is the one `serve --store` takes (default: $A2A_GRPC_STORE); its password is never
printed. Says the versions before and after in one line. Exit status 0, or 2 with one line on
stderr: no URL, a scheme no store is registered for, a database that cannot be reached, or one
a newer release migrated. Another store (Redis, memory, one a package adds) has no schema this
command migrates: nothing to do (exit 0).

`reseal` takes the keys as `serve` does (`--push-credentials-keys-file FILE` or
`--push-credentials-keys KEYS`, default: $A2A_GRPC_PUSH_CREDENTIALS_KEYS_FILE or
$A2A_GRPC_PUSH_CREDENTIALS_KEYS) and says in one line how many configs it sealed again, found
sealed with the first key already, and found replaced meanwhile by a server (left as written).
Exit status 0; 2 with one line on stderr for no URL, no keys, bad keys, a store that cannot be
reached or is not Redis or PostgreSQL; 2 also when a config none of the keys opens is stored
(one stderr line each, after the count: give the key that sealed it, or delete the config).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from a2a_grpc.core.exit_codes import OK, USAGE
from a2a_grpc.server.config import STORE_ENV
from a2a_grpc.server.tasks.registry import StoreRegistryError, redacted_url, scheme_of, store_kind
from a2a_grpc.server.tasks.sealing import CredentialKeys, KeyFileError, PushConfigCodec, Resealed

POSTGRES_SCHEMES = ("postgresql", "postgres")
REDIS_SCHEMES = ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster")
KEYS_ENV = "A2A_GRPC_PUSH_CREDENTIALS_KEYS"
KEYS_FILE_ENV = "A2A_GRPC_PUSH_CREDENTIALS_KEYS_FILE"


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
    reseal = commands.add_parser(
        "reseal",
        help="seal every push config's secrets with the first of the keys given",
        description="Seal every push config's token and credentials in a Redis or PostgreSQL "
        "store with the first of the keys given (the others still open), so that the others "
        "can be dropped.",
    )
    reseal.add_argument(
        "url",
        nargs="?",
        metavar="URL",
        help=f"the store's URL, as serve --store takes it (default: ${STORE_ENV})",
    )
    given = reseal.add_mutually_exclusive_group()
    given.add_argument(
        "--push-credentials-keys-file",
        metavar="FILE",
        help=f"the keys, one a line, the sealing one first (default: ${KEYS_FILE_ENV})",
    )
    given.add_argument(
        "--push-credentials-keys",
        metavar="KEYS",
        help=f"the keys, comma-separated, the sealing one first, as "
        f"--push-credentials-keys=KEYS: a key may begin with '-' (default: ${KEYS_ENV})",
    )
    return command


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    if args.command == "reseal":
        return _reseal_command(args)
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


def _reseal_command(args: argparse.Namespace) -> int:
    say = "a2a-grpc store reseal"
    url = args.url or os.environ.get(STORE_ENV, "")
    if not url:
        print(f"{say}: give the store's URL (or set ${STORE_ENV})", file=sys.stderr)
        return USAGE
    try:
        keys = _keys(args)
    except KeyFileError as exc:
        print(f"{say}: {exc}", file=sys.stderr)
        return USAGE
    if keys is None:
        print(
            f"{say}: give the keys: --push-credentials-keys-file FILE or "
            f"--push-credentials-keys KEYS (or set ${KEYS_FILE_ENV} or ${KEYS_ENV})",
            file=sys.stderr,
        )
        return USAGE
    scheme = scheme_of(url)
    if scheme not in POSTGRES_SCHEMES + REDIS_SCHEMES:
        print(
            f"{say}: {redacted_url(url)}: only a Redis or PostgreSQL store keeps push configs "
            "sealed; a store in memory keeps nothing, a store a package adds reseals its own",
            file=sys.stderr,
        )
        return USAGE
    try:
        done = asyncio.run(_reseal(url, keys))
    except ImportError as exc:
        print(
            f"{say}: needs the PostgreSQL driver: pip install 'a2a-grpc[postgresql]' ({exc})",
            file=sys.stderr,
        )
        return USAGE
    except Exception as exc:  # the store's errors (unreachable, no schema): one line each
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"{say}: {redacted_url(url)}: {detail}", file=sys.stderr)
        return USAGE
    print(
        f"{redacted_url(url)}: sealed {done.resealed} push configs again with the first of "
        f"{keys.count} keys; {done.current} were already (or hold no secret); {done.changed} "
        "were replaced meanwhile by a server (left as it wrote them)"
    )
    for line in done.unreadable:
        print(f"{say}: {line}", file=sys.stderr)
    return USAGE if done.unreadable else OK


def _keys(args: argparse.Namespace) -> CredentialKeys | None:
    """The keys the options give, else the environment's (KeyFileError when unusable)."""
    if args.push_credentials_keys_file:
        return CredentialKeys.from_file(args.push_credentials_keys_file)
    if args.push_credentials_keys:
        return CredentialKeys.from_text(args.push_credentials_keys)
    path, text = os.environ.get(KEYS_FILE_ENV, ""), os.environ.get(KEYS_ENV, "")
    if path and text:
        raise KeyFileError(f"{KEYS_FILE_ENV} and {KEYS_ENV} are both set: set one")
    if path:
        return CredentialKeys.from_file(path)
    return CredentialKeys.from_text(text, KEYS_ENV) if text else None


async def _reseal(url: str, keys: CredentialKeys) -> Resealed:
    codec = PushConfigCodec(keys)
    if scheme_of(url) in POSTGRES_SCHEMES:
        from a2a_grpc.server.tasks.postgres.backend import PostgresBackend
        from a2a_grpc.server.tasks.postgres.push import PostgresPushConfigs

        postgres = PostgresBackend(url, timeout=10.0)
        try:
            await postgres.start()
            return await PostgresPushConfigs(postgres, codec).reseal_all()
        finally:
            await postgres.close()
    from a2a_grpc.server.tasks.redis.backend import RedisBackend
    from a2a_grpc.server.tasks.redis.push import RedisPushConfigs
    from a2a_grpc.server.tasks.redis.urls import CLUSTER_SUFFIX

    scheme, sep, rest = url.partition("://")
    cluster = scheme.lower().endswith(CLUSTER_SUFFIX)
    if cluster:
        url = scheme[: -len(CLUSTER_SUFFIX)] + sep + rest
    redis = RedisBackend.connect(url, timeout=10.0, cluster=cluster)
    try:
        await redis.start()
        return await RedisPushConfigs(redis, codec).reseal_all()
    finally:
        await redis.close()
