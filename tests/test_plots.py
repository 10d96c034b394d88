"""Figures: labelled axes with units, the poll-wait theory line, files written."""

from __future__ import annotations

import re

import matplotlib
import numpy as np
import pandas as pd
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


@pytest.mark.parametrize("span_p", [0.5, 7.0, 150.0, 2000.0])
def test_a_backlogs_waits_are_binned_in_whole_twentieths_of_p_about_150_bins_at_most(span_p):
    # waits that run to many poll intervals (a backlog): wider bins, each a whole
    # number of P / 20, keep the bars readable (and a control's redraw quick)
    p_s = 2.0
    waits = np.linspace(0.0, span_p * p_s, 584)
    fig = plots.latency_histogram(pd.DataFrame({"poll_wait_s": waits}), "poll_wait_s", poll_interval=p_s)
    bars = fig.axes[0].patches
    width = bars[0].get_width()
    k = width / (p_s * 1000 / 20)
    assert k == pytest.approx(round(k)) and round(k) >= 1
    assert round(k) == 1 if span_p <= 7.0 else round(k) > 1  # up to 140 bins of P / 20 stay as they are
    assert len(bars) <= 151
    assert sum(b.get_height() for b in bars) == len(waits)  # every wait in a bin
    assert bars[-1].get_x() + width >= waits.max() * 1000


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


# -- figures that show their point: crashes, duplicates, coinciding lines, small samples -----------------
@pytest.fixture(scope="module")
def crash_run():
    """The shipped crashes scenario, its first half hour: four runner crashes
    (one between a dispatch and its watermark move) and failing inserts."""
    from fanoutsim import examples
    from fanoutsim.scenario import load_scenario

    s = load_scenario(examples.FOLDER / "crashes.toml").build()
    s.run(until=1800)
    return s, fs.check(s)


def test_the_watermark_lag_figure_marks_each_crash_beside_the_spike_it_caused(crash_run):
    """crashes/watermark_lag.png: every panel has a dotted line per runner crash,
    the legend below the panels names P and the crashes, and the lag's peak sits in
    or just after the longest downtime (the firings that waited it out)."""
    from fanoutsim.designs.reactor.plots.lag import watermark_lag_over_time_figure
    from fanoutsim.kernel.plotting import run_downtimes

    sim, _ = crash_run
    downs = run_downtimes(sim)
    fig = watermark_lag_over_time_figure(sim)
    for ax in fig.axes:
        dotted = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
        assert sorted(line.get_xdata()[0] for line in dotted) == pytest.approx(sorted(d.crashed_s / 60 for d in downs))
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(t.startswith("P = ") for t in labels) and any(
        t.startswith(f"runner crash ({len(downs)})") for t in labels
    )
    longest = max(downs, key=lambda d: d.seconds or 0)
    stairs = fig.axes[0].patches[0]  # the panel's lag, a step per bin
    values, edges, _ = stairs.get_data()
    peak_at = edges[int(np.nanargmax(values))]  # minutes
    assert longest.crashed_s / 60 - 0.5 <= peak_at <= (longest.restarted_s or longest.crashed_s) / 60 + 0.5


def test_downtimes_pair_each_crash_with_the_restart_after_it():
    import pandas as pd

    from fanoutsim.kernel.plotting import Downtime, downtimes

    us = 1_000_000
    trace = pd.DataFrame(
        {
            "t": [5 * us, 7 * us, 9 * us, 10 * us, 12 * us, 20 * us],
            "kind": ["crashed", "restarted", "polled", "crashed", "crashed", "restarted"],
            "detail": ["random", None, None, "poll.after_fetch", "random", None],
        }
    )
    downs = downtimes(trace, start_us=us)
    # a second crash while down is no new crash: the first holds until the restart
    assert downs == [Downtime(4.0, 6.0, "random"), Downtime(9.0, 19.0, "poll.after_fetch")]
    assert [d.seconds for d in downs] == [2.0, 10.0]
    never = downtimes(trace.iloc[:4], start_us=0)
    assert never[-1].restarted_s is None and never[-1].seconds is None
    assert downtimes(pd.DataFrame(), 0) == []


