"""Watermark lag over time (:func:`fanoutsim.designs.reactor.analysis.lag.watermark_lag_over_time`)."""

from __future__ import annotations

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from fanoutsim.designs.reactor.analysis.delivery import watermarks
from fanoutsim.designs.reactor.analysis.lag import watermark_lag_over_time
from fanoutsim.kernel.plotting import MAX_SERIES, figure_axes, mark_empty, style, time_unit

__all__ = ["watermark_lag_over_time_figure"]


def watermark_lag_over_time_figure(sim, *, bins: int = 300, ax: Axes | None = None) -> Figure:
    """Per subscription, how far behind it reads through the run: the largest
    lag in each time bin (the age of the oldest visible firing its watermark
    has not passed). Subscriptions whose lag is the same all along (one stream,
    one poll loop) share a line; the legend gives each one's backlog at the end.
    More than eight lines: one per tenant (its largest)."""
    lag = watermark_lag_over_time(sim, bins=bins)
    span = max(float(sim.now), 1e-9)
    unit, uname = time_unit(span)
    with style():
        fig, ax = figure_axes(
            ax,
            title="Watermark lag over time: the oldest firing not yet read",
            xlabel=f"virtual time ({uname})",
            ylabel="largest lag in the bin (s)",
        )
        ax.set_xlim(0, span / unit)
        if lag.empty:
            mark_empty(ax, "trace (a run without one has only the end: plots.watermark_lag)")
            return fig
        backlog = {w["id"]: w["backlog"] for w in watermarks(sim)}
        lines: dict[bytes, list] = {}  # identical series share a line
        for sid, g in lag.groupby("subscription", sort=False):
            values = g["lag_max_s"].to_numpy()
            entry = lines.setdefault(values.tobytes(), [g, []])
            entry[1].append((g["label"].iloc[0], backlog.get(sid, 0)))
        if len(lines) > MAX_SERIES:
            per_tenant = lag.assign(label=lag["label"].str.split(":").str[0])
            per_tenant = per_tenant.groupby(["label", "t0_s", "t1_s"], as_index=False)["lag_max_s"].max()
            series = [(f"tenant {name}", g) for name, g in per_tenant.groupby("label", sort=True)]
        else:
            series = []
            for g, members in lines.values():
                tenant, rest = members[0][0].split(": ", 1)
                reactor = rest.split(" \u2192 ")[0]
                workflows = ", ".join(m[0].split(" \u2192 ", 1)[1] for m in members)
                backlogs = sorted({m[1] for m in members})
                left = "/".join(f"{b:,}" for b in backlogs)
                series.append((f"{tenant}: {reactor} \u2192 {workflows} (backlog at the end {left})", g))
            series.sort(key=lambda s: s[0])
        edges = None
        for i, (label, g) in enumerate(series):
            edges = np.concatenate([g["t0_s"].to_numpy()[:1], g["t1_s"].to_numpy()]) / unit
            ax.stairs(g["lag_max_s"].to_numpy(), edges, color=f"C{i % 10}", linewidth=1.3, label=label, baseline=None)
        top = float(np.nanmax(lag["lag_max_s"].to_numpy())) if len(lag) else 0.0
        ax.set_ylim(0, top * 1.08 if top > 0 else 1.0)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=1)
    return fig
