"""Backup and restore (seed 003): "Backup and restore preserve consumer state
but publish a new history incarnation. Outstanding pre-restore lease tokens
then fail closed, and the consumer resumes from its restored checkpoint."

The backup is a copy of the tables; the restore puts it back: checkpoints and
the log return to the backup, events acknowledged after it are delivered again
(duplicates, cause ``restore``), events published after it and not delivered
are gone (lost, cause ``restore``), and old lease tokens fail closed."""

from __future__ import annotations

import textwrap

import pytest
from experiments import leases as lx  # notebooks/experiments: the lessons' experiments

from fanoutsim.designs.leases import LeaseConfig, LeaseEngine
from fanoutsim.designs.leases.backup import Backup
from fanoutsim.designs.leases.checker import check_leases
from fanoutsim.designs.leases.engine import TRACE as LEASE_TRACE
from fanoutsim.designs.leases.simulation import LeaseSimulation
from fanoutsim.designs.leases.tables import TABLES
from fanoutsim.designs.stores import open_store
from fanoutsim.faults import FaultPlan, RestoreBackup
from fanoutsim.kernel.metrics import Metrics
from fanoutsim.kernel.trace import Trace
from fanoutsim.scenario import ScenarioError, load_scenario

T0 = 1_767_225_600_000_000


def t(seconds: float) -> int:
    return T0 + round(seconds * 1_000_000)


@pytest.fixture(params=["memory", "duckdb"])
def engine(request, tmp_path):
    store = open_store("memory" if request.param == "memory" else str(tmp_path / "b.duckdb"))
    yield LeaseEngine(store, LeaseConfig(), Metrics(), Trace(LEASE_TRACE))
    store.close()


def _lease_all(e, now, consumer="c"):
    return {x.event_id: x for x in e.consume(now, consumer)}


def test_restore_returns_checkpoints_and_log_and_voids_old_tokens(engine):
    e = engine
    e.add_consumer(t(0), "c", batch_limit=8, in_flight_limit=8)
    for k in range(3):
        e.publish(t(0), [("p", "k", k)])
    got = _lease_all(e, t(1))
    assert e.ack(t(1), "c", "1:0", got["1:0"].token, 1) == "acked"
    snap = {tb: e.store.rows(tb) for tb in TABLES}
    b = e.backup(t(2))  # checkpoint at seq 1, two leases out
    assert isinstance(b, Backup) and b.last_seq == 3 and b.incarnation == 1
    assert {tb: list(b.tables[tb]) for tb in TABLES} == snap  # a copy of the tables, nothing else
    for eid in ("2:0", "3:0"):
        assert e.ack(t(3), "c", eid, got[eid].token, 1) == "acked"
    e.publish(t(3), [("p", "k", 3)])
    (held,) = e.consume(t(3), "c")  # 4:0, leased after the backup
    assert e.status(t(3), "c")["checkpoints"] == {"p": 3}
    assert e.restore_backup(t(4), b) == 2
    st = e.status(t(4), "c")
    assert st["checkpoints"] == {"p": 1} and st["incarnation"] == 2
    assert [r["event_id"] for r in e.store.rows("events")] == ["1:0", "2:0", "3:0"]  # 4:0 is gone
    # the lease out after the backup is gone with the log; a token from before fails closed
    assert e.ack(t(4), "c", held.event_id, held.token, held.incarnation) == "stale_incarnation"
    # the two leases the backup held became failed attempts: retries, leased again as attempt 2
    again = _lease_all(e, t(5))
    assert sorted(again) == ["2:0", "3:0"] and {x.attempt for x in again.values()} == {2}
    assert {x.incarnation for x in again.values()} == {2}
    assert e.ack(t(5), "c", "2:0", got["2:0"].token, 1) == "stale_incarnation"
    # numbering goes on past everything the database has had: no event id names two events
    assert e.publish(t(6), [("p", "k", 9)]) == ["5:0"]


def test_restore_is_one_transaction_and_refuses_another_databases_backup(engine):
    e = engine
    e.add_consumer(t(0), "c")
    e.publish(t(0), [("p", "k", 1)])
    b = e.backup(t(1))
    other = LeaseEngine(e.store, LeaseConfig(), Metrics(), Trace(LEASE_TRACE), database="other")
    with pytest.raises(ValueError, match="is of database 'default'; this broker serves 'other'"):
        other.restore_backup(t(2), b)
    with pytest.raises(TypeError, match="must be a Backup"):
        e.restore_backup(t(2), {"events": []})
    assert e.store.rows("history")[0]["incarnation"] == 1  # nothing changed


