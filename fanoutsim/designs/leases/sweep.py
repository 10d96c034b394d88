"""The leases' sweeps (:func:`fanoutsim.sweep`): a run's row, its per-consumer
columns, the grid keys it takes besides its config fields, its figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fanoutsim.kernel.design import SweepBudget, SweepKey, scale_workload_rates
from fanoutsim.kernel.designkit import checked_columns, latency_columns, unit_latency_columns

_STATS = ("p50", "p99", "mean")
_TOTALS = ("published", "delivered", "duplicates", "dead_lettered", "pending", "lost")  # the checker's
SWEEP_COLUMNS = (*(f"publish_to_ack_{s}_s" for s in _STATS), *_TOTALS, "valid")
UNIT_STATS = ("p50", "p99")  # per consumer: publish_to_ack_<stat>_s[<consumer>]
UNIT_COUNTS = ("delivered", "duplicates")  # per consumer too: what a lease length's duplicate rate reads
UNIT_COLUMNS = (*(f"publish_to_ack_{s}_s" for s in UNIT_STATS), *UNIT_COUNTS)


def sweep_row(sim, checked) -> dict:
    """One sweep run: publish -> ack latency over every (consumer, event) acked
    (seconds; NaN when none), and the checker's totals; per consumer, its
    latencies and its ``delivered`` and ``duplicates``."""
    from .analysis import event_outcomes

    ev = event_outcomes(sim)
    acked = ev[ev["outcome"] == "acked"]
    return {
        **latency_columns("publish_to_ack", acked["latency_s"], _STATS),
        **checked_columns(checked, _TOTALS),
        **unit_latency_columns("publish_to_ack", acked, "consumer", UNIT_STATS),
        **_unit_counts(checked.per_unit),
    }


def _unit_counts(per_unit) -> dict:
    """``delivered[<consumer>]`` and ``duplicates[<consumer>]`` (a consumer's
    lives summed: one retired and registered again is one reader)."""
    counts = per_unit.groupby("consumer", sort=True)[list(UNIT_COUNTS)].sum()
    return {f"{c}[{name}]": int(row[c]) for name, row in counts.iterrows() for c in UNIT_COUNTS}


LEASE_SUFFIX = "lease_seconds"  # a grid key ending so is a lease length recommend chooses
# (fanoutsim.sweep refuses [leases].lease_seconds when every consumer sets its own, so such a key
# that reaches a table here did set some consumer's lease)
RATE = "duplicates_per_delivered"  # duplicates / delivered, of a run: what the budget bounds
BUDGET = SweepBudget(
    "the duplicates per event delivered, the mean over seeds,", default=0.01, unit="", low_included=True, high=1.0
)


def lease_keys(df) -> list[str]:
    """The grid keys that are lease lengths: ``consumers.<name>.lease_seconds``,
    or ``lease_seconds`` (``leases.lease_seconds``) where some consumer takes that default."""
    from fanoutsim.kernel.sweeppick import grid_keys

    return [k for k in grid_keys(df) if k.rsplit(".", 1)[-1] == LEASE_SUFFIX]


def _readers(df, leases: list[str]) -> list[str] | None:
    """The consumers whose lease lengths ``leases`` are, when the table counts
    each of them on its own (``duplicates[<name>]``); None: read the totals."""
    names = [k.split(".")[1] for k in leases if k.startswith("consumers.") and k.count(".") == 2]
    if len(names) != len(leases) or any(f"duplicates[{n}]" not in df.columns for n in names):
        return None
    return names


def with_duplicate_rate(df, readers: list[str] | None = None):
    """The table with :data:`RATE`, each run's duplicates per event delivered:
    the worst of ``readers``' own (each consumer's duplicates over its
    deliveries), or over every consumer (None); NaN where none was delivered."""
    import pandas as pd

    out = df.copy()
    pairs = [("duplicates", "delivered")]
    if readers is not None:
        pairs = [(f"duplicates[{n}]", f"delivered[{n}]") for n in readers]
    rates = [df[d] / df[n].where(df[n] > 0) for d, n in pairs]
    out[RATE] = rates[0] if len(rates) == 1 else pd.concat(rates, axis=1).max(axis=1, skipna=False)
    return out


def _rate_words(readers: list[str] | None) -> str:
    return "duplicates per event delivered" + (f" to {', '.join(readers)}" if readers else "")


def sweep_figures(df, scenario, out: Path, budget: float | None = None) -> list[Any]:
    """A sweep's figures: each of its headline columns against the first numeric
    grid key, one line per value of the second, and, when the sweep varied a
    lease length, the duplicates per event delivered (:func:`with_duplicate_rate`)
    with the ``budget`` line (default :data:`BUDGET`'s)."""
    from fanoutsim.kernel.plotting import save_sweep_lines

    columns = ("publish_to_ack_p99_s", "publish_to_ack_p50_s", "duplicates", "dead_lettered", "lost")
    leases = lease_keys(df)
    if not leases:
        return save_sweep_lines(df, columns, out)
    bar = BUDGET.default if budget is None else budget
    rated = with_duplicate_rate(df, _readers(df, leases))
    return save_sweep_lines(rated, (RATE, *columns), out, bars={RATE: (bar, f"target {bar:g}")})


def recommend(df, scenario=None, budget: float | None = None) -> str:
    """The lease length to choose from a sweep that varied one (a key ending in
    ``lease_seconds``, ``consumers.<name>.lease_seconds``): the shortest — a
    worker that dies holding a lease delays its event by the whole lease —
    whose duplicates per event delivered to that consumer (its own count:
    :func:`with_duplicate_rate`), the mean over seeds, stay at most ``budget``
    (default 0.01: one in a hundred), with every run valid — at every value of
    the other grid keys (a handler's run time, a rate: its worst). Ties go to
    the lower p99 publish -> ack. ``recommendation: none: ...`` and why when
    the sweep varied no lease length or none met the target."""
    from fanoutsim.kernel.sweeppick import none_line, worst_by_setting

    budget = BUDGET.default if budget is None else BUDGET.check(budget)
    leases = lease_keys(df)
    if not leases:
        return none_line(
            f"the sweep varies no lease length, the setting it recommends; add "
            f"--grid consumers.<name>.{LEASE_SUFFIX}=..."
        )
    readers = _readers(df, leases)
    p99 = "publish_to_ack_p99_s"
    results = {RATE: ("mean", "max"), p99: ("mean", "max"), "valid": ("min", "min")}
    table, conditions = worst_by_setting(with_duplicate_rate(df, readers), leases, results)
    under = f" at every {', '.join(conditions)} of the grid (its worst)" if conditions else ""
    ok = table[(table[RATE] <= budget) & (table["valid"] >= 1.0)]
    if ok.empty:
        return none_line(
            f"no lease length keeps the {_rate_words(readers)} <= {budget:g}{under}; "
            f"try longer leases or relax the target"
        )
    best = ok.sort_values([*leases, p99], kind="stable").iloc[0]
    chosen = ", ".join(f"{k} = {best[k]:g}" for k in leases)
    return (
        f"recommendation ({_rate_words(readers)} <= {budget:g}): {chosen}: {best[RATE]:.4f} duplicates "
        f"per event delivered, p99 publish -> ack {best[p99]:.3f} s (every consumer); {len(ok)} of "
        f"{len(table)} settings meet the target{under}\n"
        f"  the rule: of the lease lengths within the target whose runs are valid, the shortest (a worker "
        f"that dies holding a lease delays its event by the whole lease), then the lowest p99"
    )


SWEEP_KEYS = {
    "rate": SweepKey(
        "total events published per virtual second: every [[workload]] is scaled "
        "by one factor so that their rates sum to it",
        scenario=scale_workload_rates,
    )
}
