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

from fanoutsim.kernel.sweeppick import none_line, swept, worst_by_setting

__all__ = [
    "seed_summary",
    "stream_shares",
    "knee_rate",
    "knee_interval",
    "backlog_growth",
    "setting_table",
    "recommend",
    "recommendation_line",
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


#: Below this many seeds a figure shows the seeds' range, not a t interval: with 2
#: or 3 seeds Student's t is 12.7 or 4.3, and the interval says more about t than the runs.
FEW_SEEDS = 5
SPREADS = ("ci", "range", "auto")


def seed_summary(
    df: pd.DataFrame, by: str | Iterable[str], metrics: str | Iterable[str], *, spread: str = "ci"
) -> pd.DataFrame:
    """Per group of ``by`` (the settings), over its seeds: for each metric
    ``<metric>`` (the mean), ``<metric>_lo`` and ``<metric>_hi``, and ``seeds``
    (the count). One row per group, sorted by ``by``. ``spread``: ``"ci"``, a 95%
    Student t confidence interval for the mean (equal to the mean with one
    seed); ``"range"``, the lowest and highest seed; ``"auto"``, the range when a
    group has fewer than :data:`FEW_SEEDS` seeds, else the interval. The
    result's ``attrs["spread"]`` says which."""
    by = [by] if isinstance(by, str) else list(by)
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    missing = [c for c in by + metrics if c not in df.columns]
    if missing:
        raise KeyError(f"no column(s) {', '.join(map(repr, missing))} in the sweep; columns: {', '.join(df.columns)}")
    if spread not in SPREADS:
        raise ValueError(f"spread must be one of {', '.join(SPREADS)}, got {spread!r}")
    groups = list(df.groupby(by, sort=True))
    if spread == "auto":
        spread = "range" if groups and min(len(g) for _, g in groups) < FEW_SEEDS else "ci"
    rows = []
    for key, grp in groups:
        key = key if isinstance(key, tuple) else (key,)
        row: dict[str, Any] = dict(zip(by, key))
        row["seeds"] = int(len(grp))
        for m in metrics:
            x = grp[m].astype(float).dropna().to_numpy()
            row[m], row[f"{m}_lo"], row[f"{m}_hi"] = _spread_of(x, spread)
        rows.append(row)
    out = pd.DataFrame(rows)
    out.attrs["spread"] = spread
    return out


def _spread_of(x: np.ndarray, spread: str) -> tuple[float, float, float]:
    """(mean, low, high) of one group's values under ``spread``."""
    if not x.size:
        return math.nan, math.nan, math.nan
    mean = float(x.mean())
    if spread == "range":
        return mean, float(x.min()), float(x.max())
    half = t_critical(x.size - 1) * float(x.std(ddof=1)) / math.sqrt(x.size) if x.size > 1 else 0.0
    return mean, mean - half, mean + half


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


def setting_table(
    df: pd.DataFrame,
    *,
    latency: str = "fire_to_dispatch_p99_s",
    interval: str = "reactor_poll_interval",
    batch: str = "reactor_poll_batch_limit",
) -> tuple[pd.DataFrame, list[str], list[str]]:
    """Each setting of the poll loop the sweep varied (``interval``, ``batch``
    or both) judged at its worst over every other grid key (``rate``,
    ``fetch_latency``, a fault's share: the conditions): ``latency`` (the mean
    over seeds), ``polls_per_s`` (the mean), ``backlog_max`` (the largest of
    any seed) and ``valid`` (every run). Returns the table, the settings and
    the conditions; ValueError when the sweep varied neither setting."""
    settings = swept(df, (interval, batch))
    if not settings:
        raise ValueError(
            f"the sweep varies neither {interval} nor {batch}, the settings it recommends; "
            f"add --grid {interval}=... (or {batch}=...)"
        )
    results = {latency: ("mean", "max"), "polls_per_s": ("mean", "max"), "backlog": ("max", "max")}
    table, conditions = worst_by_setting(df, settings, {**results, "valid": ("min", "min")})
    table = table.rename(columns={latency: "latency", "backlog": "backlog_max"})
    table["valid"] = table["valid"] >= 1.0
    return table, settings, conditions


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
    seed's backlog at most ``max_backlog`` firings and every seed valid — at
    every value of the other grid keys (:func:`setting_table`). The setting is
    the poll interval, the batch limit or both, as the sweep varied them. Ties
    go to the lower latency, then the larger batch limit (more headroom for
    bursts). Returns the setting, its numbers, ``candidates`` (how many
    settings met the bar), ``settings`` and ``conditions`` (the grid keys of
    each kind); raises ValueError when none does, or the sweep varied neither."""
    table, settings, conditions = setting_table(df, latency=latency, interval=interval, batch=batch)
    ok = table[(table["latency"] <= p99_budget_s) & (table["backlog_max"] <= max_backlog) & table["valid"]]
    if ok.empty:
        under = f" at every {', '.join(conditions)} swept" if conditions else ""
        raise ValueError(
            f"no setting keeps {latency} <= {p99_budget_s:g} s with a backlog <= {max_backlog:g}{under}; "
            f"widen the grid or relax the budget"
        )
    by, ascending = ["polls_per_s", "latency"], [True, True]
    if batch in settings:
        by, ascending = [*by, batch], [*ascending, False]
    best = ok.sort_values(by, ascending=ascending, kind="stable").iloc[0]
    tied: list[int] = []
    if batch in settings:
        same = ok[
            np.isclose(ok["polls_per_s"], best["polls_per_s"])
            & np.isclose(ok["latency"], best["latency"])
            & (ok[batch] != best[batch])
        ]
        tied = sorted(int(b) for b in same[batch])
    rec: dict[str, Any] = {}
    if interval in settings:
        rec[interval] = float(best[interval])
    if batch in settings:
        rec[batch] = int(best[batch])
    return {
        **rec,
        latency: float(best["latency"]),
        "polls_per_s": float(best["polls_per_s"]),
        "backlog_max": int(best["backlog_max"]),
        "candidates": int(len(ok)),
        "p99_budget_s": float(p99_budget_s),
        "max_backlog": max_backlog,
        "tied_batches": tied,
        "settings": settings,
        "conditions": conditions,
    }


RECOMMEND_P99_BUDGET_S = 1.5  # the budget recommendation_line applies by default (as notebook 6 does)
RECOMMEND_MAX_BACKLOG = 100  # firings left behind by a seed that still counts as keeping up


def recommendation_line(
    df: pd.DataFrame,
    p99_budget_s: float = RECOMMEND_P99_BUDGET_S,
    max_backlog: float = RECOMMEND_MAX_BACKLOG,
    scenario: Any = None,
) -> str:
    """:func:`recommend` as text (what ``fanoutsim sweep`` prints): the setting
    and its numbers, then the rule that chose it; ``recommendation: none: ...``
    with the reason when the sweep varied neither the poll interval nor the
    batch limit, or no setting met the bar. A setting the sweep did not vary
    is named with the ``scenario``'s value of it, when given."""
    interval, batch = "reactor_poll_interval", "reactor_poll_batch_limit"
    try:
        rec = recommend(df, p99_budget_s, max_backlog=max_backlog)
    except ValueError as exc:
        return none_line(str(exc))
    settings = df.groupby(rec["settings"]).ngroups
    chosen = [f"{interval} = {rec[interval]:g}"] if interval in rec else []
    chosen += [f"{batch} = {rec[batch]}"] if batch in rec else []
    kept = _kept(scenario, [k for k in (interval, batch) if k not in rec])
    tie = ""
    if rec["tied_batches"]:
        others = ", ".join(map(str, rec["tied_batches"]))
        tie = (
            f"; {batch} {others} gave the same p99 and poll rate here, and the larger limit wins the tie: "
            f"more headroom for a burst"
        )
    under = f" at every {', '.join(rec['conditions'])} of the grid (its worst)" if rec["conditions"] else ""
    return (
        f"recommendation (p99 fire -> dispatch <= {p99_budget_s:g} s, backlog <= {max_backlog:g}): "
        f"{', '.join(chosen)}{kept}: p99 {rec['fire_to_dispatch_p99_s']:.3f} s, "
        f"{rec['polls_per_s']:g} poll queries/s, max backlog {rec['backlog_max']}; "
        f"{rec['candidates']} of {settings} settings meet the bar{under}\n"
        f"  the rule: of the settings within the budget that keep up and are valid, the fewest poll queries "
        f"per second (the least database load), then the lowest p99"
        f"{', then the largest batch limit' if batch in rec else ''}{tie}"
    )


def _kept(scenario: Any, keys: list[str]) -> str:
    """`` (reactor_poll_batch_limit 100, as the scenario has it)`` for the settings not swept."""
    config = getattr(scenario, "config", None)
    named = [f"{k} {getattr(config, k)!r}" for k in keys if config is not None and hasattr(config, k)]
    return f" ({', '.join(named)}, as the scenario has it)" if named else ""
