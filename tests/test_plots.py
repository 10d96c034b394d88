"""Figures: labelled axes with units, the poll-wait theory line, files written."""

from __future__ import annotations

import re

import matplotlib
import pytest
from matplotlib.figure import Figure

import fanoutsim as fs
from fanoutsim import plots
from fanoutsim.analysis import latency_frame

UNIT = re.compile(r"\((ms|s|min|h|1/ms)\)|/ \d")


@pytest.fixture(scope="module")
def sim():
    s = fs.Simulation(seed=1)
    s.runner.subscribe_workflow_to_reactor("r", "all", tenant="a")
    s.runner.subscribe_workflow_to_reactor("r", "big", tenant="a", when="payload.quote.price > 100")
    s.runner.subscribe_workflow_to_reactor("q", "all", tenant="b")  # never fired: no lag
    s.runner.register_workflow("all", duration=0.02)
    s.add_workload("r", 3.0, "a")
    s.run(until=300)
    return s


def labels(fig: Figure):
    (ax,) = fig.axes
    return ax.get_title(), ax.get_xlabel(), ax.get_ylabel()


def assert_labelled(fig: Figure, unit_axes=("x",)):
    title, xlabel, ylabel = labels(fig)
    assert title and xlabel and ylabel
    for which in unit_axes:
        assert UNIT.search(xlabel if which == "x" else ylabel), (xlabel, ylabel)


def test_latency_histogram_with_poll_theory(sim):
    lat = latency_frame(sim)
    fig = plots.latency_histogram(lat, "fire_to_dispatch", poll_interval=1.0)
    assert isinstance(fig, Figure)
    assert_labelled(fig)
    assert "ms" in labels(fig)[1]
    ax = fig.axes[0]
    dashed = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert len(dashed) == 1
    xs, ys = dashed[0].get_data()
    assert list(xs) == [0.0, 1000.0]  # over [0, P) in ms
    # uniform: the expected count per bin is n * width / P, the same for every bin
    bins = [p for p in ax.patches]
    width = bins[0].get_width()
    assert width == pytest.approx(50.0)
    assert ys[0] == pytest.approx(len(lat) * width / 1000.0)
    assert sum(p.get_height() for p in bins) == len(lat)


def test_latency_histogram_without_theory_and_from_a_simulation(sim):
    fig = plots.latency_histogram(sim, "fire_to_claim")
    assert_labelled(fig)
    assert not [line for line in fig.axes[0].get_lines() if line.get_linestyle() == "--"]
    with pytest.raises(KeyError, match="fire_to_dispatch"):
        plots.latency_histogram(sim, "nope")


def test_draws_into_a_given_ax(sim):
    fig = Figure()
    ax1, ax2 = fig.subplots(1, 2)
    assert plots.latency_histogram(sim, ax=ax1) is fig
    assert plots.watermark_lag(sim, ax=ax2) is fig
    assert ax1.get_xlabel() and ax2.get_xlabel()


def test_executions_over_time(sim):
    fig = plots.executions_over_time(sim, bin_seconds=30)
    assert_labelled(fig, unit_axes=("x", "y"))
    ax = fig.axes[0]
    assert "30 s" in ax.get_ylabel()
    # one stairs artist per subscription that ran, plus the total
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(legend) == 3 and "all" in legend
    total = next(a for a, label in zip(ax.patches, legend) if label == "all")
    assert sum(total.get_data().values) == len(sim.executions())


def test_watermark_lag_bars(sim):
    fig = plots.watermark_lag(sim)
    assert_labelled(fig)
    ax = fig.axes[0]
    assert len(ax.patches) == 3
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    assert any("b: q" in t for t in ticks)
    assert any("never advanced" in t.get_text() for t in ax.texts)


def test_empty_simulation_still_plots():
    empty = fs.Simulation(seed=0)
    for fig in (plots.latency_histogram(empty), plots.executions_over_time(empty), plots.watermark_lag(empty)):
        assert_labelled(fig)
        assert any(t.get_text().startswith("no ") for t in fig.axes[0].texts)


def test_save_report_figures_writes_pngs_and_leaves_no_pyplot_figures(sim, tmp_path):
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    paths = plots.save_report_figures(sim, tmp_path / "figs")
    assert [p.name for p in paths] == [
        "latency_fire_to_dispatch.png",
        "latency_fire_to_claim.png",
        "executions_over_time.png",
        "watermark_lag.png",
    ]
    for p in paths:
        data = p.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    assert plt.get_fignums() == before


def test_style_is_scoped():
    before = matplotlib.rcParams["axes.spines.top"]
    with plots.style():
        assert matplotlib.rcParams["axes.spines.top"] is False
    assert matplotlib.rcParams["axes.spines.top"] == before


def test_sweep_lines_take_a_text_grid_key_and_nullable_ints():
    """A sweep's grid keys may be text (pandas 3 stores it as its str dtype) or
    nullable ints: both extension dtypes, which np.issubdtype refused with a
    TypeError, so the figures of such a sweep were never drawn. The numeric key
    is the x axis, the text key one line per value."""
    import pandas as pd

    from fanoutsim.kernel.plotting import sweep_lines

    df = pd.DataFrame(
        {
            "prune_policy": ["ttl", "conservative"] * 2,
            "n": pd.array([1, 1, 10, 10], dtype="Int64"),
            "seed": [0, 0, 0, 0],
            "lost": [1.0, 2.0, 3.0, 4.0],
        }
    )
    fig = sweep_lines(df, "lost")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "n"
    assert sorted(line.get_label() for line in ax.get_lines()) == ["prune_policy = conservative", "prune_policy = ttl"]
    assert ax.get_xscale() == "log"  # 1 to 10: a factor of 10


def test_one_axes_draws_in_the_house_frame_or_says_what_is_missing():
    from matplotlib.figure import Figure as Fig

    from fanoutsim.kernel.plotting import Labels, one_axes

    drawn = []
    fig = one_axes(None, drawn.append, Labels("t", "x (s)", "y"))
    (ax,) = fig.axes
    assert drawn == [ax]  # draw got the figure's one axes
    assert (ax.get_title(), ax.get_xlabel(), ax.get_ylabel()) == ("t", "x (s)", "y")
    assert not ax.texts
    empty = one_axes(None, None, Labels(title="t"), none_of="leases").axes[0]
    assert [t.get_text() for t in empty.texts] == ["no leases"] and empty.get_xlabel() == ""
    host = Fig()
    given = host.add_subplot()
    assert one_axes(given, None) is host and given.texts[0].get_text() == "no runs"  # the caller's axes
