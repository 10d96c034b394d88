"""The experiments of the leases lessons (notebooks 10 and 11), to read and to change.

Each function builds one small seeded run of fanoutsim's leased durable
consumers (RiffDB's design) on the virtual clock, or a grid of them, with the
times and rates the lesson uses; the numbers come from the readers in
:mod:`fanoutsim.analysis.leases` and the checker :func:`fanoutsim.check_leases`.
Nothing here is part of the library: copy a function into your notebook and
change it. Every run is deterministic in its arguments and ``seed``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import numpy as np
import pandas as pd

from fanoutsim import LeaseSimulation, check_leases
from fanoutsim.analysis import leases as la
from fanoutsim.designs.leases import LeaseConfig
from fanoutsim.designs.leases.identity import ConsumerIdentity, module_hash
from fanoutsim.faults import FaultPlan, RestoreBackup


def _sim(
    config: LeaseConfig | None = None, seed: int = 0, order: str = "riffdb"
) -> LeaseSimulation:
    """A LeaseSimulation under ``config`` with the leasing rule ``order``."""
    config = LeaseConfig() if config is None else config
    return LeaseSimulation(dataclasses.replace(config, partition_order=order), seed=seed)


def since_start(sim, t) -> np.ndarray:
    """Trace times (epoch microseconds) as virtual seconds since the run's start."""
    return (np.asarray(t, dtype="int64") - sim.start_us) / 1e6


def percentile(x: pd.Series, q: float) -> float:
    """The ``q`` quantile of ``x`` (NaN when empty)."""
    return float(x.quantile(q)) if len(x) else float("nan")


def latency_columns(lat: pd.Series) -> dict:
    """``p50_s``, ``p99_s`` and ``max_s`` of publish → done latencies (NaN when none)."""
    return {
        "p50_s": percentile(lat, 0.5),
        "p99_s": percentile(lat, 0.99),
        "max_s": float(lat.max()) if len(lat) else float("nan"),
    }


def _drain(lease_seconds: float) -> float:
    return max(120.0, 12.0 * lease_seconds)


def lease_run(
    lease_seconds: float = 60.0,
    *,
    law: str = "exponential",
    mean_work: float = 5.0,
    rate: float = 0.5,
    partitions: int = 8,
    in_flight: int = 8,
    seconds: float = 2000.0,
    fail: float = 0.0,
    seed: int = 0,
    order: str = "riffdb",
):
    """One consumer ``worker`` whose work takes ``law(mean_work)`` seconds, with
    ``lease_seconds`` leases, ``in_flight`` leases over ``partitions``; Poisson
    events at ``rate``/s for ``seconds``, then drained."""
    sim = _sim(seed=seed, order=order)
    sim.register_consumer(
        "worker",
        duration=la.work_law(law, mean_work),
        lease_seconds=lease_seconds,
        in_flight_limit=in_flight,
        batch_limit=in_flight,
        fail=fail,
        nack_delay=1.0,
    )
    sim.add_workload(rate, partitions=partitions, stop=seconds)
    sim.run(until=seconds + _drain(lease_seconds))
    return sim


def lease_sweep(
    leases: Iterable[float] = (5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0),
    laws: Iterable[str] = la.LAWS,
    **kw,
) -> pd.DataFrame:
    """Every (law, lease_seconds): published, delivered, duplicates (all causes),
    ``dups_per_1000`` (per 1000 events delivered), ``theory_per_1000``
    (:func:`la.expected_duplicates` of :func:`la.p_exceeds`), dead letters, lost, the
    duplicates' causes, and publish → acknowledged latency p50 / p99 / max."""
    mean = kw.get("mean_work", 5.0)
    rows = []
    for law in laws:
        for lease in leases:
            sim = lease_run(lease, law=law, **kw)
            r = check_leases(sim)
            lat = la.event_outcomes(sim, "worker")["latency_s"].dropna()
            p = la.p_exceeds(law, mean, lease)
            delivered = r.total["delivered"]
            rows.append(
                {
                    "law": law,
                    "lease_seconds": float(lease),
                    "mean_work": mean,
                    "lease_over_work": float(lease) / mean,
                    "p_exceeds": p,
                    "published": r.total["published"],
                    "delivered": delivered,
                    "duplicates": r.total["duplicates"],
                    "dups_per_1000": 1000.0 * r.total["duplicates"] / max(delivered, 1),
                    "theory_per_1000": 1000.0 * la.expected_duplicates(p),
                    "dead_lettered": r.total["dead_lettered"],
                    "lost": r.total["lost"],
                    "causes": ",".join(sorted(r.total["duplicates_by_cause"])) or "-",
                    **latency_columns(lat),
                    "valid": r.valid,
                }
            )
    return pd.DataFrame(rows)


