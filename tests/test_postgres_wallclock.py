"""Every design on the wall clock over PostgreSQL, and kill -9 over it.

The runtimes are the ones the DuckDB tests run; only the store differs: a
schema of the session's PostgreSQL server, named in the DSN (``options=
-csearch_path=...``) so that a child process of a kill -9 campaign opens the
same tables from the DSN alone."""

from __future__ import annotations

import time

import pytest
from conftest import wait_for

import fanoutsim as fs
from fanoutsim.designs.leases import LeaseConfig
from fanoutsim.designs.leases.checker import check_leases
from fanoutsim.designs.leases.realtime import LeaseRealtime
from fanoutsim.designs.outbox import OutboxConfig
from fanoutsim.designs.outbox.checker import check_outbox
from fanoutsim.designs.outbox.crashtest import kill9_campaign as outbox_kill9
from fanoutsim.designs.outbox.realtime import OutboxRealtime
from fanoutsim.faults import FaultPlan, Notifications
from fanoutsim.kernel.store.postgres import PostgresStore


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
    """A silent window of the plan closes the real LISTEN connection for its length."""
    seen = []
    plan = FaultPlan([Notifications(silent=((0.3, 0.6),))])
    rt = OutboxRealtime(OutboxConfig(safety_poll_interval=0.2, batch_limit=20), store=pg_url(), faults=plan)
    try:
        rt.register_consumer("indexer", fn=lambda row: seen.append(row["seq"]), duration=0.005)
        rt.add_workload(30.0, stop=1.2)
        rt.start()
        try:
            time.sleep(1.2)
            assert wait_for(
                lambda: len(rt.outbox()) > 0 and rt.cursors()["seq"].max() >= rt.outbox()["seq"].max(), timeout=20
            )
        finally:
            rt.stop()
        report = check_outbox(rt)
        committed = rt.outbox()["seq"].tolist()
        assert report.valid and report.total["lost"] == 0 and report.total["pending"] == 0
        assert len(committed) > 5 and seen == committed
        t = rt.trace()
        assert (t["detail"] == "silent").sum() == 1 and (t["kind"] == "listener_connected").sum() == 2
        assert 0 < len(_hinted(rt)) < len(committed)  # the window's hints were lost
    finally:
        rt.close()


def test_the_models_hint_faults_are_refused_over_postgres(pg_url):
    with pytest.raises(ValueError, match=r"Notifications\(drop=...\) is the model's"):
        OutboxRealtime(store=pg_url(), faults=FaultPlan([Notifications(drop=0.5)]))


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
            assert wait_for(
                lambda: len(rt.leases()) == 0 and rt.status("indexer")["first_required"] is None, timeout=20
            )
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


# -- the outbox's LISTEN/NOTIFY, for real ----------------------------------------------------


def _outbox(url, **config):
    return OutboxRealtime(OutboxConfig(**{"batch_limit": 20, **config}), store=url)


def _hinted(rt) -> set:
    t = rt.trace()
    return set(t.loc[t["kind"] == "hint", "seq"].astype(int))


def _caught_up(rt) -> bool:
    out, cur = rt.outbox(), rt.cursors()
    return len(out) > 0 and len(cur) > 0 and cur["seq"].max() >= out["seq"].max()


def test_a_real_notify_wakes_the_dispatcher_long_before_the_safety_poll(pg_url):
    rt = _outbox(pg_url(), safety_poll_interval=30.0)
    try:
        rt.register_consumer("indexer", duration=0.001)
        rt.start()
        assert wait_for(lambda: rt._pg.backend_pid is not None, timeout=10)  # LISTENing
        seqs = [rt.commit(f"p{i}", "x") for i in range(5)]
        assert wait_for(lambda: _caught_up(rt), timeout=5)  # not the 30 s poll: the NOTIFYs
        assert _hinted(rt) == set(seqs)
        rt.stop()
        assert check_outbox(rt).total["lost"] == 0
    finally:
        rt.close()


def test_a_killed_listener_loses_the_hints_of_its_absence_and_the_safety_poll_delivers_them(pg_url):
    rt = _outbox(pg_url(), safety_poll_interval=0.3)
    try:
        rt.register_consumer("indexer", duration=0.001)
        rt._pg.reconnect = 1.0  # a slow reconnect: a window with nobody listening
        rt.start()
        assert wait_for(lambda: rt._pg.backend_pid is not None, timeout=10)
        before = rt.commit("p0", "x")
        assert wait_for(lambda: before in _hinted(rt), timeout=5)
        pid = rt.kill_listener()
        assert pid is not None
        assert wait_for(lambda: rt._pg.lost_connections == 1, timeout=5)
        during = [rt.commit(f"p{i}", "x") for i in range(1, 6)]  # nobody is listening
        assert wait_for(lambda: _caught_up(rt), timeout=5)  # the safety poll found them
        assert not set(during) & _hinted(rt)  # every hint of the window was lost, for real
        assert wait_for(lambda: rt._pg.backend_pid not in (None, pid), timeout=5)  # listening again
        after = rt.commit("p9", "x")
        assert wait_for(lambda: after in _hinted(rt), timeout=5)
        assert wait_for(lambda: _caught_up(rt), timeout=5)  # hinted is not yet handled: on a loaded machine
        rt.stop()
        t = rt.trace()
        assert (t["kind"] == "listener_lost").sum() == 1 and (t["kind"] == "listener_connected").sum() == 2
        report = check_outbox(rt)
        assert report.valid and report.total["lost"] == 0 and report.total["delivered"] == 7
    finally:
        rt.close()


