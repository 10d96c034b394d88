"""Figures of one run's deliveries: latency, executions over time, watermark lag."""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from fanoutsim.designs.reactor.analysis.delivery import latency_frame, watermarks
from fanoutsim.kernel.plotting import (
    LATENCY_LABELS,
    MAX_SERIES,
    STYLE,
    THEORY_COLOR,
    Labels,
    figure_axes,
    mark_downtimes,
    mark_duplicates,
    mark_empty,
    one_axes,
    run_downtimes,
    save_figures,
    style,
    time_unit,
)

__all__ = ["latency_histogram", "executions_over_time", "watermark_lag", "save_report_figures"]


def latency_histogram(
    latency_df,
    column: str = "fire_to_dispatch",
    poll_interval: float | None = None,
    *,
    ax: Axes | None = None,
    bins: int | None = None,
) -> Figure:
    """Histogram of one latency column of :func:`fanoutsim.analysis.latency_frame`
    (a Simulation is accepted too), in milliseconds.

    With ``poll_interval`` (seconds) a dashed line shows the theory for a
    firing that waits for the next poll: uniform on ``[0, P)``, i.e. the same
    expected count in every bin below ``P``.
    """
    if not isinstance(latency_df, pd.DataFrame):
        latency_df = latency_frame(latency_df)
    if column not in latency_df.columns:
        raise KeyError(f"no column {column!r}; latency columns: fire_to_dispatch, fire_to_claim")
    ms = latency_df[column].dropna().to_numpy(dtype=float) * 1000.0
    label = LATENCY_LABELS.get(column, column)
    return one_axes(
        ax,
        None if ms.size == 0 else partial(_latency_bins, ms=ms, poll_interval=poll_interval, bins=bins),
        Labels(f"{label} latency", f"{label} (ms)", "executions per bin"),
        none_of="executions",
    )


_BARS = 150  # at most about this many bins in a latency histogram with its poll interval


def _latency_bins(ax: Axes, *, ms: np.ndarray, poll_interval: float | None, bins: int | None) -> None:
    """:func:`latency_histogram`'s bars, percentiles and theory, of some latencies (``ms``)."""
    hi = float(ms.max())
    if poll_interval is not None:
        p_ms = poll_interval * 1000.0
        width = p_ms / 20.0
        hi = max(hi, p_ms)
        # A backlog's waits run to many P: wider bins (a whole number of P / 20 each)
        # keep them to about _BARS, where a rectangle for each of thousands of narrow
        # ones read as a barcode and took a control seconds to redraw.
        width *= max(1, math.ceil(hi / width / _BARS))
    else:
        width = (hi / (bins or 40)) or 1.0
    edges = np.arange(0.0, hi + width, width)
    if edges.size < 2:
        edges = np.array([0.0, width])
    heights, _, _ = ax.hist(
        ms,
        bins=edges,
        color=STYLE["axes.prop_cycle"].by_key()["color"][0],
        alpha=0.85,
        label=f"{ms.size:,} executions",
    )
    if poll_interval is not None:
        expected = ms.size * width / p_ms
        ax.plot(
            [0.0, p_ms],
            [expected, expected],
            linestyle="--",
            color=THEORY_COLOR,
            linewidth=1.5,
            label=f"uniform [0, {poll_interval:g} s) poll wait",
        )
    for q, color in ((50, "#d62728"), (99, "#9467bd")):
        at = float(np.percentile(ms, q))
        ax.axvline(at, color=color, linewidth=1, linestyle=":", label=f"p{q} {at:.0f} ms")
    ax.set_xlim(left=0)
    ax.set_ylim(0, float(heights.max()) * 1.45)  # headroom: the legend covers no bar
    ax.legend(loc="upper center", ncols=2)


