"""The house style and the helpers every figure shares: ``style()``,
``figure_axes`` (a new figure, or the caller's axes), ``mark_empty``,
``time_unit``, ``save_figures`` and the shared colours and limits."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import matplotlib as mpl
from matplotlib.axes import Axes
from matplotlib.figure import Figure

STYLE: dict = {
    "figure.figsize": (8.0, 4.5),
    "figure.dpi": 100,
    "savefig.dpi": 120,
    "font.size": 10,
    "axes.titlesize": 12,
    "axes.titleweight": "bold",
    "axes.labelsize": 10,
    "axes.grid": True,
    "axes.axisbelow": True,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "grid.alpha": 0.35,
    "grid.linestyle": "-",
    "legend.fontsize": 8,
    "legend.frameon": False,
    "axes.prop_cycle": mpl.cycler(color=[
        "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
        "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    ]),
}
THEORY_COLOR = "#333333"
LATENCY_LABELS = {
    "fire_to_dispatch": "fire \u2192 dispatch",
    "fire_to_claim": "fire \u2192 claim",
}
MAX_SERIES = 8


@contextmanager
def style() -> Iterator[None]:
    """The house rcParams, for the duration of a ``with`` block."""
    with mpl.rc_context(STYLE):
        yield


def figure_axes(ax: Axes | None, figsize=None) -> tuple[Figure, Axes]:
    """``(figure, axes)``: the caller's ``ax`` and its figure, or a new figure
    in the house size with one axes."""
    if ax is not None:
        return ax.figure, ax
    fig = Figure(figsize=figsize or STYLE["figure.figsize"], dpi=STYLE["figure.dpi"],
                 layout="constrained")
    return fig, fig.add_subplot()


def mark_empty(ax: Axes, what: str) -> None:
    """Say "no <what>" in the middle of an axes that has nothing to show."""
    ax.text(0.5, 0.5, f"no {what}", transform=ax.transAxes, ha="center", va="center",
            color="#777777")


def time_unit(span_s: float) -> tuple[float, str]:
    """Seconds per unit and its name, for an x axis of virtual time."""
    if span_s > 3 * 3600:
        return 3600.0, "h"
    if span_s > 300:
        return 60.0, "min"
    return 1.0, "s"


def save_figures(figures: dict, out) -> list:
    """Write ``{file name: Figure}`` as PNGs into the folder ``out``; the paths."""
    paths = []
    for name, fig in figures.items():
        path = out / name
        fig.savefig(path, dpi=STYLE["savefig.dpi"], metadata={"Software": None})
        fig.clear()  # these figures belong to no pyplot manager: dropping them frees them
        paths.append(path)
    return paths


# the names these had before they were public (code written against them still runs)
_THEORY_COLOR, _LATENCY_LABELS, _MAX_SERIES = THEORY_COLOR, LATENCY_LABELS, MAX_SERIES
_axes, _empty, _time_unit, _save_figures = figure_axes, mark_empty, time_unit, save_figures