def test_the_crash_figure_marks_every_crash_and_every_duplicate(crash_run):
    """crashes/executions_over_time.png: a dotted line per crash of the trace,
    its downtime shaded, the longest written; a marker per extra delivery the
    checker found, one legend entry per cause with its count."""
    from matplotlib.collections import PathCollection

    sim, report = crash_run
    trace = sim.trace()
    crashes = int((trace["kind"] == "crashed").sum())
    assert crashes >= 2 and report.total["extra_deliveries"] > 0
    fig = plots.executions_over_time(sim, bin_seconds=60, report=report)
    ax = fig.axes[0]
    dotted = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert len(dotted) == crashes
    crashed_at = sorted((trace.loc[trace["kind"] == "crashed", "t"] - sim.start_us) / 1e6 / 60)
    assert sorted(line.get_xdata()[0] for line in dotted) == pytest.approx(crashed_at)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith(f"runner crash ({crashes}), down ") for t in legend), legend
    markers = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert sum(len(c.get_offsets()) for c in markers) == report.total["extra_deliveries"] == len(report.duplicates)
    for cause, n in report.duplicates["cause"].value_counts().items():
        assert f"duplicate: {cause} ({n})" in legend
    # read from the recorder's columns (no frame built) or from the frame: the same crashes
    from fanoutsim.kernel.plotting import downtimes, run_downtimes

    assert run_downtimes(sim) == downtimes(trace, sim.start_us) and len(run_downtimes(sim)) == crashes
    # the longest downtime is said in place: what a lag spike near it waited for
    longest = max(d.seconds for d in plots_downtimes(sim))
    assert any(f"longest down: {longest:.1f} s" in t.get_text() for t in ax.texts)
    # without a report the figure checks the run itself, and finds the same
    again = plots.executions_over_time(sim, bin_seconds=60).axes[0]
    assert sum(len(c.get_offsets()) for c in again.collections if isinstance(c, PathCollection)) == len(
        report.duplicates
    )
    quiet = plots.executions_over_time(sim, bin_seconds=60, faults=False).axes[0]
    assert not [line for line in quiet.get_lines() if line.get_linestyle() == ":"]


def plots_downtimes(sim):
    from fanoutsim.kernel.plotting import downtimes

    return [d for d in downtimes(sim.trace(), sim.start_us) if d.seconds is not None]


def test_extra_deliveries_finds_when_each_repeat_happened():
    import pandas as pd

    from fanoutsim.kernel.plotting import extra_deliveries

    us = 1_000_000
    trace = pd.DataFrame(
        {
            "t": [1 * us, 2 * us, 3 * us, 4 * us, 5 * us, 6 * us],
            "kind": ["delivered", "delivered", "crashed", "delivered", "delivered", "delivered"],
            "who": ["a", "b", None, "a", "a", "b"],
            "item": [7, 7, None, 7, 7, 8],
        }
    )
    dups = pd.DataFrame({"who": ["a", "a"], "item": [7, 7], "cause": ["crash", "reset"]})
    got = extra_deliveries(trace, dups, ["who", "item"], start_us=0)
    assert got["t_s"].tolist() == [4.0, 5.0] and got["cause"].tolist() == ["crash", "reset"]
    assert extra_deliveries(trace, dups.iloc[:0], ["who", "item"], 0).empty


def test_the_outbox_and_leases_crash_figures_mark_crashes_and_duplicates(tmp_path):
    from matplotlib.collections import PathCollection

    from fanoutsim import examples
    from fanoutsim.designs import design_of
    from fanoutsim.scenario import load_scenario

    for name, figure, who in (
        ("outbox-crashes.toml", lambda s, r: plots.cursor_progress(s, lag=True, faults=True, report=r), "dispatcher"),
        ("leases-crashes.toml", lambda s, r: plots.leases.consumers_behind(s, report=r), "node"),
    ):
        sim = load_scenario(examples.FOLDER / name).build()
        sim.run(until=900)
        report = design_of(sim).check(sim)
        crashes = int((sim.trace()["kind"] == "crashed").sum())
        fig = figure(sim, report)
        first = fig.axes[0]
        assert len([line for line in first.get_lines() if line.get_linestyle() == ":"]) == crashes > 0
        assert any(t.get_text().startswith(f"{who} crash ({crashes})") for t in first.get_legend().get_texts())
        marked = sum(
            len(c.get_offsets())
            for ax in fig.axes
            for c in ax.collections
            if isinstance(c, PathCollection) and c.get_label().startswith("duplicate:")
        )
        assert marked == len(report.duplicates), name


