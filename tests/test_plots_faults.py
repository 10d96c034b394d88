"""Figures of faults and filters (fanoutsim.designs.reactor.plots.faults, .filters), and the
notebook-3 prune control (fanoutsim.designs.reactor.widgets.prune) driven headless."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from experiments.reactor import selectivity_sweep  # notebooks/experiments: lesson 4's experiments
from matplotlib.figure import Figure

import fanoutsim as fs
from fanoutsim import plots
from fanoutsim.analysis import crash_sweep, hole_matrix, hole_run, retention_run
from fanoutsim.designs.reactor.config import POLICIES
from fanoutsim.designs.reactor.widgets.prune import PAUSE_BOUNDS, RETENTION_BOUNDS
from fanoutsim.widgets import PruneControl

UNIT = re.compile(r"\((ms|s|h|min|1/s|rows|firings|executions|s since start)[,)]|\(h, UTC\)|\(%\)")
DAY = Path(__file__).resolve().parents[1] / "fanoutsim" / "examples" / "quotes-day.parquet"


def assert_labelled(fig: Figure, unit_axes=("x", "y")):
    (ax,) = fig.axes
    assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
    for which in unit_axes:
        label = ax.get_xlabel() if which == "x" else ax.get_ylabel()
        assert UNIT.search(label), label


def test_duplicates_per_crash_draws_one_line_per_mode_and_the_theory():
    df = crash_sweep((1, 10), crashes=3)
    fig = plots.duplicates_per_crash(df)
    assert_labelled(fig)
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == [
        "watermark_commit = 'per_firing'",
        "watermark_commit = 'per_batch'",
        "watermark_commit = 'atomic'",
        "theory per_batch: (L + 1) / 2",
    ]
    assert list(ax.get_lines()[-1].get_ydata()) == [1.0, 5.5]
    with pytest.raises(KeyError, match="crash_sweep"):
        plots.duplicates_per_crash(pd.DataFrame({"x": [1]}))


def test_table_size_over_time_one_step_line_per_run():
    runs = {"ttl": retention_run("ttl", until=120.0), "conservative": retention_run("conservative", until=120.0)}
    fig = plots.table_size_over_time(runs, retention=60.0)
    assert_labelled(fig)
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.get_lines()] == [
        "ttl",
        "conservative",
        "t = retention (60 s): the first rows may go",
    ]
    assert ax.get_xlim() == (0.0, 120.0)
    assert isinstance(plots.table_size_over_time(runs["ttl"]), Figure)  # one Simulation is fine too
    # runs with the same steps share one line (one drawn over the other would hide it); a pause is shaded
    same = {"a": runs["ttl"], "b": runs["ttl"], "c": runs["conservative"]}
    ax = plots.table_size_over_time(same, paused=(25.0, 60.0)).axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["a = b (identical)", "c"]
    (shade,) = ax.patches
    assert shade.get_label() == "subscription paused" and shade.get_x() == 25.0


def test_firing_timeline_marks_the_lost_firings_around_the_first():
    sim = hole_run("late commit", until=60.0)
    report = fs.check(sim)
    fig = plots.firing_timeline(sim, report=report, title="late commit")
    assert_labelled(fig)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(label.startswith("lost (late_visibility): ") for label in labels)
    assert any(label.startswith("watermark") for label in labels)
    lo, hi = ax.get_xlim()
    assert hi - lo == pytest.approx(12.0) or lo == 0.0
    fig = plots.firing_timeline(hole_run("several pollers", until=20.0), window=(0.0, 10.0))
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "moved by poller" in labels and "moved by poller#1" in labels
    assert any(label.startswith("delivered more than once") for label in labels)


def test_hole_losses_and_strategy_latency():
    df = hole_matrix(["late commit", "several pollers"], until=30.0)
    fig = plots.hole_losses(df)
    assert_labelled(fig, unit_axes=("y",))
    assert len(fig.axes[0].patches) == 6
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert any("dup" in t for t in texts)
    fig = plots.strategy_latency(hole_matrix(["none"], until=30.0))
    assert_labelled(fig, unit_axes=("x",))
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["'fired_at'", "'fired_at_id'", "'settled'"]


def test_recorded_rate_and_selectivity_figures():
    day = fs.load_recording(DAY)
    fig = plots.recorded_rate(day, window=(15 * 3600, 16 * 3600))
    assert_labelled(fig)
    assert fig.axes[0].get_xlim() == (0.0, 24.0)
    df = selectivity_sweep(
        day,
        {"HOOLI": "payload.quote.symbol == 'HOOLI'", "all": None},
        start=15 * 3600.0,
        stop=15 * 3600.0 + 300.0,
        speed=10.0,
    )
    fig = plots.selectivity_dispatch(df)
    assert_labelled(fig)
    assert [t.get_text() for t in fig.axes[0].texts] == ["HOOLI", "all"]
    fig = plots.selectivity_lag(df)
    assert_labelled(fig)
    assert len(fig.axes[0].get_lines()) == 2


# -- the prune control, headless -----------------------------------------------------------------
def test_prune_control_defaults_redraw_and_bounds_the_engine_accepts():
    c = PruneControl()
    assert isinstance(c.figure, Figure)
    assert c.result["prune_policy"] == "ttl" and c.result["lost_paused"] > 0
    assert list(c.policy.options) == list(POLICIES["prune_policy"])
    assert (c.retention.min, c.retention.max) == RETENTION_BOUNDS[:2] and c.retention.min >= 0
    assert c.pause.min == 0 and c.pause.max == PAUSE_BOUNDS[1]
    first = c.figure
    c.policy.value = "conservative"  # a change re-runs and redraws
    assert c.figure is not first and c.result["lost"] == 0
    assert "conservative" in c.figure.axes[0].get_title()
    # every corner of the controls is a run the engine accepts
    for retention in (c.retention.min, c.retention.max):
        for pause in (c.pause.min, c.pause.max):
            for policy in c.policy.options:
                c.retention.value, c.pause.value, c.policy.value = retention, pause, policy
                assert c.result["retention_s"] == retention and c.result["prune_policy"] == policy
    assert "lost" in c.summary.value


def test_prune_control_is_deterministic():
    a, b = PruneControl(retention=30.0, pause=60.0), PruneControl(retention=30.0, pause=60.0)
    assert a.result == b.result
