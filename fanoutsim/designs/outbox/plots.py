"""The outbox dispatcher, drawn: latency against lost hints, cursors over time,
and the figures ``fanoutsim run`` writes for an outbox scenario (:func:`save_outbox_figures`)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from fanoutsim.designs.outbox import analysis as _a
from fanoutsim.kernel.plotting import save_figures, THEORY_COLOR, figure_axes, mark_empty, style


def outbox_latency_histogram(latencies: pd.DataFrame, poll: float, *, drops=None, by: str = "drop",
                             ax: Axes | None = None) -> Figure:
    """Commit → handled latency (s) at one safety-poll interval, one step
    histogram per drop rate (log counts), the poll interval dashed.
    ``latencies``: the second frame of :func:`~fanoutsim.designs.outbox.analysis.latency_sweep`;
    or, with ``by="clock"``, of :func:`~fanoutsim.designs.outbox.analysis.clock_comparison`
    (one histogram per clock)."""
    with style():
        fig, ax = figure_axes(ax)
        lat = latencies[latencies["poll"] == poll] if "poll" in latencies else latencies
        groups = sorted(lat[by].unique()) if drops is None else drops
        if lat.empty:
            mark_empty(ax, "latencies")
            return fig
        bins = np.linspace(0, poll * 1.1, 45)
        for d in groups:
            x = lat.loc[lat[by] == d, "latency_s"]
            label = f"{d:.0%} hints dropped" if by == "drop" else f"{d} clock"
            ax.hist(x, bins=bins, histtype="step", linewidth=1.5, label=f"{label} (n={len(x)})")
        ax.axvline(poll, color=THEORY_COLOR, linestyle="--", label=f"safety poll interval {poll:g} s")
        ax.set_yscale("log")
        ax.set_xlabel("commit \u2192 handled latency (s)")
        ax.set_ylabel("rows (log scale)")
        ax.set_title(f"lost hints wait for the safety poll (every {poll:g} s)")
        ax.legend(loc="upper right")
    return fig


def outbox_tail_vs_drop(summary: pd.DataFrame, *, ax: Axes | None = None) -> Figure:
    """p99 and worst commit → handled latency as a fraction of the poll interval,
    against the share of hints dropped, one colour per poll interval."""
    with style():
        fig, ax = figure_axes(ax)
        if summary.empty:
            mark_empty(ax, "runs")
            return fig
        for i, (poll, g) in enumerate(summary.groupby("poll")):
            g = g.sort_values("drop")
            color = f"C{i}"
            ax.plot(g["drop"] * 100, g["p99_s"] / poll, marker="o", color=color, label=f"p99, poll {poll:g} s")
            ax.plot(g["drop"] * 100, g["max_s"] / poll, marker="^", linestyle=":", color=color,
                    label=f"max, poll {poll:g} s")
        ax.axhline(1.0, color=THEORY_COLOR, linestyle="--", label="one poll interval")
        ax.set_xlabel("hints dropped (%)")
        ax.set_ylabel("latency / safety poll interval")
        ax.set_ylim(0, 1.15)
        ax.set_title("a lost hint costs at most one poll interval")
        ax.legend(loc="lower right", ncol=2)
    return fig


def cursor_progress(sim, consumers=None, *, title: str | None = None, lag: bool = False,
                    ax: Axes | None = None) -> Figure:
    """Each consumer's cursor (seq) over virtual time against the head of the log;
    parked rows as crosses. With ``lag=True``, rows behind the head instead."""
    with style():
        fig, ax = figure_axes(ax)
        names = list(consumers) if consumers is not None else sorted(sim.registry.consumers)
        if not lag:
            head = _a.head_path(sim)
            ax.step(head["t_s"], head["seq"], where="post", color=THEORY_COLOR, linestyle="--",
                    linewidth=1, label="head of the log (last committed seq)")
        parked = sim.store.rows("parked")  # raw rows: parked_at in epoch microseconds
        for i, name in enumerate(names):
            if lag:
                p = _a.lag_path(sim, name, step=0.5)
                ax.step(p["t_s"], p["lag"], where="post", color=f"C{i}", label=name)
                continue
            p = _a.cursor_path(sim, name)
            ax.step(p["t_s"], p["cursor"], where="post", color=f"C{i}", label=f"{name} cursor")
            mine = [r for r in parked if r["consumer"] == name]
            if mine:
                ax.scatter([(r["parked_at"] - sim.start_us) / 1e6 for r in mine], [r["seq"] for r in mine],
                           marker="x", s=60, color=f"C{i}", zorder=3, label=f"{name}: row parked")
        ax.set_xlabel("virtual time (s)")
        ax.set_ylabel("rows behind the head" if lag else "seq")
        ax.set_title(title or ("lag per consumer" if lag else "cursor per consumer"))
        ax.legend(loc="upper left")
    return fig


def consumer_latency_histogram(sim, consumers=None, *, ax: Axes | None = None) -> Figure:
    """Commit → first handled latency of one run, one step histogram per consumer
    on log-spaced bins (log counts), the safety-poll interval dashed: the
    longest a row whose hint was lost waits before a consumer even looks."""
    with style():
        fig, ax = figure_axes(ax)
        lat = _a.handled_latency(sim)
        names = list(consumers) if consumers is not None else sorted(sim.registry.consumers)
        x = lat.loc[lat["consumer"].isin(names) & (lat["latency_s"] > 0), "latency_s"]
        if x.empty:
            mark_empty(ax, "rows handled")
            return fig
        poll = sim.config.safety_poll_interval
        low, high = float(x.min()), max(float(x.max()), poll)
        bins = np.geomspace(low, high * 1.05, 60) if high > low else np.array([low * 0.9, low * 1.1])
        for i, name in enumerate(names):
            mine = lat.loc[(lat["consumer"] == name) & (lat["latency_s"] > 0), "latency_s"]
            if len(mine):
                ax.hist(mine, bins=bins, histtype="step", linewidth=1.5, color=f"C{i}",
                        label=f"{name} (n={len(mine)}, p50 {mine.median() * 1000:.0f} ms)")
        ax.axvline(poll, color=THEORY_COLOR, linestyle="--", label=f"safety poll interval {poll:g} s")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("commit \u2192 handled latency (s, log scale)")
        ax.set_ylabel("rows (log scale)")
        ax.set_title("commit \u2192 handled latency per consumer")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=2)  # below the axes: it covers no bar
    return fig


OUTBOX_FIGURES = ("outbox_latency.png", "outbox_cursors.png", "outbox_lag.png")


def save_outbox_figures(sim, out_dir) -> list[Path]:
    """Write the standard figures of an outbox run as PNGs into ``out_dir``
    (:data:`OUTBOX_FIGURES`: latency per consumer, cursors against the head of
    the log with parked rows, lag per consumer); their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figures = dict(zip(OUTBOX_FIGURES, (
        consumer_latency_histogram(sim),
        cursor_progress(sim),
        cursor_progress(sim, lag=True),
    )))
    return save_figures(figures, out)


