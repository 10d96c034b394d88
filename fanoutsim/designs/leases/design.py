"""The leased-consumer design as the cross-design tools see it (see :mod:`fanoutsim.kernel.design`)."""
from __future__ import annotations

from pathlib import Path

from fanoutsim.kernel.design import Design
from fanoutsim.kernel.faults.points import LEASE_CRASH_POINTS

from .config import LeaseConfig
from .scenario import LEASE_FAULT_KINDS


def _parse(data: dict, source: str = "<scenario>", default_name: str = "scenario"):
    from .scenario import parse_lease_scenario

    return parse_lease_scenario(data, source=source, default_name=default_name)


def _check(sim):
    from .checker import check_leases

    return check_leases(sim)


def _report(sim, name: str | None = None, checked=None) -> dict:
    from .report import leases_report

    return leases_report(sim, name=name, checked=checked if checked is not None else _check(sim))


def _format_report(report: dict) -> str:
    from .report import format_leases_report

    return format_leases_report(report)


def _format_check(checked) -> str:
    from .report import format_leases_check

    return format_leases_check(checked)


def _tables(sim) -> dict:
    return {"events": sim.events(), "checkpoints": sim.checkpoints(),
            "dead_letters": sim.dead_letters(), "consumers": sim.consumers()}


def _figures(sim, out: Path) -> list:
    from .plots import save_leases_figures

    return list(save_leases_figures(sim, out))


DESIGN = Design(
    name="leases",
    title="leased durable consumers with ack/nack, dead letters and retention fences (RiffDB)",
    config_type=LeaseConfig,
    crash_points=LEASE_CRASH_POINTS,
    fault_kinds=LEASE_FAULT_KINDS,
    parse_scenario=_parse,
    check=_check,
    report=_report,
    format_report=_format_report,
    format_check=_format_check,
    tables=_tables,
    figures=_figures,
)
