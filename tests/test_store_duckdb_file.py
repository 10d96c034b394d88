"""A ``.duckdb`` file as a store: it outlives the process, and a file the store
cannot use is refused with an error that names it — before anything is written
to it."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import uuid
from pathlib import Path

import duckdb
import pytest

from fanoutsim.designs.leases.engine import TRACE as LEASE_TRACE
from fanoutsim.designs.stores import SCHEMA_VERSION, TABLES, DuckDBStore, MemoryStore, StoreError, open_store

ROOT = Path(__file__).resolve().parents[1]
PYTHON = str(ROOT / ".venv" / "bin" / "python")
if not os.path.exists(PYTHON):  # a checkout without the project's virtualenv
    PYTHON = sys.executable


def uid(n: int) -> str:
    return str(uuid.UUID(int=n, version=4))


def fill(store) -> None:
    with store.transaction() as tx:
        write_all(tx)


def write_all(tx) -> None:
    """A row in every table, one of them changed after its insert."""
    tx.insert_firing(
        {
            "id": uid(1),
            "reactor_name": "r",
            "tenant_id": "t",
            "payload": b"\x00\x01",
            "fired_at": 1_767_225_600_000_001,
            "created_at": 1_767_225_600_000_002,
        }
    )
    tx.insert_subscription(
        {
            "id": uid(2),
            "reactor_name": "r",
            "workflow_name": "w",
            "tenant_id": "t",
            "enabled": True,
            "predicate": "payload.x > 1",
            "last_seen_fired_at": 1_767_225_600_000_001,
            "last_seen_firing_id": None,
            "predicate_error_count": 0,
            "predicate_error_firing_id": None,
            "last_predicate_error": None,
            "predicate_degraded": False,
            "created_at": 5,
            "updated_at": 6,
        }
    )
    tx.insert_execution(
        {
            "id": uid(3),
            "workflow_name": "w",
            "tenant_id": "t",
            "context": "{}",
            "status": "pending",
            "dispatched_at": 7,
            "claimed_at": None,
            "finished_at": None,
        }
    )
    tx.claim_executions(8, 1)


def state(directory: Path) -> dict[str, tuple[str, int]]:
    """Every file in the directory: its content hash and modification time."""
    return {
        p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns) for p in sorted(directory.iterdir())
    }


def test_data_survives_close_and_reopen(tmp_path):
    path = str(tmp_path / "run.duckdb")
    store = DuckDBStore(path)
    fill(store)
    before = {t: store.rows(t) for t in TABLES}
    store.close()

    again = open_store(path)
    assert isinstance(again, DuckDBStore)
    assert {t: again.rows(t) for t in TABLES} == before
    with again.transaction() as tx:
        assert [f["id"] for f in tx.fetch_firings("r", "t", None, 10)] == [uid(1)]
        assert tx.claim_executions(9, 10) == []  # still claimed
    with pytest.raises(KeyError):  # the keys came back too
        with again.transaction() as tx:
            tx.insert_firing({**before["reactor_firings"][0]})
    again.close()
    con = duckdb.connect(path, read_only=True)
    assert con.execute("SELECT value FROM fanoutsim_meta WHERE key = 'schema_version'").fetchone() == (
        str(SCHEMA_VERSION),
    )
    con.close()


def test_a_rolled_back_transaction_leaves_nothing_in_the_file(tmp_path):
    path = str(tmp_path / "run.duckdb")
    store = DuckDBStore(path)
    with pytest.raises(ValueError):
        with store.transaction() as tx:
            write_all(tx)
            raise ValueError("roll back")
    store.close()
    again = DuckDBStore(path)
    # empty, but for the one history row (seed 003) every store starts with
    assert all(again.rows(t) == ([] if t != "history" else MemoryStore().rows(t)) for t in TABLES)
    again.close()


@pytest.mark.parametrize(
    "content",
    [
        b"hello, this is a text file and not a database\n",
        b"SQLite format 3\x00" + bytes(200),
        bytes(range(256)) * 8,
        b"DUCK",  # too short to be one
    ],
    ids=["text", "sqlite", "binary", "short"],
)
def test_a_file_that_is_not_duckdb_is_refused_untouched(tmp_path, content):
    path = tmp_path / "notes.duckdb"
    path.write_bytes(content)
    before = state(tmp_path)
    with pytest.raises(StoreError) as err:
        DuckDBStore(str(path))
    assert str(path) in str(err.value)
    assert state(tmp_path) == before
    assert path.read_bytes() == content


def test_a_directory_is_refused(tmp_path):
    path = tmp_path / "dir.duckdb"
    path.mkdir()
    with pytest.raises(StoreError) as err:
        DuckDBStore(str(path))
    assert str(path) in str(err.value)


def _make_newer(path: str, *, leave_wal: bool) -> None:
    """A store file whose schema_version is from a future fanoutsim; with
    ``leave_wal`` the change sits in a write-ahead log, as a killed process leaves it."""
    DuckDBStore(path).close()
    newer = str(SCHEMA_VERSION + 1)
    code = (
        "import duckdb, os, sys\n"
        "c = duckdb.connect(sys.argv[1])\n"
        "c.execute(\"SET wal_autocheckpoint = '1GB'\")\n"
        "c.execute(\"UPDATE fanoutsim_meta SET value = ? WHERE key = 'schema_version'\", [sys.argv[2]])\n"
        "c.close() if sys.argv[3] == 'close' else os._exit(0)\n"
    )
    subprocess.run([PYTHON, "-c", code, path, newer, "exit" if leave_wal else "close"], check=True, timeout=60)


@pytest.mark.parametrize("leave_wal", [False, True], ids=["checkpointed", "pending-wal"])
def test_a_newer_schema_version_is_refused_untouched(tmp_path, leave_wal):
    path = str(tmp_path / "future.duckdb")
    _make_newer(path, leave_wal=leave_wal)
    assert os.path.exists(path + ".wal") == leave_wal
    before = state(tmp_path)
    with pytest.raises(StoreError) as err:
        DuckDBStore(path)
    message = str(err.value)
    assert path in message and str(SCHEMA_VERSION + 1) in message
    assert state(tmp_path) == before  # the file, and the WAL where there was one


def test_a_file_held_by_another_process_is_refused(tmp_path):
    path = str(tmp_path / "held.duckdb")
    DuckDBStore(path).close()
    holder = subprocess.Popen(
        [
            PYTHON,
            "-c",
            "import duckdb, sys; c = duckdb.connect(sys.argv[1]); print('ready', flush=True); sys.stdin.read()",
            path,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(StoreError) as err:
            DuckDBStore(path)
        assert path in str(err.value)
        assert "held by another process" in str(err.value)
    finally:
        holder.kill()
        holder.wait(timeout=30)
    store = DuckDBStore(path)  # free again once the holder is gone
    assert store.rows("reactor_firings") == []
    store.close()


def test_a_version_1_file_is_migrated_in_place(tmp_path):
    import duckdb

    from fanoutsim.designs.stores import sql

    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute(sql.SCHEMA.replace("    last_seen_firing_id       UUID,\n", ""))
    con.execute(sql.SET_SCHEMA_VERSION, ["1"])
    con.close()
    store = DuckDBStore(str(path))
    try:
        cols = [
            r[0]
            for r in store.con.execute(
                "select column_name from information_schema.columns where table_name = 'reactor_subscriptions'"
            ).fetchall()
        ]
        assert "last_seen_firing_id" in cols
        assert store.con.execute(sql.GET_SCHEMA_VERSION).fetchone()[0] == str(sql.SCHEMA_VERSION)
    finally:
        store.close()


def test_a_transaction_that_only_reads_sends_no_begin_or_commit(tmp_path):
    store = DuckDBStore(str(tmp_path / "r.duckdb"))
    try:
        n0 = store.statements
        with store.transaction() as tx:
            tx.count_firings()
            tx.get_cursor("a")
        assert store.statements - n0 == 2  # the two reads, nothing around them
        n0 = store.statements
        with store.transaction() as tx:
            assert tx.get_cursor("a") is None
            tx.set_cursor("a", 5)  # the first write opens the transaction
        assert store.statements - n0 == 4  # read, BEGIN, write, COMMIT
        with pytest.raises(ZeroDivisionError):
            with store.transaction() as tx:
                tx.set_cursor("a", 9)
                raise ZeroDivisionError  # a failure inside the transaction
        with store.transaction() as tx:
            assert tx.get_cursor("a") == 5  # the write after BEGIN rolled back
    finally:
        store.close()


# the leased-consumer tables as schema version 5 wrote them (before RiffDB's rules, issue 16)
_V5_LEASE_TABLES = """
CREATE TABLE history (id INTEGER PRIMARY KEY, incarnation BIGINT NOT NULL, last_commit BIGINT NOT NULL,
                      last_seq BIGINT NOT NULL, leases_granted BIGINT NOT NULL);
