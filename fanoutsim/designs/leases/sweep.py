"""The leases' sweeps (:func:`fanoutsim.sweep`): a run's row, its per-consumer
columns, the grid keys it takes besides its config fields, its figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fanoutsim.kernel.design import SweepKey, scale_workload_rates
from fanoutsim.kernel.designkit import checked_columns, latency_columns, unit_latency_columns

_STATS = ("p50", "p99", "mean")
_TOTALS = ("published", "delivered", "duplicates", "dead_lettered", "pending", "lost")  # the checker's
SWEEP_COLUMNS = (*(f"publish_to_ack_{s}_s" for s in _STATS), *_TOTALS, "valid")
UNIT_STATS = ("p50", "p99")  # per consumer: publish_to_ack_<stat>_s[<consumer>]
UNIT_COLUMNS = tuple(f"publish_to_ack_{s}_s" for s in UNIT_STATS)


def sweep_row(sim, checked) -> dict:
    """One sweep run: publish -> ack latency over every (consumer, event) acked
    (seconds; NaN when none), and the checker's totals."""
    from .analysis import event_outcomes

    ev = event_outcomes(sim)
    acked = ev[ev["outcome"] == "acked"]
    return {
        **latency_columns("publish_to_ack", acked["latency_s"], _STATS),
        **checked_columns(checked, _TOTALS),
        **unit_latency_columns("publish_to_ack", acked, "consumer", UNIT_STATS),
    }


def sweep_figures(df, scenario, out: Path) -> list[Any]:
    """A sweep's figures: each of its headline columns against the first numeric
    grid key, one line per value of the second."""
    from fanoutsim.kernel.plotting import save_sweep_lines

    return save_sweep_lines(
        df, ("publish_to_ack_p99_s", "publish_to_ack_p50_s", "duplicates", "dead_lettered", "lost"), out
    )


SWEEP_KEYS = {
    "rate": SweepKey(
        "total events published per virtual second: every [[workload]] is scaled "
        "by one factor so that their rates sum to it",
        scenario=scale_workload_rates,
    )
}
