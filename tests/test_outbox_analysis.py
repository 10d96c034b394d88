"""The outbox notebooks' experiments (notebooks/experiments/outbox.py), analysis and figures
(fanoutsim.designs.outbox.analysis, fanoutsim.designs.outbox.plots)."""

from __future__ import annotations

import pytest
from experiments import outbox as ox  # notebooks/experiments: the lessons' experiments
from matplotlib.figure import Figure

from fanoutsim import analysis, plots


@pytest.fixture(scope="module")
def sweep():
    return ox.latency_sweep(drops=(0.0, 0.5, 1.0), polls=(2.0,), minutes=10.0)


def test_a_lost_hint_costs_at_most_one_poll_interval_and_loses_nothing(sweep):
    summary, lat = sweep
    assert (summary["lost"] == 0).all() and (summary["delivered"] == summary["committed"]).all()
    clean = summary.set_index("drop")
    assert clean.loc[0.0, "max_s"] < 0.1 and clean.loc[0.0, "hinted_share"] == 1.0
    assert clean.loc[1.0, "hinted_share"] == 0.0
    late = lat[~lat["hinted"]]["latency_s"]
    assert late.max() <= 2.0 + 0.02 and 0.3 < late.mean() / 2.0 < 0.7  # uniform under the interval


def test_the_sweep_is_deterministic(sweep):
    again, _ = ox.latency_sweep(drops=(0.0, 0.5, 1.0), polls=(2.0,), minutes=10.0)
    assert again.equals(sweep[0])


def test_a_timeout_rescues_a_hung_step():
    s = analysis.scenario_summary(ox.hung_run(hang=100.0, timeout=5.0, at_row=5, rows=20)).set_index("consumer")
    assert s.loc["guarded", "failures"] == 1 and s.loc["guarded", "latency_max_s"] < 7.0
    assert s.loc["unguarded", "latency_max_s"] == pytest.approx(100.0)
    assert (s["lost"] == 0).all() and (s["delivered"] == 20).all()


def test_a_poison_row_is_parked_and_later_rows_flow():
    sim = ox.poison_run(rows=30, poison_at=10, retry_budget=3)
    s = analysis.scenario_summary(sim).set_index("consumer")
    assert s.loc["triage", "parked"] == 1 and s.loc["triage", "delivered"] == 29
    assert s.loc["indexer", "delivered"] == 30 and s.loc["indexer", "max_lag_rows"] <= 1
    assert sim.parked()["seq"].tolist() == [11]


def test_a_slow_consumer_does_not_hold_up_a_fast_one_and_a_new_one_back_fills():
    slow = analysis.scenario_summary(ox.slow_fast_run(seconds=40.0)).set_index("consumer")
    assert slow.loc["fast", "max_lag_rows"] <= 1 < 10 < slow.loc["slow", "max_lag_rows"]
    sim = ox.backfill_run(join_at=100.0, seconds=150.0)
    s = analysis.scenario_summary(sim).set_index("consumer")
    assert s.loc["search", "delivered"] == s.loc["indexer", "delivered"] > 0
    assert 100.0 <= analysis.caught_up_at(sim, "search", after=100.0) < 110.0
    lag = analysis.lag_path(sim, "search")
    assert lag["lag"].min() >= 0


def test_the_figures_draw(sweep):
    summary, lat = sweep
    figs = [
        plots.outbox_latency_histogram(lat, poll=2.0),
        plots.outbox_tail_vs_drop(summary),
        plots.cursor_progress(ox.poison_run(rows=20, poison_at=5)),
        plots.cursor_progress(ox.slow_fast_run(seconds=20.0), lag=True),
    ]
    for fig in figs:
        assert isinstance(fig, Figure)
        assert fig.axes[-1].get_xlabel() and all(
            ax.get_ylabel() and (ax.get_title() or ax.get_title(loc="left")) for ax in fig.axes
        )
    cursors, lag = figs[2:]
    # one panel per consumer (small multiples): no consumer's line hides another's
    assert [ax.get_title(loc="left").split(":")[0] for ax in cursors.axes] == ["indexer", "triage"]
    assert [ax.get_title(loc="left").split(":")[0] for ax in lag.axes] == ["fast", "slow"]
    assert "at most" in lag.axes[1].get_title(loc="left")
    empty = plots.outbox_latency_histogram(lat, poll=99.0)
    assert isinstance(empty, Figure)


def test_both_clocks_lose_no_row_when_every_hint_is_lost(tmp_path):
    from fanoutsim.designs.outbox.plots import outbox_latency_histogram

    summary, lat = ox.clock_comparison(drop=1.0, poll=0.3, rate=10.0, seconds=1.5, folder=tmp_path)
    assert summary["clock"].tolist() == ["virtual", "wall"]
    assert (summary["lost"] == 0).all() and (summary["delivered"] == summary["committed"]).all()
    assert (summary["committed"] > 0).all() and (summary["hinted_share"] == 0).all()
    assert bool(summary.loc[0, "within_poll"])  # the virtual clock: exactly bounded
    assert lat.groupby("clock")["latency_s"].max()["wall"] < 0.3 + 1.0  # the wall clock: loosely
    fig = outbox_latency_histogram(lat, 0.3, by="clock")
    assert [t.get_text().split(" (")[0] for t in fig.axes[0].get_legend().get_texts()][:2] == [
        "virtual clock",
        "wall clock",
    ]


def test_the_cursor_heatmap_has_a_row_per_consumer_and_marks_parked_rows():
    sim = ox.poison_run(rows=30, poison_at=10)
    fig = plots.outbox.cursor_heatmap(sim)
    ax = fig.axes[0]
    assert [t.get_text().split(" ")[0] for t in ax.get_yticklabels()] == ["indexer", "triage"]
    grid = ax.images[0].get_array()
    assert grid.shape[0] == 2 and grid[1].max() > grid[0].max()  # triage fell behind at its poison row
    (parked,) = [c for c in ax.collections if c.get_label() == "row parked"]
    assert len(parked.get_offsets()) == 1 and parked.get_offsets()[0][1] == 1