def lease_scenario(
    *,
    mean_work: float = 5.0,
    rate: float = 0.5,
    partitions: int = 8,
    in_flight: int = 8,
    seconds: float = 2000.0,
    max_lease: float = 60.0,
    order: str = "riffdb",
) -> dict:
    """:func:`lease_run`'s run as a scenario (a TOML document as a dict) for
    :func:`fanoutsim.sweep`: one consumer ``worker`` (exponential work of mean
    ``mean_work`` s, 60 s leases, ``in_flight`` leases over ``partitions``),
    Poisson events at ``rate``/s for ``seconds``, then drained for the longest
    lease's drain (``max_lease``). Sweep ``consumers.worker.duration`` (with
    :func:`la.work_laws`) and ``consumers.worker.lease_seconds``; the exponential
    and uniform runs equal :func:`lease_run`'s for the same seed."""
    if order not in la.ORDERS:
        raise ValueError(f"order must be one of {', '.join(la.ORDERS)}, got {order!r}")
    return {
        "design": "leases",
        "name": "lease-vs-work",
        "description": "one consumer; work time against lease length (notebook 10)",
        "run": {"seed": 0, "until": float(seconds) + _drain(max_lease)},
        "leases": {"partition_order": order},
        "consumers": [
            {
                "name": "worker",
                "duration": la.work_laws(mean_work)["exponential"],
                "lease_seconds": 60.0,
                "in_flight_limit": int(in_flight),
                "batch_limit": int(in_flight),
                "nack_delay": 1.0,
            }
        ],
        "workload": [{"rate": float(rate), "partitions": int(partitions), "stop": float(seconds)}],
    }


def crash_run(
    lease_seconds: float = 60.0,
    *,
    crashes=(500.25, 1000.25, 1500.25),
    downtime: float = 1.0,
    law: str = "exponential",
    mean_work: float = 5.0,
    rate: float = 0.5,
    partitions: int = 8,
    in_flight: int = 8,
    seconds: float = 2000.0,
    seed: int = 0,
    order: str = "riffdb",
):
    """:func:`lease_run`'s workload with the node crashing at each time in
    ``crashes`` (every worker dies with it) and restarting ``downtime`` s later.
    The leases the dead workers held stay in the table: nobody will ack them,
    and each holds its event (head-of-line: its whole partition) and an in-flight
    slot until it expires — then the restart's recovery, the recovery loop or
    the next pull turns it into a retry."""
    sim = _sim(seed=seed, order=order)
    sim.register_consumer(
        "worker",
        duration=la.work_law(law, mean_work),
        lease_seconds=lease_seconds,
        in_flight_limit=in_flight,
        batch_limit=in_flight,
        nack_delay=1.0,
    )
    sim.add_workload(rate, partitions=partitions, stop=seconds)
    for at in sorted(crashes):
        sim.run(until=at)
        sim.crash("manual", downtime=downtime)
    sim.run(until=seconds + _drain(lease_seconds))
    return sim


