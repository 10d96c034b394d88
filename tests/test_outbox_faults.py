"""The outbox design under faults: lossy hints, crashes, late commits, bad input."""

from __future__ import annotations

import pytest

from fanoutsim.designs.outbox import ConsumerSpec, OutboxConfig
from fanoutsim.designs.outbox.checker import check_outbox
from fanoutsim.designs.outbox.simulation import OutboxSimulation
from fanoutsim.faults import (
    CRASH_POINTS,
    CrashAtPoint,
    CrashRandomly,
    FaultPlan,
    LateCommit,
    Notifications,
)


def run(plan=None, config=None, seed=1, until=120.0, rate=5.0, consumers=("indexer", "exporter")):
    sim = OutboxSimulation(config or OutboxConfig(), seed=seed, faults=plan)
    for name in consumers:
        sim.register_consumer(name, duration=0.01)
    sim.add_workload(rate, stop=until - 20)
    sim.run(until=until)
    return sim, check_outbox(sim)


@pytest.mark.parametrize(
    "spec",
    [
        Notifications(drop=0.5),
        Notifications(drop=1.0),
        Notifications(coalesce=True, delay=2.0),
        Notifications(silent=((10, 60),)),
        Notifications(drop=0.3, delay={"dist": "exponential", "mean": 1}),
    ],
    ids=["drop-half", "drop-all", "coalesce-delay", "silent", "mixed"],
)
def test_lossy_hints_lose_nothing_the_safety_poll_recovers(spec):
    sim, report = run(FaultPlan([spec]))
    assert report.total["lost"] == 0 and report.total["pending"] == 0 and report.valid
    assert report.total["delivered"] == 2 * report.total["committed"]
    if spec.drop == 1.0:  # every row waited for a poll: latency up to the poll interval
        assert report.per_consumer["latency_max_s"].max() <= 5.0 + 0.1


def test_coalesce_merges_identical_payloads_of_one_transaction():
    from fanoutsim.designs.outbox.notify import NotificationChannel

    ch = NotificationChannel(Notifications(coalesce=True))
    assert [p for _, p in ch.send(0, ["7", "7", "8"])] == ["7", "8"] and ch.coalesced == 1


def test_hints_sent_while_disconnected_are_lost_but_rows_are_not():
    sim = OutboxSimulation(seed=0)
    sim.register_consumer("a")
    sim.run(until=1.0)
    sim.crash()
    sim.restart()
    sim.channel.connected = False
    sim.commit("p")
    assert sim.channel.missed == 1
    sim.run(until=10.0)
    assert check_outbox(sim).per_consumer["delivered"].tolist() == [1]


@pytest.mark.parametrize(
    "point",
    [
        "dispatch.after_handle_before_cursor",
        "dispatch.after_fetch",
        "commit.before_notify",
        "commit.after_change_before_outbox",
        "retention.mid_delete",
    ],
)
def test_crashes_at_every_outbox_point_lose_nothing_and_duplicates_have_causes(point):
    assert point in CRASH_POINTS
    plan = FaultPlan(
        [CrashAtPoint(point, nth=n, downtime=1.0) for n in (3, 40)] + [CrashRandomly(mean_gap=30, downtime=2.0)]
    )
    sim, report = run(plan, OutboxConfig(retention=10.0, retention_interval=1.0) if "retention" in point else None)
    assert report.valid
    assert set(report.lost["cause"]) <= {"pruned"}
    assert set(report.duplicates["cause"]) <= {"crash"}
    if point == "dispatch.after_handle_before_cursor":
        assert len(report.duplicates) >= 2


def test_a_late_commit_slips_under_the_cursor_and_is_lost():
    sim, report = run(FaultPlan([LateCommit(0.2, 0.5)]))
    assert report.total["lost"] > 0
    assert set(report.lost["cause"]) == {"late_commit"}
    assert not report.valid


def test_a_late_commit_passed_over_by_a_read_is_named_although_the_cursor_was_below_it():
    # a slow consumer reads seqs 1 and 3 while 2 is still uncommitted; 2 commits while the
    # cursor is at 0 (the consumer is busy with seq 1), and the cursor then moves to 3 past it
    sim = OutboxSimulation(seed=0)
    sim.register_consumer("slow", duration=1.0)
    sim.run(until=0.1)
    seq1 = sim.commit("a")
    two = sim._call(sim.engine.reserve)  # a writer takes seq 2 and commits it late
    sim.commit("c")
    sim.run(until=0.5)
    assert sim.cursors()["seq"].tolist() == [0]
    sim._call(sim.engine.commit, "b", "late", seq=two)
    sim.run(until=5.0)
    report = check_outbox(sim)
    assert (seq1, two) == (1, 2) and sim.cursors()["seq"].tolist() == [3]
    assert report.lost.to_dict("records") == [{"consumer": "slow", "seq": 2, "cause": "late_commit"}]


def test_a_replay_after_a_reset_is_a_reset_duplicate_even_if_a_crash_came_between():
    sim = OutboxSimulation(seed=0)
    sim.register_consumer("view", rebuild=lambda rows: None)
    sim.commit("a")
    sim.run(until=1.0)
    sim.crash()
    sim.restart()
    sim.reset_consumer("view")
    sim.run(until=2.0)
    report = check_outbox(sim)
    assert report.duplicates["cause"].tolist() == ["reset"] and report.valid


@pytest.mark.parametrize("mode", ["settled", "gap"])
def test_the_commit_order_safe_reads_close_the_late_commit_hole(mode):
    cfg = OutboxConfig(read_mode=mode, settle=1.0, gap_timeout=10.0)
    sim, report = run(FaultPlan([LateCommit(0.2, 0.5)]), cfg)
    assert report.total["lost"] == 0 and report.valid
    assert report.total["delivered"] == 2 * report.total["committed"]


