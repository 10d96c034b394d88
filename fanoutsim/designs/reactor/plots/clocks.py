"""Real time against virtual time, drawn: two latency distributions on one axis."""

from __future__ import annotations

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from fanoutsim.kernel.plotting import THEORY_COLOR, figure_axes, style


def latency_side_by_side(
    virtual,
    real,
    column: str = "fire_to_dispatch",
    poll_interval: float | None = None,
    *,
    real_store: str = "DuckDB file",
    ax: Axes | None = None,
) -> Figure:
    """Empirical CDFs of one latency column under both clocks (milliseconds),
    with the uniform [0, P) poll-wait theory when ``poll_interval`` is given.
    ``real_store`` names where the wall-clock run kept its tables ("PostgreSQL")."""
    with style():
        fig, ax = figure_axes(ax)
        for label, frame in (("virtual clock (SimPy)", virtual), (f"wall clock ({real_store})", real)):
            x = np.sort(np.asarray(frame[column], float)) * 1e3
            ax.step(x, np.arange(1, len(x) + 1) / max(len(x), 1), where="post", label=f"{label}, n={len(x)}")
        if poll_interval:
            p = poll_interval * 1e3
            ax.plot([0, p], [0, 1], linestyle="--", color=THEORY_COLOR, label=f"uniform on [0, {p:g} ms)")
        ax.set_xlabel(f"{column.replace('_', ' ')} latency (ms)")
        ax.set_ylabel("fraction of executions")
        ax.set_title("the same scenario under two clocks")
        ax.legend(loc="lower right")
    return fig