def crash_sweep(
    leases: Iterable[float] = (5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0), **kw
) -> pd.DataFrame:
    """Every lease_seconds under :func:`crash_run`: crashes, orphaned leases,
    their mean and worst hold (s), duplicates (by then every late effect is
    from a lease that expired), lost, and publish → acknowledged latency
    p50 / p99 / max."""
    rows = []
    for lease in leases:
        sim = crash_run(lease, **kw)
        r = check_leases(sim)
        holds = la.orphan_holds(sim)
        lat = la.event_outcomes(sim, "worker")["latency_s"].dropna()
        rows.append(
            {
                "lease_seconds": float(lease),
                "crashes": int((sim.trace()["kind"] == "crashed").sum()),
                "orphaned": len(holds),
                "hold_mean_s": float(holds["hold_s"].mean()) if len(holds) else 0.0,
                "hold_max_s": float(holds["hold_s"].max()) if len(holds) else 0.0,
                "duplicates": r.total["duplicates"],
                "dups_per_1000": 1000.0 * r.total["duplicates"] / max(r.total["delivered"], 1),
                "lost": r.total["lost"],
                **latency_columns(lat),
                "valid": r.valid,
            }
        )
    return pd.DataFrame(rows)


def poison_run(
    *,
    nack_delay: float = 2.0,
    partitions: int = 4,
    every: float = 0.25,
    seconds: float = 90.0,
    poison_at: float = 20.0,
    work: float = 0.05,
    in_flight: int = 4,
    seed: int = 0,
    order: str = "riffdb",
):
    """One consumer ``worker`` over ``partitions`` partitions; an event every
    ``every`` s, round robin (p0, p1, ...). The first event of p0 published at or
    after ``poison_at`` has kind ``poison``: the worker nacks it (retry after
    ``nack_delay``) every time, and the 10th failed attempt dead-letters it.
    Head-of-line: p0's later events wait behind it. RiffDB's rule: the retry
    holds no lease, p0's later events go on (acknowledged past the checkpoint,
    which waits for the dead letter)."""
    sim = _sim(seed=seed, order=order)
    sim.register_consumer(
        "worker",
        duration=work,
        lease_seconds=30.0,
        in_flight_limit=in_flight,
        batch_limit=in_flight,
        nack_delay=nack_delay,
        poison=lambda lease: lease.kind == "poison",
    )
    poisoned = False
    n = int(round(seconds / every))
    for i in range(n):
        sim.run(until=i * every + every / 3)
        part = f"p{i % partitions}"
        kind = "event"
        if not poisoned and part == "p0" and sim.now >= poison_at:
            kind, poisoned = "poison", True
        sim.publish(part, kind, {"i": i})
    sim.run(until=seconds + 20 * (nack_delay + 1.0))
    return sim


def order_run(
    order: str,
    *,
    partitions: int = 4,
    in_flight: int = 8,
    rate: float = 6.0,
    mean_work: float = 1.0,
    lease_seconds: float = 5.0,
    seconds: float = 300.0,
    seed: int = 0,
):
    """One consumer ``worker`` under ``order``: ``in_flight`` (and batch) leases
    over ``partitions`` partitions, exponential work of mean ``mean_work`` s
    (sometimes longer than its ``lease_seconds`` lease: duplicates), Poisson
    events at ``rate``/s for ``seconds``, then 60 s to drain."""
    sim = _sim(seed=seed, order=order)
    sim.register_consumer(
        "worker",
        duration=la.work_law("exponential", mean_work),
        lease_seconds=lease_seconds,
        in_flight_limit=in_flight,
        batch_limit=in_flight,
        nack_delay=1.0,
    )
    sim.add_workload(rate, partitions=partitions, stop=seconds)
    sim.run(until=seconds + 60.0)
    return sim


def inflight_run(
    in_flight: int,
    partitions: int,
    *,
    rate: float = 8.0,
    mean_work: float = 1.0,
    seconds: float = 60.0,
    seed: int = 0,
    order: str = "riffdb",
):
    """One consumer ``worker`` with ``in_flight`` (and batch) limit over
    ``partitions`` partitions; exponential work of mean ``mean_work`` s, leases of
    60 s (none expires); Poisson events at ``rate``/s for ``seconds``."""
    sim = _sim(seed=seed, order=order)
    sim.register_consumer(
        "worker",
        duration=la.work_law("exponential", mean_work),
        lease_seconds=60.0,
        in_flight_limit=in_flight,
        batch_limit=in_flight,
    )
    sim.add_workload(rate, partitions=partitions, stop=seconds)
    sim.run(until=seconds)
    return sim


