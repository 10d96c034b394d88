"""Figures of CEL filters (:mod:`fanoutsim.designs.reactor.analysis.filters`): a recorded
workload's rate over its day, and selectivity against dispatch volume and
subscriber lag."""

from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from fanoutsim.designs.reactor.analysis.filters import quote_rates
from fanoutsim.kernel.plotting import STYLE, THEORY_COLOR, Labels, one_axes, plain_log

__all__ = ["recorded_rate", "selectivity_dispatch", "selectivity_lag"]


def _colors() -> list[str]:
    return STYLE["axes.prop_cycle"].by_key()["color"]


def _need(df: pd.DataFrame, *cols: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise KeyError(
            f"no column(s) {', '.join(map(repr, missing))}: pass the DataFrame of selectivity_sweep "
            "(notebooks/experiments/reactor.py)"
        )


def recorded_rate(
    frame: pd.DataFrame,
    bin_s: float = 900.0,
    *,
    by: str = "region",
    window: tuple[float, float] | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Quotes per second over the recorded day, stacked per ``by`` value, in
    bins of ``bin_s`` seconds; ``window`` (recording seconds) shades a replayed window."""
    rates = quote_rates(frame, bin_s, by=by)
    return one_axes(
        ax,
        None if rates.empty else partial(_rate_stairs, rates=rates, bin_s=bin_s, window=window),
        Labels(
            "The recorded quotes day: rate by region",
            "time of day (h, UTC)",
            f"quotes per second (1/s, {bin_s / 60:g}-min bins)",
        ),
        none_of="quotes",
    )


def _rate_stairs(ax: Axes, *, rates: pd.DataFrame, bin_s: float, window: tuple[float, float] | None) -> None:
    """:func:`recorded_rate`'s stacked stairs, of rates with rows."""
    edges = np.append(rates.index.to_numpy(dtype=float), rates.index[-1] + bin_s / 3600.0)
    base = np.zeros(len(rates))
    for i, col in enumerate(rates.columns):
        top = base + rates[col].to_numpy()
        ax.stairs(top, edges, baseline=base, fill=True, alpha=0.8, color=_colors()[i % len(_colors())], label=str(col))
        base = top
    if window is not None:
        ax.axvspan(
            window[0] / 3600.0,
            window[1] / 3600.0,
            facecolor="none",
            edgecolor=THEORY_COLOR,
            hatch="//",
            linewidth=1.0,
            zorder=3,
            label="replayed",
        )
    ax.set_xlim(0, edges[-1])
    ax.set_xticks(np.arange(0, edges[-1] + 1e-9, 3))
    ax.set_ylim(0, float(base.max()) * 1.15)
    ax.legend(loc="upper left", ncols=5)


# the selectivity figures' titles and axis labels: one x axis, the filters' selectivity
_SELECTIVITY = "selectivity: firings passed by the filter (%)"
_DISPATCH_LABELS = Labels("Dispatch volume follows selectivity", _SELECTIVITY, "executions dispatched per second (1/s)")
_LAG_LABELS = Labels("Subscriber lag against selectivity", _SELECTIVITY, "p95 lag (s)")


def selectivity_dispatch(df: pd.DataFrame, *, ax: Axes | None = None) -> Figure:
    """Executions dispatched per second against the filter's selectivity, one
    point per filter of ``selectivity_sweep`` (``notebooks/experiments/reactor.py``);
    the dashed line is selectivity times the stream's firing rate."""
    _need(df, "filter", "selectivity", "dispatch_per_s", "firings")
    return one_axes(ax, None if df.empty else partial(_dispatch_points, df=df), _DISPATCH_LABELS, none_of="filters")


def _dispatch_points(ax: Axes, *, df: pd.DataFrame) -> None:
    """:func:`selectivity_dispatch`'s points and line, of a frame with rows."""
    x = df["selectivity"] * 100
    ax.scatter(x, df["dispatch_per_s"], color=_colors()[0], zorder=3)
    for xi, yi, label in zip(x, df["dispatch_per_s"], df["filter"]):
        ax.annotate(label, (xi, yi), textcoords="offset points", xytext=(5, -11), fontsize=8)
    full = df.loc[df["selectivity"] > 0]
    if len(full):
        rate = float((full["dispatch_per_s"] / full["selectivity"]).median())
        ax.plot(
            [0, 100],
            [0, rate],
            color=THEORY_COLOR,
            linestyle="--",
            linewidth=1.0,
            label=f"selectivity \u00d7 {rate:.2f} firings/s",
        )
        ax.legend(loc="upper left")
    ax.set_xlim(-3, 105)
    ax.set_ylim(bottom=0)


def selectivity_lag(df: pd.DataFrame, *, ax: Axes | None = None) -> Figure:
    """Subscriber lag against selectivity: the p95 fire -> claim of what was
    dispatched (the workflow waiting for a worker) and the p95 poll lag of
    every firing (the watermark behind the log), one point per filter."""
    _need(df, "selectivity", "claim_p95_s", "poll_lag_p95_s")
    return one_axes(ax, None if df.empty else partial(_lag_lines, df=df), _LAG_LABELS, none_of="filters")


def _lag_lines(ax: Axes, *, df: pd.DataFrame) -> None:
    """:func:`selectivity_lag`'s lines, of a frame with rows."""
    d = df.sort_values("selectivity")
    x = d["selectivity"] * 100
    ax.plot(x, d["claim_p95_s"], marker="o", color=_colors()[1], label="fire \u2192 claim p95 (dispatched firings)")
    ax.plot(
        x,
        d["poll_lag_p95_s"],
        marker="s",
        color=_colors()[0],
        label="poll lag p95: visible \u2192 passed by the watermark (all firings)",
    )
    ax.set_yscale("log")
    plain_log(ax, "y")
    ax.set_xlim(-3, 105)
    ax.legend(loc="upper left")
