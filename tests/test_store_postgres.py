"""The PostgreSQL store beyond the contract suite: the dialect layer, opening
(the embedded server, a user's server, the one-line refusals that leave
nothing behind) and ``--store`` on the command line."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import psycopg
import pytest
from pgfixtures import drop_schema, new_schema

import fanoutsim as fs
from fanoutsim.kernel.store import is_postgres, pgsql
from fanoutsim.kernel.store.duckdb import StoreError

ROOT = Path(__file__).resolve().parents[1]
OUTBOX = ROOT / "fanoutsim" / "examples" / "outbox.toml"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def tables_in(dsn: str, schema: str) -> list[str]:
    with psycopg.connect(dsn) as con:
        return sorted(
            r[0]
            for r in con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", [schema]
            ).fetchall()
        )


# -- the dialect ------------------------------------------------------------------------


def test_placeholders_become_psycopgs_outside_quoted_text_and_percent_signs_double():
    q = pgsql.translate("SELECT '?', \"a?\", x FROM t WHERE y = ? AND z LIKE 'p%' -- why? 5%\n AND w = ?")
    assert q == "SELECT '?', \"a?\", x FROM t WHERE y = %s AND z LIKE 'p%%' -- why? 5%%\n AND w = %s"


def test_types_and_text_order_in_a_table_definition():
    q = pgsql.translate("CREATE TABLE IF NOT EXISTS t (a VARCHAR PRIMARY KEY, b BLOB, c DOUBLE, d VARCHAR(3))")
    assert (
        q
        == 'CREATE TABLE IF NOT EXISTS t (a VARCHAR COLLATE "C" PRIMARY KEY, b BYTEA, c DOUBLE PRECISION, d VARCHAR(3))'
    )
    # a cast in a query keeps its plain VARCHAR
    assert (
        pgsql.translate("SELECT id::VARCHAR FROM t WHERE CAST(? AS VARCHAR) IS NULL")
        == "SELECT id::VARCHAR FROM t WHERE CAST(%s AS VARCHAR) IS NULL"
    )


def test_insert_or_replace_becomes_an_upsert_on_the_primary_key():
    info = {"t": (("k1", "k2", "v", "w"), ("k1", "k2"))}.__getitem__
    assert pgsql.translate("INSERT OR REPLACE INTO t VALUES (?, ?, ?, ?)", info) == (
        'INSERT INTO t VALUES (%s, %s, %s, %s) ON CONFLICT ("k1", "k2") DO UPDATE SET "v" = EXCLUDED."v", '
        '"w" = EXCLUDED."w"'
    )
    assert pgsql.translate("INSERT OR REPLACE INTO t (k1, k2, w) VALUES (?, ?, ?) RETURNING k1", info) == (
        'INSERT INTO t (k1, k2, w) VALUES (%s, %s, %s) ON CONFLICT ("k1", "k2") DO UPDATE SET '
        '"w" = EXCLUDED."w" RETURNING k1'
    )
    assert pgsql.translate("INSERT OR IGNORE INTO t VALUES (?)") == "INSERT INTO t VALUES (%s) ON CONFLICT DO NOTHING"


def test_a_script_splits_at_semicolons_outside_quotes():
    assert pgsql.split("CREATE TABLE a (x VARCHAR);\nINSERT INTO a VALUES ('x;y');\n") == [
        "CREATE TABLE a (x VARCHAR)",
        "INSERT INTO a VALUES ('x;y')",
    ]


def test_is_postgres():
    assert is_postgres("postgres") and is_postgres("postgresql://u@h/db") and is_postgres("postgres://h")
    assert not is_postgres("memory") and not is_postgres("x.duckdb") and not is_postgres(None)


def test_a_statement_the_dialect_has_never_seen_runs_as_duckdb_runs_it(pg_store):
    """A later statement written for DuckDB (an upsert, timestamps, a ? list) runs unchanged."""
    from fanoutsim.designs.stores import DuckDBStore

    statement = (
        "INSERT OR REPLACE INTO cursors VALUES (?, ?)",
        "SELECT consumer, seq, epoch_us(make_timestamp(CAST(? AS BIGINT))::TIMESTAMPTZ) FROM cursors ORDER BY consumer",
    )
    answers = []
    for store in (pg_store(), DuckDBStore(":memory:")):
        with store.transaction() as tx:
            tx._run(statement[0], ["b", 2])
            tx._run(statement[0], ["a", 1])
            tx._run(statement[0], ["b", 3])
            answers.append(tx._run(statement[1], [-62_135_596_800_000_000]).fetchall())
        store.close()
    assert answers[0] == answers[1] == [("a", 1, -62_135_596_800_000_000), ("b", 3, -62_135_596_800_000_000)]


# -- opening -----------------------------------------------------------------------------


def test_the_embedded_server_starts_serves_and_leaves_nothing_at_close():
    from fanoutsim.designs.stores import open_store

    store = open_store("postgres")
    folder = store.server.folder
    try:
        assert os.path.isdir(folder)
        with store.transaction() as tx:
            tx.log_runner(1, "start")
        assert [r["event"] for r in store.rows("runner_log")] == ["start"]
    finally:
        store.close()
    assert not os.path.exists(folder)
    store.close()  # twice is harmless


def test_an_unreachable_server_is_one_line(unused_port=1):
    from fanoutsim.designs.stores import PostgresStore

    with pytest.raises(StoreError, match=r"^cannot reach PostgreSQL at .*port=1: .*") as info:
        PostgresStore(f"postgresql://nobody:secret@127.0.0.1:{unused_port}/x")
    assert "\n" not in str(info.value) and "secret" not in str(info.value)


@pytest.mark.parametrize(
    "dsn,message",
    [
        ("postgresql://h/db?nosuchoption=1", "malformed PostgreSQL URI: "),
        ("mysql://h/db", "is not a PostgreSQL URI"),
    ],
)
def test_a_malformed_dsn_is_one_line(dsn, message):
    from fanoutsim.designs.stores import PostgresStore

    with pytest.raises(StoreError, match=message) as info:
        PostgresStore(dsn)
    assert "\n" not in str(info.value)


def test_a_newer_schema_is_refused_and_left_as_it_is(pg_dsn):
    from fanoutsim.designs.stores import PostgresStore

    schema = new_schema()
    try:
        with psycopg.connect(pg_dsn, autocommit=True) as con:
            con.execute(f'CREATE SCHEMA "{schema}"')
            con.execute(f'CREATE TABLE "{schema}".fanoutsim_meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL)')
            con.execute(f"INSERT INTO \"{schema}\".fanoutsim_meta VALUES ('schema_version', '999')")
        with pytest.raises(StoreError, match=r"schema version 999, newer than this fanoutsim understands"):
            PostgresStore(pg_dsn, schema=schema)
        assert tables_in(pg_dsn, schema) == ["fanoutsim_meta"]  # nothing created
        with psycopg.connect(pg_dsn) as con:
            assert con.execute(f'SELECT value FROM "{schema}".fanoutsim_meta').fetchall() == [("999",)]
    finally:
        drop_schema(pg_dsn, schema)


def test_a_failing_migration_creates_nothing(pg_dsn, monkeypatch):
    from fanoutsim.designs.stores import PostgresStore
    from fanoutsim.kernel.store import sql

    schema = new_schema()
    real = sql.migrations

    def broken(parts):
        out = real(parts)
        out[max(out)] = [*out[max(out)], "SELECT no_such_function()"]
        return out

    monkeypatch.setattr(sql, "migrations", broken)
    try:
        with pytest.raises(psycopg.Error):
            PostgresStore(pg_dsn, schema=schema)
        assert tables_in(pg_dsn, schema) == []
    finally:
        drop_schema(pg_dsn, schema)


def test_two_stores_opening_one_new_schema_at_once_both_open(pg_dsn):
    from fanoutsim.designs.stores import PostgresStore

    schema, opened, errors = new_schema(), [], []

    def open_one():
        try:
            opened.append(PostgresStore(pg_dsn, schema=schema))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(3)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors and len(opened) == 3
        with opened[0].transaction() as tx:
            tx.log_runner(1, "start")
        assert opened[2].rows("runner_log")[0]["event"] == "start"  # one database
    finally:
        for s in opened:
            s.close()
        drop_schema(pg_dsn, schema)


# -- the command line -----------------------------------------------------------------------


def test_run_with_store_a_postgresql_uri_delivers_what_memory_does(pg_dsn, tmp_path):
    """The user's server: the run's tables land there (in its public schema here, then dropped)."""
    schema = new_schema()
    dsn = pg_dsn + ("&" if "?" in pg_dsn else "?") + f"options=-csearch_path%3D{schema}"
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        con.execute(f'CREATE SCHEMA "{schema}"')
    try:
        outs = []
        for store in ("memory", dsn):
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "fanoutsim",
                    "run",
                    str(OUTBOX),
                    "--until",
                    "10",
                    "--store",
                    store,
                    "--json",
                    "--out",
                    str(tmp_path / str(len(outs))),
                ],
                capture_output=True,
                text=True,
                timeout=300,
                env=ENV,
            )
            assert done.returncode == 0, done.stderr
            outs.append(done.stdout)
        assert outs[0] == outs[1]
        assert "outbox" in tables_in(pg_dsn, schema)
    finally:
        drop_schema(pg_dsn, schema)


def test_run_with_an_unreachable_server_is_one_error_line(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "fanoutsim",
            "run",
            str(OUTBOX),
            "--store",
            "postgresql://u@127.0.0.1:1/x",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=ENV,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("fanoutsim: error: cannot reach PostgreSQL")
    assert not list(tmp_path.iterdir())


def _tables_in(url: str) -> list[str]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        return [
            r[0]
            for r in con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
            ).fetchall()
        ]


def test_check_store_refuses_a_new_throwaway_server_and_starts_none():
    with pytest.raises(ValueError, match="'postgres', which opens a new empty store"):
        fs.check_store("postgres")


def test_check_store_refuses_a_database_that_holds_no_run_and_creates_nothing(pg_url):
    url = pg_url()
    with pytest.raises(StoreError, match="holds no fanoutsim run"):
        fs.check_store(url)
    assert _tables_in(url) == []  # nothing created there
    with fs.Simulation(seed=0, store=url) as sim:  # a run, then its check
        sim.runner.register_workflow("w")
        sim.runner.subscribe_workflow_to_reactor("r", "w")
        sim.fire("r", {})
        sim.run(until=5.0)
    assert fs.check_store(url).valid


def test_check_store_refuses_a_database_of_another_design(pg_url):
    from fanoutsim.designs.leases.simulation import LeaseSimulation

    url = pg_url()
    with LeaseSimulation(seed=0, store=url) as sim:
        sim.run(until=1.0)
    with pytest.raises(StoreError, match="holds a run of the leases design, not of the reactor design"):
        fs.check_store(url)