CREATE TABLE events (seq BIGINT PRIMARY KEY, event_id VARCHAR NOT NULL UNIQUE, commit_seq BIGINT NOT NULL,
                     ordinal INTEGER NOT NULL, "partition" VARCHAR NOT NULL, kind VARCHAR NOT NULL, payload VARCHAR,
                     committed_at TIMESTAMPTZ NOT NULL);
CREATE TABLE lease_consumers (consumer VARCHAR PRIMARY KEY, start_seq BIGINT NOT NULL, batch_limit INTEGER NOT NULL,
                              in_flight_limit INTEGER NOT NULL, lease_seconds DOUBLE NOT NULL,
                              retired BOOLEAN NOT NULL);
CREATE TABLE checkpoints (consumer VARCHAR NOT NULL, "partition" VARCHAR NOT NULL, seq BIGINT NOT NULL,
                          PRIMARY KEY (consumer, "partition"));
CREATE TABLE leases (consumer VARCHAR NOT NULL, event_id VARCHAR NOT NULL, seq BIGINT NOT NULL,
                     "partition" VARCHAR NOT NULL, token VARCHAR NOT NULL, incarnation BIGINT NOT NULL,
                     attempt INTEGER NOT NULL, leased_at TIMESTAMPTZ NOT NULL, expires_at TIMESTAMPTZ NOT NULL,
                     PRIMARY KEY (consumer, event_id));
