"""The reactor's sweeps (:func:`fanoutsim.sweep`): a run's row, the grid keys
it takes besides its config fields, its figures and its recommendation."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from fanoutsim.kernel.design import SweepBudget, SweepKey, scale_workload_rates
from fanoutsim.kernel.validate import is_real

_LATENCY_STATS = ("p50", "p95", "p99", "mean")
SWEEP_COLUMNS = (
    *(f"fire_to_dispatch_{s}_s" for s in _LATENCY_STATS),
    *(f"fire_to_claim_{s}_s" for s in _LATENCY_STATS),
    "executions",
    "firings",
    "polls_per_s",
    "backlog",
    "lost",
    "extra_deliveries",
    "valid",
)


def sweep_row(sim, checked) -> dict:
    """One sweep run: latency percentiles of the subscription-dispatched
    executions (seconds; NaN when none), executions made, firings logged, poll
    queries per virtual second, the backlog past the watermarks at the end and
    the checker's totals. Read from the store's rows; the same figures as
    :func:`~.analysis.delivery.latency_frame` and ``watermarks`` give (tested)."""
    from .analysis.delivery import backlog_total, latency_columns, latency_frame, metric_total, percentiles

    got = latency_columns(sim.store)
    if got is None:  # a context the engine did not write: the frame reads it
        executions = sim.executions()
        lat = latency_frame(sim, executions=executions)
        got = len(executions), lat["fire_to_dispatch"], lat["fire_to_claim"]
    n_executions, *latencies = got
    metrics = sim.metrics()
    row: dict = {}
    for col, values in zip(("fire_to_dispatch", "fire_to_claim"), latencies):
        stats = percentiles(values)
        for s in _LATENCY_STATS:
            row[f"{col}_{s}_s"] = math.nan if stats[s] is None else stats[s]
    row["executions"] = int(n_executions)
    row["firings"] = int(metric_total(metrics, "fanoutsim_reactor_firings_total"))
    row["polls_per_s"] = metric_total(metrics, "fanoutsim_reactor_poll_queries_total") / sim.now
    row["backlog"] = backlog_total(sim.store)
    row["lost"] = int(checked.total["lost"])
    row["extra_deliveries"] = int(checked.total["extra_deliveries"])
    row["valid"] = bool(checked.valid)
    return row


BUDGET = SweepBudget("the p99 fire -> dispatch latency, the mean over seeds,", default=1.5)


def sweep_figures(df, scenario, out: Path, budget: float | None = None) -> list[Any]:
    """A sweep's figures (:func:`~.plots.sweep.save_sweep_figures`), the
    recommendation's drawn against ``budget`` (default :data:`BUDGET`'s)."""
    from .plots.sweep import save_sweep_figures

    return save_sweep_figures(df, scenario, out, p99_budget_s=BUDGET.default if budget is None else budget)


def recommend(df, scenario=None, budget: float | None = None) -> str:
    """The poll interval and batch limit to choose from a sweep that varied
    either or both (:func:`~.analysis.sweep.recommendation_line`): the
    cheapest in poll queries whose p99 fire -> dispatch stays within
    ``budget`` seconds (default 1.5) and that keeps up, at every value of the
    other grid keys; or ``recommendation: none: ...`` and why."""
    from .analysis.sweep import recommendation_line

    budget = BUDGET.default if budget is None else BUDGET.check(budget)
    return recommendation_line(df, budget, scenario=scenario)


def scale_rate(scenario, rate: float):
    """The scenario with every workload scaled so that their rates sum to ``rate``
    (a scenario that replays a recording cannot be scaled)."""
    if not is_real(rate) or not math.isfinite(rate) or rate <= 0:
        raise ValueError("the total firing rate must be a finite number of firings per virtual second > 0")
    if not scenario.workloads:
        raise ValueError("the scenario has no [[workload]] to scale")
    if getattr(scenario, "replays", ()):
        raise ValueError(
            "the scenario replays a recorded [[workload]], whose rate is the recording's; "
            "sweep a scenario with Poisson workloads only"
        )
    return scale_workload_rates(scenario, rate)


def _check_fetch_latency(value) -> None:
    if not is_real(value) or not math.isfinite(value) or value < 0:
        raise ValueError("the store round trip must be a finite number of seconds >= 0")


def _set_fetch_latency(sim, value) -> None:
    sim.fetch_latency = float(value)  # read by the poll loop at every drain


SWEEP_KEYS = {
    "rate": SweepKey(
        "total firings per virtual second: every [[workload]] is scaled by one factor so that "
        "their rates sum to it (the split between reactors and tenants is kept; a scenario that "
        "replays a recording cannot be scaled)",
        scenario=scale_rate,
    ),
    "fetch_latency": SweepKey(
        "the Simulation's store round trip between a poll's fetch and its drain, seconds (see fanoutsim.Simulation)",
        sim=_set_fetch_latency,
        check=_check_fetch_latency,
    ),
}
