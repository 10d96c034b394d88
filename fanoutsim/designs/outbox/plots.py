"""The outbox dispatcher, drawn: latency against lost hints, cursors over time,
and the figures ``fanoutsim run`` writes for an outbox scenario (:func:`save_outbox_figures`)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from fanoutsim.designs.outbox import analysis as _a
from fanoutsim.kernel.plotting import (
    MAX_SERIES,
    THEORY_COLOR,
    Labels,
    downtimes,
    extra_deliveries,
    figure_axes,
    mark_downtimes,
    mark_duplicates,
    mark_empty,
    new_figure,
    one_axes,
    plain_log,
    run_downtimes,
    save_figures,
    style,
)


def outbox_latency_histogram(
    latencies: pd.DataFrame, poll: float, *, drops=None, by: str = "drop", ax: Axes | None = None
) -> Figure:
    """Commit → handled latency (s) at one safety-poll interval, one step
    histogram per drop rate (log counts), the poll interval dashed.
    ``latencies``: :func:`~fanoutsim.designs.outbox.analysis.latency_frame`
    rows with ``drop`` and ``poll`` columns (the second frame of
    ``latency_sweep`` in ``notebooks/experiments/outbox.py``); or, with
    ``by="clock"``, rows with a ``clock`` column (of ``clock_comparison``
    there), one histogram per clock. A few hundred rows or fewer read better
    as :func:`outbox_latency_cdf`."""
    return _lost_hints_figure(latencies, poll, drops, by, ax, _histograms, "rows (log scale)")


def outbox_latency_cdf(
    latencies: pd.DataFrame, poll: float, *, drops=None, by: str = "drop", ax: Axes | None = None
) -> Figure:
    """The rows of :func:`outbox_latency_histogram` as empirical CDFs: per drop
    rate (or, ``by="clock"``, per clock), the share of rows handled within a
    latency, each curve's worst row marked, and the safety poll interval
    dashed: the bound under which a row whose hint was lost is handled. A
    hundred rows make a histogram of counts 1 to 7 that shows noise; their
    CDF shows the spread and the bound (lesson 13 draws its clocks so too)."""
    return _lost_hints_figure(latencies, poll, drops, by, ax, _cdfs, "share of rows handled within")


def _lost_hints_figure(latencies, poll: float, drops, by: str, ax: Axes | None, draw, ylabel: str) -> Figure:
    """The frame both lost-hints figures share: the groups at ``poll`` drawn by
    ``draw(ax, groups=, poll=)`` under one title, or "no latencies"."""
    groups = _latency_groups(latencies, poll, drops, by)
    return one_axes(
        ax,
        partial(draw, groups=groups, poll=poll) if groups else None,
        Labels(f"lost hints wait for the safety poll (every {poll:g} s)", "commit \u2192 handled latency (s)", ylabel),
        none_of="latencies",
    )


def _histograms(ax: Axes, *, groups: list[tuple[str, pd.Series]], poll: float) -> None:
    """:func:`outbox_latency_histogram`'s steps, of some groups."""
    bins = np.linspace(0, poll * 1.1, 45)
    for label, x in groups:
        ax.hist(x, bins=bins, histtype="step", linewidth=1.5, label=f"{label} (n={len(x)})")
    ax.axvline(poll, color=THEORY_COLOR, linestyle="--", label=f"safety poll interval {poll:g} s")
    ax.set_yscale("log")
    plain_log(ax, "y")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=3)  # below the axes: it covers no bar


def _cdfs(ax: Axes, *, groups: list[tuple[str, pd.Series]], poll: float) -> None:
    """:func:`outbox_latency_cdf`'s curves, worst rows and bound, of some groups."""
    top = poll
    for i, (label, x) in enumerate(groups):
        xs = np.sort(np.asarray(x, dtype=float))
        if not len(xs):
            continue
        share = np.arange(1, len(xs) + 1) / len(xs)
        color = f"C{i % 10}"
        ax.step(
            np.r_[0.0, xs], np.r_[0.0, share], where="post", color=color, linewidth=1.6, label=f"{label} (n={len(xs)})"
        )
        ax.plot([xs[-1]], [1.0], marker="o", color=color, markersize=5, zorder=3)
        ax.annotate(
            f"worst {xs[-1]:.3f} s",
            (xs[-1], 1.0),
            textcoords="offset points",
            xytext=(4, -12 - 11 * i),
            fontsize=8,
            color=color,
        )
        top = max(top, float(xs[-1]))
    ax.axvline(poll, color=THEORY_COLOR, linestyle="--", label=f"safety poll interval {poll:g} s: the bound")
    ax.set_xlim(0, top * 1.25)
    ax.set_ylim(0, 1.04)
    ax.legend(loc="upper left")


