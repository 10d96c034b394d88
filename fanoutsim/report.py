"""Plain-text reports, one per design (each lives in its design package)."""

from fanoutsim.designs.leases.report import format_leases_check, format_leases_report, leases_report
from fanoutsim.designs.outbox.report import format_outbox_check, format_outbox_report
from fanoutsim.designs.reactor.report import format_report

__all__ = [
    "format_report",
    "format_outbox_report",
    "format_outbox_check",
    "leases_report",
    "format_leases_report",
    "format_leases_check",
]
