"""Watermark lag over time (:func:`fanoutsim.designs.reactor.analysis.lag.watermark_lag_over_time`).

Its point is one question per subscription: does it stay below the poll
interval P, the bound of a subscription that keeps up? So P is drawn in every
panel, and each series has a panel of its own: a stream that fires seldom
makes a ragged line (a bin with few firings has a small largest lag), and in
one axes that line hid the steady ones under it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure, SubFigure

from fanoutsim.designs.reactor.analysis.delivery import watermarks
from fanoutsim.designs.reactor.analysis.lag import watermark_lag_over_time
from fanoutsim.kernel.plotting import (
    MAX_SERIES,
    THEORY_COLOR,
    figure_axes,
    mark_downtimes,
    mark_empty,
    new_figure,
    run_downtimes,
    style,
    time_unit,
)

__all__ = ["watermark_lag_over_time_figure"]

TITLE = "Watermark lag: the age of the oldest firing not yet read"
SHARED_Y = 3.0  # panels share the y axis unless a lag passes this many poll intervals


def watermark_lag_over_time_figure(sim, *, bins: int = 300, ax: Axes | None = None) -> Figure | SubFigure:
    """Per subscription, how far behind it reads through the run: its
    watermark lag (the age of the oldest visible firing its watermark has not
    passed), the largest in each time bin, in a panel of its own, with the
    poll interval P — the bound while it keeps up — drawn dashed. Subscriptions
    whose lag is the same all along (one stream, one poll loop) share a panel,
    whose title gives each one's backlog at the end and how often the lag went
    past P. Each crash of the runner is a dotted line, its downtime shaded: a
    lag spike beside one is the firings that waited it out. More than eight
    panels: one per tenant (its largest), the tenants past the seventh merged.
    ``ax``: draw every series into that one axes instead (a caller's layout)."""
    lag = watermark_lag_over_time(sim, bins=bins)
    span = max(float(sim.now), 1e-9)
    unit, uname = time_unit(span)
    poll = float(sim.config.reactor_poll_interval)
    series = [] if lag.empty else _series(lag, {w["id"]: w["backlog"] for w in watermarks(sim)})
    with style():
        if ax is not None or not series:
            fig, one = figure_axes(ax, title=TITLE, xlabel=f"virtual time ({uname})", ylabel=_ylabel(lag, span))
            one.set_xlim(0, span / unit)
            if not series:
                mark_empty(one, "trace (a run without one has only the end: plots.watermark_lag)")
                return fig
            peaks = [float(np.nanmax(g["lag_max_s"].to_numpy())) for _, g in series]
            for i, (label, g) in enumerate(series):  # the higher a line reaches, the further back it is drawn
                _draw(one, g, unit, color=f"C{i % 10}", label=label, zorder=2 - peaks[i] / (max(peaks) or 1))
            _bound(one, poll, text=False)
            mark_downtimes(one, run_downtimes(sim), unit, who="runner")
            one.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=1)
            return fig
        return _panels(series, lag, span, unit, uname, poll, run_downtimes(sim))


def _ylabel(lag: pd.DataFrame, span: float) -> str:
    width = span / max(int(lag["t0_s"].nunique()), 1) if len(lag) else span
    return f"watermark lag (s), largest in each {width:.3g} s"


def _series(lag: pd.DataFrame, backlog: dict) -> list[tuple[str, pd.DataFrame]]:
    """``(label, frame)`` per line to draw: subscriptions with the same lag
    all along share one; past :data:`MAX_SERIES` lines, one per tenant."""
    lines: dict[bytes, list] = {}  # identical series share a line
    for sid, g in lag.groupby("subscription", sort=False):
        entry = lines.setdefault(g["lag_max_s"].to_numpy().tobytes(), [g, []])
        entry[1].append((g["label"].iloc[0], backlog.get(sid, 0)))
    if len(lines) > MAX_SERIES:
        return _per_tenant(lag)
    series = []
    for g, members in lines.values():
        tenant, rest = members[0][0].split(": ", 1)
        reactor = rest.split(" \u2192 ")[0]
        workflows = ", ".join(m[0].split(" \u2192 ", 1)[1] for m in members)
        left = "/".join(f"{b:,}" for b in sorted({m[1] for m in members}))
        series.append((f"{tenant}: {reactor} \u2192 {workflows} (backlog at the end {left})", g))
    return sorted(series, key=lambda s: s[0])


