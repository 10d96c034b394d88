"""The outbox checker: per consumer, what was delivered, duplicated, lost, parked.

It reads the run's trace and tables — never the fault plan — like the reactor
design's checker. For each consumer, a row is *expected* when it committed
(a ``committed`` event) with a seq above the consumer's first cursor
(``cursor_start``). Then it is

*delivered*   handled once or more (each extra ``handled`` is a *duplicate*);
*parked*      in the ``parked`` table (its retry budget ran out), never handled;
*pending*     still ahead of the cursor and retained, or owed as deferred work;
*lost*        otherwise.

Causes of a duplicate: ``crash`` (the process crashed after handling and before
the cursor passed the row), ``reset`` (the consumer was reset and replayed:
by design), else ``unknown``. Causes of a loss: ``late_commit`` (the row
committed after this consumer's cursor had already passed its seq),
``gap_timeout`` (``read_mode="gap"`` waited for it and gave up), ``pruned``
(retention deleted it before the consumer handled it), else ``unknown``.

``valid`` is true when no loss has cause ``late_commit`` or ``unknown`` and
every duplicate has a cause: retention and a gap timeout are documented ways
to drop a row; re-delivery after a crash is the at-least-once promise.

The topic bus is reported apart (``bus``): a row is *published* when a live
dispatcher pushed it to the subscribers of its topic then (``receivers`` of
them), else *unpublished* — it committed while no dispatcher was up, and a new
process goes live at the end of the log. That is the bus's contract (best
effort, not durable), so it never counts as a loss and never touches ``valid``.
"""
from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from dataclasses import dataclass, field

import pandas as pd

from ..timeutil import US

LOSS_CAUSES = ("late_commit", "gap_timeout", "pruned", "unknown")
DUPLICATE_CAUSES = ("crash", "reset", "unknown")
_PROMISED = ("late_commit", "unknown")


@dataclass
class OutboxReport:
    per_consumer: pd.DataFrame
    duplicates: pd.DataFrame
    lost: pd.DataFrame
    parked: pd.DataFrame
    bus: pd.DataFrame = field(default_factory=pd.DataFrame)
    total: dict = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return bool(self.total.get("valid", True))

    def __str__(self) -> str:
        lines = [f"outbox check: {'valid' if self.valid else 'INVALID'} — "
                 f"{self.total['committed']} committed, {self.total['delivered']} delivered, "
                 f"{self.total['extra_deliveries']} duplicates, {self.total['lost']} lost, "
                 f"{self.total['parked']} parked"]
        if len(self.per_consumer):
            lines.append(self.per_consumer.to_string(index=False))
        if self.total.get("bus_published") or self.total.get("bus_unpublished"):
            lines.append(f"topic bus (best effort, not delivery): {self.total['bus_published']} rows published, "
                         f"{self.total['bus_unpublished']} never (no dispatcher up when they committed), "
                         f"{self.total['bus_receipts']} receipts")
        return "\n".join(lines)