@pytest.mark.parametrize("catch_up", [False, True])
def test_after_a_reconnect_the_consumers_catch_up_only_if_asked(pg_url, catch_up):
    # the poll is far (30 s, an idle timeout): only a catch-up read after the reconnect finds the
    # rows committed while nobody listened
    rt = _outbox(pg_url(), safety_poll_interval=30.0, poll_mode="idle", catch_up=catch_up)
    try:
        rt.register_consumer("indexer", duration=0.001)
        rt._pg.reconnect = 1.0
        rt.start()
        assert wait_for(lambda: rt._pg.backend_pid is not None, timeout=10)
        pid = rt.kill_listener()
        assert wait_for(lambda: rt._pg.lost_connections == 1, timeout=5)
        during = rt.commit("p1", "x")  # nobody is listening
        assert wait_for(lambda: rt._pg.backend_pid not in (None, pid), timeout=5)
        assert wait_for(lambda: _caught_up(rt), timeout=5) is catch_up
        assert during not in _hinted(rt)
        t = rt.trace()
        assert int((t["kind"] == "catch_up").sum()) == int(catch_up)
    finally:
        rt.close()


def test_a_consumers_status_write_is_a_real_notify_over_postgres(pg_url):
    rt = _outbox(pg_url(), safety_poll_interval=30.0, self_hint_every=0.05)
    try:
        rt.register_consumer("indexer", duration=0.001)
        rt.start()
        assert wait_for(lambda: rt._pg.backend_pid is not None, timeout=10)
        seq = rt.commit("p1", "x")
        # the commit's NOTIFY, then the status write's (naming the seq it records), both heard
        assert wait_for(lambda: (rt.trace()["kind"] == "hint").sum() >= 2, timeout=5)
        t = rt.trace()
        assert t.loc[t["kind"] == "hint", "seq"].astype(int).tolist()[:2] == [seq, seq]
    finally:
        rt.close()


def test_a_paused_listener_hears_everything_late(pg_url):
    rt = _outbox(pg_url(), safety_poll_interval=30.0)
    try:
        rt.register_consumer("indexer", duration=0.001)
        rt.start()
        assert wait_for(lambda: rt._pg.backend_pid is not None, timeout=10)
        t0 = time.monotonic()
        rt.pause_listener(0.8)
        time.sleep(0.15)  # a read under way when the pause came has ended
        seqs = [rt.commit(f"p{i}", "x") for i in range(3)]
        time.sleep(0.3)
        assert not _hinted(rt) and not _caught_up(rt)  # queued at the server, unread
        assert wait_for(lambda: _caught_up(rt), timeout=5)
        assert time.monotonic() - t0 >= 0.75
        assert _hinted(rt) == set(seqs)  # none lost: PostgreSQL kept them for the connection
        rt.stop()
    finally:
        rt.close()


@pytest.mark.parametrize("mode", ["all", "gap"])
def test_a_transaction_held_open_is_the_late_commit_hole_for_real(pg_url, mode):
    """A writer's transaction holds seq k open while later seqs commit: under
    read_mode="all" the cursor passes k before it is visible and the row is
    lost (named late_commit by the checker); "gap" waits for it."""
    import threading

    rt = _outbox(pg_url(), safety_poll_interval=0.1, read_mode=mode, gap_timeout=5.0)
    try:
        rt.register_consumer("indexer", duration=0.001)
        rt.start()
        assert wait_for(lambda: rt._pg.backend_pid is not None, timeout=10)
        rt.commit("p0", "x")
        held = []
        writer = threading.Thread(target=lambda: held.append(rt.hold_commit("slow", "y", hold=0.8)))
        writer.start()
        assert wait_for(lambda: len(rt.trace().query("kind == 'reserved'")) >= 2, timeout=5)
        later = [rt.commit(f"p{i}", "x") for i in range(1, 4)]
        writer.join(10)
        assert held and held[0] < min(later)  # taken first, visible last
        assert wait_for(lambda: _caught_up(rt), timeout=10)
        time.sleep(0.3)
        rt.stop()
        report = check_outbox(rt)
        if mode == "all":
            assert report.lost.to_dict("records")[0]["seq"] == held[0]
            assert set(report.lost["cause"]) == {"late_commit"} and not report.valid
        else:
            assert report.valid and report.total["lost"] == 0
    finally:
        rt.close()


def test_kill_9_of_the_lease_node_over_postgres_loses_no_event(pg_url, tmp_path):
    """The leases campaign over PostgreSQL: a killed child's leases expire and
    their events come again; re-deliveries are only the leases in hand."""
    from fanoutsim.designs.leases.crashtest import LIMITS
    from fanoutsim.designs.leases.crashtest import kill9_campaign as leases_kill9

    out = leases_kill9(pg_url(), str(tmp_path / "sink.txt"), kills=2, seed=1, up=(0.3, 0.6), backlog=12)
    print(out)
    assert out["clean_exit"] and out["starts"] == 3 and out["clean_stops"] == 1
    assert out["published"] > 12 and out["lost"] == [] and out["leases_left"] == 0
    assert out["extra_deliveries"] <= out["kills"] * LIMITS["in_flight_limit"]
