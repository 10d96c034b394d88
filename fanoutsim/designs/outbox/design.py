"""The outbox design as the cross-design tools see it (see :mod:`fanoutsim.kernel.design`)."""
from __future__ import annotations

from pathlib import Path

from fanoutsim.kernel.design import Design
from fanoutsim.kernel.faults.points import OUTBOX_CRASH_POINTS

from .config import OutboxConfig
from .scenario import OUTBOX_FAULT_KINDS


def _parse(data: dict, source: str = "<scenario>", default_name: str = "scenario"):
    from .scenario import parse_outbox_scenario

    return parse_outbox_scenario(data, source=source, default_name=default_name)


def _check(sim):
    from .checker import check_outbox

    return check_outbox(sim)


def _report(sim, name: str | None = None, checked=None) -> dict:
    from .analysis import outbox_report

    return outbox_report(sim, name=name, checked=checked if checked is not None else _check(sim))


def _format_report(report: dict) -> str:
    from .report import format_outbox_report

    return format_outbox_report(report)


def _format_check(checked) -> str:
    from .report import format_outbox_check

    return format_outbox_check(checked)


def _tables(sim) -> dict:
    return {"outbox": sim.outbox(), "cursors": sim.cursors(), "parked": sim.parked()}


def _figures(sim, out: Path) -> list:
    from .plots import save_outbox_figures

    return save_outbox_figures(sim, out)


DESIGN = Design(
    name="outbox",
    title="transactional outbox with NOTIFY hints, safety poll and per-consumer cursors (Subspace)",
    config_type=OutboxConfig,
    crash_points=OUTBOX_CRASH_POINTS,
    fault_kinds=OUTBOX_FAULT_KINDS,
    parse_scenario=_parse,
    check=_check,
    report=_report,
    format_report=_format_report,
    format_check=_format_check,
    tables=_tables,
    figures=_figures,
)
