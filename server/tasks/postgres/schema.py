"""The PostgreSQL store's schema and its migrations, recorded in a version table.

`migrate` brings a database to `SCHEMA_VERSION` (the server does it on start; `a2a-grpc store
migrate URL` does it ahead of a rollout): every migration the database lacks runs in order,
each in one transaction with its row in `a2a_schema` (PostgreSQL's DDL is transactional, so a
migration is applied whole or not at all). A transaction-scoped advisory lock makes replicas
that start together migrate one after another: the first applies, the others find nothing to
do. A database a newer release migrated (a version this code does not know) is refused rather
than written with an older idea of its tables.

Migrations are never edited once released: a change is a new one, appended.

Tables (version 1):

    a2a_tasks         one row per task, from its reservation on (body NULL, state 0, until
                      `create`): the Task (protobuf), its scope, state, version (the compare-
                      and-set of every write), ListTasks key (updated_ns, id), the replica
                      running it, its last event's sequence, push configs' version, the replica
                      delivering its webhooks, when it expires (finished) or parked (waiting)
    a2a_events        each task's events (sequence, flags, StreamResponse), the last
                      `stream_length` kept
    a2a_replies       direct replies (no task is stored), until their time to live
    a2a_push_configs  push configs beside their task, the protocol each was registered in, and
                      the sequence of the last event that reached its webhook
    a2a_claims        message-id claims of the shared idempotency window, until they expire
    a2a_replicas      each replica's lease
    a2a_counts        the number of task rows (the room `--max-tasks` bounds)
    a2a_scope_counts  tasks per scope and state (ListTasks' total_size), in 8 shards

Version 2:

    a2a_scope_changes the changes to a2a_scope_counts not folded into it yet (a count is the
                      sum of both); no writer updates a2a_scope_counts rows any more

Version 3: the same tables; the count trigger appends its changes at less cost, and a new
task's claim and room are taken in one statement (a2a_claim_room).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "Migration", "SchemaTooNewError", "migrate"]

MIGRATION_LOCK = 0x4132_4147_5250_4301
"""The advisory lock key migrations hold (any constant no other code of the database uses)."""


class SchemaTooNewError(ValueError):
    """The database was migrated by a newer release than this one (or, for a store told not to
    migrate, is not at this release's version)."""


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    sql: str


_V1 = r"""
CREATE TABLE a2a_tasks (
    id           text PRIMARY KEY,
    tenant       text NOT NULL,
    owner        text NOT NULL,
    context_id   text NOT NULL DEFAULT '',
    state        integer NOT NULL DEFAULT 0,
    version      bigint NOT NULL DEFAULT -1,
    body         bytea,
    updated_ns   bigint NOT NULL DEFAULT 0,
    runner       text NOT NULL DEFAULT '',
    last_event   bigint NOT NULL DEFAULT 0,
    push_version integer NOT NULL DEFAULT 0,
    deliverer    text NOT NULL DEFAULT '',
    expires_at   timestamptz,
    parked_at    timestamptz
) WITH (fillfactor = 80);
-- ListTasks: one index per filter, walked newest first from a page token's (updated_ns, id).
CREATE INDEX a2a_tasks_list ON a2a_tasks (tenant, owner, updated_ns DESC, id DESC)
    WHERE state > 0;
CREATE INDEX a2a_tasks_list_state ON a2a_tasks (tenant, owner, state, updated_ns DESC, id DESC)
    WHERE state > 0;
CREATE INDEX a2a_tasks_list_context
    ON a2a_tasks (tenant, owner, context_id, updated_ns DESC, id DESC) WHERE state > 0;
-- Room: live shares, finished tasks by expiry, tasks waiting for input, each replica's tasks.
CREATE INDEX a2a_tasks_live_owner ON a2a_tasks (owner) WHERE expires_at IS NULL;
CREATE INDEX a2a_tasks_live_tenant ON a2a_tasks (tenant) WHERE expires_at IS NULL;
CREATE INDEX a2a_tasks_expiry ON a2a_tasks (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX a2a_tasks_parked ON a2a_tasks (parked_at) WHERE parked_at IS NOT NULL;
CREATE INDEX a2a_tasks_runner ON a2a_tasks (runner) WHERE runner <> '';
CREATE INDEX a2a_tasks_deliverer ON a2a_tasks (deliverer) WHERE deliverer <> '';

CREATE TABLE a2a_events (
    task_id text NOT NULL,
    seq     bigint NOT NULL,
    flags   text NOT NULL,
    body    bytea NOT NULL,
    PRIMARY KEY (task_id, seq)
);

CREATE TABLE a2a_replies (
    task_id    text PRIMARY KEY,
    body       bytea NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX a2a_replies_expiry ON a2a_replies (expires_at);

CREATE TABLE a2a_push_configs (
    task_id   text NOT NULL,
    config_id text NOT NULL,
    body      bytea NOT NULL,
    protocol  text NOT NULL DEFAULT '',
    delivered bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (task_id, config_id)
);

CREATE TABLE a2a_claims (
    digest     text PRIMARY KEY,
    value      text NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX a2a_claims_expiry ON a2a_claims (expires_at);

CREATE TABLE a2a_replicas (
    id         text PRIMARY KEY,
    expires_at timestamptz NOT NULL
);

CREATE TABLE a2a_counts (
    id    integer PRIMARY KEY CHECK (id = 1),
    tasks bigint NOT NULL
);
INSERT INTO a2a_counts VALUES (1, 0);

-- ListTasks' total_size without counting rows: tasks per scope and state, each count split
-- over 8 rows (by the task id's hash) so that writers of one scope seldom wait on one row. A
-- state change moves its task between two rows of the same shard, the lower state first, so
-- writers always lock them in one order (no deadlock); deletions go through a2a_forget, which
-- takes its rows in one order too.
CREATE TABLE a2a_scope_counts (
    tenant text NOT NULL,
    owner  text NOT NULL,
    state  integer NOT NULL,
    shard  integer NOT NULL,
    tasks  bigint NOT NULL,
    PRIMARY KEY (tenant, owner, state, shard)
);

CREATE FUNCTION a2a_count(p_tenant text, p_owner text, p_state integer, p_shard integer,
    p_change bigint) RETURNS void LANGUAGE sql AS $$
    INSERT INTO a2a_scope_counts AS c VALUES (p_tenant, p_owner, p_state, p_shard, p_change)
    ON CONFLICT (tenant, owner, state, shard) DO UPDATE SET tasks = c.tasks + EXCLUDED.tasks;
$$;

CREATE FUNCTION a2a_count_state() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    shard integer := hashtext(NEW.id) & 7;
    old_state integer := CASE WHEN TG_OP = 'UPDATE' THEN OLD.state ELSE 0 END;
BEGIN
    IF old_state > 0 AND (NEW.state = 0 OR old_state < NEW.state) THEN
        PERFORM a2a_count(NEW.tenant, NEW.owner, old_state, shard, -1);
        old_state := 0;
    END IF;
    IF NEW.state > 0 THEN
        PERFORM a2a_count(NEW.tenant, NEW.owner, NEW.state, shard, 1);
    END IF;
    IF old_state > 0 THEN
        PERFORM a2a_count(NEW.tenant, NEW.owner, old_state, shard, -1);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER a2a_tasks_counted_insert AFTER INSERT ON a2a_tasks
    FOR EACH ROW WHEN (NEW.state > 0) EXECUTE FUNCTION a2a_count_state();
CREATE TRIGGER a2a_tasks_counted_update AFTER UPDATE OF state ON a2a_tasks
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION a2a_count_state();

-- Deletes tasks with their events and push configs, and counts them out of the room and of
-- their scopes' counts.
CREATE FUNCTION a2a_forget(ids text[]) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    gone bigint;
    tenants text[];
    owners text[];
    states integer[];
    shards integer[];
    counts bigint[];
BEGIN
    DELETE FROM a2a_events WHERE task_id = ANY(ids);
    DELETE FROM a2a_push_configs WHERE task_id = ANY(ids);
    WITH deleted AS (
        DELETE FROM a2a_tasks WHERE id = ANY(ids)
        RETURNING tenant, owner, state, hashtext(id) & 7 AS shard
    ), counted AS (
        SELECT tenant, owner, state, shard, count(*) AS tasks FROM deleted WHERE state > 0
        GROUP BY 1, 2, 3, 4
    )
    SELECT array_agg(tenant ORDER BY tenant, owner, state, shard),
           array_agg(owner ORDER BY tenant, owner, state, shard),
           array_agg(state ORDER BY tenant, owner, state, shard),
           array_agg(shard ORDER BY tenant, owner, state, shard),
           array_agg(tasks ORDER BY tenant, owner, state, shard),
           (SELECT count(*) FROM deleted)
    INTO tenants, owners, states, shards, counts, gone FROM counted;
    FOR i IN 1 .. coalesce(array_length(tenants, 1), 0) LOOP
        PERFORM a2a_count(tenants[i], owners[i], states[i], shards[i], -counts[i]);
    END LOOP;
    IF gone > 0 THEN
        UPDATE a2a_counts SET tasks = tasks - gone WHERE id = 1;
    END IF;
    RETURN gone;
END $$;

-- Promises room to a new task: its row, with the replica that will run it. The room's count
-- row is locked first, so reservations take room one at a time. A full room evicts its oldest
-- finished tasks (up to `batch`; live ones never) in the same transaction.
-- verdict: 'ok' (evicted: the ids that went) | 'owner' | 'tenant' (live: their live tasks)
-- | 'full'.
CREATE FUNCTION a2a_reserve(
    p_id text, p_tenant text, p_owner text, p_replica text, p_max_tasks bigint,
    p_max_owner integer, p_max_tenant integer, p_batch integer,
    OUT verdict text, OUT live bigint, OUT evicted text[]
) LANGUAGE plpgsql AS $$
DECLARE
    total bigint;
    excess bigint;
BEGIN
    evicted := '{}';
    SELECT tasks INTO total FROM a2a_counts WHERE id = 1 FOR UPDATE;
    IF p_max_owner IS NOT NULL THEN
        SELECT count(*) INTO live FROM (
            SELECT 1 FROM a2a_tasks WHERE owner = p_owner AND expires_at IS NULL
            LIMIT p_max_owner) AS shares;
        IF live >= p_max_owner THEN verdict := 'owner'; RETURN; END IF;
    END IF;
    IF p_max_tenant IS NOT NULL THEN
        SELECT count(*) INTO live FROM (
            SELECT 1 FROM a2a_tasks WHERE tenant = p_tenant AND expires_at IS NULL
            LIMIT p_max_tenant) AS shares;
        IF live >= p_max_tenant THEN verdict := 'tenant'; RETURN; END IF;
    END IF;
    excess := total - p_max_tasks + 1;
    IF excess > 0 THEN
        evicted := ARRAY(
            SELECT id FROM a2a_tasks WHERE expires_at IS NOT NULL
            ORDER BY expires_at LIMIT greatest(excess, p_batch) FOR UPDATE SKIP LOCKED);
        IF cardinality(evicted) < excess THEN
            evicted := '{}';
            verdict := 'full';
            RETURN;
        END IF;
        PERFORM a2a_forget(evicted);
    END IF;
    INSERT INTO a2a_tasks (id, tenant, owner, runner)
        VALUES (p_id, p_tenant, p_owner, p_replica)
        ON CONFLICT (id) DO NOTHING;
    IF FOUND THEN
        UPDATE a2a_counts SET tasks = tasks + 1 WHERE id = 1;
    END IF;
    verdict := 'ok';
END $$;

-- Sets the claim `p_value` on `p_digest` for `p_window` seconds unless a claim that has not
-- expired exists; returns that one (NULL when this one was set). Each statement of a
-- plpgsql function sees what committed before it: a claim another transaction just made
-- is returned, never overwritten.
CREATE FUNCTION a2a_claim(p_digest text, p_value text, p_window double precision)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    existing text;
BEGIN
    INSERT INTO a2a_claims AS c VALUES (
        p_digest, p_value, clock_timestamp() + make_interval(secs => p_window))
    ON CONFLICT (digest) DO UPDATE SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at
        WHERE c.expires_at <= clock_timestamp();
    IF FOUND THEN RETURN NULL; END IF;
    SELECT value INTO existing FROM a2a_claims WHERE digest = p_digest;
    RETURN existing;
END $$;
"""

_V2 = r"""
-- Counts a state change appends instead of adding to a shared row: writers never wait on
-- one another's count rows, so writes committed together (batch.py) cannot deadlock on them.
-- Housekeeping folds the changes into a2a_scope_counts in bounded batches (a2a_fold_counts);
-- a count is both tables' sum.
CREATE TABLE a2a_scope_changes (
    id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant text NOT NULL,
    owner  text NOT NULL,
    state  integer NOT NULL,
    change bigint NOT NULL
);
CREATE INDEX a2a_scope_changes_scope ON a2a_scope_changes (tenant, owner, state);

CREATE OR REPLACE FUNCTION a2a_count(p_tenant text, p_owner text, p_state integer,
    p_shard integer, p_change bigint) RETURNS void LANGUAGE sql AS $$
    INSERT INTO a2a_scope_changes (tenant, owner, state, change)
    VALUES (p_tenant, p_owner, p_state, p_change);
$$;

-- Folds at most `p_batch` changes (those no other replica is folding) into the counts, whose
-- rows it takes in one order; returns how many it folded.
CREATE FUNCTION a2a_fold_counts(p_batch integer) RETURNS bigint LANGUAGE sql AS $$
    WITH taken AS (
        DELETE FROM a2a_scope_changes WHERE id IN (
            SELECT id FROM a2a_scope_changes ORDER BY id LIMIT p_batch FOR UPDATE SKIP LOCKED)
        RETURNING tenant, owner, state, change
    ), folded AS (
        INSERT INTO a2a_scope_counts AS c (tenant, owner, state, shard, tasks)
        SELECT tenant, owner, state, 0, sum(change) FROM taken
        GROUP BY tenant, owner, state ORDER BY tenant, owner, state
        ON CONFLICT (tenant, owner, state, shard) DO UPDATE SET tasks = c.tasks + EXCLUDED.tasks
    )
    SELECT count(*) FROM taken;
$$;
"""

_V3 = r"""
-- The same counts, cheaper: a SQL function's statement that PostgreSQL does not inline (an
-- INSERT never is) is planned anew on every call before PostgreSQL 18, where plpgsql keeps its
-- plans for the session; and a state change appends both its changes in one statement.
CREATE OR REPLACE FUNCTION a2a_count(p_tenant text, p_owner text, p_state integer,
    p_shard integer, p_change bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO a2a_scope_changes (tenant, owner, state, change)
    VALUES (p_tenant, p_owner, p_state, p_change);
END $$;

CREATE OR REPLACE FUNCTION a2a_count_state() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO a2a_scope_changes (tenant, owner, state, change)
    SELECT NEW.tenant, NEW.owner, v.state, v.change
    FROM (VALUES (CASE WHEN TG_OP = 'UPDATE' THEN OLD.state ELSE 0 END, -1),
                 (NEW.state, 1)) AS v(state, change)
    WHERE v.state > 0;
    RETURN NULL;
END $$;

-- A new task's message-id claim and its room in one statement: the claim as a2a_claim sets it
-- (claimed: the claim that holds instead, and nothing reserved); once set, the room as
-- a2a_reserve reserves it, and a reservation refused takes the claim back.
CREATE FUNCTION a2a_claim_room(
    p_digest text, p_value text, p_window double precision,
    p_id text, p_tenant text, p_owner text, p_replica text, p_max_tasks bigint,
    p_max_owner integer, p_max_tenant integer, p_batch integer,
    OUT claimed text, OUT verdict text, OUT live bigint, OUT evicted text[]
) LANGUAGE plpgsql AS $$
BEGIN
    claimed := a2a_claim(p_digest, p_value, p_window);
    IF claimed IS NOT NULL THEN RETURN; END IF;
    SELECT r.verdict, r.live, r.evicted INTO verdict, live, evicted
    FROM a2a_reserve(p_id, p_tenant, p_owner, p_replica, p_max_tasks, p_max_owner,
        p_max_tenant, p_batch) AS r;
    IF verdict <> 'ok' THEN
        DELETE FROM a2a_claims WHERE digest = p_digest AND value = p_value;
    END IF;
END $$;
"""

_V4 = r"""
-- A count that folds to zero is deleted rather than kept: a scope whose tasks are all gone
-- leaves no row behind (a count is both tables' sum, so a missing row counts 0). Zero rows are
-- found as the fold writes them, then deleted by the next statement, which sees them.
CREATE OR REPLACE FUNCTION a2a_fold_counts(p_batch integer) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    folded bigint;
    zero_tenants text[];
    zero_owners text[];
    zero_states integer[];
BEGIN
    WITH taken AS (
        DELETE FROM a2a_scope_changes WHERE id IN (
            SELECT id FROM a2a_scope_changes ORDER BY id LIMIT p_batch FOR UPDATE SKIP LOCKED)
        RETURNING tenant, owner, state, change
    ), summed AS (
        SELECT tenant, owner, state, sum(change) AS change, count(*) AS n
        FROM taken GROUP BY tenant, owner, state
    ), written AS (
        INSERT INTO a2a_scope_counts AS c (tenant, owner, state, shard, tasks)
        SELECT tenant, owner, state, 0, change FROM summed ORDER BY tenant, owner, state
        ON CONFLICT (tenant, owner, state, shard) DO UPDATE SET tasks = c.tasks + EXCLUDED.tasks
        RETURNING c.tenant, c.owner, c.state, c.tasks
    )
    SELECT (SELECT coalesce(sum(n), 0) FROM summed),
        array_agg(tenant) FILTER (WHERE tasks = 0), array_agg(owner) FILTER (WHERE tasks = 0),
        array_agg(state) FILTER (WHERE tasks = 0)
    INTO folded, zero_tenants, zero_owners, zero_states
    FROM written;
    IF zero_tenants IS NOT NULL THEN
        DELETE FROM a2a_scope_counts AS c
        USING unnest(zero_tenants, zero_owners, zero_states) AS z(tenant, owner, state)
        WHERE c.tenant = z.tenant AND c.owner = z.owner AND c.state = z.state
            AND c.shard = 0 AND c.tasks = 0;
    END IF;
    RETURN folded;
END $$;
"""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "tasks, events, replies, push configs, claims, leases, room", _V1),
    Migration(2, "scope counts as appended changes, folded by housekeeping", _V2),
    Migration(3, "cheaper scope count changes; a new task's claim and room at once", _V3),
    Migration(4, "a scope count folded to zero is deleted", _V4),
)
SCHEMA_VERSION = MIGRATIONS[-1].version

