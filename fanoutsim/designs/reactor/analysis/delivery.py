"""What a run delivered, and how fast: pure functions over a Simulation's tables.

:func:`latency_frame` lines each subscription-dispatched execution up with the
firing it came from; :func:`delivery_report` condenses a run into a plain dict
(JSON-serializable: dicts, lists, str, int, float and None only) that
:func:`fanoutsim.report.format_report` prints and ``fanoutsim run --json`` emits.

An execution belongs to the subscription with the same ``workflow_name``,
``tenant_id`` and context ``reactor_name`` (a subscription is unique on that
triple). Executions started by trigger fan-out carry no firing and are left out
of the latency frame. Percentiles use linear interpolation (numpy's default).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import defaultdict
from typing import Any

import numpy as np
import pandas as pd

from fanoutsim.kernel.report import run_span
from fanoutsim.kernel.timeutil import US, rfc3339, rfc3339_us

from .lag import WATERMARK_LAG, watermark_lag_us

__all__ = [
    "latency_frame",
    "delivery_report",
    "watermarks",
    "percentiles",
    "metric_total",
    "SUBSCRIPTION_KEY",
    "LATENCY_COLUMNS",
]

#: The columns that name a subscription: its reactor, workflow and tenant.
SUBSCRIPTION_KEY = ("reactor_name", "workflow_name", "tenant_id")
#: The latencies :func:`latency_frame` measures per execution, in seconds: from the
#: firing's ``fired_at`` to its dispatch, and to its claim by the executor.
LATENCY_COLUMNS = ("fire_to_dispatch", "fire_to_claim")
_LATENCY_FRAME_COLUMNS = (
    "subscription_id",
    "reactor_name",
    "workflow_name",
    "tenant_id",
    "execution_id",
    "reactor_firing_id",
    "status",
    "fired_at",
    "dispatched_at",
    "claimed_at",
    "finished_at",
    "fire_to_dispatch",
    "fire_to_claim",
)


def _utc(values) -> pd.Series:
    # ISO8601, not a format inferred from the first value: contexts written by
    # hand may mix shapes (with and without fractions, offsets, a space for T)
    return pd.to_datetime(pd.Series(values, dtype=object), utc=True, format="ISO8601").astype("datetime64[us, UTC]")


def latency_frame(sim, *, executions: pd.DataFrame | None = None, subs: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per execution dispatched by a subscription.

    Columns: ``subscription_id`` (None if that subscription was deleted since),
    ``reactor_name``, ``workflow_name``, ``tenant_id``, ``execution_id``,
    ``reactor_firing_id``, ``status``, ``fired_at`` (from the context's
    ``reactor_fired_at``), ``dispatched_at``, ``claimed_at``, ``finished_at``
    (UTC timestamps) and ``fire_to_dispatch`` / ``fire_to_claim`` (float
    seconds; NaN while unclaimed). Rows keep the executions table's order,
    ``(dispatched_at, id)``. ``executions``/``subs``: the tables, if already at hand.
    """
    return _latency(
        sim.executions() if executions is None else executions, sim.subscriptions() if subs is None else subs
    )


def _latency(ex: pd.DataFrame, subs: pd.DataFrame) -> pd.DataFrame:
    ex = ex[ex["reactor_firing_id"].notna()].reset_index(drop=True)
    subs = subs[["id", *SUBSCRIPTION_KEY]].rename(columns={"id": "subscription_id"})
    out = pd.DataFrame(
        {
            "reactor_name": ex["reactor_name"].astype(object),
            "workflow_name": ex["workflow_name"].astype(object),
            "tenant_id": ex["tenant_id"].astype(object),
            "execution_id": ex["id"].astype(object),
            "reactor_firing_id": ex["reactor_firing_id"].astype(object),
            "status": ex["status"].astype(object),
        }
    )
    out = out.merge(subs, on=list(SUBSCRIPTION_KEY), how="left", validate="many_to_one")
    out["subscription_id"] = out["subscription_id"].astype(object).where(out["subscription_id"].notna(), None)
    out["fired_at"] = _utc([c.get("reactor_fired_at") for c in ex["context"]])
    for col in ("dispatched_at", "claimed_at", "finished_at"):
        out[col] = ex[col].astype("datetime64[us, UTC]")
    out["fire_to_dispatch"] = (out["dispatched_at"] - out["fired_at"]).dt.total_seconds().astype(float)
    out["fire_to_claim"] = (out["claimed_at"] - out["fired_at"]).dt.total_seconds().astype(float)
    return out[list(_LATENCY_FRAME_COLUMNS)]


