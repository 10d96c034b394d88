"""Each fault kind of the plan does what it says, seeded and from the tables."""

from __future__ import annotations

import pandas as pd
import pytest

import fanoutsim as fs
from fanoutsim.faults import (
    Backfill,
    ClockSkew,
    CrashAt,
    CrashAtPoint,
    CrashRandomly,
    FailInserts,
    FaultPlan,
    LateCommit,
    Notifications,
    Pollers,
    RestoreBackup,
    SlowWorkflow,
    Stall,
    Ties,
)
from fanoutsim.kernel.faults.points import POINTS, known_points


def sim_with(*faults, seed=0, store="memory", subs=(("r", "wf", None),), rate=None, **config):
    sim = fs.Simulation(config=fs.SchedulerConfig(**config), seed=seed, store=store, faults=FaultPlan(list(faults)))
    for reactor, workflow, when in subs:
        sim.runner.subscribe_workflow_to_reactor(reactor, workflow, when=when)
    if rate:
        sim.add_workload("r", rate, payload="counter")
    return sim


def kinds(sim, kind):
    tr = sim.trace()
    return tr[tr["kind"] == kind]


def test_crash_at_a_time_with_downtime_then_restart(store):
    sim = sim_with(CrashAt(10.0, downtime=5.0), store=store, rate=2.0)
    sim.run(until=30)
    crashed, restarted = kinds(sim, "crashed"), kinds(sim, "restarted")
    assert list((crashed["t"] - sim.start_us) / 1e6) == [10.0]
    assert list((restarted["t"] - sim.start_us) / 1e6) == [15.0]
    polled = (kinds(sim, "polled")["t"] - sim.start_us) / 1e6
    assert not ((polled > 10) & (polled < 15)).any()  # nobody polls while down
    fired = (kinds(sim, "fired")["t"] - sim.start_us) / 1e6
    assert not ((fired > 10) & (fired < 15)).any()  # a down reactor fires nothing
    assert fs.check(sim).total["lost"] == 0


def test_random_crashes_are_seeded_and_each_restarts():
    runs = []
    for _ in range(2):
        sim = sim_with(CrashRandomly(mean_gap=60.0, downtime={"dist": "exponential", "mean": 3.0}), seed=4, rate=1.0)
        sim.run(until=900)
        runs.append(list(kinds(sim, "crashed")["t"]))
        assert len(kinds(sim, "restarted")) >= len(runs[-1]) - 1
    assert runs[0] == runs[1] and len(runs[0]) >= 5


def test_crash_after_fetch_drops_the_batch_in_hand_without_duplicates(store):
    sim = sim_with(CrashAtPoint("poll.after_fetch", nth=1, downtime=0.5), store=store)
    sim.run(until=0.2)
    ids = [sim.fire("r", {"n": k}) for k in range(3)]
    sim.run(until=5)
    assert sorted(sim.executions()["reactor_firing_id"]) == sorted(ids)
    assert len(kinds(sim, "crashed")) == 1


def test_crash_after_claim_requeues_the_claim_at_restart(store):
    runs = []
    sim = sim_with(CrashAtPoint("executor.after_claim", downtime=1.0), store=store)
    sim.runner.register_workflow("wf", fn=lambda ctx: runs.append(ctx["n"]))
    sim.run(until=0.5)
    sim.fire("r", {"n": 1})
    sim.run(until=1.5)
    assert list(sim.executions()["status"]) == ["running"]  # its in-flight body died with the process
    sim.run(until=10)
    assert list(sim.executions()["status"]) == ["completed"]  # the next incarnation ran it again
    assert len(sim.trace().query("kind == 'requeued'")) == 1
    assert sim.metrics()["fanoutsim_executions_requeued_total"] == 1
    assert fs.check(sim).total["extra_deliveries"] == 0  # one dispatch, run twice


def test_crash_after_graphs_is_never_logged_and_the_checker_says_so():
    seen = []
    sim = sim_with(CrashAtPoint("reactor.after_graphs_before_log", nth=2, downtime=1.0))
    sim.runner.register_computation_graph("r", seen.append)
    sim.add_workload("r", 1.0, payload="counter")
    sim.run(until=30)
    report = fs.check(sim)
    assert report.total["never_logged"] == 1
    assert len(seen) == len(sim.trace().history)  # the graph saw every attempt, logged or not
    assert report.valid


