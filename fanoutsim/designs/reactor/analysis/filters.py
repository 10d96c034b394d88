"""CEL filters: what they cut, what they cost, and what a broken one does.

**Selectivity** is the share of a stream's firings a subscription's filter
passes. It scales the *dispatch* side — executions inserted, executor load, the
wait for a worker — but not the *poll* side: the poll loop reads every firing
past the watermark, filtered out or not, and a batch limit counts firings
read, not dispatched. So under a burst the watermark lags the same for every
filter, while the fire -> claim lag (the workflow starting) grows with
what the filter lets through once the executor saturates.

**Errors.** An evaluation error (a missing field, a null compared with a
number) is ``predicate_error_policy``: ``skip`` counts it and treats the
firing as filtered out (the watermark advances), ``hold`` keeps the watermark
on that firing and retries it each poll; the ``predicate_error_limit``-th
consecutive error dead-letters it (advance, mark the subscription degraded).
A filter that names an unknown variable or does not parse is refused at
subscribe time with :class:`~fanoutsim.InvalidPredicate`; a misspelt *field*
(``payload.quote.prcie``) parses, and fails on every firing instead.

Readers (:func:`subscriber_lag`, :func:`poll_lag`, :func:`quote_rates`,
:func:`predicate_verdicts`) read tables; experiments
(:func:`filter_run`, :func:`selectivity_sweep`, :func:`error_policy_table`)
replay a window of a recorded workload (:mod:`fanoutsim.designs.reactor.replay`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from fanoutsim.designs.reactor.analysis.delivery import latency_frame, metric_total, percentiles
from fanoutsim.designs.reactor.config import SchedulerConfig
from fanoutsim.designs.reactor.predicate import InvalidPredicate, compile_predicate
from fanoutsim.kernel.timeutil import US

__all__ = [
    "quote_rates",
    "filter_run",
    "poll_lag",
    "subscriber_lag",
    "selectivity_sweep",
    "error_policy_table",
    "predicate_verdicts",
]


def quote_rates(frame: pd.DataFrame, bin_s: float = 900.0, by: str = "region") -> pd.DataFrame:
    """A recording's rate: quotes per second in bins of ``bin_s`` recording
    seconds, one column per value of ``by``; indexed by the bin's start in hours."""
    if not bin_s > 0:
        raise ValueError(f"bin_s must be > 0, got {bin_s!r}")
    b = (frame["t"] // bin_s).astype("int64")
    counts = frame.groupby([b, frame[by]]).size().unstack(fill_value=0)
    full = np.arange(0, int(np.ceil(frame["t"].max() / bin_s)) if len(frame) else 0)
    counts = counts.reindex(full, fill_value=0)
    counts.index = counts.index * bin_s / 3600.0
    counts.index.name = "hour"
    counts.columns.name = by
    return counts / bin_s


def filter_run(
    frame: pd.DataFrame,
    when: str | None,
    *,
    start: float,
    stop: float,
    speed: float = 1.0,
    tenant: str = "acme",
    policy: str = "skip",
    error_limit: int = 5,
    batch_limit: int = 100,
    workers: int = 4,
    duration: float = 0.0,
    poll_interval: float = 1.0,
    drain_s: float = 60.0,
    seed: int = 0,
    store: str = "memory",
) -> Any:
    """One seeded run: a window ``[start, stop)`` of a recording replayed at
    ``speed`` into reactor ``pricing_reactor`` (each row in its ``tenant``
    column's tenant), one subscription ``watcher`` in ``tenant`` with filter
    ``when``, under ``predicate_error_policy=policy``. The workflow runs for
    ``duration`` s on ``workers`` executor workers. Runs ``drain_s`` past the
    last firing and returns the Simulation."""
    from fanoutsim.designs.reactor.simulation import Simulation

    cfg = SchedulerConfig(
        predicate_error_policy=policy,
        predicate_error_limit=error_limit,
        reactor_poll_batch_limit=batch_limit,
        executor_workers=workers,
        reactor_poll_interval=poll_interval,
    )
    sim = Simulation(config=cfg, seed=seed, store=store)
    sim.runner.register_workflow("watcher", duration=duration)
    sim.runner.subscribe_workflow_to_reactor("pricing_reactor", "watcher", tenant=tenant, when=when)
    replay = sim.add_replay(frame, "pricing_reactor", tenant="tenant", speed=speed, start=start, stop=stop)
    sim.run(until=(replay.last_at or 0.0) + drain_s)
    return sim


def poll_lag(sim, subscription: str | None = None) -> pd.Series:
    """Per logged firing of the subscription's stream (the only subscription
    by default): seconds from its row committing until the watermark first
    reached its ``fired_at`` — how far behind the poll loop was, whether the
    filter passed it or not. NaN where the watermark never got there."""
    from fanoutsim.designs.reactor.analysis.faults import _subscription

    sub = _subscription(sim, subscription)
    tr = sim.trace()
    hist = tr.history
    hist = hist[
        (hist["reactor_name"] == sub["reactor_name"])
        & (hist["tenant_id"] == sub["tenant_id"])
        & hist["logged_at"].notna()
    ]
    wm = tr[(tr["kind"] == "watermark") & (tr["subscription"] == sub["id"])]
    values = np.maximum.accumulate(wm["detail"].astype("int64").to_numpy()) if len(wm) else np.empty(0, "int64")
    times = wm["t"].to_numpy(dtype="int64")
    fired = hist["fired_at"].to_numpy(dtype="int64")
    logged = hist["logged_at"].to_numpy(dtype="int64")
    idx = np.searchsorted(values, fired, side="left")
    passed = np.where(idx < len(values), times[np.minimum(idx, max(len(times) - 1, 0))] if len(times) else 0, -1)
    lag = np.where(passed >= 0, (passed - logged) / US, np.nan)
    return pd.Series(np.maximum(lag, 0.0), index=hist["firing"].to_numpy(), name="poll_lag_s")


def subscriber_lag(sim, subscription: str | None = None) -> dict[str, Any]:
    """One subscription's traffic and lag: ``firings`` of its stream,
    ``dispatched``, ``selectivity`` (their ratio), ``dispatch_per_s`` (over
    the replay), ``poll_lag_p95_s`` / ``poll_lag_max_s`` (:func:`poll_lag`)
    and ``unpassed`` (firings the watermark never reached),
    ``claim_p50_s`` / ``claim_p95_s`` / ``claim_max_s`` (fire -> claim of the
    dispatched), ``predicate_errors`` and ``dead_letters``."""
    from fanoutsim.designs.reactor.analysis.faults import _subscription

    sub = _subscription(sim, subscription)
    lags = poll_lag(sim, sub["id"])
    lat = latency_frame(sim)
    lat = lat[lat["subscription_id"] == sub["id"]]
    firings = len(lags)
    span = _firing_span(sim, sub)
    claim = percentiles(lat["fire_to_claim"])
    metrics = sim.metrics()
    return {
        "firings": int(firings),
        "dispatched": int(len(lat)),
        "selectivity": len(lat) / firings if firings else float("nan"),
        "dispatch_per_s": len(lat) / span if span else float("nan"),
        "poll_lag_p95_s": _round(np.nanpercentile(lags, 95)) if lags.notna().any() else float("nan"),
        "poll_lag_max_s": _round(lags.max()) if lags.notna().any() else float("nan"),
        "unpassed": int(lags.isna().sum()),
        "claim_p50_s": _round(claim["p50"]),
        "claim_p95_s": _round(claim["p95"]),
        "claim_max_s": _round(claim["max"]),
        "predicate_errors": int(metric_total(metrics, "fanoutsim_reactor_predicate_errors_total")),
        "dead_letters": int(metric_total(metrics, "fanoutsim_reactor_predicate_dead_letters_total")),
    }


def _round(value) -> float:
    return float("nan") if value is None or pd.isna(value) else round(float(value), 3)


def _firing_span(sim, sub) -> float:
    hist = sim.trace().history
    hist = hist[(hist["reactor_name"] == sub["reactor_name"]) & (hist["tenant_id"] == sub["tenant_id"])]
    if len(hist) < 2:
        return 0.0
    return float(hist["fired_at"].max() - hist["fired_at"].min()) / US


def selectivity_sweep(frame: pd.DataFrame, filters: Mapping[str, str | None], **kwargs) -> pd.DataFrame:
    """:func:`subscriber_lag` of a :func:`filter_run` per named filter
    (``{label: CEL or None}``), sorted by selectivity; ``filter`` and ``when`` first."""
    rows = []
    for label, when in filters.items():
        sim = filter_run(frame, when, **kwargs)
        rows.append({"filter": label, "when": when or "", **subscriber_lag(sim)})
    return pd.DataFrame(rows).sort_values("selectivity", kind="stable").reset_index(drop=True)


def error_policy_table(
    frame: pd.DataFrame, filters: Mapping[str, str], policies: Iterable[str] = ("skip", "hold"), **kwargs
) -> pd.DataFrame:
    """Per named filter and ``predicate_error_policy``: what was dispatched,
    the errors and dead letters, the poll lag, and whether the subscription
    ended ``degraded``; ``filter`` and ``policy`` first."""
    rows = []
    for label, when in filters.items():
        for policy in policies:
            sim = filter_run(frame, when, policy=policy, **kwargs)
            lag = subscriber_lag(sim)
            sub = sim.subscriptions().iloc[0]
            rows.append(
                {
                    "filter": label,
                    "policy": policy,
                    "firings": lag["firings"],
                    "dispatched": lag["dispatched"],
                    "predicate_errors": lag["predicate_errors"],
                    "dead_letters": lag["dead_letters"],
                    "poll_lag_max_s": lag["poll_lag_max_s"],
                    "unpassed": lag["unpassed"],
                    "degraded": bool(sub["predicate_degraded"]),
                    "last_error": sub["last_predicate_error"] or "",
                }
            )
    return pd.DataFrame(rows)


def predicate_verdicts(expressions: Iterable[str]) -> pd.DataFrame:
    """What subscribe-time checking says of each CEL filter: ``accepted`` and
    the :class:`~fanoutsim.InvalidPredicate` message (empty if accepted)."""
    rows = []
    for expr in expressions:
        try:
            compile_predicate(expr)
        except InvalidPredicate as exc:
            rows.append({"when": expr, "accepted": False, "message": str(exc)})
        else:
            rows.append({"when": expr, "accepted": True, "message": ""})
    return pd.DataFrame(rows, columns=["when", "accepted", "message"])