def _latency_groups(latencies: pd.DataFrame, poll: float, drops, by: str) -> list[tuple[str, pd.Series]]:
    """The latencies at safety poll ``poll`` (all rows when there is no ``poll``
    column), one ``(label, latencies)`` per value of ``by`` (``drops``: those
    values, in that order); none when no row is at that poll."""
    lat = latencies[latencies["poll"] == poll] if "poll" in latencies else latencies
    if lat.empty:
        return []
    groups = sorted(lat[by].unique()) if drops is None else drops
    return [
        (f"{d:.0%} hints dropped" if by == "drop" else f"{d} clock", lat.loc[lat[by] == d, "latency_s"]) for d in groups
    ]


def outbox_tail_vs_drop(summary: pd.DataFrame, *, ax: Axes | None = None) -> Figure:
    """p99 and worst commit → handled latency as a fraction of the poll interval,
    against the share of hints dropped, one colour per poll interval."""
    return one_axes(ax, None if summary.empty else partial(_tail_lines, summary=summary))


def _tail_lines(ax: Axes, *, summary: pd.DataFrame) -> None:
    """:func:`outbox_tail_vs_drop`'s lines, of a summary with rows."""
    for i, (poll, g) in enumerate(summary.groupby("poll")):
        g = g.sort_values("drop")
        color = f"C{i}"
        ax.plot(g["drop"] * 100, g["p99_s"] / poll, marker="o", color=color, label=f"p99, poll {poll:g} s")
        ax.plot(
            g["drop"] * 100,
            g["max_s"] / poll,
            marker="^",
            linestyle=":",
            color=color,
            label=f"max, poll {poll:g} s",
        )
    ax.axhline(1.0, color=THEORY_COLOR, linestyle="--", label="one poll interval")
    ax.set_xlabel("hints dropped (%)")
    ax.set_ylabel("latency / safety poll interval")
    ax.set_ylim(0, 1.15)
    ax.set_title("a lost hint costs at most one poll interval")
    ax.legend(loc="lower right", ncol=2)