def latency_columns(store) -> tuple[int, np.ndarray, np.ndarray] | None:
    """``(executions, fire_to_dispatch, fire_to_claim)``: the number of
    executions and :func:`latency_frame`'s two latency columns, the same floats
    in the same order, read straight from the store's rows without building
    the frame (for a sweep's row). None when a ``reactor_fired_at`` is not in
    the shape the engine writes (the caller then builds the frame)."""
    from fanoutsim.designs.reactor.payload import context_firing

    rows = store.rows("workflow_executions")
    dispatch, claim = [], []
    parsed: dict[str, tuple] = {}  # a firing's context is one text, in each subscription's row
    for r in rows:
        context = r["context"]
        got = parsed.get(context)
        if got is None:
            fid, _, fired_at = context_firing(context)
            got = parsed[context] = (fid, rfc3339_us(fired_at) if isinstance(fired_at, str) else None)
        fid, fired = got
        if fid is None:
            continue  # no firing (trigger fan-out): not in the latency frame
        if fired is None:
            return None
        at, claimed = _seconds(r["dispatched_at"], fired), _seconds(r["claimed_at"], fired)
        if at is None or claimed is None:
            return None
        dispatch.append(at)
        claim.append(claimed)
    return len(rows), np.array(dispatch, dtype=float), np.array(claim, dtype=float)


def _seconds(at: int | None, since: int) -> float | None:
    """``at - since`` µs as float seconds, as this pandas' ``total_seconds``
    makes it (pandas 3 adds the remainder's fraction to the whole seconds,
    earlier versions divide once; the two differ in the last bit); NaN when
    ``at`` is NULL; None beyond 2**53 µs, where pandas 3 also nudges the last bit."""
    if at is None:
        return math.nan
    us = at - since
    if -(2**53) <= us <= 2**53:
        if _SPLIT_SECONDS:
            whole, rest = divmod(us, US)
            return whole + rest / US
        return us / US
    return None


# 1,180,249 µs is 1.180249 s split, 1.1802489999999999 s divided once
_SPLIT_SECONDS = pd.Series([pd.Timedelta(1_180_249, "us")]).dt.total_seconds().iloc[0] == 1 + 180_249 / US


def backlog_total(store) -> int:
    """The sum of :func:`watermarks`' ``backlog`` over every subscription, from
    the store's rows: retained firings of each subscription's stream after its
    watermark (all of them while it has none)."""
    streams: dict[tuple, list[int]] = defaultdict(list)
    for f in store.rows("reactor_firings"):
        streams[(f["reactor_name"], f["tenant_id"])].append(f["fired_at"])
    for fired in streams.values():
        fired.sort()
    total = 0
    for sub in store.rows("reactor_subscriptions"):
        fired = streams.get((sub["reactor_name"], sub["tenant_id"]), ())
        wm = sub["last_seen_fired_at"]
        total += len(fired) if wm is None else len(fired) - bisect_right(fired, wm)
    return total


def percentiles(values) -> dict[str, Any]:
    """``count``, ``mean``, ``p50``, ``p95``, ``p99`` and ``max`` of the
    non-missing values (linear interpolation); None for each statistic when empty."""
    arr = np.asarray(pd.Series(values, dtype=float).dropna(), dtype=float)
    if arr.size == 0:
        return {"count": 0, "mean": None, "p50": None, "p95": None, "p99": None, "max": None}
    p50, p95, p99 = np.percentile(arr, [50, 95, 99], method="linear")
    return {
        "count": int(arr.size),
        "mean": float(arr.mean()),
        "p50": float(p50),
        "p95": float(p95),
        "p99": float(p99),
        "max": float(arr.max()),
    }


def metric_total(metrics: dict[str, float], name: str) -> float:
    """Sum of a counter over all its label sets (``name`` and ``name{...}``)."""
    return sum(v for k, v in metrics.items() if k == name or k.startswith(name + "{"))


def _num(value: float) -> int | float:
    """An int when the value is whole (counters), else a float."""
    if isinstance(value, (int, np.integer)):
        return int(value)
    value = float(value)
    return int(value) if value.is_integer() else value


_EPOCH = pd.Timestamp(0, tz="UTC")
_ONE_US = pd.Timedelta(1, "us")


