"""The leased-consumer analysis (fanoutsim.designs.leases.analysis) and its figures
(fanoutsim.designs.leases.plots), on small seeded runs whose answers are known."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from experiments import leases as lx  # notebooks/experiments: the lessons' experiments
from matplotlib.figure import Figure

from fanoutsim.analysis import leases as la
from fanoutsim.designs.leases.checker import check_leases
from fanoutsim.designs.leases.simulation import LeaseSimulation
from fanoutsim.plots import leases as lp


@pytest.fixture(scope="module")
def sweep():
    return lx.lease_sweep(leases=(5.0, 10.0, 30.0), laws=("exponential", "uniform"), seconds=600.0)


@pytest.fixture(scope="module")
def poisons():
    return {
        o: lx.poison_run(nack_delay=1.0, partitions=3, every=0.25, seconds=30.0, poison_at=5.0, order=o)
        for o in la.ORDERS
    }


@pytest.fixture(scope="module")
def poison(poisons):
    return poisons["riffdb"]


@pytest.fixture(scope="module")
def restored():
    return lx.restore_run(at=30.25, seconds=60.0)


@pytest.fixture(scope="module")
def fence():
    return {m: lx.fence_run(m, at=150.5, seconds=300.0, retention=30.0, retention_interval=5.0) for m in lx.FENCE_MODES}


def test_work_laws_and_the_chance_to_outlive_a_lease():
    assert la.p_exceeds("exponential", 5.0, 5.0) == pytest.approx(math.exp(-1))
    assert la.p_exceeds("uniform", 5.0, 5.0) == 0.5 and la.p_exceeds("uniform", 5.0, 10.0) == 0.0
    assert la.p_exceeds("lognormal", 5.0, 5.0) < 0.5  # mean above the median
    assert la.expected_duplicates(0.0) == 0.0 and la.expected_duplicates(0.5) == pytest.approx(1.0, abs=0.01)
    assert la.expected_duplicates(1.0) == 9  # the 10th attempt dead-letters
    import random

    rng = random.Random(0)
    draws = [la.work_law("uniform", 2.0)(rng) for _ in range(2000)]
    assert 0 <= min(draws) and max(draws) <= 4.0 and sum(draws) / len(draws) == pytest.approx(2.0, rel=0.05)
    with pytest.raises(ValueError, match="law must be one of"):
        la.work_law("pareto", 1.0)


def test_duplicates_fall_as_the_lease_outgrows_the_work(sweep):
    for law, g in sweep.groupby("law"):
        d = g.sort_values("lease_seconds")["dups_per_1000"].tolist()
        assert d[0] > d[1] >= d[2], (law, d)
    uni = sweep[sweep["law"] == "uniform"].set_index("lease_seconds")
    assert uni.loc[5.0, "dups_per_1000"] > 500 and uni.loc[10.0, "duplicates"] == 0  # bounded work
    assert set(sweep["causes"]) <= {"lease_expired", "-"}
    assert (sweep["lost"] == 0).all() and sweep["valid"].all()
    exp5 = sweep[(sweep["law"] == "exponential") & (sweep["lease_seconds"] == 5.0)].iloc[0]
    assert exp5["dups_per_1000"] == pytest.approx(exp5["theory_per_1000"], rel=0.25)


def test_an_orphaned_lease_holds_its_event_until_expiry():
    sim = lx.crash_run(30.0, crashes=(300.25,), seconds=400.0)
    holds = la.orphan_holds(sim)
    assert len(holds) == 3 and (holds["crash_s"] == 300.25).all()
    # freed by a pull (0.5 s polls) or recovery (1 s ticks) once the lease is up: leased_s + 30 s, never before
    assert (holds["expired_s"] >= holds["leased_s"] + 30.0).all()
    assert (holds["expired_s"] <= holds["leased_s"] + 31.0).all()
    assert (holds["hold_s"] <= 31.0).all()
    c = lx.crash_sweep(leases=(5.0, 60.0), crashes=(300.25,), seconds=400.0)
    assert c.loc[1, "hold_max_s"] > 5 * c.loc[0, "hold_max_s"] and (c["lost"] == 0).all() and c["valid"].all()


def test_event_outcomes_and_checkpoint_path_of_a_run():
    sim = LeaseSimulation(seed=0)
    sim.register_consumer("c", duration=0.1)
    sim.publish("a")
    sim.run(until=1.0)
    sim.publish("b")
    sim.run(until=3.0)
    ev = la.event_outcomes(sim)
    assert ev["event_id"].tolist() == ["1:0", "2:0"] and (ev["outcome"] == "acked").all()
    assert ev["deliveries"].tolist() == [1, 1] and ev["attempts"].tolist() == [1, 1]
    assert ev["latency_s"].iloc[0] == pytest.approx(0.1)  # leased by the poll at t = 0, 0.1 s of work
    path = la.checkpoint_path(sim, "c")
    assert path[["partition", "seq", "how"]].values.tolist() == [["a", 1, "acked"], ["b", 2, "acked"]]
    assert la.checkpoints_at(sim, "c", 1.0) == {"a": 1}
    size = la.events_size(sim)
    assert size["rows"].iloc[0] == 1 and size["rows"].iloc[-1] == 2


@pytest.mark.parametrize("order", la.ORDERS)
def test_a_poison_event_holds_its_partitions_checkpoint_and_under_head_of_line_its_later_events(poisons, order):
    sim = poisons[order]
    assert sim.dead_letters()["attempts"].tolist() == [10]
    ps = la.partition_summary(sim).set_index("partition")
    assert ps.loc["p0", "dead_lettered"] == 1 and ps.loc["p0", "failed_attempts"] == 10
    assert ps.loc["p0", "longest_stall_s"] > 9.0  # the checkpoint waits: 9 retries, 1 s apart
    assert (ps.drop("p0")["longest_stall_s"] <= 1.0).all()  # the others flow
    assert ps.loc["p0", "latency_max_s"] > 10 * ps.drop("p0")["latency_max_s"].max()  # the poison event itself
    good = ps.loc["p0", "acked_latency_max_s"]
    if order == "head_of_line":  # p0's later events waited behind it
        assert good > 9.0
    else:  # RiffDB's rule: the retry holds no lease, p0's later events went on
        assert good <= 2 * ps.drop("p0")["acked_latency_max_s"].max()
    r = check_leases(sim)
    assert r.valid and r.total["lost"] == 0 and r.total["dead_lettered"] == 1


def test_in_flight_is_capped_by_the_partition_count_only_under_head_of_line():
    s = lx.inflight_sweep(in_flights=(1, 4), partition_counts=(1, 4), seconds=40.0, order="head_of_line")
    t = s.set_index(["partitions", "in_flight"])
    assert t.loc[(1, 4), "peak_leases"] == 1 and t.loc[(4, 4), "peak_leases"] == 4
    assert t.loc[(1, 4), "throughput"] == pytest.approx(t.loc[(1, 1), "throughput"])
    assert t.loc[(4, 4), "throughput"] > 3 * t.loc[(4, 1), "throughput"] * 0.9
    assert (s["slots"] == s[["in_flight", "partitions"]].min(axis=1)).all()
    r = lx.inflight_sweep(in_flights=(1, 4), partition_counts=(1, 4), seconds=40.0)  # RiffDB's rule
    u = r.set_index(["partitions", "in_flight"])
    assert u.loc[(1, 4), "peak_leases"] == 4 and (r["slots"] == r["in_flight"]).all()
    assert u.loc[(1, 4), "throughput"] > 3 * u.loc[(1, 1), "throughput"] * 0.9  # one partition, 4 at once
    assert set(r["order"]) == {"riffdb"} and set(s["order"]) == {"head_of_line"}


def test_the_two_rules_side_by_side_per_partition():
    runs = {o: lx.order_run(o, seconds=120.0) for o in la.ORDERS}
    c = la.order_comparison(runs, seconds=120.0).set_index(["order", "partition"])
    hol, rdb = c.loc["head_of_line"], c.loc["riffdb"]
    assert list(hol.index) == ["p0", "p1", "p2", "p3", "all"]
    assert (hol.drop("all")["peak_leases"] == 1).all() and (rdb.drop("all")["peak_leases"] > 1).all()
    assert rdb.loc["all", "acks_per_s"] > 1.5 * hol.loc["all", "acks_per_s"]  # 8 slots, not 4
    assert rdb.loc["all", "p99_s"] < hol.loc["all", "p99_s"]
    assert hol.loc["all", "duplicates"] == hol.drop("all")["duplicates"].sum()
    for sim in runs.values():
        assert check_leases(sim).valid
    fig = lp.orders_side_by_side(la.order_comparison(runs, seconds=120.0))
    assert [ax.get_title() for ax in fig.axes] == ["acks per second", "duplicates", "p99 publish \u2192 ack (s, log)"]
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["head-of-line", "riffdb"]


def test_the_fence_holds_rows_until_retire(fence):
    f = lx.fence_summary(fence, at=150.5).set_index("run")
    none, retired, resumed = (f.loc[m] for m in lx.FENCE_MODES)
    assert retired["rows_at_change"] > 3 * none["rows_at_change"]  # held history
    assert retired["rows_at_end"] < retired["rows_at_change"] / 2  # released by the retire
    assert retired["lost_causes"].startswith("retired=") and retired["reporting_delivered"] == 0
    assert resumed["reporting_lost"] == 0 and resumed["reporting_delivered"] > 0
    assert f["valid"].all()
    t = fence["stalled, then retired"].trace()
    retire_t = t.loc[t["kind"] == "retired", "t"].iloc[0]
    pruned = t[t["kind"] == "pruned"]
    assert len(pruned[pruned["t"] > retire_t]) > 0
    with pytest.raises(ValueError, match="mode must be one of"):
        lx.fence_run("paused")


def test_restore_makes_pre_restore_acks_fail_closed_as_stale_incarnation(restored):
    rs = la.restore_summary(restored)
    assert rs["incarnation"] == 2 and rs["leases_voided"] >= 1
    assert rs["redelivered_as_attempt"] == {2: rs["leases_voided"]}  # the restore counted a failed attempt
    assert rs["acks_refused"] == {"stale_incarnation": rs["leases_voided"]}
    assert rs["duplicates_by_cause"] == {"restore": rs["duplicates"]} and rs["lost"] == 0 and rs["valid"]
    assert rs["partitions"]["resumed"].all()
    out = la.ack_outcomes(restored).set_index("consumer")
    assert out.loc["worker", "ack refused: stale_incarnation"] == rs["leases_voided"]
    demo = lx.stale_token_demo()
    assert demo["result"].tolist()[2:] == ["stale_incarnation", "lease, attempt 2", "acked"]
    with pytest.raises(ValueError, match="no restore"):
        la.restore_summary(lx.poison_run(seconds=5.0))


def test_lease_summary_agrees_with_the_checker(restored):
    s = la.lease_summary(restored).set_index("consumer")
    r = check_leases(restored).per_consumer.set_index("consumer")
    assert s.loc["worker", "delivered"] == r.loc["worker", "delivered"]
    assert s.loc["worker", "duplicates_by_cause"] == {"restore": int(r.loc["worker", "duplicates"])}
    assert s.loc["worker", "latency_p50_s"] > 0


# -- figures -------------------------------------------------------------------------


def _labels(ax):
    return [line.get_label() for line in ax.get_lines()]


def test_duplicates_and_tradeoff_figures(sweep):
    fig = lp.duplicates_vs_lease(sweep)
    assert isinstance(fig, Figure)
    labels = _labels(fig.axes[0])
    assert "exponential work (run)" in labels and "uniform: expected from P(work > lease)" in labels
    c = lx.crash_sweep(leases=(5.0, 30.0), crashes=(100.25,), seconds=200.0)
    fig = lp.lease_tradeoff(c)
    assert len(fig.axes) == 2
    assert "orphaned lease held its event: worst" in _labels(fig.axes[0])
    assert _labels(fig.axes[1]) == ["duplicates per 1000 events"]
    with pytest.raises(KeyError, match="lease_sweep"):
        lp.duplicates_vs_lease(pd.DataFrame({"x": [1]}))


def test_checkpoint_progress_marks_dead_letters_and_restores(poisons, restored):
    fig = lp.checkpoint_progress(poisons["riffdb"], "worker")
    ax = fig.axes[0]
    assert {"p0", "p1", "p2"} <= set(_labels(ax))
    assert {"p0: dead letter", "p0: failed attempt (nack / expiry)"} <= {c.get_label() for c in ax.collections}
    waiting = {}
    for order, sim in poisons.items():
        lag = lp.checkpoint_progress(sim, "worker", lag=True).axes[0]  # a heatmap: a row per partition
        rows = [t.get_text().split(" ")[0] for t in lag.get_yticklabels()]
        assert rows == ["p0", "p1", "p2"]
        grid = lag.images[0].get_array()
        waiting[order] = grid[0].max()
        assert grid[1:].max() <= 2  # the other partitions: the event at hand
    # events not yet done: a queue behind the poison under head-of-line; itself and the one at hand under RiffDB's
    assert waiting["head_of_line"] > 5 and waiting["riffdb"] <= 2
    fig = lp.checkpoint_progress(restored)
    assert "restore (new incarnation)" in _labels(fig.axes[0])


def test_inflight_fence_and_outcome_figures(fence, restored):
    s = lx.inflight_sweep(in_flights=(1, 2), partition_counts=(1, 2), seconds=20.0, warmup=5.0)
    fig = lp.inflight_throughput(s)
    left, right = fig.axes
    # RiffDB's rule: the partition count changes nothing, and one line says so
    assert "1 and 2 partitions (identical)" in _labels(left)
    assert "1 and 2 partitions (identical), p99" in _labels(right)
    hol = lx.inflight_sweep(in_flights=(1, 2), partition_counts=(1, 2), seconds=20.0, warmup=5.0, order="head_of_line")
    left, right = lp.inflight_throughput(hol).axes
    assert {"1 partition", "2 partitions"} <= set(_labels(left))
    assert "2 partitions, p99" in _labels(right)
    fig = lp.events_table_size(fence, at=150.5, retention=30.0)
    assert set(lx.FENCE_MODES) <= set(_labels(fig.axes[0]))
    fig = lp.lease_outcomes(restored)
    ticks = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert "ack refused: stale_incarnation" in ticks and "acked" in ticks
    fig = lp.delivery_per_consumer(restored)
    assert [p.get_label() for p in fig.axes[0].containers] == [
        "delivered",
        "duplicates: restore",
        "dead_lettered",
        "lost",
        "pending",
    ]


def test_empty_runs_draw_placeholders():
    sim = LeaseSimulation(seed=0)
    for fig in (lp.checkpoint_progress(sim), lp.lease_outcomes(sim), lp.delivery_per_consumer(sim)):
        assert isinstance(fig, Figure)
        assert any(t.get_text().startswith("no ") for t in fig.axes[0].texts)


def test_save_leases_figures(tmp_path, restored):
    paths = lp.save_leases_figures(restored, tmp_path / "out")
    assert [p.name for p in paths] == list(lp.LEASES_FIGURES)
    assert all(p.stat().st_size > 5000 for p in paths)


def test_consumers_behind_one_panel_per_consumer_the_retired_one_too():
    """leases_checkpoints.png: a laggard's backlog grows until it is retired, and
    its panel ends there; a consumer that keeps up stays near zero."""
    sim = LeaseSimulation(seed=0)
    sim.register_consumer("fast", duration=0.01)
    sim.register_consumer("laggard", duration=2.0, in_flight_limit=1, batch_limit=1, lease_seconds=30.0)
    sim.add_workload(2.0, partitions=2)
    sim.administer("retire", "laggard", at=100.5)  # as an operator: once it holds no live lease
    sim.run(until=150.0)
    t = sim.trace()
    retired_at = float((t.loc[t["kind"] == "retired", "t"].iloc[0] - sim.start_us) / 1e6)
    fig = lp.consumers_behind(sim)
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert [t.split(":")[0] for t in titles] == ["fast", "laggard"]
    assert f"retired at {retired_at:g} s" in titles[1]
    fast, laggard = (ax.get_lines()[0].get_ydata() for ax in fig.axes)
    assert max(fast) < 10 < max(v for v in laggard if v == v)  # NaN once it is gone
    times = fig.axes[1].get_lines()[0].get_xdata()
    assert all(v != v for v, t in zip(laggard, times) if t > retired_at + 1)


def test_waiting_heatmap_shares_one_colour_scale_across_rules(poisons):
    fig = lp.poison_side_by_side(poisons)
    heatmaps = [ax.images[0] for ax in fig.axes if ax.images]
    assert len(heatmaps) == 2
    assert heatmaps[0].norm.vmax == heatmaps[1].norm.vmax >= max(h.get_array().max() for h in heatmaps)