def test_gap_mode_gives_up_on_a_seq_that_never_commits():
    sim = OutboxSimulation(OutboxConfig(read_mode="gap", gap_timeout=3.0), seed=0)
    sim.register_consumer("a")
    sim.run(until=0.5)
    sim._call(sim.engine.reserve)  # a writer that took seq 1 and died
    sim.commit("p")
    sim.run(until=2.0)
    assert sim.cursors()["seq"].tolist() == [0]
    sim.run(until=10.0)
    assert sim.cursors()["seq"].tolist() == [2]
    assert (sim.trace()["kind"] == "gap_skipped").sum() == 1


# -- bad input: clear errors naming the value -------------------------------------------


def test_unknown_consumer_names_are_refused():
    sim = OutboxSimulation(seed=0)
    sim.register_consumer("indexer")
    with pytest.raises(KeyError, match="unknown consumer 'nope'; registered: indexer"):
        sim.set_cursor("nope", 0)
    with pytest.raises(KeyError, match="'nope'"):
        sim.reset_consumer("nope")
    with pytest.raises(ValueError, match="consumer name must be a non-empty string"):
        sim.register_consumer("")


def test_cursor_past_the_end_or_before_the_retention_horizon_is_refused():
    sim = OutboxSimulation(OutboxConfig(retention=10.0, retention_interval=5.0), seed=0)
    sim.register_consumer("a")
    for i in range(3):
        sim.commit(f"p{i}")
    with pytest.raises(ValueError, match="cursor 9 for 'a' is past the end of the log \\(last seq 3\\)"):
        sim.set_cursor("a", 9)
    with pytest.raises(ValueError, match="cursor -1 for 'a' is negative"):
        sim.set_cursor("a", -1)
    sim.run(until=20.0)
    sim.commit("late")
    with pytest.raises(ValueError, match="cursor 1 for 'a' is before the retention horizon"):
        sim.set_cursor("a", 1)
    with pytest.raises(ValueError, match="cursor 1 for 'b' is before the retention horizon"):
        sim.register_consumer("b", start=1)
    assert sim.set_cursor("a", 3) == 3


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"timeout": -1}, "timeout must be a finite number of seconds >= 1e-06 \\(1 µs, the clock's unit\\), got -1"),
        ({"backoff": -0.5}, "backoff must be a finite number of seconds >= 0, got -0.5"),
        ({"backoff_cap": float("nan")}, "backoff_cap must be a finite number"),
        ({"retry_budget": 0}, "retry_budget must be an int >= 1, got 0"),
        ({"jitter": 2}, "jitter must be a fraction in \\[0, 1\\], got 2"),
        ({"duration": -3}, "duration must be a finite number of seconds >= 0, got -3"),
    ],
)
def test_bad_guardrails_are_refused_naming_the_value(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ConsumerSpec("c", **kwargs)


def test_bad_config_and_past_due_times_are_refused():
    with pytest.raises(
        ValueError,
        match="safety_poll_interval must be a finite number of seconds >= 1e-06 \\(1 µs, the clock's unit\\), got 0",
    ):
        OutboxConfig(safety_poll_interval=0)
    with pytest.raises(ValueError, match="read_mode must be one of .* got 'fast'"):
        OutboxConfig(read_mode="fast")
    sim = OutboxSimulation(seed=0)
    sim.run(until=10.0)
    with pytest.raises(ValueError, match="due_at 5.0 is in the past \\(now is 10 s since start\\)"):
        sim.commit("p", due_at=5.0)
    assert len(sim.outbox()) == 0


# -- a gap timeout is a documented drop, even when the skipped row commits later ---------


def test_a_row_skipped_by_the_gap_timeout_and_committed_later_is_a_gap_timeout():
    sim = OutboxSimulation(OutboxConfig(read_mode="gap", gap_timeout=0.5), seed=0)
    sim.register_consumer("a")
    sim.run(until=0.1)
    one = sim._call(sim.engine.reserve)  # seqs 1 and 2: writers that commit after the timeout
    two = sim._call(sim.engine.reserve)
    sim.commit("p")
    sim.run(until=2.0)
    skips = sim.trace().query("kind == 'gap_skipped'")
    assert skips["detail"].tolist() == ["seqs 1..2 missing for 0.5s"]
    assert sim.cursors()["seq"].tolist() == [3]
    sim._call(sim.engine.commit, "b", "late", seq=one)
    sim._call(sim.engine.commit, "c", "late", seq=two)
    sim.run(until=5.0)
    report = check_outbox(sim)
    # every seq of the skipped span, not only the first, is named from the trace
    assert report.lost.to_dict("records") == [
        {"consumer": "a", "seq": 1, "cause": "gap_timeout"},
        {"consumer": "a", "seq": 2, "cause": "gap_timeout"},
    ]
    assert report.valid


def test_late_commits_longer_than_the_gap_timeout_are_gap_timeouts_and_keep_the_run_valid():
    plan = FaultPlan([LateCommit(0.3, 0.7)])
    sim, report = run(plan, OutboxConfig(read_mode="gap", gap_timeout=0.5), consumers=("c",), until=60.0)
    skipped = sim.trace().query("kind == 'gap_skipped'")
    assert len(skipped) and report.total["lost"] > 0
    assert set(report.lost["cause"]) == {"gap_timeout"}
    assert report.valid
    # without a gap read the same late commits are passed over unawares: a broken promise
    sim, report = run(plan, OutboxConfig(), consumers=("c",), until=60.0)
    assert (sim.trace()["kind"] == "gap_skipped").sum() == 0
    assert set(report.lost["cause"]) == {"late_commit"} and not report.valid
