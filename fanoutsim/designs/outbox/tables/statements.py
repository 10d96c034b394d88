"""The outbox design's SQL (schema, migrations, statements); timestamps: :mod:`fanoutsim.kernel.store.sql`."""

from fanoutsim.kernel.store.sql import TS as _TS

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

# schema version -> statements that bring a file from the version before it:
# the outbox's tables come from OUTBOX_SCHEMA; the sequence row once
MIGRATIONS = {
    4: [OUTBOX_SCHEMA, "INSERT INTO outbox_seq SELECT 1, 0 WHERE NOT EXISTS (SELECT 1 FROM outbox_seq)"],
}

RESERVE_OUTBOX_SEQ = "UPDATE outbox_seq SET last = last + 1 WHERE id = 1 RETURNING last"
OUTBOX_LAST = "SELECT last FROM outbox_seq WHERE id = 1"
OUTBOX_COLS = "seq, epoch_us(ts), topic, kind, ref, epoch_us(due_at)"
INSERT_OUTBOX = f"INSERT INTO outbox VALUES (?, {_TS}, ?, ?, ?, {_TS})"
FETCH_OUTBOX = f"SELECT {OUTBOX_COLS} FROM outbox WHERE seq > ? ORDER BY seq LIMIT ?"
OUTBOX_MIN = "SELECT min(seq) FROM outbox"
OUTBOX_MAX = "SELECT max(seq) FROM outbox"
# whether a fetch past this seq could find a row
HAS_OUTBOX_PAST = "SELECT EXISTS (SELECT 1 FROM outbox WHERE seq > ?)"
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
LIST_PARKED = (
    f"SELECT {PARKED_COLS} FROM parked WHERE (CAST(? AS VARCHAR) IS NULL OR consumer = ?) ORDER BY consumer, seq"
)
DEFER = f"INSERT OR REPLACE INTO deferred VALUES (?, ?, {_TS})"
FETCH_DUE = f"""
SELECT consumer, seq, epoch_us(due_at) FROM deferred
WHERE consumer = ? AND due_at <= {_TS} ORDER BY due_at, seq LIMIT ?"""
NEXT_DUE = "SELECT epoch_us(min(due_at)) FROM deferred WHERE consumer = ?"
DELETE_DEFERRED = "DELETE FROM deferred WHERE consumer = ? AND seq = ? RETURNING seq"
PAGE_COLS = "id, body, epoch_us(updated_at)"
UPSERT_PAGE = f"INSERT OR REPLACE INTO pages VALUES (?, ?, {_TS})"
GET_PAGE = f"SELECT {PAGE_COLS} FROM pages WHERE id = ?"

ALL_ROWS = {
    "outbox": f"SELECT {OUTBOX_COLS} FROM outbox ORDER BY seq",
    "cursors": "SELECT consumer, seq FROM cursors ORDER BY consumer",
    "parked": f"SELECT {PARKED_COLS} FROM parked ORDER BY consumer, seq",
    "deferred": "SELECT consumer, seq, epoch_us(due_at) FROM deferred ORDER BY consumer, seq",
    "pages": f"SELECT {PAGE_COLS} FROM pages ORDER BY id",
}
