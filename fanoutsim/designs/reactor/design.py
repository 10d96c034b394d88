"""The reactor design as the cross-design tools see it (see :mod:`fanoutsim.kernel.design`)."""
from __future__ import annotations

import json
from pathlib import Path

from fanoutsim.kernel.design import Design
from fanoutsim.kernel.faults.plan import KINDS
from fanoutsim.kernel.faults.points import REACTOR_CRASH_POINTS

from .config import SchedulerConfig


def _parse(data: dict, source: str = "<scenario>", default_name: str = "scenario"):
    from .scenario import parse_reactor_scenario

    return parse_reactor_scenario(data, source=source, default_name=default_name)


def _check(sim):
    from .checker import check

    return check(sim)


def _report(sim, name: str | None = None, checked=None) -> dict:
    from .analysis.delivery import delivery_report

    report = delivery_report(sim, name=name)
    report["check"] = (checked if checked is not None else _check(sim)).total
    return report


def _format_report(report: dict) -> str:
    from .report import format_report

    return format_report(report)


def _format_check(checked) -> str:
    from .checker import format_check

    return format_check(checked)


def _tables(sim) -> dict:
    executions = sim.executions()
    executions["context"] = [json.dumps(c, separators=(",", ":")) for c in executions["context"]]
    return {"firings": sim.firings(), "executions": executions, "subscriptions": sim.subscriptions()}


def _figures(sim, out: Path) -> list:
    from .plots.delivery import save_report_figures

    return save_report_figures(sim, out)


DESIGN = Design(
    name="reactor",
    title="reactor -> workflow subscriptions with timestamp watermarks (Cloacina)",
    config_type=SchedulerConfig,
    crash_points=REACTOR_CRASH_POINTS,
    fault_kinds=tuple(KINDS),
    parse_scenario=_parse,
    check=_check,
    report=_report,
    format_report=_format_report,
    format_check=_format_check,
    tables=_tables,
    figures=_figures,
)