def _by_hand():
    sim = LeaseSimulation(seed=5)
    sim.register_consumer("c", client=False, batch_limit=8, in_flight_limit=8)
    for k in range(3):
        sim.publish("p", "k", k)
    got = {x.event_id: x for x in sim.consume("c")}
    sim.ack("c", "1:0", got["1:0"].token, 1)
    b = sim.backup()
    sim.run(until=1.0)
    sim.register_consumer("late", client=False)  # created after the backup
    for eid in ("2:0", "3:0"):
        sim.ack("c", eid, got[eid].token, 1)
    sim.publish("p", "k", 3)  # 4:0, delivered before the restore
    sim.publish("p", "k", 4)  # 5:0, never delivered
    new = {x.event_id: x for x in sim.consume("c")}
    sim.ack("c", "4:0", new["4:0"].token, 1)
    (late,) = sim.consume("late", batch_limit=1)
    sim.ack("late", late.event_id, late.token, 1)
    sim.run(until=2.0)
    sim.restore_backup(b)
    sim.run(until=3.0)
    for x in sim.consume("c"):
        sim.ack("c", x.event_id, x.token, x.incarnation)
    sim.publish("p", "k", 5)  # 6:0, after the restore
    for x in sim.consume("c"):
        sim.ack("c", x.event_id, x.token, x.incarnation)
    return sim


def test_the_checker_names_restore_as_the_cause():
    r = check_leases(_by_hand())
    dups = sorted(map(tuple, r.duplicates[["consumer", "event_id", "cause"]].to_numpy().tolist()))
    assert dups == [("c", "2:0", "restore"), ("c", "3:0", "restore")]
    lost = sorted(map(tuple, r.lost[["consumer", "event_id", "cause"]].to_numpy().tolist()))
    # c: 5:0 (published after the backup, gone before delivery); late: gone with its consumer
    assert lost == [
        ("c", "5:0", "restore"),
        ("late", "2:0", "restore"),
        ("late", "3:0", "restore"),
        ("late", "4:0", "restore"),
        ("late", "5:0", "restore"),
    ]
    assert r.valid and r.total["lost_by_cause"] == {"restore": 5}
    per = r.per_consumer.set_index("consumer")
    assert per.loc["c", "delivered"] == 5  # 1:0..4:0 and 6:0


def test_restore_backup_fault_in_a_plan_and_a_scenario(tmp_path):
    plan = FaultPlan([RestoreBackup(backup_at=20.0, at=40.0)])
    runs = []
    for _ in range(2):
        sim = LeaseSimulation(seed=2, faults=plan)
        sim.register_consumer("slow", duration=3.0, batch_limit=2, in_flight_limit=2)
        sim.add_workload(2.0, partitions=2, stop=60.0)
        sim.run(until=200.0)
        runs.append(sim)
    a, b = runs
    assert a.trace().equals(b.trace())  # deterministic, ids included
    kinds = a.trace()["kind"].tolist()
    assert kinds.count("backup") == 1 and kinds.count("backup_restored") == 1
    assert a.history()["incarnation"].tolist() == [2]
    r = check_leases(a)
    assert r.valid
    assert r.total["duplicates_by_cause"].get("restore", 0) > 0
    assert r.total["lost_by_cause"].get("restore", 0) > 0
    assert set(r.total["lost_by_cause"]) == {"restore"}

    text = textwrap.dedent("""
        design = "leases"
        [run]
        until = 120.0
        [[consumers]]
        name = "indexer"
        duration = 3.0
        [[workload]]
        rate = 2.0
        [[faults]]
        kind = "restore_backup"
        backup_at = 20.0
        at = 40.0
    """)
    path = tmp_path / "restore.toml"
    path.write_text(text)
    sim = load_scenario(path).run()
    assert (sim.trace()["kind"] == "backup_restored").sum() == 1
    path.write_text(text.replace("at = 40.0", "at = 10.0"))
    with pytest.raises(ScenarioError, match=r"faults\[0\]\.at: must be after backup_at \(20.0\), got 10.0"):
        load_scenario(path)


def test_backup_restore_summary_shows_checkpoints_going_back():
    from fanoutsim.designs.leases import analysis as la

    sim = lx.backup_restore_run(seconds=100.0)
    s = la.backup_restore_summary(sim).set_index("consumer")
    w = s.loc["worker"]
    assert w["after_restore"] == w["at_backup"] != w["before_restore"]
    assert all(w["before_restore"][p] >= w["at_backup"].get(p, 0) for p in w["before_restore"])
    assert s.loc["audit", "after_restore"] is None  # created after the backup: gone
    assert set(s.loc["audit", "lost_by_cause"]) == {"restore"}
    assert w["duplicates_by_cause"].get("restore", 0) > 0
    assert s.attrs["incarnation"] == 2 and s.attrs["valid"] and s.attrs["published_between"] > 0