def _binned(t: np.ndarray, v: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bin edges over ``t``, and per bin the max and the mean of ``v``."""
    edges = np.linspace(float(t[0]), float(t[-1]) if t[-1] > t[0] else float(t[0]) + 1.0, bins + 1)
    k = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, bins - 1)
    high = np.zeros(bins)
    np.maximum.at(high, k, v)
    total, count = np.bincount(k, weights=v, minlength=bins), np.bincount(k, minlength=bins)
    return edges, high, np.divide(total, np.maximum(count, 1))


def _consumer_panels(names: list, title: str, *, sharey: bool) -> tuple[Figure, list]:
    fig = new_figure((8.0, 1.2 + 1.55 * len(names)))
    axes = list(fig.subplots(len(names), 1, sharex=True, sharey=sharey, squeeze=False)[:, 0])
    fig.suptitle(title, fontweight="bold")
    return fig, axes


def cursor_progress(
    sim,
    consumers=None,
    *,
    title: str | None = None,
    lag: bool = False,
    ax: Axes | None = None,
    faults: bool = False,
    report=None,
) -> Figure:
    """Each consumer's cursor (seq) over virtual time against the head of the
    log, parked rows as crosses; with ``lag=True``, the rows behind the head
    instead (the worst in each stretch of time shaded, the mean drawn). One
    panel per consumer, shared axes (small multiples: no consumer's line hides
    another's); given ``ax``, every consumer in that one axes. With ``faults``
    (as ``fanoutsim run`` draws it), each crash of the dispatcher (a dotted
    line, its downtime shaded) and each duplicate the checker finds (a marker
    on its consumer's line, one shape per cause; ``report``: the checker's
    report of this run, if already at hand)."""
    names = (list(consumers) if consumers is not None else sorted(sim.registry.consumers))[:MAX_SERIES]
    with style():
        if ax is not None:
            fig, axes = ax.figure, [ax] * max(len(names), 1)
            ax.set_title(title or ("lag per consumer" if lag else "cursor per consumer"))
        else:
            fig, axes = _consumer_panels(
                names or ["-"],
                title or ("rows behind the head, per consumer" if lag else "cursor per consumer"),
                sharey=True,
            )
        axes[-1].set_xlabel("virtual time (s)")
        for a in dict.fromkeys(axes):
            a.set_ylabel("rows behind" if lag else "seq")
        if not names:
            mark_empty(axes[0], "consumers")
            return fig
        parked = sim.store.rows("parked")  # raw rows: parked_at in epoch microseconds
        head = _a.head_path(sim)
        for i, (name, a) in enumerate(zip(names, axes)):
            color = f"C{i}"
            if lag:
                _lag_panel(sim, name, a, color, single=ax is not None)
            else:
                _cursor_panel(
                    sim,
                    name,
                    a,
                    color,
                    head,
                    [r for r in parked if r["consumer"] == name],
                    single=ax is not None,
                    first=i == 0,
                )
        if faults:
            _mark_faults(sim, names, axes, lag=lag, report=report)
        for a in dict.fromkeys(axes):
            a.set_ylim(bottom=0)
            a.legend(loc="upper left", fontsize=7)
    return fig


def _mark_faults(sim, names: list, axes: list, *, lag: bool, report) -> None:
    """:func:`cursor_progress`'s crashes (in every panel; in the first one's
    legend) and duplicates (each on its consumer's line: its seq, or the rows
    behind then)."""
    trace = sim.trace()
    downs = downtimes(trace, sim.start_us)
    for j, a in enumerate(dict.fromkeys(axes)):
        mark_downtimes(a, downs, who="dispatcher", legend=j == 0)
    if not getattr(sim, "traced", True):
        return
    checked = report if report is not None else _check(sim)
    dups = extra_deliveries(trace, checked.duplicates, ["consumer", "seq"], sim.start_us)
    for name, a in zip(names, axes):
        mine = dups[dups["consumer"] == name]
        if mine.empty:
            continue
        when = mine["t_s"].to_numpy(dtype=float)
        if lag:
            path = _a.lag_path(sim, name, step=0.5)
            k = np.searchsorted(path["t_s"].to_numpy(), when, side="right") - 1
            y = np.where(k >= 0, path["lag"].to_numpy(dtype=float)[np.maximum(k, 0)], 0.0)
        else:
            y = mine["seq"].to_numpy(dtype=float)
        mark_duplicates(a, when, y, mine["cause"].to_numpy(), every=dups["cause"])


def _check(sim):
    from fanoutsim.designs.outbox.checker import check

    return check(sim)


def _rows(n: int) -> str:
    return f"{n} row" if n == 1 else f"{n} rows"


def _lag_panel(sim, name: str, a: Axes, color: str, *, single: bool) -> None:
    p = _a.lag_path(sim, name, step=0.5)
    t, v = p["t_s"].to_numpy(), p["lag"].to_numpy(dtype=float)
    if single or len(t) < 400:
        a.step(t, v, where="post", color=color, label=f"{name}: rows behind")
    else:  # a long run: rows behind flicker 0, 1, 0 with every commit; show each stretch's worst and mean
        edges, high, mean = _binned(t, v, 240)
        width = edges[1] - edges[0]
        a.stairs(high, edges, fill=True, color=color, alpha=0.3, label=f"{name}: worst in each {width:.0f} s")
        a.stairs(mean, edges, color=color, linewidth=1.2, label=f"{name}: mean")
    if not single:
        worst = int(v.max()) if len(v) else 0
        at = float(t[int(np.argmax(v))]) if len(v) else 0.0
        a.set_title(f"{name}: at most {_rows(worst)} behind (at t = {at:.0f} s)", fontsize=9, loc="left")


def _cursor_panel(
    sim, name: str, a: Axes, color: str, head: pd.DataFrame, parked: list, *, single: bool, first: bool
) -> None:
    if not single or first:
        a.step(
            head["t_s"],
            head["seq"],
            where="post",
            color=THEORY_COLOR,
            linestyle="--",
            linewidth=1,
            label="head of the log (last committed seq)",
        )
    p = _a.cursor_path(sim, name)
    a.step(p["t_s"], p["cursor"], where="post", color=color, label=f"{name} cursor")
    if parked:
        a.scatter(
            [(r["parked_at"] - sim.start_us) / 1e6 for r in parked],
            [r["seq"] for r in parked],
            marker="x",
            s=60,
            color=color,
            zorder=3,
            label=f"{name}: row parked ({len(parked)})",
        )
    if not single:
        lag = _a.lag_path(sim, name, step=0.5)["lag"]
        worst = int(lag.max()) if len(lag) else 0
        a.set_title(f"{name}: at most {_rows(worst)} behind the head", fontsize=9, loc="left")


def consumer_latency_histogram(sim, consumers=None, *, ax: Axes | None = None) -> Figure:
    """Commit → first handled latency of one run, one step histogram per consumer
    on log-spaced bins (log counts), the safety-poll interval dashed: the
    longest a row whose hint was lost waits before a consumer even looks.

    The axis starts where the consumers' latencies do (:func:`_latency_floor`):
    a consumer whose work time is drawn from a law near 0 handles a handful of
    rows in microseconds, and an axis from the very fastest would give their
    decades most of its width. Rows below the start are counted in the first
    bin, and each consumer's label says how many."""
    with style():
        fig, ax = figure_axes(ax)
        lat = _a.handled_latency(sim)
        names = list(consumers) if consumers is not None else sorted(sim.registry.consumers)
        lat = lat[lat["consumer"].isin(names) & (lat["latency_s"] > 0)]
        if lat.empty:
            mark_empty(ax, "rows handled")
            return fig
        poll = sim.config.safety_poll_interval
        low = _latency_floor(lat)
        high = max(float(lat["latency_s"].max()), poll)
        bins = np.geomspace(low, high * 1.05, 60) if high > low else np.array([low * 0.9, low * 1.1])
        for i, name in enumerate(names):
            mine = lat.loc[lat["consumer"] == name, "latency_s"].to_numpy(dtype=float)
            if len(mine):
                under = int((mine < low).sum())
                note = f"; {under} under {_duration(low)}, in the first bin" if under else ""
                ax.hist(
                    np.clip(mine, low, None),
                    bins=bins,
                    histtype="step",
                    linewidth=1.5,
                    color=f"C{i}",
                    label=f"{name} (n={len(mine)}, p50 {_duration(float(np.median(mine)))}{note})",
                )
        ax.axvline(poll, color=THEORY_COLOR, linestyle="--", label=f"safety poll interval {poll:g} s")
        ax.set_xscale("log")
        ax.set_xlim(low, high * 1.1)
        ax.set_yscale("log")
        ax.set_ylim(bottom=0.7)  # a bin of one row shows
        plain_log(ax, "both")
        ax.set_xlabel("commit \u2192 handled latency (s, log scale)")
        ax.set_ylabel("rows (log scale)")
        ax.set_title("commit \u2192 handled latency per consumer")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=2)  # below the axes: it covers no bar
    return fig


