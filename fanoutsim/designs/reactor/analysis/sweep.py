"""Reading a sweep (:func:`fanoutsim.sweep`): seed confidence intervals, the
backlog knee, a recommendation.

**The knee.** A subscription drains at most ``reactor_poll_batch_limit`` firings
per poll, one poll every ``reactor_poll_interval`` P: at most ``B / P`` firings
per second. Once the firing rate of its reactor and tenant exceeds that, its
backlog grows by the difference every second, without bound (until a TTL prune
deletes the tail). A scenario's workloads split the total rate between streams
``(reactor, tenant)``; the busiest stream that has a subscriber reaches ``B / P``
first, at the total rate :func:`knee_rate` returns.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "seed_summary",
    "stream_shares",
    "knee_rate",
    "knee_interval",
    "backlog_growth",
    "recommend",
    "t_critical",
]

# two-sided 95% Student t quantiles (0.975) for 1..30 degrees of freedom
_T975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)


def t_critical(dof: int) -> float:
    """The 0.975 quantile of Student's t with ``dof`` degrees of freedom (1.96 past 30)."""
    if dof < 1:
        return math.nan
    return _T975[dof - 1] if dof <= len(_T975) else 1.96


def seed_summary(df: pd.DataFrame, by: str | Iterable[str], metrics: str | Iterable[str]) -> pd.DataFrame:
    """Per group of ``by`` (the settings), over its seeds: for each metric
    ``<metric>`` (the mean), ``<metric>_lo`` and ``<metric>_hi`` (a 95% Student t
    confidence interval for the mean; equal to the mean with one seed), and
    ``seeds`` (the count). One row per group, sorted by ``by``."""
    by = [by] if isinstance(by, str) else list(by)
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    missing = [c for c in by + metrics if c not in df.columns]
    if missing:
        raise KeyError(f"no column(s) {', '.join(map(repr, missing))} in the sweep; columns: {', '.join(df.columns)}")
    rows = []
    for key, grp in df.groupby(by, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        row: dict[str, Any] = dict(zip(by, key))
        row["seeds"] = int(len(grp))
        for m in metrics:
            x = grp[m].astype(float).dropna().to_numpy()
            mean = float(x.mean()) if x.size else math.nan
            half = t_critical(x.size - 1) * float(x.std(ddof=1)) / math.sqrt(x.size) if x.size > 1 else 0.0
            row[m], row[f"{m}_lo"], row[f"{m}_hi"] = mean, mean - half, mean + half
        rows.append(row)
    return pd.DataFrame(rows)


def stream_shares(scenario) -> dict[tuple[str, str], float]:
    """``{(reactor, tenant): share of the total firing rate}`` of the scenario's
    (Poisson) workloads, for the streams that have at least one subscription."""
    total = sum(w.rate for w in scenario.workloads)
    subscribed = {(s.reactor, s.tenant) for s in scenario.subscriptions}
    shares: dict[tuple[str, str], float] = {}
    for w in scenario.workloads:
        if (w.reactor, w.tenant) in subscribed:
            shares[(w.reactor, w.tenant)] = shares.get((w.reactor, w.tenant), 0.0) + w.rate / total
    return shares


def knee_rate(scenario, batch_limit: int | None = None, poll_interval: float | None = None) -> float:
    """The total firing rate (per virtual second, split as the scenario's
    workloads split it) above which the busiest subscribed stream gets more
    than ``batch_limit / poll_interval`` firings per second, so its backlog
    grows without bound. Defaults: the scenario's own settings."""
    if isinstance(scenario, (str, bytes)) or hasattr(scenario, "__fspath__"):
        from fanoutsim.designs.reactor.scenario import load_scenario

        scenario = load_scenario(scenario, design="reactor")
    b = scenario.config.reactor_poll_batch_limit if batch_limit is None else batch_limit
    p = scenario.config.reactor_poll_interval if poll_interval is None else poll_interval
    shares = stream_shares(scenario)
    if not shares:
        return math.inf
    return (b / p) / max(shares.values())


def knee_interval(scenario, batch_limit: int | None = None, rate: float | None = None) -> float:
    """The knee seen from the other side: the poll interval above which the
    busiest subscribed stream, at the total firing rate ``rate``, gets more than
    ``batch_limit`` firings per poll, so its backlog grows without bound
    (:func:`knee_rate` solved for P). Defaults: the scenario's batch limit and
    rate; ``inf`` when no subscribed stream fires."""
    if isinstance(scenario, (str, bytes)) or hasattr(scenario, "__fspath__"):
        from fanoutsim.designs.reactor.scenario import load_scenario

        scenario = load_scenario(scenario, design="reactor")
    b = scenario.config.reactor_poll_batch_limit if batch_limit is None else batch_limit
    rate = sum(w.rate for w in scenario.workloads) if rate is None else rate
    busiest = rate * max(stream_shares(scenario).values(), default=0.0)
    return b / busiest if busiest > 0 else math.inf


def backlog_growth(
    scenario, rate: float | None = None, batch_limit: int | None = None, poll_interval: float | None = None
) -> float:
    """Firings per second by which the summed backlog grows at the total firing
    rate ``rate``: over the subscriptions, each stream's excess over
    ``batch_limit / poll_interval`` (0 below the knee). Defaults: the scenario's."""
    if isinstance(scenario, (str, bytes)) or hasattr(scenario, "__fspath__"):
        from fanoutsim.designs.reactor.scenario import load_scenario

        scenario = load_scenario(scenario, design="reactor")
    total = sum(w.rate for w in scenario.workloads)
    rate = total if rate is None else rate
    b = scenario.config.reactor_poll_batch_limit if batch_limit is None else batch_limit
    p = scenario.config.reactor_poll_interval if poll_interval is None else poll_interval
    shares = stream_shares(scenario)
    return sum(max(0.0, rate * shares.get((s.reactor, s.tenant), 0.0) - b / p) for s in scenario.subscriptions)


def recommend(
    df: pd.DataFrame,
    p99_budget_s: float,
    *,
    max_backlog: float,
    interval: str = "reactor_poll_interval",
    batch: str = "reactor_poll_batch_limit",
    latency: str = "fire_to_dispatch_p99_s",
) -> dict[str, Any]:
    """The cheapest setting (fewest polls per second: the least DB load) that
    keeps the mean over seeds of ``latency`` within ``p99_budget_s``, every
    seed's backlog at most ``max_backlog`` firings and every seed valid.
    Ties go to the lower latency, then the larger batch limit (more headroom
    for bursts). Returns the setting, its numbers and ``candidates`` (how many
    settings met the bar); raises ValueError when none does."""
    grp = df.groupby([interval, batch], sort=True)
    table = pd.DataFrame(
        {
            "latency": grp[latency].mean(),
            "polls_per_s": grp["polls_per_s"].mean(),
            "backlog_max": grp["backlog"].max(),
            "valid": grp["valid"].all(),
        }
    ).reset_index()
    ok = table[(table["latency"] <= p99_budget_s) & (table["backlog_max"] <= max_backlog) & table["valid"]]
    if ok.empty:
        raise ValueError(
            f"no setting keeps {latency} <= {p99_budget_s} s with a backlog <= {max_backlog}; "
            f"widen the grid or relax the budget"
        )
    best = ok.sort_values(["polls_per_s", "latency", batch], ascending=[True, True, False], kind="stable").iloc[0]
    same = ok[
        np.isclose(ok["polls_per_s"], best["polls_per_s"])
        & np.isclose(ok["latency"], best["latency"])
        & (ok[batch] != best[batch])
    ]
    return {
        interval: float(best[interval]),
        batch: int(best[batch]),
        latency: float(best["latency"]),
        "polls_per_s": float(best["polls_per_s"]),
        "backlog_max": int(best["backlog_max"]),
        "candidates": int(len(ok)),
        "p99_budget_s": float(p99_budget_s),
        "max_backlog": max_backlog,
        "tied_batches": sorted(int(b) for b in same[batch]),
    }


RECOMMEND_P99_BUDGET_S = 1.5  # the budget recommendation_line applies (as notebook 6 does)
RECOMMEND_MAX_BACKLOG = 100  # firings left behind by a seed that still counts as keeping up


def recommendation_line(
    df: pd.DataFrame, p99_budget_s: float = RECOMMEND_P99_BUDGET_S, max_backlog: float = RECOMMEND_MAX_BACKLOG
) -> str | None:
    """:func:`recommend` as one line of text (what ``fanoutsim sweep`` prints);
    None when the sweep did not vary both the poll interval and the batch limit."""
    interval, batch = "reactor_poll_interval", "reactor_poll_batch_limit"
    if interval not in df.columns or batch not in df.columns:
        return None
    settings = df.groupby([interval, batch]).ngroups
    try:
        rec = recommend(df, p99_budget_s, max_backlog=max_backlog)
    except ValueError as exc:
        return f"recommendation: none: {exc}"
    tie = ""
    if rec["tied_batches"]:
        others = ", ".join(map(str, rec["tied_batches"]))
        tie = (
            f"; {batch} {others} gave the same p99 and poll rate here, and the larger limit wins the tie: "
            f"more headroom for a burst"
        )
    return (
        f"recommendation (p99 fire -> dispatch <= {p99_budget_s:g} s, backlog <= {max_backlog:g}): "
        f"{interval} = {rec[interval]:g}, {batch} = {rec[batch]}: p99 {rec['fire_to_dispatch_p99_s']:.3f} s, "
        f"{rec['polls_per_s']:g} poll queries/s, max backlog {rec['backlog_max']}; "
        f"{rec['candidates']} of {settings} settings meet the bar\n"
        f"  the rule: of the settings within the budget that keep up and are valid, the fewest poll queries "
        f"per second (the least database load), then the lowest p99, then the largest batch limit{tie}"
    )