def check_outbox(sim) -> OutboxReport:
    trace = sim.trace()
    ev = list(zip(range(len(trace)), trace["t"], trace["kind"], trace["consumer"], trace["seq"], trace["detail"]))
    committed: dict[int, tuple[int, int]] = {}      # seq -> (t, event index)
    pruned: dict[int, int] = {}
    crashes: list[int] = []
    handled = defaultdict(list)                      # (consumer, seq) -> [event index]
    cursor_moves = defaultdict(list)                 # consumer -> [(t, index, seq)]
    starts: dict[str, int] = {}
    resets = defaultdict(list)
    gap_skips = defaultdict(set)
    published: dict[int, tuple[str, int]] = {}       # seq -> (topic, receivers)
    t_of: list[int] = trace["t"].tolist()
    for i, t, kind, who, seq, detail in ev:
        if kind == "committed":
            committed[seq] = (t, i)
        elif kind == "handled":
            handled[(who, seq)].append(i)
        elif kind == "cursor":
            cursor_moves[who].append((i, seq))
        elif kind == "cursor_start":
            starts.setdefault(who, seq)
        elif kind == "reset":
            resets[who].append(i)
        elif kind == "pruned":
            pruned[seq] = i
        elif kind == "crashed":
            crashes.append(i)
        elif kind == "gap_skipped":
            gap_skips[who].add(seq)
        elif kind == "published":
            published[seq] = (who, int(detail))
    parked_rows = sim.store.rows("parked")
    parked = {(r["consumer"], r["seq"]) for r in parked_rows}
    deferred = {(r["consumer"], r["seq"]) for r in sim.store.rows("deferred")}
    cursors = {r["consumer"]: r["seq"] for r in sim.store.rows("cursors")}
    retained = {r["seq"]: r["topic"] for r in sim.store.rows("outbox")}

    per, dups, lost = [], [], []
    for name in sorted(cursors):
        start = starts.get(name, 0)
        moves = cursor_moves[name]
        # the highest cursor reached by each event index (the cursor only moves forward, bar resets)
        high, peak = [], 0
        for i, seq in moves:
            peak = max(peak, seq)
            high.append((i, peak))
        idx = [i for i, _ in high]
        n = dict(delivered=0, duplicates=0, lost=0, parked=0, pending=0)
        lat = []
        for seq, (tc, ic) in committed.items():
            if seq <= start:
                continue
            hs = handled.get((name, seq), [])
            if hs:
                n["delivered"] += 1
                lat.append((t_of[hs[0]] - tc) / US)
                for prev, nxt in zip(hs, hs[1:]):
                    n["duplicates"] += 1
                    if any(prev < c < nxt for c in crashes):
                        cause = "crash"
                    elif any(prev < r < nxt for r in resets[name]):
                        cause = "reset"
                    else:
                        cause = "unknown"
                    dups.append({"consumer": name, "seq": seq, "cause": cause})
                continue
            if (name, seq) in parked:
                n["parked"] += 1
                continue
            if (name, seq) in deferred or (seq > cursors[name] and seq in retained):
                n["pending"] += 1
                continue
            k = bisect_left(idx, ic)  # the cursor's height when the row committed
            if k and high[k - 1][1] >= seq:
                cause = "late_commit"
            elif seq in gap_skips[name]:
                cause = "gap_timeout"
            elif seq in pruned:
                cause = "pruned"
            else:
                cause = "unknown"
            n["lost"] += 1
            lost.append({"consumer": name, "seq": seq, "cause": cause})
        s = pd.Series(lat, dtype=float)
        per.append({"consumer": name, "cursor": cursors[name], **n,
                    "latency_mean_s": s.mean(), "latency_p50_s": s.quantile(0.5),
                    "latency_p99_s": s.quantile(0.99), "latency_max_s": s.max()})
    # gap_timeout: the skip names the first missing seq; every seq of that range counts
    lost_df = pd.DataFrame(lost, columns=["consumer", "seq", "cause"])
    dup_df = pd.DataFrame(dups, columns=["consumer", "seq", "cause"])
    total = {
        "committed": len(committed),
        "delivered": sum(p["delivered"] for p in per),
        "extra_deliveries": len(dup_df),
        "lost": len(lost_df),
        "parked": sum(p["parked"] for p in per),
        "pending": sum(p["pending"] for p in per),
        "lost_by_cause": lost_df["cause"].value_counts().to_dict(),
        "duplicates_by_cause": dup_df["cause"].value_counts().to_dict(),
    }
    bus = pd.DataFrame(
        [{"seq": seq, "topic": published.get(seq, (retained.get(seq), 0))[0], "published": seq in published,
          "receivers": published.get(seq, (None, 0))[1]} for seq in sorted(committed)],
        columns=["seq", "topic", "published", "receivers"])
    total["bus_published"] = int(bus["published"].sum())
    total["bus_unpublished"] = int((~bus["published"]).sum())
    total["bus_receipts"] = int(bus["receivers"].sum())
    total["valid"] = (not lost_df["cause"].isin(_PROMISED).any()) and not (dup_df["cause"] == "unknown").any()
    return OutboxReport(pd.DataFrame(per), dup_df, lost_df, pd.DataFrame(parked_rows), bus, total)