CREATE TABLE retries (consumer VARCHAR NOT NULL, event_id VARCHAR NOT NULL, seq BIGINT NOT NULL,
                      "partition" VARCHAR NOT NULL, attempts INTEGER NOT NULL, not_before TIMESTAMPTZ NOT NULL,
                      error VARCHAR, PRIMARY KEY (consumer, event_id));
CREATE TABLE dead_letters (consumer VARCHAR NOT NULL, event_id VARCHAR NOT NULL, seq BIGINT NOT NULL,
                           "partition" VARCHAR NOT NULL, attempts INTEGER NOT NULL, error VARCHAR, payload VARCHAR,
                           dead_at TIMESTAMPTZ NOT NULL, PRIMARY KEY (consumer, event_id));
"""


def test_a_version_5_file_is_migrated_to_riffdbs_rules_once_and_idempotently(tmp_path):
    from fanoutsim.designs.stores import sql, store_parts

    path = str(tmp_path / "v5.duckdb")
    # the other designs' tables at version 5, then the leased-consumer tables as version 5 had them
    DuckDBStore(path, parts=[part for part in store_parts() if part.name != "leases"]).close()
    con = duckdb.connect(path)
    assert con.execute(sql.GET_SCHEMA_VERSION).fetchone()[0] == "5"
    con.execute(_V5_LEASE_TABLES)
    con.execute("INSERT INTO history VALUES (1, 1, 4, 5, 3)")
    # commits 1..2 (seqs 1..3) were pruned; commit 3 holds seqs 4 and 5 ... and commit 4 was never written
    for seq, commit, part in ((4, 3, "a"), (5, 3, "b")):
        con.execute(
            "INSERT INTO events VALUES (?, ?, ?, 0, ?, 'k', NULL, make_timestamp(CAST(? AS BIGINT)))",
            [seq, f"{commit}:{seq - 4}", commit, part, seq],
        )
    con.execute(
        "INSERT INTO lease_consumers VALUES ('live', 2, 4, 4, 60.0, false), ('gone', 0, 4, 4, 60.0, true),"
        " ('fresh', 0, 4, 4, 60.0, false), ('late', 4, 4, 4, 60.0, false)"
    )
    con.execute("INSERT INTO checkpoints VALUES ('live', 'a', 4), ('live', 'b', 3), ('gone', 'a', 4), ('late', 'c', 2)")
    con.execute("INSERT INTO dead_letters VALUES ('gone', '3:1', 5, 'b', 10, 'x', NULL, make_timestamp(1))")
    con.execute("INSERT INTO retries VALUES ('gone', '3:0', 4, 'a', 1, make_timestamp(1), NULL)")
    con.execute(sql.SET_SCHEMA_VERSION, ["5"])
    con.close()

    store = DuckDBStore(path)
    try:
        assert store.con.execute(sql.GET_SCHEMA_VERSION).fetchone()[0] == str(SCHEMA_VERSION) == "6"
        cols = [
            r[0]
            for r in store.con.execute(
                "select column_name from information_schema.columns where table_name = 'lease_consumers'"
            ).fetchall()
        ]
        assert "retired" not in cols and {"start_commit", "revision"} <= set(cols)
        # the retired consumer is deleted with its rows (retire deletes, as RiffDB's does)
        assert store.rows("lease_consumers") == [
            {
                "consumer": "fresh",
                "start_seq": 0,
                "start_commit": 0,
                "batch_limit": 4,
                "in_flight_limit": 4,
                "lease_seconds": 60.0,
                "revision": 1,
            },
            {
                "consumer": "late",
                "start_seq": 4,
                "start_commit": 3,
                "batch_limit": 4,
                "in_flight_limit": 4,
                "lease_seconds": 60.0,
                "revision": 1,
            },
            {
                "consumer": "live",
                "start_seq": 2,
                "start_commit": 2,
                "batch_limit": 4,
                "in_flight_limit": 4,
                "lease_seconds": 60.0,
                "revision": 1,
            },
        ]
        # a checkpoint's commit: its event's, or (pruned) the one before the oldest retained commit; one
        # inside pruned history (the old fence let retention take its commit) moves up to the horizon, seq 3
        assert store.rows("checkpoints") == [
            {"consumer": "late", "partition": "c", "seq": 3, "commit_seq": 2},
            {"consumer": "live", "partition": "a", "seq": 4, "commit_seq": 3},
            {"consumer": "live", "partition": "b", "seq": 3, "commit_seq": 2},
        ]
        assert store.rows("dead_letters") == [] and store.rows("retries") == []
        assert store.rows("resolutions") == []
        from fanoutsim.designs.leases import LeaseConfig, LeaseEngine
        from fanoutsim.kernel.metrics import Metrics
        from fanoutsim.kernel.trace import Trace

        e = LeaseEngine(store, LeaseConfig(), Metrics(), Trace(LEASE_TRACE))
        assert [x.event_id for x in e.consume(10**17, "late")] == ["3:1"]  # no pruned history read
        with store.transaction() as tx:  # the migrated tables take the new rows
            tx.delete_lease("late", "3:1")
            tx.set_checkpoint("late", "a", 4, 3)
            tx.insert_resolution(
                {
                    "consumer": "late",
                    "event_id": "3:1",
                    "seq": 5,
                    "partition": "b",
                    "commit_seq": 3,
                    "kind": "acknowledged",
                }
            )
            tx.put_lease_consumer({**tx.get_lease_consumer("late"), "revision": 2})
        before = {t: store.rows(t) for t in TABLES}
    finally:
        store.close()
    again = DuckDBStore(path)  # the migration runs again and changes nothing
    try:
        assert {t: again.rows(t) for t in TABLES} == before
        assert again.rows("lease_consumers")[1]["revision"] == 2
    finally:
        again.close()
