"""Notebook 6's control: pick a slice of a sweep's DataFrame and redraw.

>>> w = sweep_explorer(df)       # df from fanoutsim.sweep over the poll interval  # doctest: +SKIP
>>> w.budget.value = 0.6         # a tighter p99 budget: a new recommendation

Nothing re-runs: the controls choose the latency column, the batch limits (and
the firing rate, when the sweep has one) to show and the p99 budget, and the
figure — latency against the poll interval over the recommendation chart —
is drawn again from the table.
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from fanoutsim.designs.reactor.analysis.sweep import recommend
from fanoutsim.designs.reactor.plots.sweep import latency_vs_interval, recommendation_chart
from fanoutsim.designs.reactor.widgets.latency import _show, _slider
from fanoutsim.kernel.plotting import new_figure, style

__all__ = ["SweepExplorer", "sweep_explorer"]

P, B = "reactor_poll_interval", "reactor_poll_batch_limit"
_NEUTRAL = "0.45"  # the shared legend's lines: a style, not a batch limit's colour
_LATENCIES = {"fire \u2192 dispatch": "fire_to_dispatch", "fire \u2192 claim": "fire_to_claim"}


class SweepExplorer(widgets.VBox):
    """Controls over a sweep DataFrame: ``latency`` (which column), ``batches``
    (batch limits shown), ``rate`` (when swept), ``budget`` (p99 budget,
    seconds). After every change: ``selection`` (the rows drawn),
    ``recommended`` (:func:`~fanoutsim.analysis.recommend`, or None),
    ``figure`` (the recommendation chart) and ``latency_figure`` (latency
    against the poll interval, a panel per batch limit shown). The latency
    panels are drawn again only when what they show changes (not for a new
    budget): a move of the budget redraws one chart."""

    def __init__(self, df: pd.DataFrame, *, p99_budget_s: float = 1.5, max_backlog: float = 100.0) -> None:
        missing = [c for c in (P, B, "polls_per_s", "backlog") if c not in df.columns]
        if missing:
            raise KeyError(f"the sweep has no column(s) {', '.join(missing)}: sweep over {P} and {B} to explore it")
        self.df, self.max_backlog = df, max_backlog
        batches = sorted(int(b) for b in df[B].unique())
        self.latency = widgets.Dropdown(options=list(_LATENCIES), value="fire \u2192 dispatch", description="latency")
        self.batches = widgets.SelectMultiple(
            options=batches, value=tuple(batches), rows=min(len(batches), 4), description="batch limits"
        )
        rates = sorted(float(r) for r in df["rate"].unique()) if "rate" in df.columns else []
        self.rate = widgets.Dropdown(
            options=rates, value=rates[0] if rates else None, description="rate (1/s)", disabled=not rates
        )
        # the budget: any positive number of seconds, up to the slowest p99 measured
        hi = float(df["fire_to_dispatch_p99_s"].max()) if len(df) else 10.0
        hi = max(1.0, min(hi, 60.0)) if math.isfinite(hi) else 10.0
        self.budget = _slider(
            widgets.FloatSlider, p99_budget_s, (0.05, hi, 0.05), "p99 budget (s)", readout_format=".2f"
        )
        self.summary = widgets.HTML()
        self.out, self.latency_out = widgets.Output(), widgets.Output()
        self.figure: Figure | None = None
        self.latency_figure: Figure | None = None
        self._latency_key: tuple | None = None
        controls = [self.latency, self.batches] + ([self.rate] if rates else []) + [self.budget]
        super().__init__(
            [widgets.HBox(controls[:2]), widgets.HBox(controls[2:]), self.summary, self.out, self.latency_out]
        )
        for w in controls:
            w.observe(self._changed, names="value")
        self.update()

    def _changed(self, change) -> None:
        self.update()

    def update(self) -> None:
        """Select, recommend and redraw (the controls call this on every change)."""
        sel = self.df[self.df[B].isin(self.batches.value)]
        if "rate" in sel.columns and self.rate.value is not None:
            sel = sel[sel["rate"] == self.rate.value]
        self.selection = sel
        column = _LATENCIES[self.latency.value]
        latency = f"{column}_p99_s"
        try:
            self.recommended = recommend(sel, self.budget.value, max_backlog=self.max_backlog, latency=latency)
        except ValueError:
            self.recommended = None
        if self.recommended is None:
            self.summary.value = (
                f"no setting shown keeps p99 {self.latency.value} within {self.budget.value:g} s and keeps up"
            )
        else:
            r = self.recommended
            self.summary.value = (
                f"recommended: P = {r[P]:g} s, batch limit {r[B]}: p99 {r[latency]:.3f} s, "
                f"{r['polls_per_s']:g} poll queries/s, {r['candidates']} settings meet the budget"
            )
        with style():
            fig = new_figure((9.0, 4.3))
        recommendation_chart(
            sel,
            self.recommended,
            p99_budget_s=self.budget.value,
            max_backlog=self.max_backlog,
            latency=latency,
            ax=fig.add_subplot(),
        )
        self.figure = fig
        _show(self.out, fig)
        key = (column, tuple(self.batches.value), self.rate.value)
        if key != self._latency_key:  # what the panels show changed (a budget does not)
            with style():
                top = new_figure((9.0, 4.2))
            self.latency_figure = latency_vs_interval(sel, column, fig=top)  # one panel per batch limit
            _one_legend_below(top)
            self._latency_key = key
            _show(self.latency_out, top)


def _one_legend_below(fig: Figure) -> None:
    """The latency panels' legends as one row beneath them, over no curve: in
    the control's narrow panels each panel's own legend (top left) sat on
    batch 1's p99 where it climbs. Every panel says the same in its own colour
    (its title names its batch limit), so the row shows each line style once,
    in grey: p50 solid, p99 dashed, the seeds' band, the two theory lines."""
    axes = [a for a in fig.axes if a.get_legend() is not None]
    if not axes:
        return
    handles, labels = axes[0].get_legend_handles_labels()
    for a in axes:
        a.get_legend().remove()
    entries: dict[str, Artist] = {}
    for handle, label in zip(handles, labels):
        if isinstance(handle, Line2D) and label.endswith((" p50", " p99")):
            q = label.rsplit(" ", 1)[1]
            entries[q] = Line2D([], [], color=_NEUTRAL, linestyle=handle.get_linestyle(), marker="o", markersize=3.5)
        elif not isinstance(handle, Line2D):  # the seeds' band
            entries[label] = Patch(color=_NEUTRAL, alpha=0.3, linewidth=0)
        else:  # the theory lines, already grey
            entries[label] = handle
    fig.legend(list(entries.values()), list(entries), loc="outside lower center", ncols=len(entries), fontsize=8)


def sweep_explorer(df: pd.DataFrame, *, p99_budget_s: float = 1.5, max_backlog: float = 100.0) -> SweepExplorer:
    """Build notebook 6's control over a sweep DataFrame (see :class:`SweepExplorer`)."""
    return SweepExplorer(df, p99_budget_s=p99_budget_s, max_backlog=max_backlog)
