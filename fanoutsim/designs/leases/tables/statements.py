"""The leased-consumer design's SQL (schema, migrations, statements); timestamps: :mod:`fanoutsim.kernel.store.sql`."""

from fanoutsim.kernel.store.sql import TS as _TS

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
    has = con.execute(
        "SELECT count(*) FROM information_schema.columns "
        "WHERE table_name = 'lease_consumers' AND column_name = 'retired'"
    ).fetchone()[0]
    if not has:
        return
    for table in ("checkpoints", "leases", "retries", "dead_letters"):
        con.execute(f"DELETE FROM {table} WHERE consumer IN (SELECT consumer FROM lease_consumers WHERE retired)")
    con.execute("DELETE FROM lease_consumers WHERE retired")
    con.execute("ALTER TABLE lease_consumers DROP COLUMN retired")


# schema version -> statements that bring a file from the version before it:
# the leased-consumer design's tables from LEASE_SCHEMA; the history row once (5);
# RiffDB's rules (6)
MIGRATIONS = {
    5: [LEASE_SCHEMA, "INSERT INTO history SELECT 1, 1, 0, 0, 0 WHERE NOT EXISTS (SELECT 1 FROM history)"],
    # RiffDB's rules: a statement is SQL or a function of the connection; each is idempotent
    6: [
        RESOLUTIONS_SCHEMA,
        "ALTER TABLE lease_consumers ADD COLUMN IF NOT EXISTS start_commit BIGINT",
        "ALTER TABLE lease_consumers ADD COLUMN IF NOT EXISTS revision BIGINT",
        "ALTER TABLE checkpoints ADD COLUMN IF NOT EXISTS commit_seq BIGINT",
        _drop_retired,
        "UPDATE lease_consumers SET start_commit = CASE WHEN start_seq = 0 THEN 0 ELSE "
        + _COMMIT_AT.format(seq="lease_consumers.start_seq")
        + " END WHERE start_commit IS NULL",
        "UPDATE lease_consumers SET revision = 1 WHERE revision IS NULL",
        # the old fence let retention prune a checkpoint's own commit (never an event past it): such a
        # checkpoint moves up to the retention horizon, which skips nothing, so that no pull reads
        # pruned history
        "UPDATE checkpoints SET seq = " + _HORIZON + " WHERE commit_seq IS NULL AND seq < " + _HORIZON,
        "UPDATE checkpoints SET commit_seq = " + _COMMIT_AT.format(seq="checkpoints.seq") + " WHERE commit_seq IS NULL",
    ],
}

# Every statement's first word says what it does: DuckDBTx begins the transaction
# at the first statement that does not start with SELECT.

