"""Every design on the wall clock over PostgreSQL, and kill -9 over it.

The runtimes are the ones the DuckDB tests run; only the store differs: a
schema of the session's PostgreSQL server, named in the DSN (``options=
-csearch_path=...``) so that a child process of a kill -9 campaign opens the
same tables from the DSN alone."""
from __future__ import annotations

import time
from urllib.parse import quote

import psycopg
import pytest

import fanoutsim as fs
from conftest import wait_for
from fanoutsim.designs.leases import LeaseConfig
from fanoutsim.designs.leases.checker import check_leases
from fanoutsim.designs.leases.realtime import LeaseRealtime
from fanoutsim.designs.outbox import OutboxConfig
from fanoutsim.designs.outbox.checker import check_outbox
from fanoutsim.designs.outbox.crashtest import kill9_campaign as outbox_kill9
from fanoutsim.designs.outbox.realtime import OutboxRealtime
from fanoutsim.kernel.faults import FaultPlan, Notifications
from fanoutsim.kernel.store.postgres import PostgresStore
from pgfixtures import drop_schema, new_schema


@pytest.fixture
def pg_url(pg_dsn):
    """``pg_url()``: the DSN of a new, empty schema (dropped at teardown)."""
    made = []

    def make() -> str:
        schema = new_schema()
        with psycopg.connect(pg_dsn, autocommit=True) as con:
            con.execute(f'CREATE SCHEMA "{schema}"')
        made.append(schema)
        return pg_dsn + ("&" if "?" in pg_dsn else "?") + "options=" + quote(f"-csearch_path={schema}")
    yield make
    for schema in made:
        drop_schema(pg_dsn, schema)


def test_the_reactor_runs_on_the_wall_clock_over_postgres(pg_url):
    ran = []
    url = pg_url()
    config = fs.SchedulerConfig(reactor_poll_interval=0.1, executor_poll_interval=0.02)
    with fs.Realtime(config, store=url) as rt:
        assert isinstance(rt.store, PostgresStore)
        rt.runner.register_workflow("wf", fn=lambda ctx: ran.append(ctx["n"]), duration=0.01)
        rt.runner.subscribe_workflow_to_reactor("r", "wf", when="payload.n % 2 == 0")
        for n in range(6):
            rt.fire("r", {"n": n})
        assert wait_for(lambda: sorted(ran) == [0, 2, 4], timeout=20)
        assert wait_for(lambda: set(rt.executions()["status"]) == {"completed"}, timeout=20)
        report = fs.check(rt)
        assert report.valid and report.total["delivered_once"] == 3
    again = fs.Realtime(config, store=url)  # the tables outlive the runtime
    try:
        assert len(again.firings()) == 6 and len(again.executions()) == 3
        assert [r["event"] for r in again.store.rows("runner_log")] == ["start", "stop"]
    finally:
        again.close()


def test_the_outbox_loses_hints_never_rows_over_postgres(pg_url):
    seen = []
    plan = FaultPlan([Notifications(drop=0.3, silent=((0.3, 0.6),))])
    rt = OutboxRealtime(OutboxConfig(safety_poll_interval=0.2, batch_limit=20), store=pg_url(), faults=plan)
    try:
        rt.register_consumer("indexer", fn=lambda row: seen.append(row["seq"]), duration=0.005)
        rt.add_workload(30.0, stop=1.2)
        rt.start()
        try:
            time.sleep(1.2)
            assert wait_for(lambda: len(rt.outbox()) > 0 and
                            rt.cursors()["seq"].max() >= rt.outbox()["seq"].max(), timeout=20)
        finally:
            rt.stop()
        report = check_outbox(rt)
        committed = rt.outbox()["seq"].tolist()
        assert report.valid and report.total["lost"] == 0 and report.total["pending"] == 0
        assert len(committed) > 5 and seen == committed
    finally:
        rt.close()


def test_leases_run_on_the_wall_clock_over_postgres(pg_url):
    seen = []
    rt = LeaseRealtime(LeaseConfig(recovery_interval=0.2, retention_interval=0.5), store=pg_url())
    try:
        rt.register_consumer("indexer", duration=0.005, poll_interval=0.05, fn=lambda lease: seen.append(lease))
        rt.start()
        try:
            for i in range(10):
                rt.publish(f"p{i % 3}", payload={"i": i})
                time.sleep(0.03)
            assert wait_for(lambda: len(rt.leases()) == 0 and rt.status("indexer")["first_required"] is None,
                            timeout=20)
        finally:
            rt.stop()
        report = check_leases(rt)
        assert report.valid and report.total["published"] == 10
        assert report.total["lost"] == 0 and report.total["pending"] == 0 and report.total["duplicates"] == 0
        assert sorted(lease.event_id for lease in seen) == sorted(rt.events()["event_id"])
    finally:
        rt.close()


def test_kill_9_over_postgres_loses_no_committed_row(pg_url, tmp_path):
    """Ten SIGKILLs of the serving process mid-fan-out: PostgreSQL rolls back the
    killed connection's open transaction; every committed row reaches the sink,
    and every extra delivery is the one row a killed child had in hand."""
    out = outbox_kill9(pg_url(), str(tmp_path / "sink.txt"), kills=10, seed=2, up=(0.3, 0.8))
    print(out)
    assert out["clean_exit"] and out["starts"] == 11 and out["clean_stops"] == 1
    assert out["committed"] > 20 and out["lost"] == []
    assert out["cursor"] == out["last_seq"]
    assert out["extra_deliveries"] <= out["kills"]  # each one attributed to a kill
