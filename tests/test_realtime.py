"""The wall-clock runtime: the same engine, threads, a DuckDB file, real crashes."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from conftest import wait_for

import fanoutsim as fs
from fanoutsim.analysis import compare_latency, latency_frame
from fanoutsim.designs.reactor.analysis.clocks import ks_critical, ks_statistic
from fanoutsim.designs.reactor.crashtest import kill9_campaign
from fanoutsim.faults import CrashAt, CrashAtPoint, CrashRandomly, FailInserts, FaultPlan
from fanoutsim.kernel.store.duckdb import StoreError

ROOT = Path(__file__).resolve().parents[1]
REALTIME = str(ROOT / "fanoutsim" / "examples" / "realtime.toml")
FAST = fs.SchedulerConfig(reactor_poll_interval=0.1, executor_poll_interval=0.02)


def test_a_realtime_run_delivers_through_the_same_engine(tmp_path):
    ran = []
    with fs.Realtime(FAST, store=str(tmp_path / "run.duckdb")) as rt:
        rt.runner.register_workflow("wf", fn=lambda ctx: ran.append(ctx["n"]), duration=0.01)
        rt.runner.subscribe_workflow_to_reactor("r", "wf", when="payload.n % 2 == 0")
        for n in range(6):
            rt.fire("r", {"n": n})
        assert wait_for(lambda: sorted(ran) == [0, 2, 4])
        assert wait_for(lambda: set(rt.executions()["status"]) == {"completed"})
        report = fs.check(rt)
        assert report.valid and report.total["delivered_once"] == 3
        kinds = set(rt.trace()["kind"])
        assert {"fired", "logged", "polled", "dispatched", "watermark", "claimed", "finished"} <= kinds
    # the file outlives the runtime
    again = fs.Realtime(FAST, store=str(tmp_path / "run.duckdb"))
    try:
        assert len(again.firings()) == 6 and len(again.executions()) == 3
        assert [r["event"] for r in again.store.rows("runner_log")] == ["start", "stop"]
    finally:
        again.close()


def test_life_cycle_errors_and_no_ops(tmp_path):
    rt = fs.Realtime(FAST, store=str(tmp_path / "a.duckdb"))
    rt.runner.subscribe_workflow_to_reactor("r", "wf")
    assert rt.fire("r", {"n": 0})  # before start: the row waits for the poller
    rt.start()
    with pytest.raises(RuntimeError, match="already running"):
        rt.start()
    t0 = time.monotonic()
    rt.stop()
    assert time.monotonic() - t0 < 2.0  # bounded
    rt.stop()  # a no-op
    with pytest.raises(RuntimeError, match="stopped"):
        rt.fire("r", {"n": 1})
    with pytest.raises(RuntimeError, match="make a new Realtime"):
        rt.start()
    assert len(rt.firings()) == 1  # reads still work until close
    rt.close()
    rt.close()  # a no-op


def test_stop_lets_the_body_in_hand_finish(tmp_path):
    # the body holds until the stop has begun: the test waits for events, not
    # for a half-second window a loaded machine can miss
    began, release = threading.Event(), threading.Event()

    def body(context):
        began.set()
        assert release.wait(timeout=30)

    with fs.Realtime(FAST, store=str(tmp_path / "b.duckdb")) as rt:
        rt.runner.register_workflow("slow", body)
        rt.runner.subscribe_workflow_to_reactor("r", "slow")
        rt.fire("r", {"n": 1})
        assert began.wait(timeout=30)
        assert list(rt.executions()["status"]) == ["running"]
        stopping = threading.Thread(target=rt.stop)
        stopping.start()
        assert wait_for(lambda: not rt.running, timeout=30)  # the stop has begun, the body is in hand
        release.set()
        stopping.join(timeout=30)
        assert not stopping.is_alive()
        assert list(rt.executions()["status"]) == ["completed"]


def test_an_idle_executor_wakes_for_a_dispatch_between_its_empty_claim_and_its_sleep(tmp_path):
    # the executor's claim found nothing and it left the step; the poller's dispatch
    # came before it went to sleep: its snapshot of the writes then held the dispatch,
    # and it slept until some other write (for ever, alone on the store). Seen under
    # two CPU hogs: test_stop_lets_the_body_in_hand_finish's body never began.
    began = threading.Event()
    rt = fs.Realtime(FAST, store=str(tmp_path / "e.duckdb"))
    rt.runner.register_workflow("wf", lambda ctx: began.set())
    rt.runner.subscribe_workflow_to_reactor("r", "wf")
    sleep, late = rt._until_written, []

    def late_sleep(ready, since=None):
        if not late:  # the first sleep: a fire dispatched between the empty claim and here
            late.append(rt.fire("r", {"n": 1}))
            assert wait_for(lambda: len(rt.executions()) == 1, timeout=30)
        return sleep(ready, since)

    rt._until_written = late_sleep
    with rt:
        assert began.wait(timeout=30)
    assert late


def test_an_idle_poller_polls_a_fire_written_after_its_empty_pass_read(tmp_path, monkeypatch):
    # a pass that found nothing skips its reads until a step writes; a fire committed
    # by another thread after the pass's reads, before the skip began, ended no skip
    from fanoutsim.designs.reactor.engine import ReactorEngine

    rt = fs.Realtime(FAST, store=str(tmp_path / "p.duckdb"))
    rt.runner.register_workflow("wf", lambda ctx: None)
    rt.runner.subscribe_workflow_to_reactor("r", "wf")
    start_pass, fired = ReactorEngine.start_pass, []

    def pass_then_a_fire(e, now):
        subs, i, batch = start_pass(e, now)
        if i >= len(subs) and not fired:  # it found nothing: the fire lands after its reads
            fired.append(rt.fire("r", {"n": 1}))
        return subs, i, batch

    monkeypatch.setattr(ReactorEngine, "start_pass", pass_then_a_fire)
    with rt:
        assert wait_for(lambda: fired and len(rt.executions()) == 1, timeout=30)


def test_injected_faults_work_on_the_wall_clock(tmp_path):
    plan = FaultPlan(
        [
            CrashAtPoint("poll.after_dispatch_before_watermark", nth=2, downtime=0.3),
            FailInserts(probability=1.0, window=(0.0, 0.5), workflow="wf"),
        ]
    )
    rt = fs.Realtime(FAST, store=str(tmp_path / "c.duckdb"), faults=plan)
    rt.runner.subscribe_workflow_to_reactor("r", "wf")  # the plan names it: subscribe before start
    with rt:
        for n in range(3):
            rt.fire("r", {"n": n})
        assert wait_for(lambda: len(set(rt.executions()["reactor_firing_id"])) == 3, timeout=15)
        kinds = list(rt.trace()["kind"])
        assert "dispatch_failed" in kinds and "crashed" in kinds and "restarted" in kinds
        report = fs.check(rt)
        assert report.total["lost"] == 0
        assert set(report.duplicates["cause"]) <= {"crash"}
        assert [r["event"] for r in rt.store.rows("runner_log")] == ["start", "start"]


def test_planned_crashes_happen_on_the_wall_clock(tmp_path):
    plan = FaultPlan([CrashAt(at=0.4, downtime=0.3), CrashRandomly(mean_gap=0.5, downtime=0.2, window=(1.0, 2.0))])
    rt = fs.Realtime(FAST, store=str(tmp_path / "p.duckdb"), faults=plan)
    rt.runner.subscribe_workflow_to_reactor("r", "wf")
    with rt:
        rt.add_workload("r", 20.0, payload="counter", stop=2.5)
        time.sleep(3.0)
        assert wait_for(lambda: rt.up)
        trace = rt.trace()
        crashes = trace[trace["kind"] == "crashed"]
        t = (crashes["t"] - rt.start_us) / 1e6
        assert crashes["detail"].iloc[0] == "time" and 0.4 <= t.iloc[0] < 0.7
        assert (crashes["detail"].iloc[1:] == "random").all() and ((t.iloc[1:] >= 1.0) & (t.iloc[1:] < 2.2)).all()
        assert (trace["kind"] == "restarted").sum() == len(crashes)
        assert fs.check(rt).total["lost"] == 0


def test_a_crash_falls_between_two_steps_never_inside_one(tmp_path):
    """As on the outbox's and the leases' wall clock: every store step holds one
    lock, and so does crash(), so the dead incarnation writes nothing after it."""
    inside, release = threading.Event(), threading.Event()

    def graph(sources):  # runs inside fire's step, before the firing is logged
        inside.set()
        release.wait(10)

    rt = fs.Realtime(FAST, store=str(tmp_path / "s.duckdb"))
    rt.runner.register_computation_graph("r", graph)
    with rt:
        fired = []
        writer = threading.Thread(target=lambda: fired.append(rt.fire("r", {"n": 1})))
        writer.start()
        assert inside.wait(10)
        crasher = threading.Thread(target=rt.crash)
        crasher.start()
        crasher.join(0.3)
        assert crasher.is_alive() and rt.up  # the crash waits for the step in hand
        release.set()
        crasher.join(10)
        writer.join(10)
        assert not rt.up and fired[0] is not None  # the step committed, then the runner died
        kinds = list(rt.trace()["kind"])
        assert kinds.index("logged") < kinds.index("crashed")
        with pytest.raises(RuntimeError, match="down"):
            rt.fire("r", {"n": 2})
        rt.restart()
        assert rt.up and rt.fire("r", {"n": 3})
    again = fs.Realtime(FAST, store=str(tmp_path / "s.duckdb"))
    try:
        assert len(again.firings()) == 2
    finally:
        again.close()


def test_a_file_that_is_not_duckdb_is_refused_untouched(tmp_path):
    path = tmp_path / "notes.duckdb"
    path.write_text("not a database\n")
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(StoreError, match="notes.duckdb is not a DuckDB database file"):
        fs.Realtime(store=str(path))
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_a_newer_schema_is_refused_untouched(tmp_path):
    path = tmp_path / "new.duckdb"
    con = duckdb.connect(str(path))
    con.execute("create table fanoutsim_meta (key varchar primary key, value varchar not null)")
    con.execute("insert into fanoutsim_meta values ('schema_version', '99')")
    con.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(StoreError, match="schema version 99, newer"):
        fs.Realtime(store=str(path))
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def serve(db, *args):
    proc = subprocess.Popen(
        [sys.executable, "-m", "fanoutsim", "serve", "--db", str(db), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert wait_for(
        lambda: (
            Path(f"{db}.serve.json").exists() and json.loads(Path(f"{db}.serve.json").read_text())["pid"] == proc.pid
        ),
        timeout=60,
    )
    return proc


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fanoutsim", *args], capture_output=True, text=True, timeout=60)


def test_serve_owns_the_file_and_others_reach_it_through_its_endpoint(tmp_path):
    db = tmp_path / "served.duckdb"
    proc = serve(db, "--scenario", REALTIME, "--rate", "0")
    try:
        with pytest.raises(StoreError, match=rf"served.duckdb is held by another process.*PID {proc.pid}"):
            fs.Realtime(store=str(db))
        fired = cli(
            "fire",
            "--db",
            str(db),
            "--reactor",
            "pricing_reactor",
            "--payload",
            '{"quote": {"price": 150, "region": "us-east", "symbol": "ACME"}}',
        )
        assert fired.returncode == 0, fired.stderr
        assert wait_for(lambda: json.loads(cli("status", "--db", str(db)).stdout)["executions"].get("completed") == 2)
        bad = cli("fire", "--db", str(db), "--reactor", "", "--payload", "{}")
        assert bad.returncode == 2 and "reactor name must be a non-empty string" in bad.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    assert not Path(f"{db}.serve.json").exists()
    # with no server, fire and status open the file themselves
    assert cli("fire", "--db", str(db), "--reactor", "pricing_reactor", "--payload", '{"n": 1}').returncode == 0
    status = json.loads(cli("status", "--db", str(db)).stdout)
    assert status["firings_retained"] == 2 and status["running"] is False


def test_kill_9_loses_nothing_durably_logged(tmp_path):
    out = kill9_campaign(str(tmp_path / "k.duckdb"), REALTIME, kills=10, seed=1)
    print({k: v for k, v in out.items() if k != "report"})
    assert out["clean_exit"] and out["crashes_seen"] == 10
    assert out["firings"] > 100
    assert out["lost"] == 0 and out["pending"] == 0
    assert set(out["duplicates_by_cause"]) <= {"crash"}
    assert out["max_duplicates_per_crash_and_subscription"] <= out["batch_limit"]


def test_ks_statistic():
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0, 1, 2000), rng.uniform(0, 1, 2000)
    assert ks_statistic(a, b) < ks_critical(2000, 2000)
    assert ks_statistic(a, a + 0.5) == pytest.approx(0.5, abs=0.03)
    assert ks_statistic([0.0], [1.0]) == 1.0


def test_real_time_against_virtual_time(tmp_path):
    """30 wall seconds at P = 1 s against the same scenario under SimPy.

    What the wall clock adds is each poll's lateness: how long after its tick
    (start + k·P) the pass began — a wake-up, the store's lock, and on a loaded
    machine the scheduler. It is measured per poll and taken out; what remains
    is the poll wait the model predicts, and that is compared. A row fired
    during a late pass is taken by it; on time, it would have waited for the
    next tick: the poll wait modulo P."""
    poll = 1.0
    config = fs.SchedulerConfig(reactor_poll_interval=poll, executor_poll_interval=0.05)

    def setup(host):
        host.runner.register_workflow("wf", duration=0.01)
        host.runner.subscribe_workflow_to_reactor("r", "wf")
        host.add_workload("r", 20.0, payload="counter")

    sim = fs.Simulation(config, seed=0)
    setup(sim)
    sim.run(until=30.0)
    rt = fs.Realtime(config, store=str(tmp_path / "rt.duckdb"), seed=0)
    setup(rt)
    rt.start()
    time.sleep(30.0)
    rt.stop()
    real = latency_frame(rt)
    since = (real["dispatched_at"] - pd.Timestamp(rt.start_us, unit="us", tz="UTC")).dt.total_seconds()
    lateness = since % poll  # after the last tick the pass's start
    waited = (real["fire_to_dispatch"] - lateness) % poll
    cmp = compare_latency(latency_frame(sim), pd.DataFrame({"fire_to_dispatch": waited}))
    rt.close()
    print(cmp, f"mean poll lateness {lateness.mean():.3f} s")
    # the poll wait dominates both: uniform on [0, 1 s), mean near 0.5 s
    assert cmp["n_real"] > 400 and cmp["n_virtual"] > 400
    assert cmp["mean_virtual"] == pytest.approx(0.5, abs=0.06)
    # each sample mean carries ~13 ms of noise (a uniform [0, 1 s) wait, n ~ 550): bounded both ways
    assert -0.04 < cmp["mean_gap"] < 0.04
    assert cmp["ks"] < cmp["ks_critical_5pct"] * 1.5
    # and the lateness was real: every pass began at or after its tick
    assert (lateness >= 0).all() and (real["fire_to_dispatch"] >= 0).all()


def test_live_view_redraws_from_a_running_engine(tmp_path):
    from fanoutsim.widgets import LiveView

    rt = fs.Realtime(FAST, store=str(tmp_path / "live.duckdb"))
    rt.runner.subscribe_workflow_to_reactor("r", "wf")
    rt.start()
    try:
        view = LiveView(rt, every=0.2).start()
        for n in range(5):
            rt.fire("r", {"n": n})
        assert wait_for(lambda: view.last.get("executions", {}).get("completed") == 5)
        assert "firings</b> 5" in view.summary.value and "r-&gt;wf@public" in view.summary.value
        assert len(view.history) >= 2
        view.stop()
    finally:
        rt.close()
    with pytest.raises(ValueError, match="every must be a positive"):
        LiveView(rt, every=0)


def test_a_paused_subscription_on_the_wall_clock(tmp_path):
    from fanoutsim.faults import Stall

    plan = FaultPlan([Stall("paused", window=(0.0, 1.0), mode="pause")])
    rt = fs.Realtime(FAST, store=str(tmp_path / "p.duckdb"), faults=plan)
    rt.runner.subscribe_workflow_to_reactor("r", "paused")
    rt.runner.subscribe_workflow_to_reactor("r", "free")
    with rt:
        rt.fire("r", {"n": 1})
        assert wait_for(lambda: list(rt.executions()["workflow_name"]) == ["free"], timeout=5)
        time.sleep(0.3)
        assert list(rt.executions()["workflow_name"]) == ["free"]  # still paused
        assert wait_for(lambda: sorted(rt.executions()["workflow_name"]) == ["free", "paused"], timeout=5)
        ex = rt.executions().set_index("workflow_name")
        waited = (ex.loc["paused", "dispatched_at"] - ex.loc["free", "dispatched_at"]).total_seconds()
        assert waited > 0.5  # held until the pause window closed


def test_a_pass_skips_idle_subscriptions_in_one_step_and_counts_each(tmp_path):
    """The fetches of subscriptions with nothing new, up to the next batch, are
    one step (a pass over 200 idle subscriptions is not 200 transactions), and
    each still counts as the query the real poll loop sends. After a pass that
    found nothing, the ticks until a step writes read nothing (this process is
    the file's only writer), and still count their queries."""
    import types

    from fanoutsim.designs.reactor import poller

    rt = fs.Realtime(FAST, store=str(tmp_path / "idle.duckdb"))
    for i in range(200):
        rt.runner.subscribe_workflow_to_reactor(f"r{i}", "w")
    steps, passes = [], []
    engine = rt.engine

    def start_pass(self, now):
        got = poller.start_pass(self, now)
        passes.append(now)
        steps.append((len(passes), 0, got[1]))
        return got

    def drain_next(self, now, subs, i, batch, decoded):  # a drain, then the fetches from the next one
        got = poller.drain_next(self, now, subs, i, batch, decoded)
        steps.append((len(passes), i + 1, got[0]))
        return got

    def queries() -> float:
        return rt.metrics().get("fanoutsim_reactor_poll_queries_total", 0)

    # bound to the engine, as the runtime's liveness check wants its steps
    engine.start_pass = types.MethodType(start_pass, engine)
    engine.drain_next = types.MethodType(drain_next, engine)
    with rt:
        assert wait_for(lambda: queries() >= 200 * 3, timeout=5)
        rt.fire("r150", {"n": 1})
        assert wait_for(lambda: len(rt.executions()) == 1, timeout=5)
        then = queries()
        assert wait_for(lambda: queries() >= then + 200 * 5, timeout=5)
        ticks = queries() / 200
    assert ticks == int(ticks)  # every subscription counted on every tick
    by_pass: dict[int, list] = {}
    for p, start, found in steps:
        by_pass.setdefault(p, []).append((start, found))
    k = sorted(f"r{i}" for i in range(200)).index("r150")  # its place in poll order
    for fetched in by_pass.values():
        if fetched == [(0, 200)]:
            continue  # nothing anywhere: one step
        # the firing's pass: one step to its batch, one from the next to the end
        assert fetched == [(0, k), (k + 1, 200)], fetched
    assert [(0, k), (k + 1, 200)] in by_pass.values()
    assert len(passes) < ticks - 3  # the idle ticks read nothing