def latency_under_backfill(runs: dict, *, ax: Axes | None = None) -> Figure:
    """Commit → handled latency over commit time, one series per run of
    :func:`~fanoutsim.designs.outbox.analysis.pool_run` (``{label: sim}``), the
    backfill's window shaded and the safety poll interval dashed."""
    with style():
        fig, ax = figure_axes(ax)
        if not runs:
            mark_empty(ax, "runs")
            return fig
        poll = None
        for i, (label, sim) in enumerate(runs.items()):
            lat = _a.handled_latency(sim)
            ax.plot(lat["committed_s"], lat["latency_s"], marker=".", linestyle="none", markersize=4,
                    color=f"C{i}", label=f"{label} (max {lat['latency_s'].max():.2f} s)")
            lo, hi = sim.backfill_window
            poll = sim.config.safety_poll_interval
        ax.axvspan(lo, hi, color="0.9", zorder=0, label="backfill holds the pool")
        ax.axhline(poll, color=THEORY_COLOR, linestyle="--", label=f"safety poll interval {poll:g} s")
        ax.set_xlabel("commit time (virtual s)")
        ax.set_ylabel("commit \u2192 handled latency (s)")
        ax.set_title("a reserved LISTEN connection keeps hints flowing through a backfill")
        ax.legend(loc="upper right")
    return fig