def test_identical_lines_share_one_labelled_line():
    """Lesson 10's "several leases per partition": under RiffDB's rule 1, 4 and
    8 partitions give the same numbers; one line says so, not three stacked."""
    import pandas as pd

    from fanoutsim.plots import leases as lp

    rows = []
    for parts in (1, 4, 8):
        for k in (1, 2, 4, 8):
            slots = k  # RiffDB's rule: the in-flight limit, whatever the partition count
            rows.append(
                {
                    "partitions": parts,
                    "in_flight": k,
                    "throughput": 0.8 * slots,
                    "theory": 0.8 * slots,
                    "p50_s": 10.0 / slots,
                    "p99_s": 30.0 / slots,
                    "offered": 8.0,
                }
            )
    same = pd.DataFrame(rows)
    left, right = lp.inflight_throughput(same).axes
    assert [t.get_text() for t in left.get_legend().get_texts()][0] == "1, 4 and 8 partitions (identical)"
    assert len([line for line in left.get_lines() if line.get_marker() == "o"]) == 1
    assert [t.get_text() for t in right.get_legend().get_texts()] == [
        "1, 4 and 8 partitions (identical), p50",
        "1, 4 and 8 partitions (identical), p99",
    ]
    # head-of-line: min(in-flight, partitions) slots, so each count its own line, in its own colour
    hol = same.assign(throughput=[0.8 * min(r["in_flight"], r["partitions"]) for r in rows])
    left, right = lp.inflight_throughput(hol).axes
    names = [t.get_text() for t in left.get_legend().get_texts()]
    assert names[:3] == ["1 partition", "4 partitions", "8 partitions"]
    colours = {line.get_label(): line.get_color() for line in left.get_lines() if line.get_marker() == "o"}
    assert len(set(colours.values())) == 3
    # the latency panel, the same for all three here, keeps the first count's colour
    (p50,) = [line for line in right.get_lines() if line.get_label().endswith("p50")]
    assert p50.get_color() == colours["1 partition"]
    # the other rule beside it: its own lines, dotted and hollow, each count in the same colour
    left, _ = lp.inflight_throughput(same, compare=("head-of-line", hol)).axes
    dotted = {line.get_label(): line for line in left.get_lines() if line.get_linestyle() == ":"}
    assert sorted(dotted) == ["1 partition, head-of-line", "4 partitions, head-of-line", "8 partitions, head-of-line"]
    assert all(line.get_markerfacecolor() == "white" for line in dotted.values())
    assert list(dotted["8 partitions, head-of-line"].get_ydata()) == [0.8, 1.6, 3.2, 6.4]
    assert dotted["1 partition, head-of-line"].get_color() == colours["1 partition"]


def test_the_lost_hints_cdf_rises_to_one_and_draws_the_bound():
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    lat = pd.DataFrame(
        {
            "latency_s": np.r_[rng.uniform(0, 0.5, 100), rng.uniform(0.05, 0.55, 100)],
            "clock": ["virtual"] * 100 + ["wall"] * 100,
        }
    )
    fig = plots.outbox_latency_cdf(lat, poll=0.5, by="clock")
    ax = fig.axes[0]
    curves = [line for line in ax.get_lines() if line.get_drawstyle() == "steps-post"]
    assert [c.get_label() for c in curves] == ["virtual clock (n=100)", "wall clock (n=100)"]
    for c in curves:
        xs, ys = (np.asarray(v, dtype=float) for v in c.get_data())
        assert ys[0] == 0 and ys[-1] == pytest.approx(1.0)
        assert (np.diff(ys) >= 0).all() and (np.diff(xs) >= 0).all()  # a CDF: never falls
    (bound,) = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert bound.get_xdata()[0] == 0.5 and "safety poll" in bound.get_label()
    assert ax.get_xlim()[1] >= lat["latency_s"].max()  # the worst row shows
    other_poll = plots.outbox_latency_cdf(lat.assign(poll=0.5), poll=9.0, by="clock")
    assert "no latencies" in [t.get_text() for t in other_poll.axes[0].texts]


def test_the_outbox_latency_axis_starts_where_the_consumers_latencies_do():
    """outbox.toml's search consumer handles a few rows in microseconds (its
    work time is exponential); the axis starts at the fastest consumer's 5th
    percentile, not at those, and every row is still counted."""
    from fanoutsim import examples
    from fanoutsim.designs.outbox import analysis as oa
    from fanoutsim.scenario import load_scenario

    sim = load_scenario(examples.FOLDER / "outbox.toml").build()
    sim.run(until=600)
    lat = oa.handled_latency(sim)
    lat = lat[lat["latency_s"] > 0]
    typical = float(lat.groupby("consumer")["latency_s"].quantile(0.05).min())
    assert float(lat["latency_s"].min()) * 3 < typical  # the outlier this is about
    ax = plots.consumer_latency_histogram(sim).axes[0]
    low = ax.get_xlim()[0]
    assert typical / 2.5 <= low <= typical
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    for name, n in lat["consumer"].value_counts().items():  # every row counted, those under the start too
        assert any(t.startswith(f"{name} (n={n},") for t in legend), (name, legend)
    search = next(t for t in legend if t.startswith("search"))
    under = int((lat.loc[lat["consumer"] == "search", "latency_s"] < low).sum())
    assert f"{under} under" in search and "in the first bin" in search


@pytest.mark.parametrize("store", [None, "PostgreSQL"])
def test_the_two_clocks_cdf_names_the_store_the_wall_clock_run_used(store):
    frame = pd.DataFrame({"fire_to_dispatch": [0.1, 0.2, 0.3]})
    kw = {} if store is None else {"real_store": store}
    fig = plots.latency_side_by_side(frame, frame, poll_interval=0.5, **kw)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels[:2] == ["virtual clock (SimPy), n=3", f"wall clock ({store or 'DuckDB file'}), n=3"]
