"""Latency, counts, backlog and lag of hand-built runs whose answers are known."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

import fanoutsim as fs
from fanoutsim.analysis import delivery_report, latency_frame, metric_total, percentiles
from fanoutsim.report import format_report

POLL = 1.0
TICK = 0.1
# virtual fire times and the poll that dispatches each (the poll loop runs at t = 0, 1, 2, ...)
FIRES = [0.25, 0.5, 2.35, 5.0, 7.9]
DISPATCH = [1.0, 1.0, 3.0, 5.0, 8.0]
# t=5.0: run(until=5.0) stops *before* the poll due at 5.0, so a firing made then
# is taken by that very poll: zero wait, the closed end of the uniform [0, P).


def hand_built(*, until: float = 10.0, retention: float = 604800.0, prune_interval: float = 3600.0):
    cfg = fs.SchedulerConfig(
        reactor_poll_interval=POLL,
        executor_poll_interval=TICK,
        executor_workers=8,
        reactor_firings_retention=retention,
        reactor_firings_prune_interval=prune_interval,
    )
    sim = fs.Simulation(cfg, seed=3)
    run = sim.runner
    run.subscribe_workflow_to_reactor("r", "all")  # every firing
    run.subscribe_workflow_to_reactor("r", "big", when="payload.x > 1")  # x = 2..5
    run.subscribe_workflow_to_reactor("r", "paused")  # paused after t=3
    run.subscribe_workflow_to_reactor("r", "other", tenant="t2")  # its stream never fires
    ids = []
    for k, t in enumerate(FIRES, start=1):
        sim.run(until=t)
        ids.append(sim.fire("r", {"x": k}))
        if t == 2.35:
            sim.run(until=3.5)  # the poll at 3.0 has taken it
            run.set_subscription_enabled("r", "paused", enabled=False)
    sim.run(until=until)
    return sim, ids


def test_fire_to_dispatch_is_the_wait_for_the_next_poll():
    sim, ids = hand_built()
    lat = latency_frame(sim)
    all_ = lat[lat["workflow_name"] == "all"].set_index("reactor_firing_id").loc[ids]
    expected = [d - f for f, d in zip(FIRES, DISPATCH)]
    assert all_["fire_to_dispatch"].tolist() == pytest.approx(expected, abs=1e-9)
    # exact to the microsecond, as the store keeps it
    assert [round(v * 1e6) for v in all_["fire_to_dispatch"]] == [750000, 500000, 650000, 0, 100000]
    start = sim.clock_time - pd.Timedelta(seconds=sim.now)
    assert all_["fired_at"].tolist() == [start + pd.Timedelta(seconds=t) for t in FIRES]
    assert all_["dispatched_at"].tolist() == [start + pd.Timedelta(seconds=t) for t in DISPATCH]
    # fired_at from the context agrees with the log
    log = sim.firings().set_index("id").loc[ids, "fired_at"]
    assert all_["fired_at"].tolist() == log.tolist()


def test_fire_to_claim_adds_at_most_one_executor_tick():
    sim, _ = hand_built()
    lat = latency_frame(sim)
    assert lat["claimed_at"].notna().all()
    extra = lat["fire_to_claim"] - lat["fire_to_dispatch"]
    assert (extra >= 0).all() and (extra <= TICK + 1e-6).all()
    assert np.allclose(lat["fire_to_claim"], (lat["claimed_at"] - lat["fired_at"]).dt.total_seconds())
    assert lat["fire_to_dispatch"].dtype == float and lat["fire_to_claim"].dtype == float


def test_latency_frame_rows_and_keys():
    sim, ids = hand_built()
    lat = latency_frame(sim)
    subs = sim.subscriptions().set_index(["reactor_name", "workflow_name", "tenant_id"])["id"]
    assert len(lat) == 5 + 4 + 3
    for row in lat.itertuples():
        assert row.subscription_id == subs[(row.reactor_name, row.workflow_name, row.tenant_id)]
    assert set(lat.loc[lat["workflow_name"] == "big", "reactor_firing_id"]) == set(ids[1:])
    assert set(lat.loc[lat["workflow_name"] == "paused", "reactor_firing_id"]) == set(ids[:3])
    assert list(lat.columns[-2:]) == ["fire_to_dispatch", "fire_to_claim"]


def test_unclaimed_execution_has_no_claim_latency():
    sim, _ = hand_built(until=8.0)  # the 7.9 firing is not dispatched yet ...
    sim.run(until=8.0 + 1e-6)  # ... now it is, and no executor tick has come
    lat = latency_frame(sim)
    last = lat[np.isclose(lat["fire_to_dispatch"], 0.1)]
    assert len(last) == 2 and last["fire_to_claim"].isna().all() and last["claimed_at"].isna().all()
    report = delivery_report(sim)
    assert report["latency_s"]["fire_to_claim"]["count"] == len(lat) - 2
    assert report["latency_s"]["fire_to_dispatch"]["count"] == len(lat)


def test_latency_percentiles_in_the_report():
    sim, _ = hand_built()
    stats = delivery_report(sim)["latency_s"]["fire_to_dispatch"]
    # 12 executions: "all" 5 + "big" 4 (not x=1) + "paused" 3 (the first three)
    values = [0.75, 0.5, 0.65, 0.0, 0.1] + [0.5, 0.65, 0.0, 0.1] + [0.75, 0.5, 0.65]
    s = sorted(values)  # 0, 0, .1, .1, .5, .5, .5, .65, .65, .65, .75, .75
    assert stats["count"] == 12
    assert stats["mean"] == pytest.approx(sum(values) / 12)
    assert stats["p50"] == pytest.approx(0.5)  # between s[5] and s[6]
    assert stats["p95"] == pytest.approx(s[10] + 0.45 * (s[11] - s[10]))  # rank 10.45
    assert stats["p99"] == pytest.approx(0.75)
    assert stats["max"] == pytest.approx(0.75)


def test_percentiles_interpolate_linearly():
    assert percentiles([4.0, 1.0, 3.0, 2.0]) == {
        "count": 4,
        "mean": 2.5,
        "p50": 2.5,
        "p95": pytest.approx(3.85),
        "p99": pytest.approx(3.97),
        "max": 4.0,
    }
    assert percentiles([7.0]) == {"count": 1, "mean": 7.0, "p50": 7.0, "p95": 7.0, "p99": 7.0, "max": 7.0}
    empty = percentiles([])
    assert empty["count"] == 0 and all(empty[k] is None for k in ("mean", "p50", "p95", "p99", "max"))
    assert percentiles([1.0, float("nan"), 3.0])["count"] == 2


def _subs_by_workflow(report):
    return {s["workflow"]: s for s in report["subscriptions"]}


def test_per_subscription_counts_backlog_and_lag():
    sim, _ = hand_built(until=10.0)
    report = delivery_report(sim)
    subs = _subs_by_workflow(report)
    assert {w: s["executions"] for w, s in subs.items()} == {"all": 5, "big": 4, "paused": 3, "other": 0}
    assert report["executions"]["total"] == 12 and report["executions"]["unmatched"] == 0
    # active subscriptions passed the 7.9 firing at the poll at 8: nothing left to read, no lag
    # (the 2.1 s since the stream last fired is not lag)
    for w in ("all", "big"):
        assert subs[w]["watermark_lag_s"] == 0.0
        assert subs[w]["backlog"] == 0
        assert subs[w]["state"] == "active"
    # paused after the poll at 3: its watermark is the 2.35 firing; 5.0 and 7.9 wait, the oldest 5 s
    assert subs["paused"]["watermark_lag_s"] == pytest.approx(10.0 - 5.0)
    assert subs["paused"]["watermark"] == "2026-01-01T00:00:02.350000Z"
    assert subs["paused"]["backlog"] == 2
    assert subs["paused"]["state"] == "paused"
    # a stream that never fired: the watermark never moved, and nothing waits
    assert subs["other"]["watermark_lag_s"] == 0.0 and subs["other"]["watermark"] is None
    assert "oldest firing" in report["definitions"]["watermark_lag_s"]
    assert subs["other"]["backlog"] == 0 and subs["other"]["tenant"] == "t2"
    assert report["time_span_s"] == 10.0
    assert report["firings"] == {"fired": 5, "retained": 5, "pruned": 0}


def test_backlog_counts_only_what_the_log_still_holds():
    # keep 2 s, prune every 5 s: the prune at t=5 drops the firings before t=3
    sim, _ = hand_built(until=10.0, retention=2.0, prune_interval=5.0)
    report = delivery_report(sim)
    assert report["firings"] == {"fired": 5, "retained": 2, "pruned": 3}
    assert _subs_by_workflow(report)["paused"]["backlog"] == 2
    assert metric_total(sim.metrics(), "fanoutsim_reactor_firings_pruned_total") == 3


def test_never_advanced_subscription_backlog_is_the_whole_stream():
    sim = fs.Simulation(seed=0)
    sim.runner.subscribe_workflow_to_reactor("r", "late")
    sim.runner.set_subscription_enabled("r", "late", enabled=False)
    sim.run(until=0.5)
    for _ in range(3):
        sim.fire("r", {"x": 1})
    sim.run(until=4.0)
    (sub,) = delivery_report(sim)["subscriptions"]
    # nothing read: the oldest of the three, fired at 0.5 s, is 3.5 s old
    assert sub["backlog"] == 3 and sub["watermark_lag_s"] == pytest.approx(3.5) and sub["executions"] == 0


def test_executions_of_a_removed_subscription_are_unmatched():
    sim, _ = hand_built()
    sim.runner.unsubscribe_workflow_from_reactor("r", "paused")
    report = delivery_report(sim)
    assert report["executions"]["unmatched"] == 3
    assert sum(s["executions"] for s in report["subscriptions"]) == 9
    lat = latency_frame(sim)
    assert lat.loc[lat["workflow_name"] == "paused", "subscription_id"].isna().all()


def test_metrics_are_summed_over_labels():
    m = {
        'fanoutsim_reactor_firings_total{graph="a",reactor="a"}': 3,
        'fanoutsim_reactor_firings_total{graph="b",reactor="b"}': 4,
        "fanoutsim_reactor_firings_total_other": 100,
        "fanoutsim_reactor_firings_pruned_total": 2,
    }
    assert metric_total(m, "fanoutsim_reactor_firings_total") == 7
    assert metric_total(m, "fanoutsim_reactor_firings_pruned_total") == 2
    assert metric_total(m, "nope") == 0


def test_predicate_errors_and_dead_letters_come_from_metrics():
    cfg = fs.SchedulerConfig(predicate_error_policy="hold", predicate_error_limit=2)
    sim = fs.Simulation(cfg, seed=0)
    sim.runner.subscribe_workflow_to_reactor("r", "wf", when="payload.x > 1")
    sim.run(until=0.5)
    sim.fire("r", {"y": 1})  # no x: an evaluation error on every poll until dead-lettered
    sim.run(until=5.0)
    report = delivery_report(sim)
    assert report["predicate_errors"] == metric_total(sim.metrics(), "fanoutsim_reactor_predicate_errors_total")
    assert report["predicate_errors"] == 2
    assert report["dead_letters"] == 1
    assert report["subscriptions"][0]["state"] == "degraded"


def _walk(value):
    if isinstance(value, dict):
        for k, v in value.items():
            assert isinstance(k, str)
            yield from _walk(v)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v)
    else:
        yield value


def test_report_is_plain_json():
    sim, _ = hand_built()
    report = delivery_report(sim, name="hand")
    for leaf in _walk(report):
        assert leaf is None or type(leaf) in (int, float, str), (leaf, type(leaf))
        assert not (type(leaf) is float and math.isnan(leaf))
    assert json.loads(json.dumps(report, allow_nan=False)) == report
    assert report["scenario"] == "hand" and report["seed"] == 3


def test_empty_run_reports_without_failing():
    report = delivery_report(fs.Simulation(seed=0))
    assert report["executions"]["total"] == 0 and report["subscriptions"] == []
    assert report["latency_s"]["fire_to_dispatch"]["p50"] is None
    assert latency_frame(fs.Simulation(seed=0)).empty
    assert "fire -> dispatch" in format_report(report)


def test_format_report_is_aligned_in_ms_and_deterministic():
    sim, _ = hand_built()
    report = delivery_report(sim)
    text = format_report(report)
    assert text == format_report(delivery_report(hand_built()[0]))
    assert "Latency (ms)" in text
    line = next(line for line in text.splitlines() if line.strip().startswith("fire -> dispatch"))
    p50 = f"{report['latency_s']['fire_to_dispatch']['p50'] * 1000:.1f}"
    assert p50 == "500.0" and p50 in line.split()
    # the subscription table's rows line up under its header
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.strip().startswith("tenant"))
    table = lines[head : head + 2 + len(report["subscriptions"])]
    col = table[0].index("executions") + len("executions")
    for row in table[2:]:
        assert row[col - 1] != " ", row  # right-aligned numbers end under the header's end
    t2 = next(row for row in table[2:] if row.split()[0] == "t2")
    assert t2.split()[-2] == "0.00"  # its stream never fired: nothing waits, no lag
    assert "wm lag: watermark lag, the age of the oldest firing" in text  # the column's definition under it