def executions_over_time(
    sim, bin_seconds: float = 60, *, ax: Axes | None = None, report=None, faults: bool = True
) -> Figure:
    """Executions dispatched per ``bin_seconds`` of virtual time, one line per
    subscription (per tenant when there are more than eight). With ``faults``
    (the default), what a crash or a fault did, where it did it: each crash of
    the runner (a dotted line, its downtime shaded) and each duplicate delivery
    the checker finds (a marker on its line's bin, one shape per cause);
    ``report``: the checker's report of this run, if already at hand (else the
    run is checked here; a run without a trace shows its crashes only)."""
    if not bin_seconds > 0:
        raise ValueError(f"bin_seconds must be > 0, got {bin_seconds!r}")
    ex = sim.executions()
    span = max(float(sim.now), bin_seconds)
    unit, uname = time_unit(span)
    with style():
        fig, ax = figure_axes(
            ax,
            title=f"Executions dispatched per {bin_seconds:g} s",
            xlabel=f"virtual time ({uname})",
            ylabel=f"executions / {bin_seconds:g} s",
        )
        ax.set_xlim(0, span / unit)
        if ex.empty:
            mark_empty(ax, "executions")
        else:
            t = (ex["dispatched_at"] - pd.Timestamp(sim.start_us, unit="us", tz="UTC")).dt.total_seconds()
            edges = np.arange(0.0, span + bin_seconds, bin_seconds)
            groups = _execution_groups(ex)
            counts = _execution_stairs(ax, t, groups, edges, unit)
            if faults and getattr(sim, "traced", True):
                checked = report if report is not None else _check(sim)
                _mark_duplicates(ax, checked.duplicates, ex, t, groups, counts, edges, unit)
            ax.set_ylim(0, ax.get_ylim()[1] * 1.12)  # headroom: a crash's note covers no line
        if faults:
            mark_downtimes(ax, run_downtimes(sim), unit, who="runner")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def _check(sim):
    from fanoutsim.designs.reactor.checker import check

    return check(sim)


def _execution_groups(ex: pd.DataFrame) -> pd.Series:
    """Each execution's line: its subscription, or its tenant when there are more than eight."""
    reactor = ex["reactor_name"].astype(object).fillna("(trigger)")
    by_sub = reactor + " \u2192 " + ex["workflow_name"].astype(object) + " [" + ex["tenant_id"].astype(object) + "]"
    return by_sub if by_sub.nunique() <= MAX_SERIES else "tenant " + ex["tenant_id"].astype(object)


def _execution_stairs(
    ax: Axes, t: pd.Series, groups: pd.Series, edges: np.ndarray, unit: float
) -> dict[str, np.ndarray]:
    """:func:`executions_over_time`'s lines (and the total, dashed, over several): the counts per line and bin."""
    counts = {}
    for name in sorted(groups.unique()):
        counts[name], _ = np.histogram(t[groups == name], bins=edges)
        ax.stairs(counts[name], edges / unit, baseline=None, linewidth=1.3, label=name)
    if groups.nunique() > 1:
        total, _ = np.histogram(t, bins=edges)
        ax.stairs(
            total,
            edges / unit,
            baseline=None,
            linewidth=1.0,
            color=THEORY_COLOR,
            alpha=0.6,
            linestyle="--",
            label="all",
        )
    return counts


def _mark_duplicates(
    ax: Axes,
    duplicates: pd.DataFrame,
    ex: pd.DataFrame,
    t: pd.Series,
    groups: pd.Series,
    counts: dict[str, np.ndarray],
    edges: np.ndarray,
    unit: float,
) -> None:
    """Each extra delivery the checker found, at its dispatch on its line: the height of its bin."""
    if duplicates.empty:
        return
    where = pd.Series(np.arange(len(ex)), index=ex["id"].astype(object))
    rows = where.reindex(duplicates["execution"].astype(object)).to_numpy()
    found = ~pd.isna(rows)
    at = t.to_numpy()[rows[found].astype(int)]
    line = groups.to_numpy()[rows[found].astype(int)]
    k = np.clip(np.searchsorted(edges, at, side="right") - 1, 0, len(edges) - 2)
    y = np.array([counts[g][i] for g, i in zip(line, k)], dtype=float)
    mark_duplicates(ax, at, y, duplicates["cause"].to_numpy()[found], unit)


