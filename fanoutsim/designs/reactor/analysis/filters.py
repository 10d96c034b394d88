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
:func:`predicate_verdicts`) read tables. Lesson 4's experiments, which replay a
window of a recorded workload (:mod:`fanoutsim.designs.reactor.replay`), are
beside the notebooks, in ``notebooks/experiments/reactor.py``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from fanoutsim.designs.reactor.analysis.delivery import latency_frame, metric_total, percentiles
from fanoutsim.designs.reactor.predicate import InvalidPredicate, compile_predicate
from fanoutsim.kernel.timeutil import US

__all__ = [
    "quote_rates",
    "poll_lag",
    "subscriber_lag",
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