def _ts_us(value) -> int | None:
    """Epoch microseconds of a timestamp, exactly; None for a missing one."""
    if value is None or pd.isna(value):
        return None
    return int((pd.Timestamp(value) - _EPOCH) // _ONE_US)


def _series_us(values: pd.Series) -> np.ndarray:
    return ((values - _EPOCH) // _ONE_US).to_numpy(dtype=np.int64)


def watermarks(sim, *, subs: pd.DataFrame | None = None, firings: pd.DataFrame | None = None) -> list[dict]:
    """Per subscription, in table order: its key, filter and state
    (``active``, ``paused`` or ``degraded``), its watermark (RFC 3339, None if
    never advanced), ``watermark_lag_s`` (seconds: the age of the oldest
    retained firing of its reactor and tenant it has not read yet, 0 when it
    has read them all; :data:`~fanoutsim.designs.reactor.analysis.lag.WATERMARK_LAG`)
    and ``backlog`` (retained firings of its reactor and tenant after the
    watermark; all of them if it never advanced). ``subs``/``firings``: the
    tables, if already at hand."""

    subs = sim.subscriptions() if subs is None else subs
    firings = sim.firings() if firings is None else firings
    now_us = sim.now_us()
    stream_fired_us = {
        key: np.sort(_series_us(grp["fired_at"])) for key, grp in firings.groupby(["reactor_name", "tenant_id"])
    }
    rows = []
    for sub in subs.itertuples(index=False):
        wm_us = _ts_us(sub.last_seen_fired_at)
        stream = stream_fired_us.get((sub.reactor_name, sub.tenant_id), np.empty(0, dtype=np.int64))
        backlog = int(stream.size if wm_us is None else stream.size - np.searchsorted(stream, wm_us, "right"))
        if not sub.enabled:
            state = "paused"
        elif sub.predicate_degraded:
            state = "degraded"
        else:
            state = "active"
        rows.append(
            {
                "id": sub.id,
                "tenant": sub.tenant_id,
                "reactor": sub.reactor_name,
                "workflow": sub.workflow_name,
                "predicate": sub.predicate,
                "state": state,
                "watermark": None if wm_us is None else rfc3339(wm_us),
                "watermark_lag_s": watermark_lag_us(now_us, wm_us, stream) / US,
                "backlog": backlog,
                "predicate_error_count": int(sub.predicate_error_count),
            }
        )
    return rows


def delivery_report(sim, *, name: str | None = None) -> dict[str, Any]:
    """A run's deliveries, latencies and backlog as a plain, JSON-ready dict.

    ``name`` (say, the scenario's) is recorded as ``scenario``.
    """
    metrics = sim.metrics()
    ex = sim.executions()
    subs = sim.subscriptions()
    lat = _latency(ex, subs)
    firings = sim.firings()

    status_counts = ex["status"].value_counts()
    by_status = {s: int(status_counts.get(s, 0)) for s in sorted(status_counts.index)}

    rows, matched = _subscription_rows(sim, ex, subs, firings, lat)

    report = {
        **run_span(sim, name, "reactor"),
        "config": sim.config.to_dict(),
        "firings": {
            "fired": _num(metric_total(metrics, "fanoutsim_reactor_firings_total")),
            "retained": int(len(firings)),
            "pruned": _num(metric_total(metrics, "fanoutsim_reactor_firings_pruned_total")),
        },
        "executions": {
            "total": int(len(ex)),
            "by_status": by_status,
            "from_subscriptions": int(len(lat)),
            "unmatched": int(len(ex) - matched),
        },
        "latency_s": {col: percentiles(lat[col]) for col in LATENCY_COLUMNS},
        "subscriptions": rows,
        "definitions": {"watermark_lag_s": WATERMARK_LAG},
        "predicate_errors": _num(metric_total(metrics, "fanoutsim_reactor_predicate_errors_total")),
        "dead_letters": _num(metric_total(metrics, "fanoutsim_reactor_predicate_dead_letters_total")),
        "dispatch_failures": _num(metric_total(metrics, "fanoutsim_reactor_dispatch_failures_total")),
    }
    if report["predicate_errors"]:
        report["predicate_error_examples"] = predicate_error_examples(sim, subs, firings)
    return _plain(report)


# a subscription row's columns in the report's order: key, filter, state, deliveries, then position
_SUBSCRIPTION_COLUMNS = (
    "id",
    "tenant",
    "reactor",
    "workflow",
    "predicate",
    "state",
    "executions",
    "watermark",
    "watermark_lag_s",
    "backlog",
    "predicate_error_count",
    "fire_to_dispatch_p50_s",
    "fire_to_claim_p50_s",
)


def _subscription_rows(sim, ex: pd.DataFrame, subs, firings, lat: pd.DataFrame) -> tuple[list[dict], int]:
    """One row per subscription (its watermark, backlog, executions and p50
    latencies), and how many executions matched a subscription."""
    # executions per subscription triple
    keyed = pd.DataFrame(
        {
            "reactor_name": ex["reactor_name"].astype(object),
            "workflow_name": ex["workflow_name"],
            "tenant_id": ex["tenant_id"],
        }
    )
    counts = keyed.groupby(list(SUBSCRIPTION_KEY), dropna=False).size()
    lat_by_sub = {sid: grp for sid, grp in lat.groupby("subscription_id")}
    no_lat = lat.iloc[:0]

    rows = []
    matched = 0
    for row in watermarks(sim, subs=subs, firings=firings):
        n = int(counts.get((row["reactor"], row["workflow"], row["tenant"]), 0))
        matched += n
        sub_lat = lat_by_sub.get(row["id"], no_lat)
        row = {
            **row,
            "executions": n,
            "fire_to_dispatch_p50_s": percentiles(sub_lat["fire_to_dispatch"])["p50"],
            "fire_to_claim_p50_s": percentiles(sub_lat["fire_to_claim"])["p50"],
        }
        rows.append({k: row[k] for k in _SUBSCRIPTION_COLUMNS})
    return rows, matched


def _error_outcome(cfg) -> str:
    """What ``predicate_error_policy`` did with a firing whose filter failed."""
    if cfg.predicate_error_policy == "hold":
        return (
            f"hold: the watermark stayed on the firing and each poll tried it again; the "
            f"{cfg.predicate_error_limit}th error in a row dead-lettered it (the watermark moved past "
            f"it, the subscription marked degraded)"
        )
    return "skip: counted as false, so not dispatched, and the watermark moved past it"


def _logged_sources(trace, firing_id: str) -> dict | None:
    """The decoded payload of ``firing_id`` as the trace's firing history logged it
    (None: not in it, or its payload does not decode)."""
    from fanoutsim.designs.reactor.payload import decode_sources

    history = getattr(trace, "history", None)
    if history is None or "payload" not in history:
        return None
    rows = history.loc[history["firing"] == firing_id, "payload"]
    if rows.empty or not isinstance(rows.iloc[0], (bytes, bytearray)):
        return None
    try:
        return decode_sources(bytes(rows.iloc[0]))
    except ValueError:
        return None


def predicate_error_examples(sim, subs: pd.DataFrame, firings: pd.DataFrame) -> list[dict]:
    """Per subscription whose filter failed: how often, and its first failure
    in plain words — the firing, the filter, what the filter read and what its
    operator needed (:func:`~fanoutsim.designs.reactor.predicate.explain_error`)
    — and what ``predicate_error_policy`` did with it. From the trace (a run
    without one gives the subscriptions' last raw error)."""
    from fanoutsim.designs.reactor.predicate import explain_error

    outcome = _error_outcome(sim.config)
    filters = dict(zip(subs["id"], subs["predicate"]))
    names = {s.id: f"{s.reactor_name}->{s.workflow_name}@{s.tenant_id}" for s in subs.itertuples(index=False)}
    if getattr(sim, "traced", True) is False:
        return [
            {
                "subscription": names[s.id],
                "firing": s.predicate_error_firing_id,
                "filter": s.predicate,
                "count": int(s.predicate_error_count),
                "error": s.last_predicate_error,
                "outcome": outcome,
            }
            for s in subs.itertuples(index=False)
            if s.last_predicate_error
        ]
    trace = sim.trace()
    errors = trace[(trace["kind"] == "predicate") & trace["detail"].astype(str).str.startswith("error: ")]
    sources = dict(zip(firings["id"], firings["sources"]))
    out = []
    for sid, group in errors.groupby("subscription", sort=False):
        first = group.iloc[0]
        seen = sources.get(first["firing"])
        if seen is None:  # pruned since: the trace's firing history still has the payload it logged
            seen = _logged_sources(trace, first["firing"])
        text = (
            explain_error(filters.get(sid, ""), seen, first["detail"].removeprefix("error: "))
            if seen is not None
            else f"{first['detail'].removeprefix('error: ')} (the firing is pruned since)"
        )
        out.append(
            {
                "subscription": names.get(sid, sid),
                "firing": first["firing"],
                "filter": filters.get(sid),
                "count": int(len(group)),
                "error": text,
                "outcome": outcome,
            }
        )
    return out


def _plain(value):
    """Recursively: numpy scalars to Python, NaN to None, bool refused."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bool, np.bool_)):
        raise TypeError("the report holds no booleans")
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return None if math.isnan(value) else value
    raise TypeError(f"value {value!r} of type {type(value).__name__} does not belong in a report")
