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

from fanoutsim.designs.stores import TABLES, open_store
from fanoutsim.designs.stores import DuckDBStore, StoreError
from fanoutsim.designs.stores import MemoryStore
from fanoutsim.designs.stores import SCHEMA_VERSION

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
    tx.insert_firing({"id": uid(1), "reactor_name": "r", "tenant_id": "t", "payload": b"\x00\x01",
                      "fired_at": 1_767_225_600_000_001, "created_at": 1_767_225_600_000_002})
    tx.insert_subscription({
        "id": uid(2), "reactor_name": "r", "workflow_name": "w", "tenant_id": "t", "enabled": True,
        "predicate": "payload.x > 1", "last_seen_fired_at": 1_767_225_600_000_001, "last_seen_firing_id": None,
        "predicate_error_count": 0, "predicate_error_firing_id": None, "last_predicate_error": None,
        "predicate_degraded": False, "created_at": 5, "updated_at": 6,
    })
    tx.insert_execution({"id": uid(3), "workflow_name": "w", "tenant_id": "t", "context": "{}",
                         "status": "pending", "dispatched_at": 7, "claimed_at": None, "finished_at": None})
    tx.claim_executions(8, 1)


def state(directory: Path) -> dict[str, tuple[str, int]]:
    """Every file in the directory: its content hash and modification time."""
    return {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(directory.iterdir())}


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
        str(SCHEMA_VERSION),)
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


@pytest.mark.parametrize("content", [
    b"hello, this is a text file and not a database\n",
    b"SQLite format 3\x00" + bytes(200),
    bytes(range(256)) * 8,
    b"DUCK",  # too short to be one
], ids=["text", "sqlite", "binary", "short"])
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
        [PYTHON, "-c", "import duckdb, sys; c = duckdb.connect(sys.argv[1]); print('ready', flush=True); "
                       "sys.stdin.read()", path],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
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
        cols = [r[0] for r in store.con.execute(
            "select column_name from information_schema.columns where table_name = 'reactor_subscriptions'"
        ).fetchall()]
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
        assert store.statements - n0 == 2                 # the two reads, nothing around them
        n0 = store.statements
        with store.transaction() as tx:
            assert tx.get_cursor("a") is None
            tx.set_cursor("a", 5)                           # the first write opens the transaction
        assert store.statements - n0 == 4                 # read, BEGIN, write, COMMIT
        with pytest.raises(ZeroDivisionError):
            with store.transaction() as tx:
                tx.set_cursor("a", 9)
                1 / 0
        with store.transaction() as tx:
            assert tx.get_cursor("a") == 5                  # the write after BEGIN rolled back
    finally:
        store.close()