def inflight_sweep(
    in_flights: Iterable[int] = range(1, 9),
    partition_counts: Iterable[int] = (1, 4, 8),
    *,
    rate: float = 8.0,
    mean_work: float = 1.0,
    seconds: float = 60.0,
    warmup: float = 10.0,
    poll_interval: float = 0.5,
    seed: int = 0,
    order: str = "riffdb",
) -> pd.DataFrame:
    """Every (partitions, in_flight): ``throughput`` (acks per second after
    ``warmup``), ``slots`` — the leases that can be out at once with a backlog:
    min(in_flight, partitions) under head-of-line, in_flight under RiffDB's rule
    (a partition's window holds up to 65) — ``theory`` = slots / (mean_work +
    poll_interval / 2) (each slot works, then waits half a client poll on average
    for its next lease), the peak number of leases out, and publish →
    acknowledged latency (p50, p99) of the events done; ``order`` names the rule."""
    rows = []
    for parts in partition_counts:
        for k in in_flights:
            sim = inflight_run(
                k, parts, rate=rate, mean_work=mean_work, seconds=seconds, seed=seed, order=order
            )
            t = sim.trace()
            acked = t[t["kind"] == "acked"]
            ts = since_start(sim, acked["t"])
            thr = float(((ts >= warmup) & (ts < seconds)).sum()) / (seconds - warmup)
            lat = la.event_outcomes(sim, "worker")["latency_s"].dropna()
            slots = min(k, parts) if order == "head_of_line" else k
            rows.append(
                {
                    "order": order,
                    "partitions": parts,
                    "in_flight": k,
                    "slots": slots,
                    "throughput": thr,
                    "theory": slots / (mean_work + poll_interval / 2),
                    "peak_leases": la.peak_leases(sim),
                    "offered": rate,
                    "p50_s": percentile(lat, 0.5),
                    "p99_s": percentile(lat, 0.99),
                }
            )
    return pd.DataFrame(rows)


FENCE_MODES = ("no stalled consumer", "stalled, then retired", "stalled, then resumed")


def fence_run(
    mode: str = "stalled, then retired",
    *,
    at: float = 300.5,
    retention: float = 60.0,
    retention_interval: float = 10.0,
    rate: float = 2.0,
    seconds: float = 600.0,
    partitions: int = 4,
    seed: int = 0,
    order: str = "riffdb",
):
    """A live consumer ``indexer`` under ``retention`` s of retention (pruned every
    ``retention_interval`` s), Poisson events at ``rate``/s for ``seconds``. In
    ``mode`` (:data:`FENCE_MODES`) a second consumer ``reporting`` exists from the
    start but its process is down (it never consumes: its checkpoint is the
    fence); at ``at`` it is retired, or its client starts and it catches up."""
    if mode not in FENCE_MODES:
        raise ValueError(f"mode must be one of {FENCE_MODES}, got {mode!r}")
    sim = _sim(
        LeaseConfig(retention=retention, retention_interval=retention_interval),
        seed=seed,
        order=order,
    )
    sim.register_consumer("indexer", duration=0.01, in_flight_limit=8, batch_limit=8)
    if mode != FENCE_MODES[0]:
        sim.register_consumer("reporting", client=False, in_flight_limit=8, batch_limit=8)
    sim.add_workload(rate, partitions=partitions, stop=seconds)
    sim.run(until=at)
    if mode == FENCE_MODES[1]:
        sim.retire("reporting")
    elif mode == FENCE_MODES[2]:
        sim.register_consumer("reporting", duration=0.01, in_flight_limit=8, batch_limit=8)
    sim.run(until=seconds)
    return sim