def _latency_floor(lat: pd.DataFrame) -> float:
    """Where a log axis of these (positive) latencies starts: at the fastest
    row, unless it lies more than a factor 3 below the fastest consumer's 5th
    percentile (a few rows of a work time drawn near 0), then at that
    percentile; rounded down to 1, 2 or 5 times a power of ten."""
    fastest = float(lat["latency_s"].min())
    typical = float(lat.groupby("consumer")["latency_s"].quantile(0.05).min())
    start = fastest if fastest * 3 >= typical else typical
    decade = 10.0 ** np.floor(np.log10(start))
    return float(max(m * decade for m in (1.0, 2.0, 5.0) if m * decade <= start * (1 + 1e-9)))


def _duration(s: float) -> str:
    """A latency, short: 10 ms, 0.31 s, 285 s."""
    if s < 1:
        return f"{s * 1000:.3g} ms"
    return f"{s:.3g} s" if s < 100 else f"{s:.0f} s"


def cursor_heatmap(sim, consumers=None, *, bins: int = 120, ax: Axes | None = None) -> Figure:
    """Where every consumer's cursor stood, at a glance: one row per consumer,
    one column per stretch of virtual time, coloured by the most rows the
    cursor was behind the head in that stretch (white: caught up); parked rows
    as black crosses on their consumer's row; each crash of the dispatcher a
    dotted line, its downtime shaded."""
    from matplotlib.colors import LinearSegmentedColormap, PowerNorm

    names = (list(consumers) if consumers is not None else sorted(sim.registry.consumers))[:MAX_SERIES]
    with style():
        fig, ax = figure_axes(ax, figsize=(8.0, 1.6 + 0.45 * max(len(names), 1)))
        ax.set_title("rows behind the head, per consumer (darker: further behind)")
        ax.set_xlabel("virtual time (s)")
        if not names or sim.now <= 0:
            mark_empty(ax, "consumers")
            return fig
        grid, edges = [], None
        for name in names:
            p = _a.lag_path(sim, name, step=max(0.1, float(sim.now) / (bins * 20)))
            edges, high, _ = _binned(p["t_s"].to_numpy(), p["lag"].to_numpy(dtype=float), bins)
            grid.append(high)
        cmap = LinearSegmentedColormap.from_list("behind", ["#ffffff", "#fdae6b", "#d94801", "#7f2704"])
        top = max(float(np.max(grid)), 1.0)
        image = ax.imshow(
            np.array(grid),
            aspect="auto",
            cmap=cmap,
            norm=PowerNorm(0.5, vmin=0, vmax=top),
            extent=(edges[0], edges[-1], len(names) - 0.5, -0.5),
            interpolation="nearest",
        )
        parked = sim.store.rows("parked")
        for i, name in enumerate(names):
            mine = [(r["parked_at"] - sim.start_us) / 1e6 for r in parked if r["consumer"] == name]
            if mine:
                ax.scatter(
                    mine,
                    [i] * len(mine),
                    marker="x",
                    s=30,
                    color="black",
                    zorder=3,
                    label="row parked" if i == 0 or not ax.get_legend_handles_labels()[0] else None,
                )
        ax.set_yticks(range(len(names)), [f"{n} (max {int(g.max())})" for n, g in zip(names, grid)])
        ax.grid(False)
        mark_downtimes(ax, run_downtimes(sim), who="dispatcher")
        fig.colorbar(image, ax=ax, label="rows behind (worst in the stretch)", pad=0.01)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper left", bbox_to_anchor=(0.0, -0.12 - 0.02 * len(names)), ncols=2)
    return fig