def test_fail_inserts_in_a_window_for_one_workflow(store):
    sim = sim_with(
        FailInserts(probability=1.0, window=(5.0, 10.0), workflow="wf"),
        store=store,
        subs=(("r", "wf", None), ("r", "other", None)),
        rate=2.0,
    )
    sim.run(until=30)
    failed = kinds(sim, "dispatch_failed")
    t = (failed["t"] - sim.start_us) / 1e6
    assert len(failed) and t.between(5.0, 10.0).all()
    subs = sim.subscriptions().set_index("id")
    assert set(subs.loc[failed["subscription"], "workflow_name"]) == {"wf"}
    report = fs.check(sim)
    assert report.total["lost"] == 0 and report.total["extra_deliveries"] == 0  # hold, then retried


def test_ambiguous_insert_retry_is_a_duplicate_with_its_cause():
    sim = sim_with(FailInserts(probability=1.0, window=(2.0, 2.5), ambiguous=True))
    sim.run(until=1.5)
    fid = sim.fire("r", {"n": 1})
    sim.run(until=5)
    assert list(sim.executions()["reactor_firing_id"]) == [fid, fid]
    report = fs.check(sim)
    assert list(report.duplicates["cause"]) == ["ambiguous_insert"]


def test_stall_pause_skips_the_subscription_for_the_window():
    sim = sim_with(
        Stall("wf", window=(10.0, 20.0), mode="pause"), subs=(("r", "wf", None), ("r", "other", None)), rate=2.0
    )
    sim.run(until=30)
    ex = sim.executions()
    ex["t"] = (ex["dispatched_at"] - sim.clock_time + pd.Timedelta(seconds=30)).dt.total_seconds()
    paused = ex[ex["workflow_name"] == "wf"]
    assert not paused["t"].between(10.0, 19.999).any()
    assert ex[ex["workflow_name"] == "other"]["t"].between(10.0, 19.999).any()
    assert fs.check(sim).total["lost"] == 0  # caught up afterwards


def test_stall_throttle_caps_each_batch():
    sim = sim_with(Stall("wf", window=(0.0, 100.0), mode="throttle", batch_limit=2), rate=10.0)
    sim.run(until=20)
    polled = kinds(sim, "polled")
    assert polled["detail"].astype(int).max() == 2
    assert fs.check(sim).total["pending"] > 0  # backlog grows at 10/s against 2/s


def test_stall_wedge_fails_inserts_and_holds_the_watermark():
    sim = sim_with(Stall("wf", window=(5.0, 15.0), mode="wedge"), rate=1.0)
    sim.run(until=40)
    failed = (kinds(sim, "dispatch_failed")["t"] - sim.start_us) / 1e6
    assert len(failed) and failed.between(5.0, 15.0).all()
    assert fs.check(sim).total["lost"] == 0


def test_a_wedged_workflow_hangs_its_bodies_until_the_window_ends():
    sim = sim_with(Stall("wf", window=(0.0, 30.0), mode="wedge", target="workflow"), executor_workers=2)
    sim.run(until=0.5)
    for k in range(3):
        sim.fire("r", {"n": k})
    sim.run(until=60)
    ex = sim.executions().sort_values("claimed_at")
    finished = (ex["finished_at"] - sim.clock_time + pd.Timedelta(seconds=60)).dt.total_seconds()
    assert finished.iloc[0] == pytest.approx(30.0, abs=1e-3)  # held a worker for the whole window


def test_slow_workflow_draws_its_durations():
    sim = sim_with(
        SlowWorkflow("wf", duration={"dist": "uniform", "low": 2.0, "high": 3.0}), rate=1.0, executor_workers=50
    )
    sim.run(until=60)
    ex = sim.executions().query("status == 'completed'")
    run = (ex["finished_at"] - ex["claimed_at"]).dt.total_seconds()
    assert run.between(2.0, 3.0).all() and run.nunique() > 5