def fence_summary(runs: dict, at: float = 300.5) -> pd.DataFrame:
    """Per labelled run of :func:`fence_run`: peak rows retained, rows retained at
    ``at`` (when the stalled consumer was retired or resumed) and at the end,
    rows pruned, and the ``reporting`` consumer's delivered and lost (with causes)."""
    rows = []
    for label, sim in runs.items():
        size = la.events_size(sim)
        t = sim.trace()
        r = check_leases(sim)
        pc = r.per_consumer.set_index("consumer")
        lost = r.lost[r.lost["consumer"] == "reporting"]["cause"].value_counts().to_dict()
        before = int(size.loc[size["t_s"] <= at, "rows"].iloc[-1])
        rows.append(
            {
                "run": label,
                "peak_rows": int(size["rows"].max()),
                "rows_at_change": before,
                "rows_at_end": int(size["rows"].iloc[-1]),
                "pruned": int((t["kind"] == "pruned").sum()),
                "reporting_delivered": (
                    int(pc.loc["reporting", "delivered"]) if "reporting" in pc.index else 0
                ),
                "reporting_lost": (
                    int(pc.loc["reporting", "lost"]) if "reporting" in pc.index else 0
                ),
                "lost_causes": ",".join(f"{k}={v}" for k, v in sorted(lost.items())) or "-",
                "valid": r.valid,
            }
        )
    return pd.DataFrame(rows)


def restore_run(
    *,
    at: float = 60.25,
    rate: float = 1.0,
    partitions: int = 4,
    mean_work: float = 3.0,
    lease_seconds: float = 30.0,
    seconds: float = 120.0,
    seed: int = 0,
    order: str = "riffdb",
):
    """One consumer ``worker`` (uniform work around ``mean_work`` s, 30 s leases,
    4 in flight) under Poisson events at ``rate``/s for ``seconds``; at ``at`` a
    restore publishes a new history incarnation (every live lease becomes a
    failed attempt, redelivered as the next one)."""
    sim = _sim(seed=seed, order=order)
    sim.register_consumer(
        "worker",
        duration=la.work_law("uniform", mean_work),
        lease_seconds=lease_seconds,
        in_flight_limit=4,
        batch_limit=4,
    )
    sim.add_workload(rate, partitions=partitions, stop=seconds)
    sim.run(until=at)
    sim.restore()
    sim.run(until=seconds + 60.0)
    return sim


def stale_token_demo(seed: int = 0) -> pd.DataFrame:
    """By hand: lease an event, restore, then ack with the pre-restore token (it
    fails closed: ``stale_incarnation``), lease the event again and ack with the
    new token (``acked``). One row per step: ``step``, ``incarnation`` and ``result``."""
    sim = _sim(seed=seed)
    sim.register_consumer("c", client=False)
    eid = sim.publish("p0", "ticket.changed", {"ticket": 7})
    rows = []
    (old,) = sim.consume("c")
    rows.append(
        {
            "step": f"consume {eid}",
            "incarnation": old.incarnation,
            "result": f"lease, attempt {old.attempt}",
        }
    )
    inc = sim.restore()
    rows.append({"step": "restore", "incarnation": inc, "result": "new history incarnation"})
    rows.append(
        {
            "step": "ack with the old token",
            "incarnation": old.incarnation,
            "result": sim.ack("c", eid, old.token, old.incarnation),
        }
    )
    (new,) = sim.consume("c")
    rows.append(
        {
            "step": f"consume {eid} again",
            "incarnation": new.incarnation,
            "result": f"lease, attempt {new.attempt}",
        }
    )
    rows.append(
        {
            "step": "ack with the new token",
            "incarnation": new.incarnation,
            "result": sim.ack("c", eid, new.token, new.incarnation),
        }
    )
    return pd.DataFrame(rows)


