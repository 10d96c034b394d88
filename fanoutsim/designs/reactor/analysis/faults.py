"""Faults and what they cost: duplicates per crash, the firings table under
retention, and each firing's path past a watermark.

Two kinds of function live here. *Readers* are pure functions from a
finished Simulation's tables and trace to numbers (:func:`duplicates_per_crash`,
:func:`table_size`, :func:`retention_cost`, :func:`watermark_path`,
:func:`firing_outcomes`, :func:`hole_summary`). *Experiments* build one small
seeded run each (:func:`crash_run`, :func:`retention_run`, :func:`hole_run`)
or a grid of them (:func:`crash_sweep`, :func:`crash_points`,
:func:`retention_table`, :func:`hole_matrix`), so that a notebook cell is one
call. Every experiment is deterministic in its arguments and ``seed``.

**Duplicates per crash.** A crash between an execution insert and the commit
of the watermark that passes it re-delivers that firing on restart. How many
firings sit in that window is ``watermark_commit``: ``per_firing`` commits the
watermark after every dispatch (at most the one firing in flight),
``per_batch`` once per batch (everything dispatched so far in the batch: on
average half a full batch, ``(L + 1) / 2`` for a batch limit ``L``), and
``atomic`` inserts and moves the watermark in one transaction (none). The crash
experiments make every batch full — the subscription first catches up on a
backlog — and crash at a named point at dispatches spaced ``[L, 2L)`` apart
(seeded), so each crash lands at a uniformly random position of a full batch.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from fanoutsim.designs.faults import LateCommit
from fanoutsim.designs.reactor.analysis.delivery import latency_frame
from fanoutsim.designs.reactor.checker import check
from fanoutsim.designs.reactor.config import SchedulerConfig
from fanoutsim.designs.reactor.faults import ClockSkew, Pollers, Stall, Ties
from fanoutsim.kernel.faults import CrashAtPoint, FaultPlan
from fanoutsim.kernel.timeutil import US

__all__ = [
    "CRASH_MODES",
    "DUPLICATE_POINT",
    "crash_run",
    "duplicates_per_crash",
    "crash_sweep",
    "crash_points",
    "table_size",
    "table_size_summary",
    "retention_run",
    "retention_cost",
    "retention_table",
    "watermark_path",
    "firing_outcomes",
    "HOLES",
    "WATERMARKS",
    "hole_run",
    "hole_summary",
    "hole_matrix",
]

#: The watermark commit strategies a crash experiment compares (``watermark_commit``).
CRASH_MODES = ("per_firing", "per_batch", "atomic")
#: The crash point between a dispatch and its watermark move: a crash there duplicates.
DUPLICATE_POINT = "poll.after_dispatch_before_watermark"
# the crash points a run passes once per firing (the others once per batch, pass or claim)
PER_FIRING_POINTS = ("reactor.after_graphs_before_log", DUPLICATE_POINT)
#: The watermark strategies the holes experiment compares (``SchedulerConfig.watermark``).
WATERMARKS = ("fired_at", "fired_at_id", "settled")


def _t(sim, us) -> Any:
    """Virtual seconds since the run's start, of epoch microseconds (scalar or array)."""
    return (np.asarray(us, dtype="int64") - sim.start_us) / US if not np.isscalar(us) else (us - sim.start_us) / US


