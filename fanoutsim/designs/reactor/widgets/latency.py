"""Notebook 1's control: the poll interval and the batch limit, re-run and redrawn.

>>> w = latency_explorer("fanoutsim/examples/sweep.toml", until=300)   # doctest: +SKIP
>>> w                      # in a notebook: the sliders, a summary and the figure
>>> w.poll_interval.value = 2.0     # re-runs the seeded simulation; w.figure is new

Each change re-runs the scenario with the same seed (so only the setting
differs), registers an in-process computation graph on every fired reactor,
and draws the poll-wait histogram with its uniform theory over the stacked
budget of the DB path against the in-process path.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure

from fanoutsim.designs.reactor.analysis.delivery import watermarks
from fanoutsim.designs.reactor.analysis.latency import budget_table, latency_budget, poll_wait_uniformity
from fanoutsim.designs.reactor.plots.latency import budget_bars, poll_wait_histogram
from fanoutsim.kernel.plotting import new_figure, show_in, style

__all__ = ["LatencyExplorer", "latency_explorer", "POLL_INTERVAL_BOUNDS", "BATCH_LIMIT_BOUNDS"]

# (min, max, step): every value is one SchedulerConfig accepts (P > 0, batch >= 1)
#: The poll interval slider's (min, max, step), in seconds.
POLL_INTERVAL_BOUNDS = (0.1, 5.0, 0.1)
#: The batch limit slider's (min, max, step), in firings.
BATCH_LIMIT_BOUNDS = (1, 200, 1)

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _router(sources: dict) -> str:
    """The in-process graph: a fast routing decision on the quote, nothing durable."""
    quote = sources.get("quote") or {}
    return "urgent" if quote.get("price", 0) > 100 else "normal"


def _load(scenario):
    from fanoutsim.designs.reactor.scenario import Scenario, load_scenario

    return scenario if isinstance(scenario, Scenario) else load_scenario(scenario, design="reactor")


def _show(out: widgets.Output, fig: Figure) -> None:
    """Make ``fig`` the Output's content (:func:`~fanoutsim.kernel.plotting.show_in`).
    Headless, with no IPython, the figure is kept on the control only: nbval,
    which does not route captured output to widgets, sees no output."""
    from IPython import get_ipython

    if get_ipython() is not None:
        show_in(out, fig)


def _slider(kind: type[widgets.FloatSlider | widgets.IntSlider], value, bounds, description: str, **options):
    """A ``kind`` slider over ``bounds`` (min, max, step), at ``value`` held
    within them, that answers when released (each answer re-runs or redraws:
    not on every step of a drag)."""
    lo, hi, step = bounds
    return kind(
        value=min(max(value, lo), hi),
        min=lo,
        max=hi,
        step=step,
        description=description,
        continuous_update=False,
        **options,
    )


class LatencyExplorer(widgets.VBox):
    """Sliders for ``reactor_poll_interval`` and ``reactor_poll_batch_limit``,
    a one-line summary, and the figure. After every change: ``sim`` (the run),
    ``budget`` (:func:`~fanoutsim.analysis.latency_budget`), ``table``
    (:func:`~fanoutsim.analysis.budget_table`), ``stats`` and ``figure``."""

    def __init__(
        self,
        scenario,
        *,
        seed: int = 0,
        until: float = 600.0,
        poll_interval: float | None = None,
        batch_limit: int | None = None,
        graph: bool = True,
    ) -> None:
        self.scenario = _load(scenario)
        self.seed, self.until, self.graph = seed, float(until), graph
        cfg = self.scenario.config
        p0 = cfg.reactor_poll_interval if poll_interval is None else poll_interval
        b0 = cfg.reactor_poll_batch_limit if batch_limit is None else batch_limit
        self.poll_interval = _slider(
            widgets.FloatSlider, float(p0), POLL_INTERVAL_BOUNDS, "poll P (s)", readout_format=".1f"
        )
        self.batch_limit = _slider(widgets.IntSlider, int(b0), BATCH_LIMIT_BOUNDS, "batch limit")
        self.summary = widgets.HTML()
        self.out = widgets.Output()
        self.figure: Figure | None = None
        super().__init__([widgets.HBox([self.poll_interval, self.batch_limit]), self.summary, self.out])
        self.poll_interval.observe(self._changed, names="value")
        self.batch_limit.observe(self._changed, names="value")
        self.update()

    def _changed(self, change) -> None:
        self.update()

    def run(self):
        """The seeded simulation at the sliders' settings, run to ``until``."""
        config = dataclasses.replace(
            self.scenario.config,
            reactor_poll_interval=float(self.poll_interval.value),
            reactor_poll_batch_limit=int(self.batch_limit.value),
        )
        sc = dataclasses.replace(self.scenario, config=config)
        store = sc.store if sc.store in ("memory", "duckdb") else "memory"
        sim = sc.build(seed=self.seed, store=store)
        if self.graph:
            for reactor in sorted({w.reactor for w in sc.workloads}):
                sim.runner.register_computation_graph(reactor, _router, name="router")
        sim.run(self.until)
        return sim

    def update(self) -> None:
        """Re-run and redraw (the sliders call this on every change)."""
        sim = self.sim = self.run()
        p = sim.config.reactor_poll_interval
        self.budget = latency_budget(sim)
        self.table = budget_table(sim, self.budget)
        u = poll_wait_uniformity(self.budget["poll_wait_s"], p)
        backlog = sum(w["backlog"] for w in watermarks(sim))
        p99 = float(np.percentile(self.budget["poll_wait_s"], 99)) if len(self.budget) else float("nan")
        self.stats = {
            **u,
            "poll_wait_p99_s": p99,
            "backlog": int(backlog),
            "db_path_total_s": float(self.table.loc["DB path (measured)", "total_s"]),
        }
        mean = "n/a" if u["mean_s"] is None else f"{u['mean_s'] * 1000:,.0f} ms"
        self.summary.value = (
            f"P = {p:g} s, batch {sim.config.reactor_poll_batch_limit}: {u['count']:,} executions, "
            f"mean poll wait {mean} (theory P/2 = {p * 500:,.0f} ms), "
            f"p99 {p99 * 1000:,.0f} ms, backlog at the end {backlog:,} firings"
        )
        with style():
            fig = new_figure((8.0, 8.0))
            ax1, ax2 = fig.subplots(2, 1, height_ratios=[3, 2])
        poll_wait_histogram(self.budget, p, ax=ax1)
        budget_bars(self.table, ax=ax2)
        self.figure = fig
        _show(self.out, fig)


def _takes_the_arguments_of(cls: Callable[_P, _R]) -> Callable[[Callable[..., _R]], Callable[_P, _R]]:
    """A decorator: the function takes ``cls``'s arguments, for the type checker
    and for :func:`inspect.signature` (so its keywords are written once, on the class)."""

    def decorate(fn: Callable[..., _R]) -> Callable[_P, _R]:
        returns = inspect.signature(fn).return_annotation
        fn.__signature__ = inspect.signature(cls).replace(return_annotation=returns)  # type: ignore[attr-defined]
        return fn

    return decorate


@_takes_the_arguments_of(LatencyExplorer)
def latency_explorer(scenario, **options) -> LatencyExplorer:
    """Build notebook 1's control over ``scenario`` (a Scenario or a TOML path);
    the sliders start at the scenario's settings unless given."""
    return LatencyExplorer(scenario, **options)
