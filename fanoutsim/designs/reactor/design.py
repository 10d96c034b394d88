"""The reactor design as the cross-design tools see it (see :mod:`fanoutsim.kernel.design`)."""

from __future__ import annotations

import json
import math

from fanoutsim.kernel.design import Design, SweepKey, lazy, scale_workload_rates
from fanoutsim.kernel.validate import is_real

from .causes import CAUSES
from .causes import expected as _expected
from .config import SchedulerConfig
from .faults import FAULTS
from .roles import ROLES
from .scenario import SCHEMA
from .serve import WRITE_FIELDS, open_realtime, status_of, write
from .story import backlog as _backlog
from .story import story as _explain
from .tables import PART


def _check(sim):
    from .checker import check

    return check(sim)


def _report(sim, name: str | None = None, checked=None) -> dict:
    from .analysis.delivery import delivery_report

    report = delivery_report(sim, name=name)
    report["check"] = (checked if checked is not None else _check(sim)).total
    return report


def _tables(sim) -> dict:
    executions = sim.executions()
    executions["context"] = [json.dumps(c, separators=(",", ":")) for c in executions["context"]]
    firings = sim.firings()  # the decoded payload as JSON text beside its bytes
    firings["sources"] = [None if c is None else json.dumps(c, separators=(",", ":")) for c in firings["sources"]]
    return {"firings": firings, "executions": executions, "subscriptions": sim.subscriptions()}


# -- sweeps -------------------------------------------------------------------------
def _sweep_recommend(df, scenario) -> str | None:
    from .analysis.sweep import recommendation_line

    return recommendation_line(df)


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


def _sweep_row(sim, checked) -> dict:
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


# -- the wall clock (fanoutsim serve / fire / write / status) -------------------------
DESIGN = Design(
    name="reactor",
    title="reactor -> workflow subscriptions with timestamp watermarks (Cloacina)",
    config_type=SchedulerConfig,
    crash_points=FAULTS.points,
    fault_kinds=FAULTS.kind_names,
    parse_scenario=lazy(f"{__package__}.scenario", "parse_reactor_scenario"),
    scenario_schema=SCHEMA,
    check=_check,
    report=_report,
    format_report=lazy(f"{__package__}.report", "format_report"),
    format_check=lazy(f"{__package__}.checker", "format_check"),
    tables=_tables,
    figures=lazy(f"{__package__}.plots.delivery", "save_report_figures"),
    config_table="config",
    sweep_columns=SWEEP_COLUMNS,
    sweep_row=_sweep_row,
    sweep_figures=lazy(f"{__package__}.plots.sweep", "save_sweep_figures"),
    sweep_recommend=_sweep_recommend,
    sweep_keys=SWEEP_KEYS,
    realtime=open_realtime,
    write=write,
    write_fields=WRITE_FIELDS,
    status=status_of,
    roles=ROLES.help,
    store_part=PART,
    explain=_explain,
    backlog=_backlog,
    backlog_name="pending",
    causes=CAUSES,
    expected=_expected,
)
