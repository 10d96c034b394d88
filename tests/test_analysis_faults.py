"""fanoutsim.designs.reactor.analysis.faults and .idempotency: duplicates per crash, the table
under retention, a watermark's path, the holes — and the idempotency recipe."""

from __future__ import annotations

import math

import pytest

import fanoutsim as fs
from fanoutsim.analysis import (
    EffectTable,
    crash_points,
    crash_run,
    crash_sweep,
    dedup_report,
    duplicates_per_crash,
    firing_outcomes,
    hole_matrix,
    hole_run,
    idempotency_run,
    recording_body,
    retention_cost,
    retention_run,
    retention_table,
    table_size,
    table_size_summary,
    watermark_path,
)


# -- duplicates per crash ----------------------------------------------------------------
@pytest.fixture(scope="module")
def sweep():
    return crash_sweep((1, 10, 50), crashes=6)


def test_per_firing_redelivers_one_atomic_none_per_batch_part_of_a_batch(sweep):
    by = {(r.watermark_commit, r.batch_limit): r for r in sweep.itertuples(index=False)}
    for limit in (1, 10, 50):
        assert by["per_firing", limit].crashes == 6 and by["per_firing", limit].duplicates_per_crash == 1.0
        assert by["atomic", limit].crashes == 6 and by["atomic", limit].extra_deliveries == 0
        assert 1.0 <= by["per_batch", limit].duplicates_per_crash <= limit
    assert by["per_batch", 1].duplicates_per_crash == 1.0  # a batch of one is a firing
    assert by["per_batch", 10].duplicates_per_crash < by["per_batch", 50].duplicates_per_crash
    assert (sweep["lost"] == 0).all()


def test_crash_runs_are_seeded():
    a = duplicates_per_crash(crash_run(20, "per_batch", seed=3, crashes=3))
    b = duplicates_per_crash(crash_run(20, "per_batch", seed=3, crashes=3))
    assert a == b


def test_each_named_point_costs_what_it_should():
    df = crash_points(
        ["poll.after_fetch", "poll.before_batch_commit", "executor.after_claim", "reactor.after_graphs_before_log"],
        batch_limit=10,
        crashes=3,
    ).set_index(["point", "watermark_commit"])
    assert (df.loc["poll.after_fetch", "extra_deliveries"] == 0).all()  # nothing dispatched yet
    assert df.loc[("poll.before_batch_commit", "per_batch"), "duplicates_per_crash"] == 10  # a whole batch
    assert df.loc[("poll.before_batch_commit", "per_firing"), "crashes"] == 0  # never passes that point
    assert math.isnan(df.loc[("poll.before_batch_commit", "atomic"), "duplicates_per_crash"])
    claim = df.loc["executor.after_claim"]
    assert (claim["extra_deliveries"] == 0).all() and (claim["requeued"] > 0).all()  # re-run, not stuck
    assert (claim["stuck"] == 0).all()
    graphs = df.loc["reactor.after_graphs_before_log"]
    assert (graphs["never_logged"] == graphs["crashes"]).all()


# -- the idempotency recipe ---------------------------------------------------------------
def test_upsert_keyed_on_the_firing_id_applies_each_firing_once():
    sim, naive, upsert = idempotency_run(batch_limit=20, crashes=4)
    r = dedup_report(sim, naive, upsert)
    assert r["extra_deliveries"] > 0
    assert r["executions"] == r["bodies_run"] == r["naive_records"] == r["firings"] + r["extra_deliveries"]
    assert r["upserted_records"] == r["firings"] == r["firings_delivered"]
    assert r["absorbed"] == r["extra_deliveries"]
    assert set(upsert.records) == set(sim.executions()["reactor_firing_id"])


def test_effect_table_appends_or_upserts_and_names_a_missing_key():
    naive, keyed = EffectTable(key=None), EffectTable()
    body = recording_body(naive, keyed)
    for ctx in (
        {"reactor_firing_id": "a", "n": 1},
        {"reactor_firing_id": "a", "n": 2},
        {"reactor_firing_id": "b", "n": 3},
    ):
        body(ctx)
    assert (naive.applied, keyed.applied, keyed.writes, keyed.overwrites) == (3, 2, 3, 1)
    assert keyed.records["a"]["n"] == 2  # the last write wins
    assert "upsert on reactor_firing_id: 2 records from 3 writes" in repr(keyed)
    with pytest.raises(KeyError, match="no 'reactor_firing_id' to key the effect on; it has n"):
        keyed.write({"n": 4})


# -- the table under retention --------------------------------------------------------------
def test_table_size_follows_logged_and_pruned_rows_to_the_tables(store):
    sim = retention_run("ttl", retention=30.0, pause=0, until=120.0, store=store)
    size = table_size(sim)
    assert size["t_s"].is_monotonic_increasing and size["t_s"].iloc[-1] == 120.0
    assert size["retained"].iloc[-1] == len(sim.firings())
    assert size["retained_bytes"].iloc[-1] == sum(len(p) for p in sim.firings()["payload"])
    assert (size["retained"] >= 0).all() and size["retained"].max() <= 2.0 * (30 + 10) * 1.5


