"""Every SQL statement the DuckDB store runs, kept together.

Timestamps are ``TIMESTAMPTZ`` in the tables and ``BIGINT`` microseconds at
the interface: ``epoch_us(col)`` reads them, ``_TS`` writes them.
"""

SCHEMA_VERSION = 6

_TS = "make_timestamp(CAST(? AS BIGINT))::TIMESTAMPTZ"

SCHEMA = """
CREATE TABLE IF NOT EXISTS fanoutsim_meta (
    key   VARCHAR PRIMARY KEY,
    value VARCHAR NOT NULL
);
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
CREATE TABLE IF NOT EXISTS runner_log (
    seq    INTEGER PRIMARY KEY,
    happened_at TIMESTAMPTZ NOT NULL,
    event  VARCHAR NOT NULL,
    detail VARCHAR
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

# The outbox design (seed 002): a domain table, the log, per-consumer cursors,
# parked (poison) rows and deferred work. ``outbox_seq`` is the log's sequence:
# one row whose ``last`` only grows, so a pruned or rolled-back seq is never reused.
OUTBOX_SCHEMA = """
CREATE TABLE IF NOT EXISTS pages (
    id         VARCHAR PRIMARY KEY,
    body       VARCHAR,
    updated_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS outbox_seq (
    id   INTEGER PRIMARY KEY,
    last BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS outbox (
    seq    BIGINT PRIMARY KEY,
    ts     TIMESTAMPTZ NOT NULL,
    topic  VARCHAR,
    kind   VARCHAR NOT NULL,
    ref    VARCHAR,
    due_at TIMESTAMPTZ
);
CREATE TABLE IF NOT EXISTS cursors (
    consumer VARCHAR PRIMARY KEY,
    seq      BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS parked (
    consumer  VARCHAR NOT NULL,
    seq       BIGINT NOT NULL,
    error     VARCHAR,
    attempts  INTEGER NOT NULL,
    parked_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (consumer, seq)
);
CREATE TABLE IF NOT EXISTS deferred (
    consumer VARCHAR NOT NULL,
    seq      BIGINT NOT NULL,
    due_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (consumer, seq)
);
"""

# The leased-consumer design (seed 003): the event log, durable consumers and
# their per-partition checkpoints, leases, retries, dead letters, and the one
# ``history`` row (the incarnation a restore bumps, and the log's counters).
LEASE_SCHEMA = """
CREATE TABLE IF NOT EXISTS history (
    id             INTEGER PRIMARY KEY,
    incarnation    BIGINT NOT NULL,
    last_commit    BIGINT NOT NULL,
    last_seq       BIGINT NOT NULL,
    leases_granted BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    seq          BIGINT PRIMARY KEY,
    event_id     VARCHAR NOT NULL UNIQUE,
    commit_seq   BIGINT NOT NULL,
    ordinal      INTEGER NOT NULL,
    "partition"  VARCHAR NOT NULL,
    kind         VARCHAR NOT NULL,
    payload      VARCHAR,
    committed_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS lease_consumers (
    consumer        VARCHAR PRIMARY KEY,
    start_seq       BIGINT NOT NULL,
    batch_limit     INTEGER NOT NULL,
    in_flight_limit INTEGER NOT NULL,
    lease_seconds   DOUBLE NOT NULL,
    start_commit    BIGINT,
    revision        BIGINT
);
CREATE TABLE IF NOT EXISTS checkpoints (
    consumer    VARCHAR NOT NULL,
    "partition" VARCHAR NOT NULL,
    seq         BIGINT NOT NULL,
    commit_seq  BIGINT,
    PRIMARY KEY (consumer, "partition")
);
CREATE TABLE IF NOT EXISTS leases (
    consumer    VARCHAR NOT NULL,
    event_id    VARCHAR NOT NULL,
    seq         BIGINT NOT NULL,
    "partition" VARCHAR NOT NULL,
    token       VARCHAR NOT NULL,
    incarnation BIGINT NOT NULL,
    attempt     INTEGER NOT NULL,
    leased_at   TIMESTAMPTZ NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (consumer, event_id)
);
CREATE TABLE IF NOT EXISTS retries (
    consumer    VARCHAR NOT NULL,
    event_id    VARCHAR NOT NULL,
    seq         BIGINT NOT NULL,
    "partition" VARCHAR NOT NULL,
    attempts    INTEGER NOT NULL,
    not_before  TIMESTAMPTZ NOT NULL,
    error       VARCHAR,
    PRIMARY KEY (consumer, event_id)
);
CREATE TABLE IF NOT EXISTS dead_letters (
    consumer    VARCHAR NOT NULL,
    event_id    VARCHAR NOT NULL,
    seq         BIGINT NOT NULL,
    "partition" VARCHAR NOT NULL,
    attempts    INTEGER NOT NULL,
    error       VARCHAR,
    payload     VARCHAR,
    dead_at     TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (consumer, event_id)
);
"""

# Schema 6: RiffDB's rules (issue 16). Sparse resolutions held past a checkpoint;
# a checkpoint remembers its event's commit (the retention fence is the commit
# before it); a consumer its start position's commit and a revision; retire
# deletes a consumer, so the ``retired`` column goes (with the rows of consumers
# an older version had marked retired). Column order after the migration is the
# order LEASE_SCHEMA gives a new file; every statement names its columns anyway.
RESOLUTIONS_SCHEMA = """
CREATE TABLE IF NOT EXISTS resolutions (
    consumer    VARCHAR NOT NULL,
    event_id    VARCHAR NOT NULL,
    seq         BIGINT NOT NULL,
    "partition" VARCHAR NOT NULL,
    commit_seq  BIGINT NOT NULL,
    kind        VARCHAR NOT NULL,
    PRIMARY KEY (consumer, event_id)
);
"""
# the highest seq retention has deleted (every seq up to it is gone)
_HORIZON = """coalesce((SELECT min(e.seq) - 1 FROM events e), (SELECT h.last_seq FROM history h WHERE h.id = 1))"""
# the commit of the event at a seq; a pruned one's is below the oldest retained commit
_COMMIT_AT = """coalesce((SELECT e.commit_seq FROM events e WHERE e.seq = {seq}),
                (SELECT min(e.commit_seq) - 1 FROM events e),
                (SELECT h.last_commit FROM history h WHERE h.id = 1))"""


def _drop_retired(con) -> None:
    """Retired consumers (an older version kept their rows) are deleted with
    their rows, then the column; nothing to do once it is gone."""
    has = con.execute("SELECT count(*) FROM information_schema.columns "
                      "WHERE table_name = 'lease_consumers' AND column_name = 'retired'").fetchone()[0]
    if not has:
        return
    for table in ("checkpoints", "leases", "retries", "dead_letters"):
        con.execute(f"DELETE FROM {table} WHERE consumer IN (SELECT consumer FROM lease_consumers WHERE retired)")
    con.execute("DELETE FROM lease_consumers WHERE retired")
    con.execute("ALTER TABLE lease_consumers DROP COLUMN retired")

# schema version -> statements that bring a file from the version before it
MIGRATIONS = {
    2: ["ALTER TABLE reactor_subscriptions ADD COLUMN IF NOT EXISTS last_seen_firing_id UUID"],
    3: [],  # runner_log: created by SCHEMA's CREATE TABLE IF NOT EXISTS
    # the outbox design: its tables come from OUTBOX_SCHEMA; the sequence row once
    4: [OUTBOX_SCHEMA, "INSERT INTO outbox_seq SELECT 1, 0 WHERE NOT EXISTS (SELECT 1 FROM outbox_seq)"],
    # the leased-consumer design: its tables from LEASE_SCHEMA; the history row once
    5: [LEASE_SCHEMA, "INSERT INTO history SELECT 1, 1, 0, 0, 0 WHERE NOT EXISTS (SELECT 1 FROM history)"],
    # RiffDB's rules: a statement is SQL or a function of the connection; each is idempotent
    6: [RESOLUTIONS_SCHEMA,
        "ALTER TABLE lease_consumers ADD COLUMN IF NOT EXISTS start_commit BIGINT",
        "ALTER TABLE lease_consumers ADD COLUMN IF NOT EXISTS revision BIGINT",
        "ALTER TABLE checkpoints ADD COLUMN IF NOT EXISTS commit_seq BIGINT",
        _drop_retired,
        "UPDATE lease_consumers SET start_commit = CASE WHEN start_seq = 0 THEN 0 ELSE "
        + _COMMIT_AT.format(seq="lease_consumers.start_seq") + " END WHERE start_commit IS NULL",
        "UPDATE lease_consumers SET revision = 1 WHERE revision IS NULL",
        # the old fence let retention prune a checkpoint's own commit (never an event past it): such a
        # checkpoint moves up to the retention horizon, which skips nothing, so that no pull reads
        # pruned history
        "UPDATE checkpoints SET seq = " + _HORIZON + " WHERE commit_seq IS NULL AND seq < " + _HORIZON,
        "UPDATE checkpoints SET commit_seq = " + _COMMIT_AT.format(seq="checkpoints.seq")
        + " WHERE commit_seq IS NULL"],
}

LOG_RUNNER = f"""
INSERT INTO runner_log
SELECT coalesce(max(seq), 0) + 1, {_TS}, ?, ? FROM runner_log
RETURNING seq"""

GET_SCHEMA_VERSION = "SELECT value FROM fanoutsim_meta WHERE key = 'schema_version'"
SET_SCHEMA_VERSION = "INSERT OR REPLACE INTO fanoutsim_meta VALUES ('schema_version', ?)"
HAS_META = "SELECT count(*) FROM information_schema.tables WHERE table_name = 'fanoutsim_meta'"

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

COUNT_FIRINGS = "SELECT count(*) FROM reactor_firings"

SUB_COLS = """id::VARCHAR, reactor_name, workflow_name, tenant_id, enabled, predicate,
    epoch_us(last_seen_fired_at), last_seen_firing_id::VARCHAR, predicate_error_count, predicate_error_firing_id::VARCHAR,
    last_predicate_error, predicate_degraded, epoch_us(created_at), epoch_us(updated_at)"""

GET_SUBSCRIPTION = f"""
SELECT {SUB_COLS} FROM reactor_subscriptions
WHERE reactor_name = ? AND workflow_name = ? AND tenant_id = ?"""

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

CLAIM_EXECUTIONS = f"""
UPDATE workflow_executions SET status = 'running', claimed_at = {_TS}
WHERE id IN (
    SELECT id FROM workflow_executions WHERE status = 'pending'
    ORDER BY dispatched_at, id LIMIT ?)
RETURNING {EXEC_COLS}"""

FINISH_EXECUTION = f"UPDATE workflow_executions SET status = ?, finished_at = {_TS} WHERE id = ?"

ALL_ROWS = {
    "reactor_firings": f"SELECT {FIRING_COLS} FROM reactor_firings ORDER BY fired_at, id",
    "reactor_subscriptions": f"SELECT {SUB_COLS} FROM reactor_subscriptions "
                             "ORDER BY tenant_id, reactor_name, workflow_name",
    "workflow_executions": f"SELECT {EXEC_COLS} FROM workflow_executions ORDER BY dispatched_at, id",
    "runner_log": "SELECT seq, epoch_us(happened_at), event, detail FROM runner_log ORDER BY seq",
}


def update_subscription(columns: tuple[str, ...], timestamp_columns: frozenset[str]) -> str:
    sets = ", ".join(f"{c} = {_TS}" if c in timestamp_columns else f"{c} = ?" for c in columns)
    return f"UPDATE reactor_subscriptions SET {sets} WHERE id = ?"


# -- the outbox design (seed 002) ------------------------------------------------------

RESERVE_OUTBOX_SEQ = "UPDATE outbox_seq SET last = last + 1 WHERE id = 1 RETURNING last"
OUTBOX_LAST = "SELECT last FROM outbox_seq WHERE id = 1"
OUTBOX_COLS = "seq, epoch_us(ts), topic, kind, ref, epoch_us(due_at)"
INSERT_OUTBOX = f"INSERT INTO outbox VALUES (?, {_TS}, ?, ?, ?, {_TS})"
FETCH_OUTBOX = f"SELECT {OUTBOX_COLS} FROM outbox WHERE seq > ? ORDER BY seq LIMIT ?"
OUTBOX_MIN = "SELECT min(seq) FROM outbox"
# rows past the retention window go, except those a consumer still owes (deferred work)
PRUNE_OUTBOX = f"""
DELETE FROM outbox WHERE seq IN (
    SELECT o.seq FROM outbox o
    WHERE o.ts < {_TS} AND NOT EXISTS (SELECT 1 FROM deferred d WHERE d.seq = o.seq)
    ORDER BY o.seq LIMIT ?)
RETURNING seq"""
GET_CURSOR = "SELECT seq FROM cursors WHERE consumer = ?"
SET_CURSOR = "INSERT OR REPLACE INTO cursors VALUES (?, ?)"
PARKED_COLS = "consumer, seq, error, attempts, epoch_us(parked_at)"
PARK = f"INSERT OR REPLACE INTO parked VALUES (?, ?, ?, ?, {_TS})"
LIST_PARKED = f"SELECT {PARKED_COLS} FROM parked WHERE (CAST(? AS VARCHAR) IS NULL OR consumer = ?) ORDER BY consumer, seq"
DEFER = f"INSERT OR REPLACE INTO deferred VALUES (?, ?, {_TS})"
FETCH_DUE = f"""
SELECT consumer, seq, epoch_us(due_at) FROM deferred
WHERE consumer = ? AND due_at <= {_TS} ORDER BY due_at, seq LIMIT ?"""
NEXT_DUE = "SELECT epoch_us(min(due_at)) FROM deferred WHERE consumer = ?"
DELETE_DEFERRED = "DELETE FROM deferred WHERE consumer = ? AND seq = ? RETURNING seq"
PAGE_COLS = "id, body, epoch_us(updated_at)"
UPSERT_PAGE = f"INSERT OR REPLACE INTO pages VALUES (?, ?, {_TS})"
GET_PAGE = f"SELECT {PAGE_COLS} FROM pages WHERE id = ?"

ALL_ROWS.update({
    "outbox": f"SELECT {OUTBOX_COLS} FROM outbox ORDER BY seq",
    "cursors": "SELECT consumer, seq FROM cursors ORDER BY consumer",
    "parked": f"SELECT {PARKED_COLS} FROM parked ORDER BY consumer, seq",
    "deferred": "SELECT consumer, seq, epoch_us(due_at) FROM deferred ORDER BY consumer, seq",
    "pages": f"SELECT {PAGE_COLS} FROM pages ORDER BY id",
})


# -- the leased-consumer design (seed 003) ---------------------------------------------
# Every statement's first word says what it does: DuckDBTx begins the transaction
# at the first statement that does not start with SELECT.

HISTORY_COLS = "incarnation, last_commit, last_seq, leases_granted"
GET_HISTORY = f"SELECT {HISTORY_COLS} FROM history WHERE id = 1"
SET_HISTORY = "UPDATE history SET incarnation = ?, last_commit = ?, last_seq = ?, leases_granted = ? WHERE id = 1"
EVENT_COLS = 'seq, event_id, commit_seq, ordinal, "partition", kind, payload, epoch_us(committed_at)'
INSERT_EVENT = f"INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, {_TS})"
GET_EVENT = f"SELECT {EVENT_COLS} FROM events WHERE event_id = ?"
GET_EVENT_AT = f"SELECT {EVENT_COLS} FROM events WHERE seq = ?"
# per partition (or only one), the first N events past both the consumer's start and its checkpoint there
EVENT_WINDOW = f"""
SELECT {EVENT_COLS} FROM (
    SELECT e.*, row_number() OVER (PARTITION BY e."partition" ORDER BY e.seq) AS rn
    FROM events e
    LEFT JOIN checkpoints k ON k.consumer = ? AND k."partition" = e."partition"
    WHERE e.seq > ? AND (k.seq IS NULL OR e.seq > k.seq)
      AND (CAST(? AS VARCHAR) IS NULL OR e."partition" = ?))
WHERE rn <= ?
ORDER BY seq"""
EVENT_BOUNDS = "SELECT min(seq), max(seq) FROM events"
PRUNE_EVENTS = f"""
DELETE FROM events WHERE seq IN (
    SELECT seq FROM events
    WHERE committed_at < {_TS} AND (CAST(? AS BIGINT) IS NULL OR commit_seq < ?)
    ORDER BY seq LIMIT ?)
RETURNING seq, event_id"""
LEASE_CONSUMER_COLS = "consumer, start_seq, start_commit, batch_limit, in_flight_limit, lease_seconds, revision"
GET_LEASE_CONSUMER = f"SELECT {LEASE_CONSUMER_COLS} FROM lease_consumers WHERE consumer = ?"
PUT_LEASE_CONSUMER = f"INSERT OR REPLACE INTO lease_consumers ({LEASE_CONSUMER_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
DELETE_LEASE_CONSUMER = "DELETE FROM lease_consumers WHERE consumer = ? RETURNING start_seq"
CHECKPOINT_COLS = 'consumer, "partition", seq, commit_seq'
LIST_CHECKPOINTS = f'SELECT {CHECKPOINT_COLS} FROM checkpoints WHERE consumer = ? ORDER BY "partition"'
SET_CHECKPOINT = f"INSERT OR REPLACE INTO checkpoints ({CHECKPOINT_COLS}) VALUES (?, ?, ?, ?)"
CLEAR_CHECKPOINTS = "DELETE FROM checkpoints WHERE consumer = ? RETURNING seq"
RESOLUTION_COLS = 'consumer, event_id, seq, "partition", commit_seq, kind'
INSERT_RESOLUTION = f"INSERT INTO resolutions ({RESOLUTION_COLS}) VALUES (?, ?, ?, ?, ?, ?)"
LIST_RESOLUTIONS = (f"SELECT {RESOLUTION_COLS} FROM resolutions WHERE consumer = ? "
                    'AND (CAST(? AS VARCHAR) IS NULL OR "partition" = ?) ORDER BY seq')
DELETE_RESOLUTION = "DELETE FROM resolutions WHERE consumer = ? AND event_id = ? RETURNING seq"
CLEAR_RESOLUTIONS = "DELETE FROM resolutions WHERE consumer = ? RETURNING seq"
CLEAR_RETRIES = "DELETE FROM retries WHERE consumer = ? RETURNING seq"
CLEAR_DEAD_LETTERS = "DELETE FROM dead_letters WHERE consumer = ? RETURNING seq"
LEASE_COLS = ('consumer, event_id, seq, "partition", token, incarnation, attempt, '
              'epoch_us(leased_at), epoch_us(expires_at)')
INSERT_LEASE = f"INSERT INTO leases VALUES (?, ?, ?, ?, ?, ?, ?, {_TS}, {_TS})"
GET_LEASE = f"SELECT {LEASE_COLS} FROM leases WHERE consumer = ? AND event_id = ?"
LIST_LEASES = (f"SELECT {LEASE_COLS} FROM leases WHERE (CAST(? AS VARCHAR) IS NULL OR consumer = ?) "
               "ORDER BY consumer, seq")
DELETE_LEASE = "DELETE FROM leases WHERE consumer = ? AND event_id = ? RETURNING seq"
EXPIRED_LEASES = f"""
SELECT {LEASE_COLS} FROM leases WHERE expires_at <= {_TS}
ORDER BY expires_at, consumer, seq LIMIT ?"""
RETRY_COLS = 'consumer, event_id, seq, "partition", attempts, epoch_us(not_before), error'
PUT_RETRY = f"INSERT OR REPLACE INTO retries VALUES (?, ?, ?, ?, ?, {_TS}, ?)"
GET_RETRY = f"SELECT {RETRY_COLS} FROM retries WHERE consumer = ? AND event_id = ?"
DELETE_RETRY = "DELETE FROM retries WHERE consumer = ? AND event_id = ? RETURNING seq"
LIST_RETRIES = (f"SELECT {RETRY_COLS} FROM retries WHERE (CAST(? AS VARCHAR) IS NULL OR consumer = ?) "
                "ORDER BY consumer, seq")
DEAD_COLS = 'consumer, event_id, seq, "partition", attempts, error, payload, epoch_us(dead_at)'
INSERT_DEAD_LETTER = f"INSERT INTO dead_letters VALUES (?, ?, ?, ?, ?, ?, ?, {_TS})"
LIST_DEAD_LETTERS = (f"SELECT {DEAD_COLS} FROM dead_letters WHERE (CAST(? AS VARCHAR) IS NULL OR consumer = ?) "
                     "ORDER BY consumer, seq")

ALL_ROWS.update({
    "events": f"SELECT {EVENT_COLS} FROM events ORDER BY seq",
    "lease_consumers": f"SELECT {LEASE_CONSUMER_COLS} FROM lease_consumers ORDER BY consumer",
    "checkpoints": f'SELECT {CHECKPOINT_COLS} FROM checkpoints ORDER BY consumer, "partition"',
    "resolutions": f"SELECT {RESOLUTION_COLS} FROM resolutions ORDER BY consumer, seq",
    "leases": f"SELECT {LEASE_COLS} FROM leases ORDER BY consumer, seq",
    "retries": f"SELECT {RETRY_COLS} FROM retries ORDER BY consumer, seq",
    "dead_letters": f"SELECT {DEAD_COLS} FROM dead_letters ORDER BY consumer, seq",
    "history": GET_HISTORY,
})