def _per_tenant(lag: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """One line per tenant, its subscriptions' largest; the tenants past the
    seventh (by their peak) merged into one line, so that no more than
    :data:`MAX_SERIES` are drawn."""
    per = lag.assign(label=lag["label"].str.split(":").str[0])
    peaks = per.groupby("label")["lag_max_s"].max().sort_values(ascending=False, kind="stable")
    if len(peaks) > MAX_SERIES:
        rest = set(peaks.index[MAX_SERIES - 1 :])
        per["label"] = per["label"].where(~per["label"].isin(rest), f"{len(rest)} other tenants")
    per = per.groupby(["label", "t0_s", "t1_s"], as_index=False)["lag_max_s"].max()
    return [(f"tenant {name}" if " other " not in name else name, g) for name, g in per.groupby("label", sort=True)]


def _draw(ax: Axes, g: pd.DataFrame, unit: float, *, color: str, label: str | None = None, zorder: float = 2) -> None:
    edges = np.concatenate([g["t0_s"].to_numpy()[:1], g["t1_s"].to_numpy()]) / unit
    ax.stairs(g["lag_max_s"].to_numpy(), edges, color=color, linewidth=1.3, label=label, baseline=None, zorder=zorder)


def _bound(ax: Axes, poll: float, *, text: bool = True) -> None:
    """The poll interval P, dashed: while a subscription keeps up its lag stays below it."""
    ax.axhline(
        poll,
        color=THEORY_COLOR,
        linestyle="--",
        linewidth=1.2,
        zorder=3,
        label=f"P = {poll:g} s (the poll interval): the bound while a subscription keeps up",
    )
    if text:
        ax.annotate(
            f"P = {poll:g} s (the poll interval): the bound while a subscription keeps up",
            (1.0, poll),
            xycoords=("axes fraction", "data"),
            xytext=(-4, 3),
            textcoords="offset points",
            ha="right",
            va="bottom",
            fontsize=8,
            color=THEORY_COLOR,
            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 1.0},
            zorder=4,
        )


def _past_bound(values: np.ndarray, poll: float) -> str:
    over = int(np.count_nonzero(values > poll * (1 + 1e-9)))
    return "never above P" if over == 0 else f"above P in {over} of {values.size} bins"


def _panels(
    series: list[tuple[str, pd.DataFrame]],
    lag: pd.DataFrame,
    span: float,
    unit: float,
    uname: str,
    poll: float,
    downs: list,
) -> Figure:
    """One panel per series, stacked, on one time axis, the runner's crashes
    (``downs``) marked in each; the y axis shared unless a lag runs past
    :data:`SHARED_Y` poll intervals. The legend, below the panels, names P and
    the crashes; with no crash, P is written in the first panel instead."""
    top = float(np.nanmax(lag["lag_max_s"].to_numpy()))
    shared = top <= SHARED_Y * poll
    fig = new_figure((8.0, 1.3 + 1.45 * len(series)))
    axes = np.atleast_1d(fig.subplots(len(series), 1, sharex=True, sharey=shared))
    axes[-1].set_xlim(0, span / unit)
    for i, (a, (label, g)) in enumerate(zip(axes, series)):
        _draw(a, g, unit, color=f"C{i % 10}")
        _bound(a, poll, text=i == 0 and not downs)
        mark_downtimes(a, downs, unit, who="runner", legend=i == 0)
        values = g["lag_max_s"].to_numpy()
        a.set_title(f"{label}: {_past_bound(values, poll)}", fontsize=9, fontweight="normal", loc="left")
        high = max(top if shared else float(np.nanmax(values)), poll)
        a.set_ylim(0, high * 1.15)
    if downs:
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncols=2, fontsize=8)
    axes[-1].set_xlabel(f"virtual time ({uname})")
    fig.supylabel(_ylabel(lag, span), fontsize=10)
    fig.suptitle(TITLE, fontweight="bold", fontsize=12)
    return fig