_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS a2a_schema (
    version     integer PRIMARY KEY,
    description text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
)
"""


async def schema_version(connection: Any) -> int:
    """The version the database is at (0 when it has no version table)."""
    cursor = await connection.execute("SELECT to_regclass('a2a_schema') IS NOT NULL")
    row = await cursor.fetchone()
    if not row or not row[0]:
        return 0
    cursor = await connection.execute("SELECT coalesce(max(version), 0) FROM a2a_schema")
    row = await cursor.fetchone()
    return int(row[0]) if row else 0


async def migrate(
    connection: Any, migrations: tuple[Migration, ...] = MIGRATIONS, target: int | None = None
) -> tuple[int, int]:
    """Applies the `migrations` the database lacks, up to `target` (default: the last), and
    returns (the version before, the version after). `connection` is a psycopg
    AsyncConnection in autocommit mode. SchemaTooNewError when the database is past the last
    migration given."""
    last = migrations[-1].version if target is None else target
    before = after = await schema_version(connection)
    for migration in migrations:
        if migration.version > last:
            break
        async with connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            await connection.execute(_VERSION_TABLE)
            after = await schema_version(connection)  # another replica may have migrated
            if migration.version <= after:
                continue
            await connection.execute(migration.sql)
            await connection.execute(
                "INSERT INTO a2a_schema (version, description) VALUES (%s, %s)",
                (migration.version, migration.description),
            )
            after = migration.version
    known = migrations[-1].version
    if after > known:
        raise SchemaTooNewError(
            f"the database's a2a schema is at version {after}, newer than this release knows "
            f"({known}): run the release that migrated it, or a newer one"
        )
    return before, after
