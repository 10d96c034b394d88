"""Reading a sweep: seed intervals, the knee, the recommendation, the figures and notebook 6's control."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

import fanoutsim as fs
from fanoutsim import plots
from fanoutsim.analysis import backlog_growth, knee_interval, knee_rate, recommend, seed_summary, stream_shares
from fanoutsim.designs.reactor.analysis.sweep import t_critical
from fanoutsim.designs.reactor.scenario import load_scenario
from fanoutsim.widgets import SweepExplorer, sweep_explorer

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "fanoutsim" / "examples" / "sweep.toml"
P, B = "reactor_poll_interval", "reactor_poll_batch_limit"


@pytest.fixture(scope="module")
def df():
    return fs.sweep(
        SCENARIO, grid={P: [0.5, 1.0, 2.0], B: [1, 100]}, seeds=range(2), until=90.0, cache=None, progress=False
    )


@pytest.fixture(scope="module")
def rates():
    return fs.sweep(SCENARIO, grid={"rate": [1.0, 4.0, 16.0], B: [2, 20]}, until=90.0, cache=None, progress=False)


def test_seed_summary_means_and_t_intervals():
    d = pd.DataFrame({"k": [1, 1, 1, 2], "x": [1.0, 2.0, 3.0, 5.0]})
    s = seed_summary(d, "k", "x")
    assert list(s["k"]) == [1, 2] and list(s["seeds"]) == [3, 1]
    half = t_critical(2) * 1.0 / math.sqrt(3)  # sd of 1, 2, 3 is 1
    assert s.loc[0, "x"] == 2.0
    assert s.loc[0, "x_lo"] == pytest.approx(2.0 - half) and s.loc[0, "x_hi"] == pytest.approx(2.0 + half)
    assert s.loc[1, "x_lo"] == s.loc[1, "x_hi"] == 5.0  # one seed: no interval
    assert t_critical(4) == 2.776 and t_critical(100) == 1.96
    with pytest.raises(KeyError, match="'nope'"):
        seed_summary(d, "k", "nope")
    assert s.attrs["spread"] == "ci"


def test_seed_summary_gives_the_seeds_range_for_a_few_seeds_and_an_interval_for_many():
    few = pd.DataFrame({"k": [1, 1, 1], "x": [1.0, 2.0, 6.0]})
    r = seed_summary(few, "k", "x", spread="range")
    assert (r.loc[0, "x"], r.loc[0, "x_lo"], r.loc[0, "x_hi"]) == (3.0, 1.0, 6.0)
    auto = seed_summary(few, "k", "x", spread="auto")  # three seeds: their range
    assert auto.attrs["spread"] == "range" and auto.loc[0, "x_hi"] == 6.0
    many = pd.DataFrame({"k": [1] * 5, "x": [1.0, 2.0, 3.0, 4.0, 5.0]})
    ci = seed_summary(many, "k", "x", spread="auto")  # five: the t interval
    assert ci.attrs["spread"] == "ci"
    assert ci.loc[0, "x_hi"] == pytest.approx(3.0 + t_critical(4) * math.sqrt(2.5) / math.sqrt(5))
    with pytest.raises(ValueError, match="spread must be one of ci, range, auto, got 'minmax'"):
        seed_summary(few, "k", "x", spread="minmax")


def test_the_knee_is_batch_over_p_for_the_busiest_stream():
    sc = load_scenario(SCENARIO)
    assert stream_shares(sc) == {("pricing_reactor", "acme"): 0.75, ("pricing_reactor", "globex"): 0.25}
    assert knee_rate(sc, 5, 1.0) == pytest.approx(5 / 0.75)
    assert knee_rate(sc, 100, 2.0) == pytest.approx(50 / 0.75)
    assert knee_rate(SCENARIO) == pytest.approx(100 / 0.75)  # the scenario's own settings, from a path


def test_the_knee_as_a_poll_interval_is_batch_over_the_busiest_rate():
    sc = load_scenario(SCENARIO)
    assert knee_interval(sc, 10, 16.0) == pytest.approx(10 / 12.0)  # acme: 75% of 16 firings/s
    assert knee_interval(sc, 100) == pytest.approx(100 / 1.5)  # the scenario's own 2 firings/s
    for b, p in ((5, 1.0), (100, 2.0)):  # the same knee, seen from either side
        assert knee_interval(sc, b, knee_rate(sc, b, p)) == pytest.approx(p)


def test_the_latency_panels_mark_each_batch_limits_knee(tmp_path):
    """The how-to's sweep: at 16 firings/s (acme 12/s) batch 10 falls behind
    past P = 0.83 s and batch 100 never does. The batch-10 panel draws its knee
    and shades the intervals past it; the batch-100 panel says where its knee lies."""
    from matplotlib.collections import PolyCollection

    from fanoutsim.designs.reactor.plots.sweep import save_sweep_figures

    sc = load_scenario(SCENARIO)
    df = fs.sweep(
        SCENARIO, grid={P: [0.5, 1.0], B: [10, 100], "rate": [16.0]}, until=60.0, seeds=range(2), progress=False
    )
    knees = {b: knee_interval(sc, b, 16.0) for b in (10, 100)}
    fig = plots.latency_vs_interval(df, knees=knees)
    ten, hundred = fig.axes
    (line,) = [x for x in ten.get_lines() if x.get_gid() == "knee"]
    assert line.get_xdata()[0] == pytest.approx(10 / 12.0)
    assert not [x for x in hundred.get_lines() if x.get_gid() == "knee"]  # 8.3 s: past the grid
    (past,) = [p for p in ten.patches if p.get_gid() == "past the knee"]
    assert past.get_x() == pytest.approx(10 / 12.0)  # shaded from the knee on
    shaded = [c for c in ten.collections if isinstance(c, PolyCollection) and not c.get_label().startswith("_")]
    assert [c.get_label() for c in shaded] == ["lowest to highest of 2 seeds"]  # the band says what it is
    assert any("backlog grows" in t.get_text() for t in ten.texts)
    assert any("knee at P = 8.3 s: every swept interval keeps up" in t.get_text() for t in hundred.texts)
    # batch 10 past its knee: latency far above the poll wait; batch 100 on it
    p99 = df.groupby([B, P])["fire_to_dispatch_p99_s"].mean()
    assert p99[(10, 1.0)] > 5 * 1.0 and p99[(100, 1.0)] < 1.2
    written = {p.name for p in save_sweep_figures(df, sc, tmp_path)}
    assert "sweep_backlog_vs_rate.png" not in written  # one rate: no figure of one point per line
    assert "sweep_latency_vs_interval.png" in written


def test_backlog_growth_is_the_excess_over_the_drain_rate():
    sc = load_scenario(SCENARIO)
    assert backlog_growth(sc, 16.0, 5, 1.0) == pytest.approx(2 * (12.0 - 5.0))  # acme's two; globex 4 < 5
    assert backlog_growth(sc, 32.0, 5, 1.0) == pytest.approx(2 * (24.0 - 5.0) + 2 * (8.0 - 5.0))
    assert backlog_growth(sc, knee_rate(sc, 5, 1.0), 5, 1.0) == pytest.approx(0.0)
    assert backlog_growth(SCENARIO) == 0.0  # 2 firings/s against 100 per second


def test_backlog_is_bounded_below_the_knee_and_grows_above(rates):
    sc = load_scenario(SCENARIO)
    for row in rates.itertuples(index=False):
        knee = knee_rate(sc, getattr(row, B), 1.0)
        if row.rate < knee:
            assert row.backlog < 3 * row.rate * 4  # at most a few polls' worth over 4 subscriptions
        else:
            acme_excess = 0.75 * row.rate - getattr(row, B)  # per second, per acme subscription
            assert row.backlog > 0.5 * acme_excess * 90.0 * 2


def test_recommend_the_cheapest_setting_within_budget(df):
    rec = recommend(df, 1.5, max_backlog=50)
    assert (rec[P], rec[B]) == (1.0, 100)
    assert rec["fire_to_dispatch_p99_s"] < 1.0 and rec["polls_per_s"] == pytest.approx(4.0)
    assert rec["candidates"] >= 2  # P = 0.5 s and 1 s with batch 100 at least
    assert recommend(df, 3.0, max_backlog=50)[P] == 2.0
    with pytest.raises(ValueError, match="no setting keeps"):
        recommend(df, 0.01, max_backlog=50)


def axes_labelled(fig):
    for ax in fig.axes:
        assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
        assert "(" in ax.get_xlabel() and "(" in ax.get_ylabel()


def test_latency_vs_interval_one_panel_per_batch_limit_in_plain_numbers(df):
    fig = plots.latency_vs_interval(df)
    assert isinstance(fig, Figure)
    assert [ax.get_title() for ax in fig.axes] == ["batch limit 1", "batch limit 100"]  # small multiples
    assert fig.axes[0].get_ylabel() and all("(" in ax.get_xlabel() for ax in fig.axes)
    assert fig.axes[0].get_shared_y_axes().joined(fig.axes[0], fig.axes[1])
    fig.draw_without_rendering()  # tick labels are written at draw time
    for ax in fig.axes:
        assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels() if t.get_text()]  # the shared y axis
    assert labels and all("times" not in t and "^" not in t for t in labels), labels  # never 2x10^0
    labels = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert labels == [
        "batch 100 p50",
        "batch 100 p99",
        "lowest to highest of 2 seeds",  # the shaded band says what it is (few seeds: their range)
        "theory p50 = P/2",
        "theory p99 = 0.99 P",
    ]
    (p50_100,) = [line for line in fig.axes[1].get_lines() if line.get_label() == "batch 100 p50"]
    xs, ys = p50_100.get_data()
    assert list(xs) == [0.5, 1.0, 2.0]
    np.testing.assert_allclose(ys, np.array(xs) / 2, rtol=0.2)
    assert "fire \u2192 claim" in plots.latency_vs_interval(df, "fire_to_claim").axes[0].get_ylabel()
    fig, ax = plt_axes()
    plots.latency_vs_interval(df, ax=ax)  # into one given axes: every batch limit there
    assert {line.get_label() for line in ax.get_lines()} >= {"batch 1 p50", "batch 100 p99"}


def plt_axes():
    fig = Figure()
    return fig, fig.add_subplot()


def test_plain_log_labels_say_numbers():
    from fanoutsim.kernel.plotting import plain_log, plain_number

    assert [plain_number(v) for v in (0.05, 0.5, 2.0, 10.0, 1000.0, 0.0)] == ["0.05", "0.5", "2", "10", "1,000", "0"]
    fig, ax = plt_axes()
    ax.plot([1.5, 4.0], [1.5, 4.0])
    ax.set_yscale("log")
    plain_log(ax, "y")
    fig.draw_without_rendering()
    labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert "2" in labels and not any("10^" in t or "times" in t for t in labels)


def test_plain_log_over_decades_ticks_minor_at_two_and_five_times_each_power_of_ten():
    from fanoutsim.kernel.plotting import plain_log

    fig, ax = plt_axes()
    ax.plot([0.01, 1000.0], [0.01, 1000.0])
    ax.set_yscale("log")
    plain_log(ax, "y")
    fig.draw_without_rendering()
    lo, hi = ax.get_ylim()
    minor = [v for v in ax.yaxis.get_minorticklocs() if lo <= v <= hi]
    majors = {round(v, 6) for v in ax.yaxis.get_majorticklocs()}
    assert minor and all(round(v / 10.0 ** np.floor(np.log10(v)), 6) in (2.0, 5.0) for v in minor)
    assert {0.02, 0.05, 20.0, 500.0} <= {round(v, 6) for v in minor}
    assert {0.01, 1.0, 1000.0} <= majors and not any(t.get_text() for t in ax.get_yticklabels(minor=True))


def test_polls_vs_interval(df):
    fig = plots.polls_vs_interval(df, subscriptions=4)
    axes_labelled(fig)
    measured, theory = fig.axes[0].get_lines()
    np.testing.assert_allclose(measured.get_ydata(), theory.get_ydata(), rtol=0.05)


def test_backlog_vs_rate_marks_the_knees(rates):
    sc = load_scenario(SCENARIO)
    knees = {b: knee_rate(sc, b, 1.0) for b in (2, 20)}
    fig = plots.backlog_vs_rate(rates, knees)
    axes_labelled(fig)
    ax = fig.axes[0]
    vlines = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert sorted(line.get_xdata()[0] for line in vlines) == pytest.approx(sorted(knees.values()))
    with pytest.raises(KeyError, match="'rate'"):
        plots.backlog_vs_rate(rates.drop(columns="rate"))


def test_recommendation_chart(df):
    rec = recommend(df, 1.5, max_backlog=50)
    fig = plots.recommendation_chart(df, rec, p99_budget_s=1.5, max_backlog=50)
    axes_labelled(fig)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "recommended: P = 1 s, batch 100" in labels
    assert "batch 1, backlog grows" in labels and "p99 budget 1.5 s" in labels
    # two batch limits on one point both show: the first drawn larger, underneath, in another marker
    kept = {c.get_label(): c for c in ax.collections if c.get_label().endswith("keeps up")}
    first, last = kept["batch 1, keeps up"], kept["batch 100, keeps up"]
    assert first.get_sizes()[0] > last.get_sizes()[0] and first.get_zorder() < last.get_zorder()
    assert first.get_paths()[0] != last.get_paths()[0]
    legend = ax.get_legend()
    assert legend.get_bbox_to_anchor().x0 >= ax.get_window_extent().x1 - 1  # beside the axes, over no point


def test_the_sweep_explorer_redraws_from_the_table(df):
    w = sweep_explorer(df)
    assert isinstance(w, SweepExplorer)
    assert w.budget.min > 0
    first = w.figure
    assert isinstance(first, Figure) and len(first.axes) == 1
    panels = w.latency_figure
    assert len(panels.axes) == df[B].nunique()  # a latency panel per batch limit
    assert w.recommended[P] == 1.0 and "P = 1 s" in w.summary.value
    w.budget.value = 3.0
    assert w.figure is not first and w.recommended[P] == 2.0 and "P = 2 s" in w.summary.value
    assert w.latency_figure is panels  # a new budget: the panels stand
    w.batches.value = (1,)
    assert set(w.selection[B]) == {1}
    w.budget.value = 0.05
    assert w.recommended is None and "no setting" in w.summary.value
    w.latency.value = "fire \u2192 claim"
    assert "claim" in w.figure.axes[0].get_ylabel() and "claim" in w.latency_figure.axes[0].get_ylabel()


def test_the_sweep_explorers_latency_panels_share_one_legend_below_them(df):
    """The control's panels are narrow: a legend inside each sat on batch 1's
    p99 where it climbs. One legend for all, beneath the panels, shows each
    line style once (the panel titles name the batch limits)."""
    w = sweep_explorer(df)
    for batches in ((1, 100), (100,)):
        w.batches.value = batches
        fig = w.latency_figure
        assert all(a.get_legend() is None for a in fig.axes)
        (legend,) = fig.legends
        labels = [t.get_text() for t in legend.get_texts()]
        assert labels[:2] == ["p50", "p99"] and "theory p50 = P/2" in labels and len(labels) == 5
        fig.draw_without_rendering()
        box = legend.get_window_extent()
        assert all(box.y1 <= a.get_tightbbox().y0 + 1 for a in fig.axes)  # below every panel and its labels


def test_the_sweep_explorer_with_a_rate_column(rates):
    with pytest.raises(KeyError, match="reactor_poll_interval"):
        sweep_explorer(rates)
    both = fs.sweep(SCENARIO, grid={"rate": [1.0, 4.0], P: [1.0], B: [2]}, until=30.0, cache=None, progress=False)
    w = sweep_explorer(both)
    assert w.rate.options == (1.0, 4.0) and set(w.selection["rate"]) == {1.0}
    w.rate.value = 4.0
    assert set(w.selection["rate"]) == {4.0}