def backup_restore_run(
    *,
    backup_at: float = 40.25,
    restore_at: float = 80.25,
    rate: float = 1.0,
    partitions: int = 4,
    mean_work: float = 3.0,
    in_flight: int = 2,
    seconds: float = 160.0,
    join_at: float = 60.0,
    seed: int = 0,
):
    """One consumer ``worker`` (uniform work around ``mean_work`` s, ``in_flight``
    leases) under Poisson events at ``rate``/s for ``seconds``; a second one,
    ``audit``, created at ``join_at``. A backup is taken at ``backup_at`` and
    restored at ``restore_at`` (the scenario fault ``restore_backup``)."""
    sim = LeaseSimulation(
        seed=seed, faults=FaultPlan([RestoreBackup(backup_at=backup_at, at=restore_at)])
    )
    sim.register_consumer(
        "worker",
        duration=la.work_law("uniform", mean_work),
        in_flight_limit=in_flight,
        batch_limit=in_flight,
    )
    sim.env.process(_join_later(sim, join_at, "audit", mean_work))
    sim.add_workload(rate, partitions=partitions, stop=seconds)
    sim.run(until=seconds + 60.0)
    return sim


def _join_later(sim, at: float, name: str, mean_work: float):
    yield sim.env.timeout(at)
    sim.register_consumer(name, duration=la.work_law("uniform", mean_work))


IDENTITY_MODES = ("old identity forgotten", "old identity retired")


def identity_run(
    mode: str = "old identity forgotten",
    *,
    deploy_at: float = 200.5,
    retire_at: float = 400.5,
    retention: float = 60.0,
    retention_interval: float = 10.0,
    rate: float = 2.0,
    seconds: float = 600.0,
    partitions: int = 4,
    seed: int = 0,
):
    """The consumer ``indexer`` of operation ``TicketEvents`` under module v1
    (a :class:`~fanoutsim.designs.leases.identity.ConsumerIdentity`); at
    ``deploy_at`` module v2 is deployed (:meth:`~.simulation.LeaseSimulation.deploy`,
    start ``"end"``): a new durable consumer takes over, the v1 identity stops
    being pulled and keeps its fence. In ``mode`` (:data:`IDENTITY_MODES`) the
    v1 identity is left alone, or retired at ``retire_at``. Retention keeps
    ``retention`` s. ``sim.identities`` holds ``(v1, v2)``."""
    if mode not in IDENTITY_MODES:
        raise ValueError(f"mode must be one of {IDENTITY_MODES}, got {mode!r}")
    sim = _sim(LeaseConfig(retention=retention, retention_interval=retention_interval), seed=seed)
    v1 = ConsumerIdentity(
        module_hash("reactive TicketActivity version 1"),
        "TicketEvents",
        "indexer",
        {"organization_id": "org-1"},
    )
    sim.register_consumer(v1, duration=0.01, in_flight_limit=8, batch_limit=8)
    sim.add_workload(rate, partitions=partitions, stop=seconds)
    sim.run(until=deploy_at)
    v2 = sim.deploy(v1, module_hash("reactive TicketActivity version 2"), start="end")
    if mode == IDENTITY_MODES[1]:
        sim.run(until=retire_at)
        sim.retire(v1.key)
    sim.run(until=seconds)
    sim.identities = (v1, v2)
    return sim


def identity_summary(runs: dict) -> pd.DataFrame:
    """Per labelled run of :func:`identity_run`: each identity's key, whether it
    still exists, its checkpoints' lowest seq, what it delivered and has
    pending, and the events retained at the end."""
    rows = []
    for label, sim in runs.items():
        r = check_leases(sim).per_consumer.set_index("consumer")
        retained = len(sim.events())
        for which, ident in zip(("v1", "v2"), sim.identities):
            st = sim.status(ident.key)
            rows.append(
                {
                    "run": label,
                    "module": which,
                    "consumer": ident.key,
                    "exists": st is not None,
                    "lowest_checkpoint": (
                        min(st["checkpoints"].values()) if st and st["checkpoints"] else None
                    ),
                    "delivered": int(r.loc[ident.key, "delivered"]) if ident.key in r.index else 0,
                    "pending": int(r.loc[ident.key, "pending"]) if ident.key in r.index else 0,
                    "events_retained": retained,
                }
            )
    return pd.DataFrame(rows)
