"""The reactor design's SQL (schema, migrations, statements); timestamps: :mod:`fanoutsim.kernel.store.sql`."""

from fanoutsim.kernel.store.sql import TS as _TS

SCHEMA = """
CREATE TABLE IF NOT EXISTS reactor_firings (
    id           UUID PRIMARY KEY,
    reactor_name VARCHAR NOT NULL,
    tenant_id    VARCHAR NOT NULL,
    payload      BLOB NOT NULL,
    fired_at     TIMESTAMPTZ NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS reactor_subscriptions (
    id                        UUID PRIMARY KEY,
    reactor_name              VARCHAR NOT NULL,
    workflow_name             VARCHAR NOT NULL,
    tenant_id                 VARCHAR NOT NULL,
    enabled                   BOOLEAN NOT NULL,
    predicate                 VARCHAR,
    last_seen_fired_at        TIMESTAMPTZ,
    last_seen_firing_id       UUID,
    predicate_error_count     INTEGER NOT NULL,
    predicate_error_firing_id UUID,
    last_predicate_error      VARCHAR,
    predicate_degraded        BOOLEAN NOT NULL,
    created_at                TIMESTAMPTZ NOT NULL,
    updated_at                TIMESTAMPTZ NOT NULL,
    UNIQUE (reactor_name, workflow_name, tenant_id)
);
CREATE TABLE IF NOT EXISTS workflow_executions (
    id            UUID PRIMARY KEY,
    workflow_name VARCHAR NOT NULL,
    tenant_id     VARCHAR NOT NULL,
    context       VARCHAR NOT NULL,
    status        VARCHAR NOT NULL,
    dispatched_at TIMESTAMPTZ NOT NULL,
    claimed_at    TIMESTAMPTZ,
    finished_at   TIMESTAMPTZ
);
"""

# schema version -> statements that bring a file from the version before it
MIGRATIONS = {
    2: ["ALTER TABLE reactor_subscriptions ADD COLUMN IF NOT EXISTS last_seen_firing_id UUID"],
}

FIRING_COLS = "id::VARCHAR, reactor_name, tenant_id, payload, epoch_us(fired_at), epoch_us(created_at)"

INSERT_FIRING = f"INSERT INTO reactor_firings VALUES (?, ?, ?, ?, {_TS}, {_TS})"

FETCH_FIRINGS_ALL = f"""
SELECT {FIRING_COLS} FROM reactor_firings
WHERE reactor_name = ? AND tenant_id = ?
ORDER BY fired_at, id LIMIT ?"""

FETCH_FIRINGS_AFTER = f"""
SELECT {FIRING_COLS} FROM reactor_firings
WHERE reactor_name = ? AND tenant_id = ? AND fired_at > {_TS}
ORDER BY fired_at, id LIMIT ?"""

# The compound cursor (fired_at, id) and the settle horizon: NULL parameters
# switch each part off.
FETCH_FIRINGS_CURSOR = f"""
SELECT {FIRING_COLS} FROM reactor_firings
WHERE reactor_name = ? AND tenant_id = ?
  AND (CAST(? AS BIGINT) IS NULL OR fired_at > {_TS}
       OR (fired_at = {_TS} AND CAST(? AS UUID) IS NOT NULL AND id > CAST(? AS UUID)))
  AND (CAST(? AS BIGINT) IS NULL OR fired_at <= {_TS})
ORDER BY fired_at, id LIMIT ?"""

# Conservative prune (seed 000): every enabled subscription of the firing's
# stream must be at or past it; a NULL watermark holds the stream open.
PRUNE_FIRINGS = f"""
DELETE FROM reactor_firings WHERE id IN (
    SELECT f.id FROM reactor_firings f
    WHERE f.fired_at < {_TS}
      AND (NOT ? OR NOT EXISTS (
          SELECT 1 FROM reactor_subscriptions s
          WHERE s.enabled AND s.reactor_name = f.reactor_name AND s.tenant_id = f.tenant_id
            AND (s.last_seen_fired_at IS NULL OR s.last_seen_fired_at < f.fired_at)))
    ORDER BY f.fired_at, f.id
    LIMIT ?)
RETURNING id::VARCHAR, epoch_us(fired_at)"""

# the keys of each table as the hint of the committed keys holds them (DuckDBTx._insert_new)
FIRING_KEYS = "SELECT id::VARCHAR FROM reactor_firings"
EXECUTION_KEYS = "SELECT id::VARCHAR FROM workflow_executions"

COUNT_FIRINGS = "SELECT count(*) FROM reactor_firings"
COUNT_EXECUTIONS = "SELECT count(*) FROM workflow_executions"