def watermark_lag(sim, *, ax: Axes | None = None) -> Figure:
    """Per subscription, its watermark lag now (seconds: the age of the oldest
    firing it has not read yet, :data:`~fanoutsim.designs.reactor.analysis.lag.WATERMARK_LAG`),
    with its backlog of retained firings after the watermark and the poll
    interval P, the bound while it keeps up, dashed."""
    subs = watermarks(sim)
    height = max(2.5, 0.45 * len(subs) + 1.2)
    poll = float(sim.config.reactor_poll_interval)
    return one_axes(
        ax,
        partial(_lag_bars, subs=subs, poll=poll) if subs else None,
        Labels(
            f"Watermark lag at t = {sim.now:g} s: the age of the oldest firing not yet read",
            "watermark lag (s)",
            "subscription",
        ),
        none_of="subscriptions",
        figsize=(8.0, height),
    )


def _lag_bars(ax: Axes, *, subs: list[dict], poll: float) -> None:
    """:func:`watermark_lag`'s bars, of some subscriptions, and the poll interval."""
    labels = [f"{s['tenant']}: {s['reactor']} \u2192 {s['workflow']}" for s in subs]
    lags = [s["watermark_lag_s"] for s in subs]
    y = np.arange(len(subs))
    colors = STYLE["axes.prop_cycle"].by_key()["color"]
    tenants = sorted({s["tenant"] for s in subs})
    bar_colors = [colors[tenants.index(s["tenant"]) % len(colors)] for s in subs]
    ax.barh(y, lags, color=bar_colors, alpha=0.85)
    top = max([*lags, poll])
    for yi, s, v in zip(y, subs, lags):
        moved = "" if s["watermark"] is not None else " (watermark never advanced)"
        ax.text(v + top * 0.01, yi, f"{v:.2f} s, backlog {s['backlog']:,}{moved}", va="center", fontsize=8)
    ax.axvline(poll, color=THEORY_COLOR, linestyle="--", linewidth=1.2, label=f"P = {poll:g} s (poll interval)")
    ax.legend(loc="lower right")
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.set_xlim(0, top * 1.35)
    ax.grid(axis="y", visible=False)


def save_report_figures(sim, out_dir, *, checked=None) -> list[Path]:
    """Write the standard figures of a run as PNGs into ``out_dir``; their paths.
    ``checked``: the checker's report of this run, if the caller has it (else the
    run is checked here, for the duplicates the figures mark)."""
    lat = latency_frame(sim)
    figures = {
        "latency_fire_to_dispatch.png": latency_histogram(
            lat, "fire_to_dispatch", poll_interval=sim.config.reactor_poll_interval
        ),
        "latency_fire_to_claim.png": latency_histogram(lat, "fire_to_claim"),
        "executions_over_time.png": executions_over_time(sim, bin_seconds=_bin_for(sim.now), report=checked),
        "watermark_lag.png": _lag_figure(sim),
    }
    return save_figures(figures, out_dir)


def _lag_figure(sim) -> Figure:
    """The lag through the run (:mod:`.lag`); the snapshot at the end when the run kept no trace."""
    from fanoutsim.designs.reactor.analysis.lag import watermark_lag_over_time
    from fanoutsim.designs.reactor.plots.lag import watermark_lag_over_time_figure

    lag = watermark_lag_over_time(sim, bins=1)
    if lag.empty or lag["lag_max_s"].isna().all():
        return watermark_lag(sim)
    return watermark_lag_over_time_figure(sim)


def _bin_for(span_s: float) -> float:
    """A readable bin width: 15 min from 6 h of run up, 1 min from 1 h, else
    about a sixtieth of the run in whole seconds."""
    if span_s >= 3600 * 6:
        return 900.0
    if span_s >= 3600:
        return 60.0
    return max(1.0, float(round(span_s / 60)))