# -- duplicates per crash ---------------------------------------------------------------
def crash_run(
    batch_limit: int = 100,
    watermark_commit: str = "per_firing",
    *,
    point: str = DUPLICATE_POINT,
    crashes: int = 8,
    rate: float = 10.0,
    backlog_s: float = 200.0,
    after_s: float = 40.0,
    downtime: float = 0.5,
    drain_s: float = 0.0,
    seed: int = 0,
    store: str = "memory",
    body: Callable[[dict], Any] | None = None,
    workflow: str = "wf",
) -> Any:
    """One seeded run: ``workflow`` subscribed to reactor ``r``, fired ``rate``
    times a second with counter payloads; the subscription is paused for the
    first ``backlog_s`` seconds (a backlog to catch up on, so batches are
    full), then the runner crashes ``crashes`` times at ``point``, each time
    down for ``downtime`` s. A point passed once per firing is crashed at
    passes spaced uniformly in ``[L, 2L)`` apart: a uniformly random position
    of a full batch. A point passed once per batch or claim (a fetch, a batch's
    commit, a claim) is crashed every first or second pass: ``[L, 2L)`` of
    those would leave a run of a few dozen batches one crash.
    ``body``: the workflow's body (say, an idempotent sink). Fires until
    ``backlog_s + after_s``, runs ``drain_s`` more (to let the subscription
    and the executor drain) and returns the Simulation."""
    from fanoutsim.designs.reactor.simulation import Simulation

    rng = random.Random(f"fanoutsim:crash_run:{seed}:{batch_limit}")
    span = batch_limit if point in PER_FIRING_POINTS else 1
    nth, specs = 0, []
    for k in range(crashes):
        nth += rng.randrange(span, 2 * span) if k else rng.randrange(1, span + 1)
        specs.append(CrashAtPoint(point, nth=nth, downtime=downtime))
    plan = FaultPlan([Stall(workflow, window=(0.0, float(backlog_s)), mode="pause"), *specs])
    cfg = SchedulerConfig(reactor_poll_batch_limit=batch_limit, watermark_commit=watermark_commit)
    sim = Simulation(config=cfg, seed=seed, store=store, faults=plan)
    if body is not None:
        sim.runner.register_workflow(workflow, body)
    sim.runner.subscribe_workflow_to_reactor("r", workflow)
    sim.add_workload("r", rate, payload="counter", stop=backlog_s + after_s)
    sim.run(until=backlog_s + after_s + drain_s)
    return sim


def duplicates_per_crash(sim, report=None) -> dict[str, Any]:
    """What a run's crashes cost: ``crashes``, ``extra_deliveries`` whose cause
    the checker names ``crash``, their ratio ``duplicates_per_crash`` (NaN
    without a crash), ``lost``, ``pending``, ``never_logged``, ``requeued``
    (claims a dead runner left running, put back to pending by the next one) and
    ``stuck`` (executions still ``running`` at the end)."""
    report = check(sim) if report is None else report
    tr = sim.trace()
    n = int((tr["kind"] == "crashed").sum())
    extra = int((report.duplicates["cause"] == "crash").sum())
    ex = sim.executions()
    return {
        "crashes": n,
        "extra_deliveries": extra,
        "duplicates_per_crash": extra / n if n else float("nan"),
        "expected": int(report.total["expected"]),
        "executions": int(len(ex)),
        "lost": int(report.total["lost"]),
        "pending": int(report.total["pending"]),
        "never_logged": int(report.total["never_logged"]),
        "requeued": int(sim.metrics().get("fanoutsim_executions_requeued_total", 0)),
        "stuck": int((ex["status"] == "running").sum()),
    }


def crash_sweep(
    batch_limits: Iterable[int] = (1, 2, 5, 10, 20, 50, 100), modes: Iterable[str] = CRASH_MODES, **kwargs
) -> pd.DataFrame:
    """:func:`duplicates_per_crash` of :func:`crash_run` over batch limits and
    ``watermark_commit`` modes; one row each, with ``batch_limit`` and
    ``watermark_commit`` first. ``kwargs`` go to :func:`crash_run`."""
    rows = []
    for mode in modes:
        for limit in batch_limits:
            sim = crash_run(limit, mode, **kwargs)
            rows.append({"batch_limit": int(limit), "watermark_commit": mode, **duplicates_per_crash(sim)})
    return pd.DataFrame(rows)


def crash_points(
    points: Iterable[str], modes: Iterable[str] = CRASH_MODES, *, batch_limit: int = 20, **kwargs
) -> pd.DataFrame:
    """:func:`duplicates_per_crash` for crashes at each named point under each
    mode (``crashes`` is 0 where a mode never passes the point)."""
    rows = []
    for point in points:
        for mode in modes:
            sim = crash_run(batch_limit, mode, point=point, **kwargs)
            rows.append({"point": point, "watermark_commit": mode, **duplicates_per_crash(sim)})
    return pd.DataFrame(rows)