OUTBOX_FIGURES = ("outbox_latency.png", "outbox_cursors.png", "outbox_lag.png")


def save_outbox_figures(sim, out_dir, *, checked=None) -> list[Path]:
    """Write the standard figures of an outbox run as PNGs into ``out_dir``
    (:data:`OUTBOX_FIGURES`: latency per consumer; where each cursor stood —
    rows behind the head, per consumer and stretch of time, with parked rows;
    rows behind per consumer, one panel each); their paths. ``checked``: the checker's
    report of this run, if the caller has it (else the run is checked here, for the
    duplicates the figures mark)."""
    figures = (
        consumer_latency_histogram(sim),
        cursor_heatmap(sim),
        cursor_progress(sim, lag=True, faults=True, report=checked),
    )
    return save_figures(dict(zip(OUTBOX_FIGURES, figures)), out_dir)


def latency_under_backfill(runs: dict, *, ax: Axes | None = None) -> Figure:
    """Commit → handled latency over commit time, one series per run
    (``{label: sim}``, each with its ``backfill_window``: ``pool_run`` in
    ``notebooks/experiments/outbox.py``), the backfill's window shaded and the
    safety poll interval dashed."""
    return one_axes(ax, partial(_backfill_points, runs=runs) if runs else None)


def _backfill_points(ax: Axes, *, runs: dict) -> None:
    """:func:`latency_under_backfill`'s points, of some runs."""
    poll = None
    for i, (label, sim) in enumerate(runs.items()):
        lat = _a.handled_latency(sim)
        ax.plot(
            lat["committed_s"],
            lat["latency_s"],
            marker=".",
            linestyle="none",
            markersize=4,
            color=f"C{i}",
            zorder=3 + len(runs) - i,  # the first run on top: its points hide under none of the others'
            label=f"{label} (max {lat['latency_s'].max():.2f} s)",
        )
        lo, hi = sim.backfill_window
        poll = sim.config.safety_poll_interval
    ax.axvspan(lo, hi, color="0.9", zorder=0, label="backfill holds the pool")
    ax.axhline(poll, color=THEORY_COLOR, linestyle="--", label=f"safety poll interval {poll:g} s")
    ax.set_xlabel("commit time (virtual s)")
    ax.set_ylabel("commit \u2192 handled latency (s)")
    ax.set_title("a reserved LISTEN connection keeps hints flowing through a backfill")
    ax.legend(loc="center left", framealpha=0.95)  # before the backfill: no point above the floor there


def save_report_figures(sim, out_dir, *, checked=None) -> list[Path]:
    """A run's figures, under the package template's name: :func:`save_outbox_figures`'s,
    looked up when called (so replacing that function replaces these)."""
    return list(save_outbox_figures(sim, out_dir, checked=checked))
