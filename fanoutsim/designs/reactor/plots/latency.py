"""Figures of the latency budget: the poll wait against its uniform theory, and
the stacked budget of the DB path against the in-process path."""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from fanoutsim.designs.reactor.analysis.latency import BUDGET_COMPONENTS, budget_table, latency_budget
from fanoutsim.designs.reactor.plots.delivery import latency_histogram
from fanoutsim.kernel.plotting import STYLE, Labels, one_axes, style

__all__ = ["poll_wait_histogram", "budget_bars", "BUDGET_LABELS"]

#: Each latency component's label in the figures
#: (:data:`~fanoutsim.designs.reactor.analysis.latency.BUDGET_COMPONENTS`).
BUDGET_LABELS = {
    "poll_wait_s": "poll wait",
    "round_trip_s": "insert / round trip",
    "claim_wait_s": "claim wait",
    "run_s": "run",
    "in_process_s": "in-process call",
}


def poll_wait_histogram(budget, poll_interval: float | None = None, *, ax: Axes | None = None) -> Figure:
    """Histogram of the poll wait (fired -> fetched, ms) of
    :func:`fanoutsim.analysis.latency_budget` (a Simulation is accepted too),
    with the uniform ``[0, P)`` theory drawn over it
    (:func:`fanoutsim.plots.latency_histogram` does the drawing); its title
    says "a backlog" when the median wait is past P.
    ``poll_interval`` defaults to the Simulation's."""
    if not isinstance(budget, pd.DataFrame):
        if poll_interval is None:
            poll_interval = budget.config.reactor_poll_interval
        budget = latency_budget(budget)
    if poll_interval is None:
        raise ValueError("poll_interval is needed to draw the theory when a DataFrame is given")
    fig = latency_histogram(budget, "poll_wait_s", poll_interval=poll_interval, ax=ax)
    ax = ax if ax is not None else fig.axes[0]
    # the theory holds while each poll takes every firing past the watermark; a backlog
    # (a batch limit too small for the rate) queues them for polls on end, and says so
    backlog = len(budget) and float(budget["poll_wait_s"].quantile(0.5)) > poll_interval
    with style():
        ax.set_title(
            f"Poll wait at P = {poll_interval:g} s: "
            + ("a backlog, far past the uniform [0, P)" if backlog else "uniform on [0, P)")
        )
        ax.set_xlabel("poll wait, fired \u2192 fetched (ms)")
    return fig


def budget_bars(table, *, ax: Axes | None = None) -> Figure:
    """The mean latency budget per path as stacked horizontal bars (ms):
    :func:`fanoutsim.analysis.budget_table` (a Simulation is accepted too)."""
    if not isinstance(table, pd.DataFrame):
        table = budget_table(table)
    return one_axes(
        ax,
        None if table.empty else partial(_budget_stack, table=table),
        Labels("Latency budget: fired \u2192 finished, mean per execution", "mean time (ms)", "path"),
        none_of="paths",
        figsize=(8.0, 1.8 + 0.7 * max(len(table), 1)),
    )


def _budget_stack(ax: Axes, *, table: pd.DataFrame) -> None:
    """:func:`budget_bars`'s stacked bars, of a table with rows."""
    parts = [c for c in (*BUDGET_COMPONENTS, "in_process_s") if c in table.columns]
    colors = STYLE["axes.prop_cycle"].by_key()["color"]
    y = np.arange(len(table))
    left = np.zeros(len(table))
    for i, col in enumerate(parts):
        ms = table[col].astype(float).fillna(0.0).to_numpy() * 1000.0
        ax.barh(
            y,
            ms,
            left=left,
            color=colors[i % len(colors)],
            alpha=0.9,
            height=0.55,
            label=BUDGET_LABELS.get(col, col),
        )
        left += ms
    top = float(left.max()) or 1.0
    for yi, (_, row) in zip(y, table.iterrows()):
        total = float(row.get("total_s", math.nan))
        if not math.isfinite(total):
            text = "no data"
        elif total * 1000.0 < top * 0.005:
            text = f"{total * 1e6:.0f} \u00b5s in virtual time (Cloacina: tens of \u00b5s)"
        else:
            text = f"{total * 1000.0:.0f} ms"
        ax.text(left[yi] + top * 0.01, yi, text, va="center", fontsize=8)
    ax.set_yticks(y, list(table.index))
    ax.invert_yaxis()
    ax.set_xlim(0, top * 1.3)
    ax.grid(axis="y", visible=False)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncols=len(parts))