def test_late_commit_makes_rows_visible_after_their_stamp():
    sim = sim_with(LateCommit(probability=1.0, delay=2.0), rate=1.0)
    sim.run(until=30)
    f = sim.firings()
    assert ((f["created_at"] - f["fired_at"]).dt.total_seconds() == 2.0).all()


def test_clock_skew_offsets_fired_at_per_host():
    sim = sim_with(ClockSkew(hosts=[(-3.0, 0.0), (0.0, 0.0)]), rate=2.0)
    sim.run(until=60)
    lag = (sim.firings()["created_at"] - sim.firings()["fired_at"]).dt.total_seconds()
    assert set(lag.round(6)) == {0.0, 3.0}


def test_several_pollers_dispatch_twice_with_their_cause():
    sim = sim_with(Pollers(2), rate=1.0)
    sim.run(until=30)
    report = fs.check(sim)
    assert report.total["extra_deliveries"] > 0
    assert set(report.duplicates["cause"]) == {"several_pollers"}
    assert set(sim.trace().query("kind == 'dispatched'")["actor"]) == {"poller", "poller#1"}


def test_ties_share_a_fired_at():
    sim = sim_with(Ties(probability=1.0, burst=3), rate=0.5)
    sim.run(until=60)
    sizes = sim.firings().groupby("fired_at").size()
    assert (sizes == 3).all()


def test_ties_from_a_coarse_clock():
    sim = sim_with(Ties(resolution=1.0), rate=5.0)
    sim.run(until=30)
    f = sim.firings()
    assert (f["fired_at"].dt.microsecond == 0).all() and (f.groupby("fired_at").size() > 1).any()


def test_notifications_spec_is_validated_for_the_outbox_design():
    spec = Notifications(drop=0.05, coalesce=True, delay={"dist": "exponential", "mean": 0.01}, silent=[(10, 20)])
    assert spec.silent == ((10.0, 20.0),)
    with pytest.raises(ValueError, match="notifications.drop"):
        Notifications(drop=1.5)


def test_the_same_plan_and_seed_give_the_same_trace():
    def run():
        sim = sim_with(
            CrashRandomly(mean_gap=30.0, downtime=2.0),
            FailInserts(probability=0.1),
            LateCommit(probability=0.2, delay={"dist": "uniform", "low": 0, "high": 2}),
            seed=9,
            rate=3.0,
        )
        sim.run(until=300)
        return sim.trace()

    pd.testing.assert_frame_equal(run(), run())


# -- bad input ---------------------------------------------------------------------


def test_unknown_crash_point_lists_the_known_ones():
    with pytest.raises(ValueError, match="known points: .*reactor.after_graphs_before_log") as refused:
        CrashAtPoint("poll.somewhere")
    # by design name, whichever design's module was imported first
    listed = str(refused.value).split("known points: ")[1].split(", ")
    assert set(listed) == set(POINTS) and listed == known_points()
    assert [POINTS[p] for p in listed] == sorted(POINTS[p] for p in listed)


def test_unknown_workflow_or_subscription_is_named_at_run():
    sim = sim_with(FailInserts(workflow="nope"))
    with pytest.raises(ValueError, match="'nope'.*known workflows: wf"):
        sim.run(until=1)
    sim = sim_with(Stall("wf", window=(0, 1), reactor="other"))
    with pytest.raises(ValueError, match="stall names no existing subscription.*known: r->wf@public"):
        sim.run(until=1)