# -- the firings table under retention ------------------------------------------------------
def table_size(sim) -> pd.DataFrame:
    """Rows in ``reactor_firings`` over virtual time, from the trace: one row
    per logged or pruned firing (and one at 0 and one at the end), with
    ``t_s`` (virtual seconds), ``retained`` (rows after that event) and
    ``retained_bytes`` (the payload bytes they hold)."""
    tr = sim.trace()
    sizes = {f: len(p) for f, p in zip(tr.history["firing"], tr.history["payload"])}
    logged = tr["kind"] == "logged"
    ev = tr[logged | ((tr["kind"] == "pruned") & tr["firing"].notna())]
    sign = np.where(ev["kind"] == "logged", 1, -1)
    size = np.array([sizes.get(f, 0) for f in ev["firing"]], dtype="int64")
    t = _t(sim, ev["t"].to_numpy())
    out = pd.DataFrame(
        {
            "t_s": np.concatenate([[0.0], t, [float(sim.now)]]),
            "retained": np.concatenate([[0], np.cumsum(sign), [0]]),
            "retained_bytes": np.concatenate([[0], np.cumsum(sign * size), [0]]),
        }
    )
    out.iloc[-1, 1:] = out.iloc[-2, 1:] if len(out) > 2 else 0
    return out.astype({"retained": "int64", "retained_bytes": "int64"})


def table_size_summary(sim, after: float = 0.0) -> dict[str, float]:
    """``min``, ``max`` and time-weighted ``mean`` rows of :func:`table_size`
    from ``after`` virtual seconds to the end of the run."""
    size = table_size(sim)
    t = size["t_s"].to_numpy()
    rows = size["retained"].to_numpy()
    start = max(0, int(np.searchsorted(t, after, side="right")) - 1)  # the value in force at ``after``
    t, rows = t[start:], rows[start:]
    t = np.maximum(t, after)
    held = np.diff(t)
    total = float(held.sum())
    mean = float((rows[:-1] * held).sum() / total) if total > 0 else float(rows[-1])
    return {"min": int(rows.min()), "max": int(rows.max()), "mean": round(mean, 1)}


def retention_run(
    policy: str = "ttl",
    *,
    retention: float = 60.0,
    pause: float = 120.0,
    pause_start: float = 25.0,
    never_polled: bool = False,
    disabled: bool = False,
    rate: float = 2.0,
    until: float = 300.0,
    prune_interval: float = 10.0,
    seed: int = 0,
    store: str = "memory",
) -> Any:
    """One seeded run of the prune loop: reactor ``r`` fired ``rate`` times a
    second (quote payloads) to a ``live`` subscription and a ``paused`` one
    (paused from ``pause_start`` for ``pause`` seconds; 0: never). With
    ``never_polled`` an ``archive`` subscription exists that is never polled
    (its runner is stuck all run: the watermark stays NULL); with ``disabled``
    a ``disabled`` subscription exists, switched off by the operator. Prunes
    every ``prune_interval`` s keeping ``retention`` s under ``policy``."""
    from fanoutsim.designs.reactor.simulation import Simulation

    faults = []
    if pause > 0:
        faults.append(Stall("paused", window=(float(pause_start), float(pause_start + pause)), mode="pause"))
    if never_polled:
        faults.append(Stall("archive", window=(0.0, float(until)), mode="pause"))
    cfg = SchedulerConfig(
        prune_policy=policy,
        reactor_firings_retention=float(retention),
        reactor_firings_prune_interval=float(prune_interval),
    )
    sim = Simulation(config=cfg, seed=seed, store=store, faults=FaultPlan(faults))
    sim.runner.subscribe_workflow_to_reactor("r", "live")
    sim.runner.subscribe_workflow_to_reactor("r", "paused")
    if never_polled:
        sim.runner.subscribe_workflow_to_reactor("r", "archive")
    if disabled:
        sim.runner.subscribe_workflow_to_reactor("r", "disabled")
        sim.runner.set_subscription_enabled("r", "disabled", enabled=False)
    sim.add_workload("r", rate)
    sim.run(until=until)
    return sim


def retention_cost(sim, report=None) -> dict[str, Any]:
    """The storage and delivery cost of a run's prune choice: ``peak_rows``
    and ``end_rows`` of ``reactor_firings``, ``peak_kb`` (payload kilobytes at
    the peak), ``pruned``, and per subscription workflow ``lost_<workflow>``;
    ``lost`` in all, ``pending`` (still in the log ahead of a watermark) and
    ``valid`` (nothing lost that the configuration promises)."""
    report = check(sim) if report is None else report
    size = table_size(sim)
    out: dict[str, Any] = {
        "prune_policy": sim.config.prune_policy,
        "retention_s": float(sim.config.reactor_firings_retention),
        "peak_rows": int(size["retained"].max()),
        "end_rows": int(size["retained"].iloc[-1]),
        "peak_kb": round(float(size["retained_bytes"].max()) / 1000.0, 1),
        "pruned": int((sim.trace().query("kind == 'pruned'")["firing"].notna()).sum()),
        "lost": int(report.total["lost"]),
        "pending": int(report.total["pending"]),
        "valid": bool(report.valid),
    }
    for row in report.per_subscription.itertuples(index=False):
        out[f"lost_{row.workflow_name}"] = int(row.lost)
    return out


