"""The house style and the helpers every figure shares: ``style()``,
``figure_axes`` (a new figure, or the caller's axes), ``mark_empty``,
``time_unit``, ``save_figures``, ``sweep_lines`` (any sweep column against a
grid key) and the shared colours and limits."""
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


def grid_keys(df) -> list:
    """The grid keys of a sweep's table (:func:`fanoutsim.sweep`): its columns before ``seed``."""
    columns = list(df.columns)
    return columns[:columns.index("seed")] if "seed" in columns else []


def sweep_lines(df, column: str, *, x: str | None = None, by: str | None = None, ax: Axes | None = None,
                title: str | None = None) -> Figure:
    """A sweep's ``column`` against the grid key ``x`` (default: the first
    numeric one), one line per value of the grid key ``by`` (default: the next
    grid key, if any): the mean over seeds, shaded from the lowest to the
    highest seed. A log x axis when ``x`` spans a factor of 10 or more."""
    import numpy as np

    keys = grid_keys(df)
    numeric = [k for k in keys if np.issubdtype(df[k].dtype, np.number) and df[k].dtype != bool]
    x = x or (numeric[0] if numeric else None)
    if x is None or x not in df.columns or column not in df.columns:
        raise KeyError(f"sweep_lines needs a numeric grid key and the column {column!r}; the table's grid "
                       f"keys: {', '.join(keys) or 'none'}")
    if by is None:
        rest = [k for k in keys if k != x]
        by = rest[0] if rest else None
    with style():
        fig, ax = figure_axes(ax)
        ax.set_title(title or f"{column} vs {x}")
        ax.set_xlabel(x)
        ax.set_ylabel(column)
        data = df[[c for c in (x, by, column) if c is not None]].dropna()
        if data.empty:
            mark_empty(ax, "runs")
            return fig
        groups = data.groupby(by, sort=True) if by is not None else [(None, data)]
        colors = STYLE["axes.prop_cycle"].by_key()["color"]
        for i, (value, g) in enumerate(list(groups)[:MAX_SERIES]):
            stats = g.groupby(x, sort=True)[column].agg(["mean", "min", "max"])
            c = colors[i % len(colors)]
            ax.plot(stats.index, stats["mean"], marker="o", markersize=3.5, color=c,
                    label=f"{by} = {value}" if by is not None else "mean over seeds")
            ax.fill_between(stats.index, stats["min"], stats["max"], color=c, alpha=0.15, linewidth=0)
        xs = np.unique(data[x].to_numpy(dtype=float))
        if xs.min() > 0 and xs.max() / xs.min() >= 10:
            from matplotlib.ticker import NullLocator

            ax.set_xscale("log")
            ax.set_xticks(xs, [f"{v:g}" for v in xs])  # ticked at the swept values, written plainly
            ax.xaxis.set_minor_locator(NullLocator())
        ax.legend(loc="best")
    return fig


def save_sweep_lines(df, columns, out, prefix: str = "sweep") -> list:
    """:func:`sweep_lines` of each of ``columns`` the table has, saved into
    ``out`` as ``<prefix>_<column>.png``; nothing when the table has no numeric
    grid key (a sweep of seeds only)."""
    try:
        figures = {f"{prefix}_{c}.png": sweep_lines(df, c) for c in columns if c in df.columns}
    except KeyError:
        return []
    return save_figures(figures, out)


# the names these had before they were public (code written against them still runs)
_THEORY_COLOR, _LATENCY_LABELS, _MAX_SERIES = THEORY_COLOR, LATENCY_LABELS, MAX_SERIES
_axes, _empty, _time_unit, _save_figures = figure_axes, mark_empty, time_unit, save_figures
