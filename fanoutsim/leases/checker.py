"""The leases checker: per consumer, delivered, duplicated, lost, dead-lettered,
pending and out of order — and why — from the trace and the tables alone
(never the fault plan).

An event is *expected* by a consumer when it was published (a ``published``
event) with a seq past the consumer's start (``consumer_start``), and before
the consumer was retired (a retired consumer owes nothing published later). A worker's
effect is a ``delivered`` event. Then an expected event is

*delivered*      delivered once or more (each extra delivery is a *duplicate*);
*dead_lettered*  in the ``dead_letters`` table, never delivered;
*pending*        not done yet: the consumer is active, the event retained and
                 past both its start and its partition's checkpoint;
*lost*           otherwise.

Causes of a duplicate (what happened between two deliveries): ``seek`` (the
consumer was seeked), ``restore`` (a new history incarnation voided the
lease), ``lease_expired`` (the earlier delivery's ack was refused — the
lease had expired, or had expired before the effect landed — or the lease
expired in recovery with no crash between),
``crash`` (the node died after the effect and before the ack), else
``unknown``. Causes of a loss: ``seek`` (seeked past it before it was
delivered), ``retired`` (the consumer was retired first), ``pruned``
(retention deleted it — the fence should make this impossible for an active
consumer), else ``unknown``.

*Out of order*: within one partition, a first delivery of an event with a
lower seq than an event already delivered to that consumer. The broker never
leases out of order; it emerges when a worker whose lease was already gone
(expired, then the event dead-lettered or moved past) applies its effect
late — cause ``stale_lease`` (its ack was refused) — else ``unknown``.

``valid``: no loss with cause ``pruned`` or ``unknown``, every duplicate has
a cause, and no out-of-order delivery with cause ``unknown``.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from dataclasses import dataclass, field

import pandas as pd

LOSS_CAUSES = ("seek", "retired", "pruned", "unknown")
DUPLICATE_CAUSES = ("seek", "restore", "lease_expired", "crash", "unknown")
_BROKEN = ("pruned", "unknown")


@dataclass
class LeaseReport:
    per_consumer: pd.DataFrame
    duplicates: pd.DataFrame
    lost: pd.DataFrame
    out_of_order: pd.DataFrame
    total: dict = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return bool(self.total.get("valid", True))

    def __str__(self) -> str:
        t = self.total
        head = (f"leases check: {'valid' if self.valid else 'INVALID'} — {t['published']} published, "
                f"{t['delivered']} delivered, {t['duplicates']} duplicates, {t['lost']} lost, "
                f"{t['dead_lettered']} dead-lettered, {t['out_of_order']} out of order")
        return head + ("\n" + self.per_consumer.to_string(index=False) if len(self.per_consumer) else "")


def _between(idx: list[int], lo: int, hi: int) -> bool:
    """Some index in the sorted ``idx`` lies strictly between lo and hi."""
    return bisect_left(idx, hi) > bisect_right(idx, lo)


def _stale(outcomes, invalidated, d: int, end: int) -> str | None:
    """If the ack after the delivery at ``d`` (before ``end``) was refused, why
    its lease was no longer good: the last invalidation before the refusal."""
    for i, refused in outcomes:
        if d < i < end:
            if not refused:
                return None
            why = [c for j, c in invalidated if j < i]
            return why[-1] if why else "lease_expired"
    return None


def _attempt(detail) -> int | None:
    """The attempt number of a ``leased`` or ``delivered`` event ("attempt N")."""
    if isinstance(detail, str) and detail.startswith("attempt "):
        return int(detail.split()[1].rstrip(":"))
    return None


def _gone_before(granted, invalidated, d: int, attempt: int | None) -> str | None:
    """If the lease this delivery worked under was already gone (expired in
    recovery, voided by a seek or restore) when the effect landed, why."""
    g = granted.get(attempt)
    if g is None:
        return None
    why = [c for j, c in invalidated if g < j < d]
    return why[-1] if why else None


def check_leases(sim) -> LeaseReport:
    t = sim.trace()
    kinds, who, eids, details = (t[c].tolist() for c in ("kind", "consumer", "event_id", "detail"))
    published: dict[str, tuple[int, str, int]] = {}     # event_id -> (seq, partition, index)
    starts: dict[str, int] = {}
    seeks = defaultdict(list)                            # consumer -> [(index, position)]
    restores, crashes, pruned = [], [], {}
    outcomes = defaultdict(list)                         # (consumer, event_id) -> [(index, refused?)] of acks
    invalidated = defaultdict(list)                      # (consumer, event_id) -> [(index, cause)]
    expired = defaultdict(list)
    delivered = defaultdict(list)                        # consumer -> [(index, event_id)]
    granted = defaultdict(dict)                          # (consumer, event_id) -> {attempt: index leased}
    parts = t["partition"].tolist()
    for i, k in enumerate(kinds):
        if k == "published":
            published[eids[i]] = (int(details[i]), parts[i], i)
        elif k == "delivered":
            delivered[who[i]].append((i, eids[i]))
        elif k == "leased":
            granted[(who[i], eids[i])][_attempt(details[i])] = i
        elif k == "consumer_start":
            starts.setdefault(who[i], int(details[i]))
        elif k == "seek":
            seeks[who[i]].append((i, int(details[i])))
        elif k == "restored":
            restores.append(i)
        elif k == "crashed":
            crashes.append(i)
        elif k == "pruned":
            pruned.setdefault(eids[i], i)
        elif k in ("acked", "ack_refused"):
            outcomes[(who[i], eids[i])].append((i, k == "ack_refused"))
        elif k == "expired":
            expired[(who[i], eids[i])].append(i)
            invalidated[(who[i], eids[i])].append((i, "lease_expired"))
        elif k == "lease_voided":
            invalidated[(who[i], eids[i])].append((i, details[i] if details[i] in ("seek", "restore") else "retired"))

    consumers = {r["consumer"]: r for r in sim.store.rows("lease_consumers")}
    dead = {(r["consumer"], r["event_id"]) for r in sim.store.rows("dead_letters")}
    cps = defaultdict(dict)
    for r in sim.store.rows("checkpoints"):
        cps[r["consumer"]][r["partition"]] = r["seq"]
    retained = {r["event_id"] for r in sim.store.rows("events")}
    retired_at = {who[i]: i for i, k in enumerate(kinds) if k == "retired"}

    per, dups, lost, disorder = [], [], [], []
    for name in sorted(consumers):
        row, start = consumers[name], starts.get(name, consumers[name]["start_seq"])
        seek_idx = [i for i, _ in seeks[name]]
        got = defaultdict(list)
        last_seq: dict[str, int] = {}
        n = dict(delivered=0, duplicates=0, lost=0, dead_lettered=0, pending=0, out_of_order=0)
        for i, eid in delivered[name]:
            got[eid].append(i)
            seq, part, _ = published.get(eid, (None, None, None))
            if seq is None or len(got[eid]) > 1:
                continue
            if part in last_seq and seq < last_seq[part]:
                # a worker whose lease was gone (its ack refused) applied its effect late: the
                # broker leased in order; the effect was not fenced
                stale = (_stale(outcomes[(name, eid)], invalidated[(name, eid)], i, len(kinds))
                         or _gone_before(granted[(name, eid)], invalidated[(name, eid)], i, _attempt(details[i])))
                n["out_of_order"] += 1
                disorder.append({"consumer": name, "event_id": eid, "partition": part,
                                 "after_seq": last_seq[part], "cause": "stale_lease" if stale else "unknown"})
            last_seq[part] = max(seq, last_seq.get(part, seq))
        retired_i = retired_at.get(name)
        for eid, (seq, part, ip) in sorted(published.items(), key=lambda kv: kv[1][0]):
            if seq <= start or (retired_i is not None and ip > retired_i):
                continue
            times = got.get(eid)
            if times:
                n["delivered"] += 1
                bounds = times[1:] + [len(kinds)]
                # a delivery was stale if its ack was refused, or if its lease was already
                # gone when the effect landed (the worker may have died before acking)
                stale = [_stale(outcomes[(name, eid)], invalidated[(name, eid)], d, end)
                         or _gone_before(granted[(name, eid)], invalidated[(name, eid)], d, _attempt(details[d]))
                         for d, end in zip(times, bounds)]
                for j, (prev, nxt) in enumerate(zip(times, times[1:])):
                    if _between(seek_idx, prev, nxt):
                        cause = "seek"
                    elif _between(restores, prev, nxt):
                        cause = "restore"
                    elif stale[j] or stale[j + 1]:
                        cause = stale[j] or stale[j + 1]
                    elif _between(crashes, prev, nxt):
                        cause = "crash"
                    elif _between(expired[(name, eid)], prev, nxt):
                        cause = "lease_expired"
                    else:
                        cause = "unknown"
                    dups.append({"consumer": name, "event_id": eid, "cause": cause})
                    n["duplicates"] += 1
                continue
            if (name, eid) in dead:
                n["dead_lettered"] += 1
                continue
            if (not row["retired"] and eid in retained and seq > row["start_seq"]
                    and seq > cps[name].get(part, -1)):
                n["pending"] += 1
                continue
            if any(i > ip and pos >= seq for i, pos in seeks[name]):
                cause = "seek"
            elif name in retired_at:
                cause = "retired"
            elif eid in pruned:
                cause = "pruned"
            else:
                cause = "unknown"
            n["lost"] += 1
            lost.append({"consumer": name, "event_id": eid, "cause": cause})
        per.append({"consumer": name, "retired": bool(row["retired"]), **n})
    dup_df = pd.DataFrame(dups, columns=["consumer", "event_id", "cause"])
    lost_df = pd.DataFrame(lost, columns=["consumer", "event_id", "cause"])
    ooo_df = pd.DataFrame(disorder, columns=["consumer", "event_id", "partition", "after_seq", "cause"])
    total = {
        "published": len(published),
        "delivered": sum(p["delivered"] for p in per),
        "duplicates": len(dup_df), "lost": len(lost_df),
        "dead_lettered": sum(p["dead_lettered"] for p in per),
        "pending": sum(p["pending"] for p in per),
        "out_of_order": len(ooo_df),
        "duplicates_by_cause": dup_df["cause"].value_counts().to_dict(),
        "lost_by_cause": lost_df["cause"].value_counts().to_dict(),
    }
    total["valid"] = (not lost_df["cause"].isin(_BROKEN).any() and not (dup_df["cause"] == "unknown").any()
                      and not (ooo_df["cause"] == "unknown").any())
    cols = ["consumer", "retired", "delivered", "duplicates", "lost", "dead_lettered", "pending", "out_of_order"]
    return LeaseReport(pd.DataFrame(per, columns=cols), dup_df, lost_df, ooo_df, total)