HISTORY_COLS = "incarnation, last_commit, last_seq, leases_granted"
GET_HISTORY = f"SELECT {HISTORY_COLS} FROM history WHERE id = 1"
# the history row locked until the transaction ends (PostgreSQL: see Tx.row_locks)
LOCK_HISTORY = GET_HISTORY + " FOR UPDATE"
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
DELETE_EVENT = "DELETE FROM events WHERE seq = ? RETURNING seq"
PRUNE_EVENTS = f"""
DELETE FROM events WHERE seq IN (
    SELECT seq FROM events
    WHERE committed_at < {_TS} AND (CAST(? AS BIGINT) IS NULL OR commit_seq < ?)
    ORDER BY seq LIMIT ?)
RETURNING seq, event_id"""
LEASE_CONSUMER_COLS = "consumer, start_seq, start_commit, batch_limit, in_flight_limit, lease_seconds, revision"
GET_LEASE_CONSUMER = f"SELECT {LEASE_CONSUMER_COLS} FROM lease_consumers WHERE consumer = ?"
LOCK_LEASE_CONSUMER = GET_LEASE_CONSUMER + " FOR UPDATE"
PUT_LEASE_CONSUMER = f"INSERT OR REPLACE INTO lease_consumers ({LEASE_CONSUMER_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
DELETE_LEASE_CONSUMER = "DELETE FROM lease_consumers WHERE consumer = ? RETURNING start_seq"
CHECKPOINT_COLS = 'consumer, "partition", seq, commit_seq'
LIST_CHECKPOINTS = f'SELECT {CHECKPOINT_COLS} FROM checkpoints WHERE consumer = ? ORDER BY "partition"'
SET_CHECKPOINT = f"INSERT OR REPLACE INTO checkpoints ({CHECKPOINT_COLS}) VALUES (?, ?, ?, ?)"
CLEAR_CHECKPOINTS = "DELETE FROM checkpoints WHERE consumer = ? RETURNING seq"
RESOLUTION_COLS = 'consumer, event_id, seq, "partition", commit_seq, kind'
INSERT_RESOLUTION = f"INSERT INTO resolutions ({RESOLUTION_COLS}) VALUES (?, ?, ?, ?, ?, ?)"
LIST_RESOLUTIONS = (
    f"SELECT {RESOLUTION_COLS} FROM resolutions WHERE consumer = ? "
    'AND (CAST(? AS VARCHAR) IS NULL OR "partition" = ?) ORDER BY seq'
)
DELETE_RESOLUTION = "DELETE FROM resolutions WHERE consumer = ? AND event_id = ? RETURNING seq"
CLEAR_RESOLUTIONS = "DELETE FROM resolutions WHERE consumer = ? RETURNING seq"
CLEAR_RETRIES = "DELETE FROM retries WHERE consumer = ? RETURNING seq"
CLEAR_DEAD_LETTERS = "DELETE FROM dead_letters WHERE consumer = ? RETURNING seq"
LEASE_COLS = (
    'consumer, event_id, seq, "partition", token, incarnation, attempt, epoch_us(leased_at), epoch_us(expires_at)'
)
INSERT_LEASE = f"INSERT INTO leases VALUES (?, ?, ?, ?, ?, ?, ?, {_TS}, {_TS})"
GET_LEASE = f"SELECT {LEASE_COLS} FROM leases WHERE consumer = ? AND event_id = ?"
LIST_LEASES = (
    f"SELECT {LEASE_COLS} FROM leases WHERE (CAST(? AS VARCHAR) IS NULL OR consumer = ?) ORDER BY consumer, seq"
)
DELETE_LEASE = "DELETE FROM leases WHERE consumer = ? AND event_id = ? RETURNING seq"
EXPIRED_LEASES = f"""
SELECT {LEASE_COLS} FROM leases WHERE expires_at <= {_TS}
ORDER BY expires_at, consumer, seq LIMIT ?"""
# whether recovery at this time could find a lease; the earliest expiry (the adapter's hint)
HAS_LEASE_DUE = f"SELECT EXISTS (SELECT 1 FROM leases WHERE expires_at <= {_TS})"
EARLIEST_EXPIRY = "SELECT epoch_us(min(expires_at)) FROM leases"
RETRY_COLS = 'consumer, event_id, seq, "partition", attempts, epoch_us(not_before), error'
PUT_RETRY = f"INSERT OR REPLACE INTO retries VALUES (?, ?, ?, ?, ?, {_TS}, ?)"
GET_RETRY = f"SELECT {RETRY_COLS} FROM retries WHERE consumer = ? AND event_id = ?"
DELETE_RETRY = "DELETE FROM retries WHERE consumer = ? AND event_id = ? RETURNING seq"
LIST_RETRIES = (
    f"SELECT {RETRY_COLS} FROM retries WHERE (CAST(? AS VARCHAR) IS NULL OR consumer = ?) ORDER BY consumer, seq"
)
DEAD_COLS = 'consumer, event_id, seq, "partition", attempts, error, payload, epoch_us(dead_at)'
INSERT_DEAD_LETTER = f"INSERT INTO dead_letters VALUES (?, ?, ?, ?, ?, ?, ?, {_TS})"
LIST_DEAD_LETTERS = (
    f"SELECT {DEAD_COLS} FROM dead_letters WHERE (CAST(? AS VARCHAR) IS NULL OR consumer = ?) ORDER BY consumer, seq"
)

# every row of a table of the current database (the connection's search path)
HERE_ROWS = {
    "events": f"SELECT {EVENT_COLS} FROM events ORDER BY seq",
    "lease_consumers": f"SELECT {LEASE_CONSUMER_COLS} FROM lease_consumers ORDER BY consumer",
    "checkpoints": f'SELECT {CHECKPOINT_COLS} FROM checkpoints ORDER BY consumer, "partition"',
    "resolutions": f"SELECT {RESOLUTION_COLS} FROM resolutions ORDER BY consumer, seq",
    "leases": f"SELECT {LEASE_COLS} FROM leases ORDER BY consumer, seq",
    "retries": f"SELECT {RETRY_COLS} FROM retries ORDER BY consumer, seq",
    "dead_letters": f"SELECT {DEAD_COLS} FROM dead_letters ORDER BY consumer, seq",
    "history": GET_HISTORY,
}
# the store's rows(): the default database's, in ``main`` whatever the search path
ALL_ROWS = {
    t: s.replace(f" FROM {t} ", f" FROM main.{t} ").replace(f" FROM {t}", f" FROM main.{t}")
    for t, s in HERE_ROWS.items()
}
# every consumer row, locked in name order (PostgreSQL: see Tx.row_locks)
LOCK_LEASE_CONSUMERS = HERE_ROWS["lease_consumers"] + " FOR UPDATE"
# a named database's first history row (the default one's comes with migration 5)
FIRST_HISTORY = "INSERT INTO history SELECT 1, 1, 0, 0, 0 WHERE NOT EXISTS (SELECT 1 FROM history);"