# Whether a fetch with this cursor could find a row (the compound cursor of
# FETCH_FIRINGS_CURSOR without its settle horizon).
HAS_FIRINGS_PAST = f"""
SELECT EXISTS (SELECT 1 FROM reactor_firings
WHERE reactor_name = ? AND tenant_id = ?
  AND (CAST(? AS BIGINT) IS NULL OR fired_at > {_TS}
       OR (fired_at = {_TS} AND CAST(? AS UUID) IS NOT NULL AND id > CAST(? AS UUID))))"""

HAS_FIRINGS_BEFORE = f"SELECT EXISTS (SELECT 1 FROM reactor_firings WHERE fired_at < {_TS})"

# what the adapter's hints start from: each stream's newest fired_at, the oldest firing
STREAM_HEADS = """
SELECT reactor_name, tenant_id, epoch_us(max(fired_at)) FROM reactor_firings
GROUP BY reactor_name, tenant_id"""

OLDEST_FIRING = "SELECT epoch_us(min(fired_at)) FROM reactor_firings"

HAS_PENDING_EXECUTIONS = "SELECT EXISTS (SELECT 1 FROM workflow_executions WHERE status = 'pending')"

SUB_COLS = """id::VARCHAR, reactor_name, workflow_name, tenant_id, enabled, predicate,
    epoch_us(last_seen_fired_at), last_seen_firing_id::VARCHAR, predicate_error_count,
    predicate_error_firing_id::VARCHAR, last_predicate_error, predicate_degraded,
    epoch_us(created_at), epoch_us(updated_at)"""

GET_SUBSCRIPTION = f"""
SELECT {SUB_COLS} FROM reactor_subscriptions
WHERE reactor_name = ? AND workflow_name = ? AND tenant_id = ?"""

# PostgreSQL only: a subscribe waits for another process's (writers of other rows do not)
LOCK_SUBSCRIPTIONS = "LOCK TABLE reactor_subscriptions IN SHARE ROW EXCLUSIVE MODE"

INSERT_SUBSCRIPTION = f"""
INSERT INTO reactor_subscriptions VALUES
    (?, ?, ?, ?, ?, ?, {_TS}, ?, ?, ?, ?, ?, {_TS}, {_TS})"""

DELETE_SUBSCRIPTION = "DELETE FROM reactor_subscriptions WHERE id = ? RETURNING id"

LIST_SUBSCRIPTIONS = f"""
SELECT {SUB_COLS} FROM reactor_subscriptions
WHERE (? IS NULL OR tenant_id = ?) AND (enabled OR NOT ?)
ORDER BY tenant_id, reactor_name, workflow_name"""

EXEC_COLS = """id::VARCHAR, workflow_name, tenant_id, context, status,
    epoch_us(dispatched_at), epoch_us(claimed_at), epoch_us(finished_at)"""

INSERT_EXECUTION = f"INSERT INTO workflow_executions VALUES (?, ?, ?, ?, ?, {_TS}, {_TS}, {_TS})"

REQUEUE_RUNNING = """
UPDATE workflow_executions SET status = 'pending', claimed_at = NULL
WHERE status = 'running'
RETURNING id::VARCHAR, epoch_us(dispatched_at)"""

# status = 'pending' twice: an UPDATE that waited for another executor's claim
# (READ COMMITTED) re-checks only its own WHERE on the row as committed, not the
# subquery, so without the outer test it claimed the running row a second time
CLAIM_EXECUTIONS = f"""
UPDATE workflow_executions SET status = 'running', claimed_at = {_TS}
WHERE status = 'pending' AND id IN (
    SELECT id FROM workflow_executions WHERE status = 'pending'
    ORDER BY dispatched_at, id LIMIT ?)
RETURNING {EXEC_COLS}"""

# what the adapter's hint of the pending executions starts from, and the claim
# it makes by their ids ({} takes one ? per id)
PENDING_EXECUTIONS = f"""
SELECT {EXEC_COLS} FROM workflow_executions WHERE status = 'pending'
ORDER BY dispatched_at, id"""

CLAIM_EXECUTION_IDS = f"""
UPDATE workflow_executions SET status = 'running', claimed_at = {_TS}
WHERE status = 'pending' AND id IN ({{}})"""

FINISH_EXECUTION = f"UPDATE workflow_executions SET status = ?, finished_at = {_TS} WHERE id = ?"

ALL_ROWS = {
    "reactor_firings": f"SELECT {FIRING_COLS} FROM reactor_firings ORDER BY fired_at, id",
    "reactor_subscriptions": f"SELECT {SUB_COLS} FROM reactor_subscriptions "
    "ORDER BY tenant_id, reactor_name, workflow_name",
    "workflow_executions": f"SELECT {EXEC_COLS} FROM workflow_executions ORDER BY dispatched_at, id",
}


def update_subscription(columns: tuple[str, ...], timestamp_columns: frozenset[str]) -> str:
    sets = ", ".join(f"{c} = {_TS}" if c in timestamp_columns else f"{c} = ?" for c in columns)
    return f"UPDATE reactor_subscriptions SET {sets} WHERE id = ?"
