"""The outbox's sweeps (:func:`fanoutsim.sweep`): a run's row, its per-consumer
columns, the grid keys it takes besides its config fields, its figures."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from fanoutsim.kernel.design import SweepBudget, SweepKey, scale_workload_rates
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


SAFETY_POLL = "safety_poll_interval"  # the setting recommend chooses
BUDGET = SweepBudget("the p99 commit -> handled latency, the mean over seeds,", default=2.0)


def sweep_figures(df, scenario, out: Path, budget: float | None = None) -> list[Any]:
    """A sweep's figures: each of its headline columns against the first numeric
    grid key, one line per value of the second; the p99's with the ``budget``
    line (default :data:`BUDGET`'s) when the sweep varied the safety poll."""
    from fanoutsim.kernel.plotting import save_sweep_lines

    bars = {}
    if SAFETY_POLL in df.columns:
        bar = BUDGET.default if budget is None else budget
        bars["commit_to_handled_p99_s"] = (bar, f"budget {bar:g} s")
    columns = ("commit_to_handled_p99_s", "commit_to_handled_p50_s", "extra_deliveries", "lost")
    return save_sweep_lines(df, columns, out, bars=bars)


def recommend(df, scenario=None, budget: float | None = None) -> str:
    """The safety poll to choose from a sweep that varied ``safety_poll_interval``:
    the longest (the fewest reads that hints did not ask for: the least
    database load) whose p99 commit -> handled latency, the mean over seeds,
    stays within ``budget`` seconds (default 2) with nothing lost and every run
    valid — at every value of the other grid keys (a share of lost hints, a
    rate: its worst). Ties go to the lower p99. ``recommendation: none: ...``
    and why when the sweep did not vary the safety poll or no value met the bar."""
    from fanoutsim.kernel.sweeppick import none_line, worst_by_setting

    budget = BUDGET.default if budget is None else BUDGET.check(budget)
    if SAFETY_POLL not in df.columns:
        return none_line(
            f"the sweep does not vary {SAFETY_POLL}, the setting it recommends; add --grid {SAFETY_POLL}=..."
        )
    p99 = "commit_to_handled_p99_s"
    results = {p99: ("mean", "max"), "lost": ("max", "max"), "valid": ("min", "min")}
    table, conditions = worst_by_setting(df, [SAFETY_POLL], results)
    under = f" at every {', '.join(conditions)} of the grid (its worst)" if conditions else ""
    ok = table[(table[p99] <= budget) & (table["lost"] == 0) & (table["valid"] >= 1.0)]
    if ok.empty:
        return none_line(
            f"no {SAFETY_POLL} keeps the p99 commit -> handled <= {budget:g} s with nothing lost{under}; "
            f"try shorter safety polls or relax the budget"
        )
    best = ok.sort_values([SAFETY_POLL, p99], ascending=[False, True], kind="stable").iloc[0]
    return (
        f"recommendation (p99 commit -> handled <= {budget:g} s, nothing lost): {SAFETY_POLL} = "
        f"{best[SAFETY_POLL]:g}: p99 {best[p99]:.3f} s; {len(ok)} of {len(table)} settings meet the bar{under}\n"
        f"  the rule: of the safety polls within the budget that lose nothing and are valid, the longest "
        f"(the fewest reads no hint asked for: the least database load)"
    )


SWEEP_KEYS = {
    "rate": SweepKey(
        "total commits per virtual second: every [[workload]] is scaled by one factor so that their rates sum to it",
        scenario=scale_workload_rates,
    )
}
