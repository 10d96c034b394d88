"""The leased-consumer design's SQL, kept together: its tables' schema, migrations and statements.

Timestamps are ``TIMESTAMPTZ`` in the tables and ``BIGINT`` microseconds at
the interface: ``epoch_us(col)`` reads them, ``_TS`` writes them. Part of
:data:`fanoutsim.designs.leases.tables.PART`.
"""
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
    retired         BOOLEAN NOT NULL
);
CREATE TABLE IF NOT EXISTS checkpoints (
    consumer    VARCHAR NOT NULL,
    "partition" VARCHAR NOT NULL,
    seq         BIGINT NOT NULL,
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

# schema version -> statements that bring a file from the version before it:
# the leased-consumer design's tables from LEASE_SCHEMA; the history row once
MIGRATIONS = {
    5: [LEASE_SCHEMA, "INSERT INTO history SELECT 1, 1, 0, 0, 0 WHERE NOT EXISTS (SELECT 1 FROM history)"],
}

# Every statement's first word says what it does: DuckDBTx begins the transaction
# at the first statement that does not start with SELECT.

HISTORY_COLS = "incarnation, last_commit, last_seq, leases_granted"
GET_HISTORY = f"SELECT {HISTORY_COLS} FROM history WHERE id = 1"
SET_HISTORY = "UPDATE history SET incarnation = ?, last_commit = ?, last_seq = ?, leases_granted = ? WHERE id = 1"
EVENT_COLS = 'seq, event_id, commit_seq, ordinal, "partition", kind, payload, epoch_us(committed_at)'
INSERT_EVENT = f"INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, {_TS})"
GET_EVENT = f"SELECT {EVENT_COLS} FROM events WHERE event_id = ?"
# per partition, the first event past both the consumer's start and its checkpoint there
EVENT_HEADS = f"""
SELECT {EVENT_COLS} FROM events WHERE seq IN (
    SELECT min(e.seq) FROM events e
    LEFT JOIN checkpoints k ON k.consumer = ? AND k."partition" = e."partition"
    WHERE e.seq > ? AND (k.seq IS NULL OR e.seq > k.seq)
    GROUP BY e."partition")
ORDER BY seq"""
EVENT_BOUNDS = "SELECT min(seq), max(seq) FROM events"
PRUNE_EVENTS = f"""
DELETE FROM events WHERE seq IN (
    SELECT seq FROM events
    WHERE committed_at < {_TS} AND (CAST(? AS BIGINT) IS NULL OR commit_seq < ?)
    ORDER BY seq LIMIT ?)
RETURNING seq, event_id"""
LEASE_CONSUMER_COLS = "consumer, start_seq, batch_limit, in_flight_limit, lease_seconds, retired"
GET_LEASE_CONSUMER = f"SELECT {LEASE_CONSUMER_COLS} FROM lease_consumers WHERE consumer = ?"
PUT_LEASE_CONSUMER = "INSERT OR REPLACE INTO lease_consumers VALUES (?, ?, ?, ?, ?, ?)"
GET_CHECKPOINTS = 'SELECT "partition", seq FROM checkpoints WHERE consumer = ? ORDER BY "partition"'
SET_CHECKPOINT = "INSERT OR REPLACE INTO checkpoints VALUES (?, ?, ?)"
CLEAR_CHECKPOINTS = "DELETE FROM checkpoints WHERE consumer = ? RETURNING seq"
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

ALL_ROWS = {
    "events": f"SELECT {EVENT_COLS} FROM events ORDER BY seq",
    "lease_consumers": f"SELECT {LEASE_CONSUMER_COLS} FROM lease_consumers ORDER BY consumer",
    "checkpoints": 'SELECT consumer, "partition", seq FROM checkpoints ORDER BY consumer, "partition"',
    "leases": f"SELECT {LEASE_COLS} FROM leases ORDER BY consumer, seq",
    "retries": f"SELECT {RETRY_COLS} FROM retries ORDER BY consumer, seq",
    "dead_letters": f"SELECT {DEAD_COLS} FROM dead_letters ORDER BY consumer, seq",
    "history": GET_HISTORY,
}