def test_table_size_summary_is_time_weighted():
    sim = retention_run("ttl", retention=60.0, pause=0)
    rows = table_size_summary(sim, after=80.0)
    assert rows["min"] <= rows["mean"] <= rows["max"]
    assert rows["mean"] == pytest.approx(2.0 * (60 + 10 / 2), rel=0.1)  # rate x (R + I / 2)


def test_a_pause_longer_than_the_retention_loses_under_ttl_and_not_under_conservative():
    ttl, cons = retention_cost(retention_run("ttl")), retention_cost(retention_run("conservative"))
    assert ttl["lost_paused"] > 0 and ttl["lost_live"] == 0 and ttl["valid"]  # the documented gotcha
    assert cons["lost"] == 0 and cons["valid"]
    assert cons["peak_rows"] > ttl["peak_rows"]  # ... paid for in storage
    short = retention_cost(retention_run("ttl", pause=20.0))  # shorter than the retention
    assert short["lost"] == 0


def test_a_never_polled_subscription_holds_the_log_open_under_conservative():
    df = retention_table(
        {
            "ttl": dict(policy="ttl", never_polled=True),
            "conservative": dict(policy="conservative", never_polled=True),
            "disabled": dict(policy="conservative", disabled=True),
        }
    ).set_index("case")
    assert (
        df.loc["conservative", "pruned"] == 0
        and df.loc["conservative", "end_rows"] == df.loc["conservative", "peak_rows"]
    )
    assert df.loc["ttl", "lost_archive"] > 0 and df.loc["ttl", "end_rows"] < df.loc["conservative", "end_rows"]
    assert df.loc["disabled", "pruned"] > 0 and df.loc["disabled", "lost_paused"] == 0  # disabled holds nothing


# -- a watermark's path and the holes ----------------------------------------------------------
def test_watermark_path_and_outcomes_agree_with_the_checker():
    sim = hole_run("late commit")
    report = fs.check(sim)
    out = firing_outcomes(sim, report=report)
    assert (out["outcome"] == "lost").sum() == report.total["lost"]
    assert set(out.loc[out["outcome"] == "lost", "cause"]) == {"late_visibility"}
    lost = out[out["outcome"] == "lost"]
    assert (lost["visible_s"] > lost["fired_s"]).all()  # committed after their stamp
    path = watermark_path(sim)
    assert path["t_s"].is_monotonic_increasing and not path["rewind"].any()
    # each lost firing became visible when the watermark was already past its stamp
    for f in lost.itertuples():
        before = path[path["t_s"] <= f.visible_s]
        assert before["watermark_s"].iloc[-1] >= f.fired_s


def test_outcomes_name_filtered_and_duplicated_firings():
    sim = fs.Simulation(faults=fs.FaultPlan([fs.faults.Pollers(2)]))
    sim.runner.subscribe_workflow_to_reactor("r", "wf", when="payload.n > 0")
    sim.run(until=0.5)
    sim.fire("r", {"n": 0})
    sim.fire("r", {"n": 1})
    sim.run(until=3)
    out = firing_outcomes(sim, "wf").set_index("deliveries")
    assert list(firing_outcomes(sim)["outcome"]) == ["filtered", "duplicated"]
    assert out.loc[2, "cause"] == "several_pollers"
    with pytest.raises(KeyError, match="no single subscription 'nope'"):
        watermark_path(sim, "nope")


def test_hole_matrix_closes_each_hole_as_the_strategies_promise():
    df = hole_matrix(until=60.0).set_index(["hole", "watermark"])
    assert df.loc[("tie split by the batch limit", "fired_at"), "lost"] > 0
    assert df.loc[("tie split by the batch limit", "fired_at_id"), "lost"] == 0
    for hole in ("late commit", "clock skew"):
        assert df.loc[(hole, "fired_at_id"), "lost"] > 0 and df.loc[(hole, "settled"), "lost"] == 0
    pollers = df.loc["several pollers"]
    assert (pollers["lost"] == 0).all() and (pollers["extra_deliveries"] > 0).all() and (pollers["rewinds"] > 0).all()
    base = hole_matrix(["none"], until=120.0).set_index("watermark")
    assert base.loc["fired_at", "dispatch_mean_s"] == pytest.approx(0.5, abs=0.1)
    assert base.loc["settled", "dispatch_mean_s"] - base.loc["fired_at", "dispatch_mean_s"] == pytest.approx(
        5.0, abs=0.05
    )
    with pytest.raises(KeyError, match="unknown hole 'nope'"):
        hole_run("nope")
