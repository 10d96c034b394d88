"""The runs and figures of lesson 14 (``fanoutsim.designs.outbox.systems``): each
says what the lesson reads from it, on runs small enough for the test suite."""

from __future__ import annotations

import pytest
from matplotlib.figure import Figure

from fanoutsim.designs.outbox import systems as sy


def test_a_lost_hint_costs_the_next_jobs_gap_under_traffic_and_the_poll_when_sparse():
    cost = sy.lost_hint_cost(rates=(1 / 60, 5.0), jobs=150).set_index(["preset", "rate"])
    for name, poll in (("procrastinate-3.10", 5.0), ("pgqueuer-1.6", 30.0)):
        busy, sparse = cost.loc[(name, 5.0)], cost.loc[(name, 1 / 60)]
        assert busy["hints_lost"] > 5 and sparse["hints_lost"] > 5
        assert busy["lost_mean_s"] < 0.6  # the next job's hint, ~0.2 s at 5 jobs/s
        assert 0.25 * poll < sparse["lost_mean_s"] < 0.75 * poll and sparse["lost_max_s"] <= poll + 0.1
        assert busy["all_p50_s"] < 0.02  # the median job's own hint wakes the worker
    fig = sy.lost_hint_figure(cost.reset_index())
    assert isinstance(fig, Figure) and len(fig.axes[0].lines) == 1 + 2 * 2


@pytest.mark.parametrize("mode,waits_for_poll", [("after_fetch", True), ("before_fetch", False)])
def test_the_race_run_shows_the_lost_wake_up_and_its_fix(mode, waits_for_poll):
    sim = sy.race_run(mode)
    lat = sy.job_latencies(sim).set_index("seq")["latency_s"]
    assert bool(lat[2] >= 5.0) is waits_for_poll and bool(lat[2] < 0.05) is not waits_for_poll
    assert [found for _, _, found in sim.reads][:3] == [False, True, False]  # start, job 1, the empty fetch
    fig = sy.race_timeline({mode: sim})
    assert f"{1000 * lat[2]:,.0f} ms" in " ".join(t.get_text() for t in fig.axes[0].texts)
    # the one "handled" mark is job 2's (job 1's sat by job 2's commit, as if it were job 2's)
    handled = [c for c in fig.axes[0].collections if c.get_label() == "handled"][0]
    window_ms = 1000 * (1.05 - 0.995)
    marks = [x for x, _ in handled.get_offsets() if 0 <= x <= window_ms]
    assert len(marks) == (0 if waits_for_poll else 1)


def test_the_race_table_counts_the_hints_that_land_in_an_empty_fetch():
    runs = {mode: sy.race_count(mode, minutes=3) for mode in ("after_fetch", "before_fetch")}
    table = sy.race_table(runs).set_index("run")
    for mode in runs:
        assert 0 < table.loc[mode, "in_the_window"] < 0.1 * table.loc[mode, "jobs"]
    # caught in the window: a later hint's wait with the flag cleared after the fetch, a fetch's without
    assert table.loc["after_fetch", "their_mean_ms"] > 5 * table.loc["before_fetch", "their_mean_ms"]


def test_a_cursor_each_and_crashes_between_the_work_and_the_cursor():
    s = sy.offsets_summary(sy.offsets_run(seconds=120.0, crashes=(50, 100))).set_index("consumer")
    assert s["lost"].sum() == 0 and s["duplicates"].sum() >= 2
    assert all(set(c) == {"crash"} for c in s["causes"] if c)
    assert s.loc["fast", "p99_s"] < 0.1 < s.loc["slow", "p99_s"]


def test_a_seq_cursor_skips_late_commits_unless_it_waits_at_gaps():
    runs = {mode: sy.commit_order_run(mode, seconds=40.0) for mode in ("all", "gap")}
    s = sy.commit_order_summary(runs).set_index("read_mode")
    assert s.loc["all", "lost"] > 0 and s.loc["gap", "lost"] == 0
    assert s.loc["gap", "delivered"] == s.loc["gap", "committed"]
