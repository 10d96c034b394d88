"""The outbox's sweeps (:func:`fanoutsim.sweep`): a run's row, its per-consumer
columns, the grid keys it takes besides its config fields, its figures."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from fanoutsim.kernel.design import SweepKey, scale_workload_rates
from fanoutsim.kernel.designkit import checked_columns, latency_columns, unit_latency_columns

_STATS = ("p50", "p99", "mean", "max")
_TOTALS = ("committed", "delivered", "extra_deliveries", "parked", "pending", "lost")  # the checker's
SWEEP_COLUMNS = (*(f"commit_to_handled_{s}_s" for s in _STATS), "hinted_share", *_TOTALS, "valid")
UNIT_STATS = ("p50", "p99")  # per consumer: commit_to_handled_<stat>_s[<consumer>]
UNIT_COLUMNS = tuple(f"commit_to_handled_{s}_s" for s in UNIT_STATS)


def sweep_row(sim, checked) -> dict:
    """One sweep run: commit -> first handled latency over every (consumer, row)
    handled (seconds; NaN when none), ``hinted_share`` — the share of those
    (consumer, row) pairs whose row's own hint reached the listener (NaN when
    none was handled) — and the checker's totals. The latencies and the share
    are :func:`~fanoutsim.designs.outbox.analysis.latency_frame`'s."""
    from .analysis import latency_frame

    lat = latency_frame(sim)
    return {
        **latency_columns("commit_to_handled", lat["latency_s"], _STATS),
        "hinted_share": float(lat["hinted"].mean()) if len(lat) else math.nan,
        **checked_columns(checked, _TOTALS),
        **unit_latency_columns("commit_to_handled", lat, "consumer", UNIT_STATS),
    }


def sweep_figures(df, scenario, out: Path) -> list[Any]:
    """A sweep's figures: each of its headline columns against the first numeric
    grid key, one line per value of the second."""
    from fanoutsim.kernel.plotting import save_sweep_lines

    return save_sweep_lines(df, ("commit_to_handled_p99_s", "commit_to_handled_p50_s", "extra_deliveries", "lost"), out)


SWEEP_KEYS = {
    "rate": SweepKey(
        "total commits per virtual second: every [[workload]] is scaled by one factor so that their rates sum to it",
        scenario=scale_workload_rates,
    )
}
