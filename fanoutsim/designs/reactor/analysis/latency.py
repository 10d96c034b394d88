"""The latency budget of a firing, path by path (seed 000, "Composition with the
in-process path").

A firing reaches its subscribers by two paths:

*in-process* (computation graphs)
    called synchronously inside the firing, before the log row is written, so a
    ``graph_called`` trace row is at the firing's own time; seed 000 puts it at "tens
    of microseconds (one async call)";
*DB-backed* (workflow subscriptions)
    the row waits in ``reactor_firings`` for the next poll, is fetched, dispatched as a
    ``workflow_executions`` row, claimed by the executor and run. Seed 000's budget:
    ``reactor_poll_interval / 2`` on average, plus one execution insert, plus one
    claim-and-run cycle; "~500 ms fire-to-execution-row latency" at the default 1 s
    interval.

:func:`latency_budget` splits each dispatched execution's time from firing to finish
into the stacked components

``poll_wait_s``
    fired -> fetched by the poll (the trace's ``polled`` row of its subscription):
    waiting for the next poll, uniform on ``[0, P)`` while nothing queues;
``round_trip_s``
    fetched -> dispatched: the store round trip (the Simulation's ``fetch_latency``)
    before the drain inserts the execution;
``claim_wait_s``
    dispatched -> claimed: waiting for the executor's next claim;
``run_s``
    claimed -> finished: the workflow body.

All times are virtual seconds.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from fanoutsim.designs.reactor.analysis.delivery import latency_frame

__all__ = [
    "BUDGET_COMPONENTS",
    "latency_budget",
    "graph_latency",
    "expected_budget",
    "budget_table",
    "poll_wait_uniformity",
]

#: The stacked components of a firing's latency, in order (the module's text says each).
BUDGET_COMPONENTS = ("poll_wait_s", "round_trip_s", "claim_wait_s", "run_s")
_EPOCH = pd.Timestamp(0, tz="UTC")
_US = pd.Timedelta(1, "us")


def _us(values: pd.Series) -> pd.Series:
    """Epoch microseconds of a timestamp column, as floats (NaN where missing)."""
    return ((values - _EPOCH) / _US).astype(float)


def latency_budget(sim) -> pd.DataFrame:
    """One row per execution dispatched by a subscription: the columns of
    :func:`~fanoutsim.analysis.latency_frame` plus ``fetched_at`` and the
    components ``poll_wait_s``, ``round_trip_s``, ``claim_wait_s``, ``run_s``
    and their sum ``total_s`` (fired -> finished; NaN while unfinished)."""
    lat = latency_frame(sim)
    trace = sim.trace()
    polled = trace.loc[trace["kind"] == "polled", ["t", "subscription"]]
    polled = pd.DataFrame(
        {"fetched_us": polled["t"].astype(float), "subscription_id": polled["subscription"].astype(object)}
    )
    out = lat.copy()
    out["dispatched_us"] = _us(out["dispatched_at"])
    out["_row"] = np.arange(len(out))
    known = out[out["subscription_id"].notna()].sort_values("dispatched_us", kind="stable")
    if len(known) and len(polled):
        joined = pd.merge_asof(
            known[["_row", "dispatched_us", "subscription_id"]],
            polled.sort_values("fetched_us", kind="stable"),
            left_on="dispatched_us",
            right_on="fetched_us",
            by="subscription_id",
            direction="backward",
        )
        fetched = pd.Series(joined["fetched_us"].to_numpy(), index=joined["_row"].to_numpy())
    else:
        fetched = pd.Series(dtype=float)
    fetched_us = fetched.reindex(out["_row"]).to_numpy()
    # no poll row found (a deleted subscription): count it all as poll wait
    fetched_us = np.where(np.isnan(fetched_us), out["dispatched_us"].to_numpy(), fetched_us)
    fired_us = _us(out["fired_at"]).to_numpy()
    fetched_us = np.maximum(fetched_us, fired_us)  # a late-committed firing: its wait starts at its stamp
    out["fetched_at"] = pd.to_datetime(fetched_us.astype("int64"), unit="us", utc=True).astype("datetime64[us, UTC]")
    out["poll_wait_s"] = (fetched_us - fired_us) / 1e6
    out["round_trip_s"] = (out["dispatched_us"].to_numpy() - fetched_us) / 1e6
    out["claim_wait_s"] = (out["claimed_at"] - out["dispatched_at"]).dt.total_seconds().astype(float)
    out["run_s"] = (out["finished_at"] - out["claimed_at"]).dt.total_seconds().astype(float)
    out["total_s"] = (out["finished_at"] - out["fired_at"]).dt.total_seconds().astype(float)
    cols = [c for c in lat.columns if c not in ("fire_to_dispatch", "fire_to_claim")]
    cols.insert(cols.index("dispatched_at"), "fetched_at")
    return out[[*cols, *BUDGET_COMPONENTS, "total_s", "fire_to_dispatch", "fire_to_claim"]]


def graph_latency(sim) -> pd.DataFrame:
    """One row per in-process graph call: ``firing``, ``graph`` (its name),
    ``fired_at`` and ``called_at`` (UTC) and ``latency_s`` (called - fired)."""
    trace = sim.trace()
    fired = trace.loc[trace["kind"] == "fired", ["firing", "t"]].drop_duplicates("firing")
    calls = trace.loc[trace["kind"] == "graph_called", ["firing", "t", "detail"]]
    df = calls.merge(fired, on="firing", how="left", suffixes=("", "_fired"))
    return pd.DataFrame(
        {
            "firing": df["firing"].astype(object),
            "graph": df["detail"].astype(object),
            "fired_at": pd.to_datetime(df["t_fired"].astype("int64"), unit="us", utc=True),
            "called_at": pd.to_datetime(df["t"].astype("int64"), unit="us", utc=True),
            "latency_s": (df["t"].astype("int64") - df["t_fired"].astype("int64")).astype(float) / 1e6,
        }
    )


def _mean_duration(sim, budget: pd.DataFrame) -> float:
    """Mean declared run time, weighted by each workflow's executions (NaN if
    a run time is a callable without a known mean)."""
    counts = budget["workflow_name"].value_counts()
    total, n = 0.0, 0
    for name, count in counts.items():
        spec = sim.registry.workflows.get(name)
        d = 0.0 if spec is None else spec.duration
        if callable(d):
            mean = getattr(d, "mean", None)
            if mean is None:
                return math.nan
            d = mean() if callable(mean) else mean
        total += float(d) * int(count)
        n += int(count)
    return total / n if n else math.nan


def expected_budget(config, *, fetch_latency: float = 0.0, run_s: float = 0.0) -> dict[str, float]:
    """Seed 000's budget for one execution, in seconds: half a poll interval of
    poll wait, one round trip, half an executor tick of claim wait, the run."""
    return {
        "poll_wait_s": config.reactor_poll_interval / 2,
        "round_trip_s": float(fetch_latency),
        "claim_wait_s": config.executor_poll_interval / 2,
        "run_s": float(run_s),
    }


def budget_table(sim, budget: pd.DataFrame | None = None, graphs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Mean seconds per component, one row per path:

    ``Cloacina's estimate``
        :func:`expected_budget` for the run's settings (run = the declared mean run times);
    ``DB path (measured)``
        the means of :func:`latency_budget`;
    ``in-process graph (measured)``
        the mean graph latency, all of it "in-process call" (NaN when no graph is registered).

    Columns: the components, ``in_process_s`` and ``total_s``; the index is the path."""
    budget = latency_budget(sim) if budget is None else budget
    graphs = graph_latency(sim) if graphs is None else graphs
    est = expected_budget(
        sim.config, fetch_latency=getattr(sim, "fetch_latency", 0.0), run_s=_mean_duration(sim, budget)
    )
    rows = {
        "Cloacina's estimate": {**est, "in_process_s": 0.0},
        "DB path (measured)": {
            **{c: float(budget[c].mean()) if len(budget) else math.nan for c in BUDGET_COMPONENTS},
            "in_process_s": 0.0,
        },
        "in-process graph (measured)": {
            **{c: 0.0 for c in BUDGET_COMPONENTS},
            "in_process_s": float(graphs["latency_s"].mean()) if len(graphs) else math.nan,
        },
    }
    df = pd.DataFrame.from_dict(rows, orient="index")
    df["total_s"] = df[list(BUDGET_COMPONENTS) + ["in_process_s"]].sum(axis=1, skipna=False)
    df.index.name = "path"
    return df


def poll_wait_uniformity(poll_wait, poll_interval: float) -> dict[str, Any]:
    """How close the poll waits are to uniform on ``[0, P)``: ``count``, ``mean_s``
    against ``expected_mean_s`` (P/2), ``within_p`` (the share below P) and the
    Kolmogorov-Smirnov distance ``ks`` to the uniform law (0: identical; about
    ``1.36 / sqrt(count)`` is the 5% critical value for independent samples)."""
    x = np.sort(np.asarray(pd.Series(poll_wait, dtype=float).dropna(), dtype=float))
    n = x.size
    if n == 0:
        return {
            "count": 0,
            "mean_s": None,
            "expected_mean_s": poll_interval / 2,
            "within_p": None,
            "ks": None,
            "ks_critical_5pct": None,
        }
    cdf = np.clip(x / poll_interval, 0.0, 1.0)
    i = np.arange(1, n + 1)
    ks = float(max(np.max(i / n - cdf), np.max(cdf - (i - 1) / n)))
    return {
        "count": int(n),
        "mean_s": float(x.mean()),
        "expected_mean_s": poll_interval / 2,
        "within_p": float(np.mean(x < poll_interval)),
        "ks": ks,
        "ks_critical_5pct": 1.36 / math.sqrt(n),
    }
