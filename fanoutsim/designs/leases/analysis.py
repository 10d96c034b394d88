"""Leased durable consumers (RiffDB): readers of a finished run.

Pure functions over a :class:`~fanoutsim.designs.leases.simulation.LeaseSimulation`
(or ``LeaseRealtime``) and its trace — what happened to every event and
attempt, and the theory to hold it against:

* per event and per attempt: :func:`published_events`, :func:`event_outcomes`
  (publish → first delivery → acknowledged or dead-lettered, deliveries,
  attempts), :func:`checkpoint_path` (a consumer's checkpoint per partition over
  time), :func:`ack_outcomes` (what every ack, nack and expiry came to),
  :func:`events_size` (rows in the ``events`` table over time),
  :func:`peak_leases` and :func:`lease_summary` (one row per consumer: the
  checker's counts and latency);
* lease length against work time: :func:`work_law` and :func:`p_exceeds`
  (a duration law and the chance one attempt outlives its lease),
  :func:`expected_duplicates`, :func:`work_laws` (the laws as scenario
  tables, a sweep's grid) and :func:`lease_table` (a sweep's table with the
  law and the theory); :func:`orphan_holds` (how long a crash's orphaned
  leases held their events);
* per partition: :func:`partition_summary`, :func:`order_comparison`
  (throughput, duplicates and latency per partition of runs under each rule);
* restores: :func:`restore_summary`, :func:`backup_restore_summary`.

The experiments the notebooks run with these (a crash sweep, the fence, a
restore in a running system, ...) live beside the notebooks, in
``notebooks/experiments/leases.py``, where a learner reads them.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from fanoutsim.designs.leases import MAX_ATTEMPTS
from fanoutsim.designs.leases.checker import check_leases
from fanoutsim.kernel.timeutil import US

LAWS = ("exponential", "uniform", "lognormal")
LOGNORMAL_SIGMA = 1.0
ACK_RESULTS = ("acked", "stale_incarnation", "expired", "wrong_token", "no_lease", "not_found")
OUTCOME_KINDS = (
    "acked",
    "ack refused: stale_incarnation",
    "ack refused: expired",
    "ack refused: wrong_token",
    "ack refused: no_lease",
    "ack refused: not_found",
    "nacked",
    "lease expired",
    "dead_lettered",
    "lease voided",
)
ORDERS = ("head_of_line", "riffdb")


def _rel(sim, t) -> np.ndarray:
    return (np.asarray(t, dtype="int64") - sim.start_us) / US


def _pct(x: pd.Series, q: float) -> float:
    return float(x.quantile(q)) if len(x) else float("nan")


# -- per event, per attempt -------------------------------------------------------


def published_events(sim) -> pd.DataFrame:
    """One row per published event: ``event_id``, ``partition``, ``seq`` and
    ``published_s`` (virtual seconds since the run's start)."""
    t = sim.trace()
    p = t[t["kind"] == "published"]
    return pd.DataFrame(
        {
            "event_id": p["event_id"].to_numpy(),
            "partition": p["partition"].to_numpy(),
            "seq": p["detail"].astype(int).to_numpy(),
            "published_s": _rel(sim, p["t"]),
        }
    )


def event_outcomes(sim, consumer: str | None = None) -> pd.DataFrame:
    """One row per (consumer, event) the consumer leased at least once:
    ``partition``, ``seq``, ``published_s``, ``first_delivered_s``, ``done_s``
    (acknowledged or dead-lettered), ``outcome`` (``acked``, ``dead_lettered``
    or ``pending``), ``deliveries`` (worker effects), ``attempts`` (leases) and
    ``latency_s`` = done − published (NaN while pending)."""
    t = sim.trace()
    if consumer is not None:
        t = t[t["consumer"] == consumer]
    t = t.assign(t_s=_rel(sim, t["t"]))
    cols = [
        "consumer",
        "event_id",
        "partition",
        "seq",
        "published_s",
        "first_delivered_s",
        "done_s",
        "outcome",
        "deliveries",
        "attempts",
        "latency_s",
    ]
    leased = t[t["kind"] == "leased"].groupby(["consumer", "event_id"]).size().rename("attempts")
    if leased.empty:
        return pd.DataFrame(columns=cols)
    out = leased.reset_index()
    dl = t[t["kind"] == "delivered"].groupby(["consumer", "event_id"])["t_s"].agg(["min", "size"])
    dl.columns = ["first_delivered_s", "deliveries"]
    done = t[t["kind"].isin(["acked", "dead_lettered"])].drop_duplicates(["consumer", "event_id"])
    done = done.set_index(["consumer", "event_id"])[["t_s", "kind"]]
    done.columns = ["done_s", "outcome"]
    out = out.join(dl, on=["consumer", "event_id"]).join(done, on=["consumer", "event_id"])
    out = out.merge(published_events(sim), on="event_id", how="left")
    out["deliveries"] = out["deliveries"].fillna(0).astype(int)
    out["outcome"] = out["outcome"].fillna("pending")
    out["latency_s"] = out["done_s"] - out["published_s"]
    return out[cols].sort_values(["consumer", "seq"]).reset_index(drop=True)


def checkpoint_path(sim, consumer: str) -> pd.DataFrame:
    """Every move of ``consumer``'s checkpoints (the trace's ``checkpoint``
    events): ``t_s``, ``partition``, ``seq`` (the event it moved past; under
    RiffDB's rule one move may pass several events acknowledged out of order)
    and ``how`` that event was resolved (``acked`` or ``dead_lettered``), in time order."""
    t = sim.trace()
    mine = t[t["consumer"] == consumer]
    sel = mine[mine["kind"] == "checkpoint"]
    dead = set(mine.loc[mine["kind"] == "dead_lettered", "event_id"])
    return pd.DataFrame(
        {
            "t_s": _rel(sim, sel["t"]),
            "partition": sel["partition"].to_numpy(),
            "seq": sel["detail"].astype(int).to_numpy(),
            "how": ["dead_lettered" if e in dead else "acked" for e in sel["event_id"]],
        }
    ).reset_index(drop=True)


def checkpoints_at(sim, consumer: str, t_s: float) -> dict[str, int]:
    """``consumer``'s checkpoint per partition just before virtual time ``t_s``."""
    p = checkpoint_path(sim, consumer)
    p = p[p["t_s"] < t_s]
    return {str(k): int(v) for k, v in p.groupby("partition")["seq"].max().items()}


def ack_outcomes(sim) -> pd.DataFrame:
    """Per consumer, how every attempt ended (columns :data:`OUTCOME_KINDS`, zeros
    kept): acks that moved a checkpoint, acks refused (by reason: the lease's
    incarnation was stale, it had expired, the token was replaced, no lease, the
    consumer retired), nacks, leases expired in recovery, dead letters and leases
    voided (by restore, seek or retire)."""
    t = sim.trace()
    names = sorted(set(sim.consumers()["consumer"])) if len(sim.consumers()) else []
    kinds = {
        "acked": "acked",
        "nacked": "nacked",
        "expired": "lease expired",
        "dead_lettered": "dead_lettered",
        "lease_voided": "lease voided",
    }
    rows = []
    for name in names:
        mine = t[t["consumer"] == name]
        counts = dict.fromkeys(OUTCOME_KINDS, 0)
        for k, label in kinds.items():
            counts[label] = int((mine["kind"] == k).sum())
        refused = mine.loc[mine["kind"] == "ack_refused", "detail"].value_counts()
        for reason, n in refused.items():
            counts[f"ack refused: {reason}"] = counts.get(f"ack refused: {reason}", 0) + int(n)
        rows.append({"consumer": name, **counts})
    return pd.DataFrame(rows, columns=["consumer", *OUTCOME_KINDS])


def events_size(sim, step: float = 1.0) -> pd.DataFrame:
    """Rows in the ``events`` table (published minus pruned), sampled every
    ``step`` virtual seconds: ``t_s`` and ``rows``."""
    t = sim.trace()
    sel = t[t["kind"].isin(["published", "pruned"])]
    delta = np.where(sel["kind"] == "published", 1, -1)
    ts, rows = _rel(sim, sel["t"]), np.cumsum(delta)
    grid = np.arange(0.0, sim.now + step / 2, step)
    k = np.searchsorted(ts, grid, side="right") - 1
    return pd.DataFrame({"t_s": grid, "rows": np.where(k >= 0, rows[np.maximum(k, 0)], 0)})


def lease_summary(sim, checked=None) -> pd.DataFrame:
    """One row per consumer: the checker's delivered, duplicates, lost,
    dead_lettered and pending, the duplicates per cause, refused acks, leases
    expired, and publish → done latency (p50, p99, max)."""
    checked = check_leases(sim) if checked is None else checked
    ev, out = event_outcomes(sim), ack_outcomes(sim).set_index("consumer")
    rows = []
    for r in checked.per_consumer.to_dict("records"):
        c = r["consumer"]
        lat = ev.loc[ev["consumer"] == c, "latency_s"].dropna()
        dups = checked.duplicates.loc[checked.duplicates["consumer"] == c, "cause"].value_counts()
        refused = sum(int(out.loc[c, k]) for k in OUTCOME_KINDS if k.startswith("ack refused")) if c in out.index else 0
        rows.append(
            {
                **{k: r[k] for k in ("consumer", "delivered", "duplicates", "lost", "dead_lettered", "pending")},
                "duplicates_by_cause": {str(k): int(v) for k, v in sorted(dups.items())},
                "acks_refused": refused,
                "leases_expired": int(out.loc[c, "lease expired"]) if c in out.index else 0,
                "latency_p50_s": round(_pct(lat, 0.5), 3),
                "latency_p99_s": round(_pct(lat, 0.99), 3),
                "latency_max_s": round(float(lat.max()) if len(lat) else float("nan"), 3),
            }
        )
    return pd.DataFrame(rows)


# -- lease length against work time ------------------------------------------------------


def work_law(law: str, mean: float) -> Callable:
    """A worker's duration law with mean ``mean`` seconds, as ``fn(rng) -> seconds``:
    ``exponential``; ``uniform`` on [0, 2·mean] (bounded); ``lognormal`` with
    σ = 1 (a heavier tail than the exponential)."""
    if law not in LAWS:
        raise ValueError(f"law must be one of {', '.join(LAWS)}, got {law!r}")
    if not mean > 0:
        raise ValueError(f"mean must be > 0 seconds, got {mean!r}")
    if law == "exponential":
        return lambda rng: rng.expovariate(1.0 / mean)
    if law == "uniform":
        return lambda rng: rng.uniform(0.0, 2.0 * mean)
    mu = math.log(mean) - LOGNORMAL_SIGMA**2 / 2
    return lambda rng: rng.lognormvariate(mu, LOGNORMAL_SIGMA)


def p_exceeds(law: str, mean: float, lease_seconds: float) -> float:
    """The chance one attempt's work outlasts its lease: P(duration > lease)."""
    work_law(law, mean)
    x = float(lease_seconds)
    if law == "exponential":
        return math.exp(-x / mean)
    if law == "uniform":
        return max(0.0, 1.0 - x / (2.0 * mean))
    mu = math.log(mean) - LOGNORMAL_SIGMA**2 / 2
    return 0.5 * math.erfc((math.log(x) - mu) / (LOGNORMAL_SIGMA * math.sqrt(2)))


def expected_duplicates(p: float, max_attempts: int = MAX_ATTEMPTS) -> float:
    """Extra deliveries per event when each attempt outlives its lease with chance
    ``p``: every attempt ends in an effect (late or not), the event is re-leased
    until one acks in time, at most ``max_attempts`` times:
    (1 − p^n) / (1 − p) − 1."""
    if p >= 1.0:
        return float(max_attempts - 1)
    return (1.0 - p**max_attempts) / (1.0 - p) - 1.0


def work_laws(mean: float = 5.0) -> dict[str, dict]:
    """:func:`work_law`'s laws as scenario ``duration`` tables (``{dist = ...}``),
    by name: the values of the grid key ``consumers.worker.duration`` of a
    :func:`fanoutsim.sweep` of :func:`lease_scenario`. The lognormal is given
    by its median, ``mean · e^(−σ²/2)``; a scenario draws it as
    ``median · e^(σ·gauss)`` where :func:`work_law` draws ``lognormvariate``:
    the same law, another stream of numbers."""
    work_law("exponential", mean)
    return {
        "exponential": {"dist": "exponential", "mean": float(mean)},
        "uniform": {"dist": "uniform", "low": 0.0, "high": 2.0 * float(mean)},
        "lognormal": {
            "dist": "lognormal",
            "median": float(mean) * math.exp(-(LOGNORMAL_SIGMA**2) / 2),
            "sigma": LOGNORMAL_SIGMA,
        },
    }


def lease_table(
    df: pd.DataFrame, duration: str = "consumers.worker.duration", lease: str = "consumers.worker.lease_seconds"
) -> pd.DataFrame:
    """A :func:`fanoutsim.sweep` table of :func:`lease_scenario` as
    :func:`lease_sweep`'s: ``law``, ``lease_seconds``, ``mean_work``,
    ``lease_over_work``, ``p_exceeds``, ``dups_per_1000`` (per 1000 events
    delivered), ``theory_per_1000``, and the sweep's counts and
    ``publish_to_ack_{p50,p99}_s`` as ``p50_s`` and ``p99_s``."""
    missing = [c for c in (duration, lease, "duplicates", "delivered") if c not in df.columns]
    if missing:
        raise KeyError(f"lease_table needs a sweep over {duration!r} and {lease!r}; missing: {', '.join(missing)}")
    out = pd.DataFrame({"law": [d["dist"] for d in df[duration]], "lease_seconds": df[lease].astype(float)})
    means = [
        float(d.get("mean", (d.get("low", 0.0) + d.get("high", 0.0)) / 2))
        if d["dist"] != "lognormal"
        else float(d["median"]) * math.exp(float(d["sigma"]) ** 2 / 2)
        for d in df[duration]
    ]
    out["mean_work"] = np.round(means, 9)
    out["lease_over_work"] = out["lease_seconds"] / out["mean_work"]
    if "seed" in df.columns:
        out["seed"] = df["seed"].to_numpy()
    out["p_exceeds"] = [p_exceeds(law, m, x) for law, m, x in zip(out["law"], out["mean_work"], out["lease_seconds"])]
    for c in ("published", "delivered", "duplicates"):
        out[c] = df[c].to_numpy()
    out["dups_per_1000"] = 1000.0 * out["duplicates"] / out["delivered"].clip(lower=1)
    out["theory_per_1000"] = [1000.0 * expected_duplicates(p) for p in out["p_exceeds"]]
    for c in ("dead_lettered", "lost", "valid"):
        out[c] = df[c].to_numpy()
    out["p50_s"] = df["publish_to_ack_p50_s"].to_numpy()
    out["p99_s"] = df["publish_to_ack_p99_s"].to_numpy()
    return out


def orphan_holds(sim) -> pd.DataFrame:
    """Every lease a crash orphaned (granted, not acked, nacked, expired or voided
    before the node went down): ``crash_s``, ``partition``, ``event_id``,
    ``leased_s``, ``expired_s`` (when expiry freed it) and ``hold_s`` (from
    the crash to then: how long its event — head-of-line: its partition — stood still)."""
    t = sim.trace()
    kinds, who, eids, parts = (t[c].tolist() for c in ("kind", "consumer", "event_id", "partition"))
    ts = _rel(sim, t["t"]).tolist()
    ends = {"acked", "nacked", "expired", "lease_voided", "dead_lettered"}
    open_: dict[tuple, tuple] = {}  # (consumer, event_id) -> (leased_s, partition)
    orphans: dict[tuple, dict] = {}
    rows = []
    for i, k in enumerate(kinds):
        key = (who[i], eids[i])
        if k == "leased":
            open_[key] = (ts[i], parts[i])
        elif k in ends:
            if k == "expired" and key in orphans:
                o = orphans.pop(key)
                rows.append({**o, "expired_s": ts[i], "hold_s": ts[i] - o["crash_s"]})
            open_.pop(key, None)
        elif k == "crashed":
            for (c, e), (lt, part) in open_.items():
                orphans[(c, e)] = {"crash_s": ts[i], "consumer": c, "partition": part, "event_id": e, "leased_s": lt}
            open_.clear()
    cols = ["crash_s", "consumer", "partition", "event_id", "leased_s", "expired_s", "hold_s"]
    return pd.DataFrame(rows, columns=cols).sort_values(["crash_s", "partition"]).reset_index(drop=True)


# -- per partition ---------------------------------------------------------------------------


def partition_summary(sim, consumer: str = "worker") -> pd.DataFrame:
    """Per partition of one consumer: events done, dead letters, failed attempts
    (nacks and expiries), publish → done latency (p50, max), the worst latency of
    the events that were acknowledged (``acked_latency_max_s``: how long a good
    event waited) and the longest time its checkpoint stood still."""
    ev = event_outcomes(sim, consumer)
    t = sim.trace()
    mine = t[t["consumer"] == consumer]
    fails = mine[mine["kind"].isin(["nacked", "expired"])].groupby("partition").size()
    path = checkpoint_path(sim, consumer)
    rows = []
    for part, g in ev.groupby("partition"):
        p = path[path["partition"] == part]["t_s"].to_numpy()
        gaps = np.diff(p) if len(p) > 1 else np.array([0.0])
        lat = g["latency_s"].dropna()
        good = g.loc[g["outcome"] == "acked", "latency_s"].dropna()
        rows.append(
            {
                "partition": part,
                "done": int((g["outcome"] != "pending").sum()),
                "dead_lettered": int((g["outcome"] == "dead_lettered").sum()),
                "failed_attempts": int(fails.get(part, 0)),
                "latency_p50_s": round(_pct(lat, 0.5), 3),
                "latency_max_s": round(float(lat.max()) if len(lat) else float("nan"), 3),
                "acked_latency_max_s": round(float(good.max()) if len(good) else float("nan"), 3),
                "longest_stall_s": round(float(gaps.max()), 3),
            }
        )
    return pd.DataFrame(rows)


def order_comparison(runs: dict, *, seconds: float = 300.0, warmup: float = 10.0) -> pd.DataFrame:
    """Per run of :func:`order_run` (``{order: sim}``) and partition: events
    published, delivered, ``duplicates`` (all causes), ``acks_per_s`` (first
    acks of the partition's events between ``warmup`` and ``seconds``), the
    peak number of the partition's leases out at once (``all``: of every
    partition together), publish → acked latency (p50, p99) and the events still
    ``pending`` at the end. A row ``all`` per run covers every partition."""
    rows = []
    for order, sim in runs.items():
        r = check_leases(sim)
        ev = event_outcomes(sim, "worker")
        pub = published_events(sim)
        dups = r.duplicates.merge(pub[["event_id", "partition"]], on="event_id", how="left")
        peaks = _peak_leases_by_partition(sim)
        for part in sorted(pub["partition"].unique()) + ["all"]:
            g = ev if part == "all" else ev[ev["partition"] == part]
            acked = g[g["outcome"] == "acked"]
            done = acked["done_s"]
            rows.append(
                {
                    "order": order,
                    "partition": part,
                    "published": int(len(pub) if part == "all" else (pub["partition"] == part).sum()),
                    "delivered": int((g["deliveries"] > 0).sum()),
                    "duplicates": int(len(dups) if part == "all" else (dups["partition"] == part).sum()),
                    "acks_per_s": float(((done >= warmup) & (done < seconds)).sum()) / (seconds - warmup),
                    "peak_leases": int(peak_leases(sim) if part == "all" else peaks.get(part, 0)),
                    "p50_s": _pct(acked["latency_s"], 0.5),
                    "p99_s": _pct(acked["latency_s"], 0.99),
                    "pending": int(
                        (g["outcome"] == "pending").sum()
                        + (len(pub) if part == "all" else (pub["partition"] == part).sum())
                        - len(g)
                    ),
                }
            )
    return pd.DataFrame(rows)


def _peak_leases_by_partition(sim, consumer: str = "worker") -> dict[str, int]:
    t = sim.trace()
    sel = t[(t["consumer"] == consumer) & t["kind"].isin(["leased", "acked", "nacked", "expired", "lease_voided"])]
    live: dict[str, int] = {}
    peak: dict[str, int] = {}
    for kind, part in zip(sel["kind"].tolist(), sel["partition"].tolist()):
        live[part] = live.get(part, 0) + (1 if kind == "leased" else -1)
        peak[part] = max(peak.get(part, 0), live[part])
    return peak


def peak_leases(sim) -> int:
    """The most leases out at once in a run (every consumer together)."""
    t = sim.trace()
    sel = t[t["kind"].isin(["leased", "acked", "nacked", "expired", "lease_voided"])]
    d = np.where(sel["kind"] == "leased", 1, -1)
    return int(np.cumsum(d).max()) if len(d) else 0


# -- restores ---------------------------------------------------------------------------------


def restore_summary(sim, consumer: str = "worker") -> dict:
    """What a restore did: when (``restore_s``), the new ``incarnation``, the
    leases it voided, the acks that then failed closed as ``stale_incarnation``,
    the duplicates (by cause) and losses, the attempt each voided lease's event
    was leased again as (``redelivered_as_attempt``: attempt -> events; the
    restore counted a failed attempt), and per partition the checkpoint at the
    restore against the seq of the first event leased after it (``resumed``:
    the next one, as the checkpoint says)."""
    t = sim.trace()
    res = t[t["kind"] == "restored"]
    if res.empty:
        raise ValueError("this run has no restore")
    at_i, at_s = res.index[0], float(_rel(sim, res["t"])[0])
    r = check_leases(sim)
    mine = t[t["consumer"] == consumer]
    seqs = published_events(sim).set_index("event_id")["seq"]
    before = checkpoints_at(sim, consumer, at_s)
    after = mine[(mine.index > at_i) & (mine["kind"] == "leased")].drop_duplicates("partition")
    first = {p: int(seqs[e]) for p, e in zip(after["partition"], after["event_id"])}
    parts = []
    for p in sorted(set(before) | set(first)):
        nxt = seqs[(published_events(sim).set_index("event_id")["partition"] == p)]
        cp = before.get(p)
        want = nxt[nxt > (cp if cp is not None else 0)].min() if len(nxt) else None
        parts.append(
            {
                "partition": p,
                "checkpoint_at_restore": cp,
                "first_leased_after": first.get(p),
                "resumed": first.get(p) == (None if want is None or pd.isna(want) else int(want)),
            }
        )
    refused = mine[(mine["kind"] == "ack_refused")]["detail"].value_counts().to_dict()
    voided = set(mine.loc[(mine["kind"] == "lease_voided") & (mine["detail"] == "restore"), "event_id"])
    again = mine[(mine.index > at_i) & (mine["kind"] == "leased") & mine["event_id"].isin(voided)]
    again = again.drop_duplicates("event_id")["detail"].str.split().str[1].astype(int).value_counts()
    return {
        "restore_s": at_s,
        "incarnation": int(sim.history()["incarnation"].iloc[0]),
        "leases_voided": int(((t["kind"] == "lease_voided") & (t["detail"] == "restore")).sum()),
        "redelivered_as_attempt": {int(k): int(v) for k, v in sorted(again.items())},
        "acks_refused": {str(k): int(v) for k, v in sorted(refused.items())},
        "duplicates_by_cause": r.total["duplicates_by_cause"],
        "duplicates": r.total["duplicates"],
        "lost": r.total["lost"],
        "valid": r.valid,
        "partitions": pd.DataFrame(parts),
    }


def _checkpoints_then(sim, consumer: str, t_s: float) -> dict[str, int]:
    """``consumer``'s checkpoint per partition at ``t_s``: the last move at or
    before it (a restore from backup moves checkpoints back)."""
    p = checkpoint_path(sim, consumer)
    p = p[p["t_s"] <= t_s]
    return {str(k): int(v) for k, v in p.groupby("partition")["seq"].last().items()}


def backup_restore_summary(sim) -> pd.DataFrame:
    """Per consumer life, what a restore from backup did: its checkpoints at the
    backup, just before the restore and just after it, and the checker's
    duplicates and losses by cause. ``attrs``: ``backup_s``, ``restore_s``, the
    new ``incarnation``, ``published_between`` (events published after the
    backup and before the restore: the log lost them) and ``valid``."""
    t = sim.trace()
    taken, back = t[t["kind"] == "backup"], t[t["kind"] == "backup_restored"]
    if taken.empty or back.empty:
        raise ValueError("this run has no restore from backup")
    b_s, r_s = float(_rel(sim, taken["t"])[0]), float(_rel(sim, back["t"])[0])
    r = check_leases(sim)
    pub = published_events(sim)
    last_seq = int(taken["detail"].iloc[0].rsplit(":", 1)[1])
    label = back["detail"].iloc[0]
    kept = next(
        (
            set(c["consumer"] for c in b.tables["lease_consumers"])
            for b in getattr(sim, "backups", ())
            if b.label == label
        ),
        None,
    )
    rows = []
    for name in sorted(r.per_consumer["consumer"]):
        dups = r.duplicates[r.duplicates["consumer"] == name]["cause"].value_counts().to_dict()
        lost = r.lost[r.lost["consumer"] == name]["cause"].value_counts().to_dict()
        base = name.split("#")[0]
        rows.append(
            {
                "consumer": name,
                "at_backup": _checkpoints_then(sim, base, b_s),
                "before_restore": _checkpoints_then(sim, base, r_s - 1e-6),
                "after_restore": (
                    _checkpoints_then(sim, base, r_s) if kept is None or base in kept else None
                ),  # None: the restore took the consumer away
                "duplicates_by_cause": dups,
                "lost_by_cause": lost,
            }
        )
    out = pd.DataFrame(rows)
    out.attrs.update(
        {
            "backup_s": b_s,
            "restore_s": r_s,
            "incarnation": int(sim.history()["incarnation"].iloc[0]),
            "published_between": int(((pub["seq"] > last_seq) & (pub["published_s"] < r_s)).sum()),
            "valid": r.valid,
        }
    )
    return out


_peak_leases = peak_leases  # the name it had before it was public