@pytest.mark.parametrize(
    "make, needle",
    [
        (lambda: CrashRandomly(mean_gap=-1), "mean_gap"),
        (lambda: CrashAt(-5), "crash_at.at"),
        (lambda: FailInserts(probability=2), "probability"),
        (lambda: FailInserts(window=(10, 5)), "must end after it starts"),
        (lambda: FailInserts(window=(-1, 5)), "window start"),
        (lambda: Stall("wf", window=None), "stall.window is required"),
        (lambda: Stall("wf", window=(0, 1), mode="sleep"), "stall.mode"),
        (lambda: CrashAt(1, downtime={"dist": "gamma"}), "downtime.dist"),
        (lambda: Pollers(0), "pollers.count"),
        (lambda: Ties(burst=1), "ties.burst"),
        (lambda: Ties(resolution=-1), "ties.resolution must be >= 0"),
        (lambda: CrashAtPoint("reactor.after_graphs_before_log", nth=0), "crash_at_point.nth must be >= 1"),
        (lambda: CrashAtPoint("reactor.after_graphs_before_log", nth=1.5), "crash_at_point.nth must be an integer"),
        (lambda: CrashRandomly(mean_gap=0), "crash_randomly.mean_gap must be > 0"),
        (lambda: FailInserts(ambiguous=1), "fail_inserts.ambiguous must be true or false, got 1"),
        (lambda: FailInserts(workflow=""), "fail_inserts.workflow must be a non-empty string"),
        (lambda: Notifications(coalesce="yes"), "notifications.coalesce must be true or false"),
        (lambda: Notifications(delay={"dist": "gamma"}), "notifications.delay.dist"),
        (lambda: LateCommit(probability=0.5, delay=1.0, reactor=""), "late_commit.reactor must be a non-empty"),
        (lambda: LateCommit(probability=float("nan"), delay=1.0), "late_commit.probability must be a finite"),
        (lambda: SlowWorkflow(None, 1.0), "slow_workflow.workflow must be a non-empty string, got None"),
        (lambda: Stall("wf", window=(0, 1), tenant=3), "stall.tenant must be a non-empty string"),
        (lambda: RestoreBackup(backup_at=-1, at=2), "restore_backup.backup_at must be >= 0"),
        (lambda: Backfill(window=(0, 1), connections=0), "backfill.connections must be >= 1"),
    ],
)
def test_bad_fault_values_name_the_field(make, needle):
    with pytest.raises(ValueError, match=needle):
        make()


def test_checked_fault_fields_keep_the_checked_form():
    late = LateCommit(probability=1, delay={"dist": "fixed", "value": 2.0}, window=[1, 3])
    assert late.window == (1.0, 3.0)  # a TOML list kept as the tuple the hooks compare
    assert late.delay.law == "fixed" and late.delay.a == 2.0
    assert CrashAt(5, downtime=1).downtime.law == "fixed"
    assert Backfill(window=[0, 2]).window == (0.0, 2.0)


def test_contradictory_plans_are_refused():
    with pytest.raises(ValueError, match="contradictory stalls"):
        FaultPlan([Stall("wf", (0, 10), mode="pause"), Stall("wf", (5, 15), mode="throttle")])
    with pytest.raises(ValueError, match="more than one 'pollers'"):
        FaultPlan([Pollers(2), Pollers(3)])


def test_plan_from_toml_tables_names_kind_and_keys():
    plan = FaultPlan.from_dicts(
        [{"kind": "crash_at", "at": 5, "downtime": 1}, {"kind": "fail_inserts", "probability": 0.5, "window": [0, 10]}]
    )
    assert [f.kind for f in plan.faults] == ["crash_at", "fail_inserts"]
    with pytest.raises(ValueError, match=r"faults\[0\].kind: 'boom' is not known; allowed: crash_at"):
        FaultPlan.from_dicts([{"kind": "boom"}])
    with pytest.raises(ValueError, match=r"faults\[0\]: unknown key\(s\) 'when'.*allowed: at, downtime"):
        FaultPlan.from_dicts([{"kind": "crash_at", "at": 1, "when": 2}])


def test_a_burst_stops_when_its_writer_crashes_mid_burst():
    sim = sim_with(
        Ties(probability=1.0, burst=3), CrashAtPoint("reactor.after_graphs_before_log", nth=2, downtime=1.0), rate=0.5
    )
    sim.run(until=30)
    history = sim.trace().history
    first = history.iloc[:3]
    # the first burst: one logged, the second attempt crashed the writer, the third never began
    assert first["logged_at"].notna().tolist()[:2] == [True, False]
    assert history.groupby("fired_at").size().iloc[0] == 2
    assert fs.check(sim).total["never_logged"] == 1