def test_restore_backup_fault_on_the_wall_clock(tmp_path):
    import time

    from fanoutsim.designs.leases.realtime import LeaseRealtime

    def wait_for(cond, timeout=10.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if cond():
                return True
            time.sleep(0.02)
        return False

    def seen(rt, kind):
        return (rt.trace()["kind"] == kind).sum()

    rt = LeaseRealtime(store=str(tmp_path / "wall.duckdb"), faults=FaultPlan([RestoreBackup(backup_at=0.5, at=1.5)]))
    try:
        rt.register_consumer("hand", client=False, batch_limit=8, in_flight_limit=8)
        for k in range(3):
            rt.publish("p", "k", k)
        rt.start()
        got = {x.event_id: x for x in rt.consume("hand")}
        assert rt.ack("hand", "1:0", got["1:0"].token, 1) == "acked"
        assert wait_for(lambda: seen(rt, "backup") == 1)
        assert rt.ack("hand", "2:0", got["2:0"].token, 1) == "acked"
        rt.publish("p", "k", 3)
        assert rt.status("hand")["checkpoints"] == {"p": 2}
        assert wait_for(lambda: seen(rt, "backup_restored") == 1)
        st = rt.status("hand")
        assert st["checkpoints"] == {"p": 1} and st["incarnation"] == 2
        assert rt.events()["event_id"].tolist() == ["1:0", "2:0", "3:0"]
        assert rt.ack("hand", "3:0", got["3:0"].token, 1) == "stale_incarnation"
        assert len(rt.backups) == 1
    finally:
        rt.stop()
        rt.close()


def test_a_restore_that_dead_letters_a_voided_lease_traces_where_the_checkpoint_stands(engine):
    """The voided tenth attempt is a dead letter the checkpoint passes; the trace's
    last checkpoint row of the partition says so, not the backup's older one."""
    e = engine
    e.add_consumer(t(0), "c", batch_limit=1, in_flight_limit=1)
    (eid,) = e.publish(t(0), [("p", "k", 1)])
    for attempt in range(1, 10):
        (x,) = e.consume(t(attempt), "c")
        assert e.nack(t(attempt), "c", x.event_id, x.token, x.incarnation) == "retry_scheduled"
    (x,) = e.consume(t(10), "c")
    assert x.attempt == 10
    b = e.backup(t(11))
    e.restore_backup(t(12), b)
    st = e.status(t(12), "c")
    assert (st["dead_lettered"], st["checkpoints"]) == ([eid], {"p": 1})
    tr = e.trace.frame()
    marks = tr[(tr["kind"] == "checkpoint") & (tr["consumer"] == "c")]
    assert marks["detail"].tolist()[-1] == "1"


def _take_all(sim, consumer="c", ack=True):
    got = sim.consume(consumer)
    if ack:
        for x in got:
            assert sim.ack(consumer, x.event_id, x.token, x.incarnation) == "acked"
    return got


def test_the_checker_follows_a_consumer_a_restore_brings_back_after_its_retire():
    """Retired after the backup, brought back by the restore with the backup's
    checkpoint: its life goes on after the restore (what it gets and owes then
    is checked), not ended at the retire the restore undid."""
    sim = LeaseSimulation(seed=0)
    sim.register_consumer("c", client=False, batch_limit=8, in_flight_limit=8)
    for i in range(3):
        sim.publish("p", "k", i)
    _take_all(sim)  # 1:0..3:0 delivered
    b = sim.backup()
    sim.publish("p", "k", 3)
    _take_all(sim)  # 4:0 delivered, then gone with the restore
    assert sim.retire("c") == "applied"
    sim.publish("p", "k", 4)  # 5:0, published while it was retired
    sim.restore_backup(b)
    assert sim.status("c")["checkpoints"] == {"p": 3}
    sim.publish("p", "k", 5)
    sim.publish("p", "k", 6)
    (x, y) = sim.consume("c")
    assert sim.ack("c", x.event_id, x.token, x.incarnation) == "acked"
    report = check_leases(sim)
    (row,) = report.per_consumer.to_dict("records")
    assert (row["consumer"], row["retired"], row["delivered"], row["pending"]) == ("c", False, 5, 1)
    assert report.lost.values.tolist() == [["c", "5:0", "restore"]] and report.valid