def retention_table(cases: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """:func:`retention_cost` of :func:`retention_run` per named case
    (``{label: retention_run kwargs}``); the label first."""
    rows = []
    for label, kwargs in cases.items():
        rows.append({"case": label, **retention_cost(retention_run(**kwargs))})
    df = pd.DataFrame(rows)
    lost = [c for c in df.columns if c.startswith("lost_")]
    return df.fillna({c: 0 for c in lost}).astype({c: "int64" for c in lost})


# -- a firing's path past a watermark --------------------------------------------------------
def _subscription(sim, subscription: str | None) -> pd.Series:
    subs = sim.subscriptions()
    if subscription is None:
        if len(subs) != 1:
            raise ValueError(
                f"the run has {len(subs)} subscriptions; name one of: "
                f"{', '.join(subs['workflow_name'] + ' (' + subs['id'] + ')')}"
            )
        return subs.iloc[0]
    hit = subs[(subs["id"] == subscription) | (subs["workflow_name"] == subscription)]
    if len(hit) != 1:
        raise KeyError(
            f"no single subscription {subscription!r}; known: "
            f"{', '.join(subs['workflow_name'] + ' (' + subs['id'] + ')')}"
        )
    return hit.iloc[0]


def watermark_path(sim, subscription: str | None = None) -> pd.DataFrame:
    """Every move of one subscription's watermark (an id or a workflow name;
    the only one by default): ``t_s`` (when), ``watermark_s`` (its new value,
    as virtual seconds), ``actor`` (which poller) and ``rewind`` (it moved back)."""
    sub = _subscription(sim, subscription)
    tr = sim.trace()
    wm = tr[(tr["kind"] == "watermark") & (tr["subscription"] == sub["id"])]
    values = _t(sim, wm["detail"].astype("int64").to_numpy())
    out = pd.DataFrame(
        {"t_s": _t(sim, wm["t"].to_numpy()), "watermark_s": values, "actor": wm["actor"].to_numpy(dtype=object)}
    )
    out["rewind"] = out["watermark_s"].diff().fillna(0.0) < 0
    return out


def firing_outcomes(sim, subscription: str | None = None, *, report=None) -> pd.DataFrame:
    """Every firing of one subscription's reactor and tenant, as the checker
    sees it: ``firing``, ``fired_s`` (its stamp), ``visible_s`` (when its row
    committed; NaN if never), ``deliveries`` and ``outcome`` — ``delivered``,
    ``duplicated``, ``lost``, ``pending``, ``filtered`` (the filter said no),
    ``before`` (logged before the subscription existed) or ``never_logged`` —
    with the checker's ``cause`` for a loss or a duplicate."""
    sub = _subscription(sim, subscription)
    report = check(sim) if report is None else report
    hist = sim.trace().history
    hist = hist[(hist["reactor_name"] == sub["reactor_name"]) & (hist["tenant_id"] == sub["tenant_id"])]
    ex = sim.executions()
    ex = ex[
        (ex["workflow_name"] == sub["workflow_name"])
        & (ex["tenant_id"] == sub["tenant_id"])
        & (ex["reactor_name"] == sub["reactor_name"])
    ]
    deliveries = ex.groupby("reactor_firing_id").size()
    lost = report.lost[report.lost["subscription"] == sub["id"]].set_index("firing")["cause"]
    dups = report.duplicates[report.duplicates["subscription"] == sub["id"]]
    dup_cause = dups.groupby("firing")["cause"].agg(lambda c: ",".join(sorted(set(c))))
    created = int(sub["created_at"].value // 1000)
    from fanoutsim.designs.reactor.payload import decode_sources
    from fanoutsim.designs.reactor.predicate import activation, compile_predicate

    predicate = compile_predicate(sub["predicate"]) if sub["predicate"] else None
    rows = []
    for f in hist.itertuples(index=False):
        n = int(deliveries.get(f.firing, 0))
        cause = None
        if pd.isna(f.logged_at):
            outcome = "never_logged"
        elif f.firing in lost.index:
            outcome, cause = "lost", lost[f.firing]
        elif n > 1:
            outcome, cause = "duplicated", dup_cause.get(f.firing)
        elif n == 1:
            outcome = "delivered"
        elif int(f.logged_at) < created:
            outcome = "before"
        elif (
            predicate is not None
            and predicate.evaluate(activation(decode_sources(f.payload), f.reactor_name, f.tenant_id))[0] is not True
        ):
            outcome = "filtered"
        else:
            outcome = "pending"
        rows.append(
            {
                "firing": f.firing,
                "fired_s": _t(sim, int(f.fired_at)),
                "visible_s": np.nan if pd.isna(f.logged_at) else _t(sim, int(f.logged_at)),
                "deliveries": n,
                "outcome": outcome,
                "cause": cause,
            }
        )
    return pd.DataFrame(rows, columns=["firing", "fired_s", "visible_s", "deliveries", "outcome", "cause"])


# -- the holes of a timestamp watermark --------------------------------------------------------
#: Minimal plans for each hole (see tests/test_watermark_holes.py): faults, config, firing rate.
HOLES: dict[str, dict[str, Any]] = {
    "tie split by the batch limit": dict(
        faults=(Ties(probability=1.0, burst=2),), config=dict(reactor_poll_batch_limit=1), rate=0.5
    ),
    "late commit": dict(
        faults=(LateCommit(probability=0.3, delay={"dist": "uniform", "low": 0.5, "high": 3.0}),), config={}, rate=4.0
    ),
    "clock skew": dict(faults=(ClockSkew(hosts=[(-2.0, 0.0), (0.0, 0.0)]),), config={}, rate=4.0),
    "several pollers": dict(faults=(Pollers(2),), config={}, rate=2.0),
}


def hole_run(
    hole: str,
    watermark: str = "fired_at",
    *,
    until: float = 120.0,
    settle: float = 5.0,
    seed: int = 0,
    store: str = "memory",
) -> Any:
    """One seeded run of a :data:`HOLES` entry (or ``"none"``: no fault, 2
    firings/s) under a watermark strategy; subscription ``r -> wf``, counter payloads."""
    from fanoutsim.designs.reactor.simulation import Simulation

    if hole == "none":
        spec = dict(faults=(), config={}, rate=2.0)
    elif hole in HOLES:
        spec = HOLES[hole]
    else:
        raise KeyError(f"unknown hole {hole!r}; known: none, {', '.join(HOLES)}")
    cfg = SchedulerConfig(watermark=watermark, watermark_settle=settle, **spec["config"])
    sim = Simulation(config=cfg, seed=seed, store=store, faults=FaultPlan(list(spec["faults"])))
    sim.runner.subscribe_workflow_to_reactor("r", "wf")
    sim.add_workload("r", spec["rate"], payload="counter")
    sim.run(until=until)
    return sim


def hole_summary(sim, report=None) -> dict[str, Any]:
    """``expected``, ``lost`` (with ``lost_by_cause``), ``extra_deliveries``,
    ``rewinds`` (watermark moves backwards) and the fire -> dispatch latency
    (``dispatch_mean_s``, ``dispatch_p99_s``) of a run."""
    report = check(sim) if report is None else report
    lat = latency_frame(sim)["fire_to_dispatch"].dropna()
    tr = sim.trace()
    rewinds = 0
    for _, wm in tr[tr["kind"] == "watermark"].groupby("subscription"):
        rewinds += int((wm["detail"].astype("int64").diff() < 0).sum())
    causes = report.total["lost_by_cause"]
    return {
        "expected": int(report.total["expected"]),
        "lost": int(report.total["lost"]),
        "lost_by_cause": ", ".join(f"{c} {n}" for c, n in sorted(causes.items())) or "-",
        "extra_deliveries": int(report.total["extra_deliveries"]),
        "rewinds": rewinds,
        "dispatch_mean_s": round(float(lat.mean()), 3) if len(lat) else float("nan"),
        "dispatch_p99_s": round(float(np.percentile(lat, 99)), 3) if len(lat) else float("nan"),
    }


def hole_matrix(holes: Iterable[str] | None = None, strategies: Iterable[str] = WATERMARKS, **kwargs) -> pd.DataFrame:
    """:func:`hole_summary` of :func:`hole_run` for every hole under every
    strategy; ``hole`` and ``watermark`` first."""
    rows = []
    for hole in list(HOLES) if holes is None else holes:
        for strategy in strategies:
            rows.append({"hole": hole, "watermark": strategy, **hole_summary(hole_run(hole, strategy, **kwargs))})
    return pd.DataFrame(rows)
