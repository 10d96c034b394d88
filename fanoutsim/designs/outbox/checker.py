"""The outbox checker: per consumer, what was delivered, duplicated, lost, parked.

It reads the run's trace and tables — never the fault plan — like the reactor
design's checker. For each consumer, a row is *expected* when it committed
(a ``committed`` event) with a seq above the consumer's first cursor
(``cursor_start``). A delivery is counted where the consumer's effect lands:
a ``delivered`` event, which the dispatcher records when the consumer's ``fn``
ran without raising — as its step *begins*, before the step's duration has
passed and before the cursor moves (as the leases checker counts a worker's
effect, not its ack). Then an expected row is

*delivered*   delivered once or more (each extra delivery is a *duplicate*);
*parked*      in the ``parked`` table (its retry budget ran out), never delivered;
*pending*     still ahead of the cursor and retained, or owed as deferred work;
*lost*        otherwise.

Causes of a duplicate (what happened between two deliveries): ``reset`` (the
cursor was moved back by hand — ``set_cursor`` or ``reset_consumer`` — and the
row replayed: by design), ``crash`` (the process crashed after the effect and
before the cursor passed the row — while the step ran, or between its end and
the cursor's move), else ``unknown``. Causes of a loss: ``late_commit`` (the
row committed after this consumer had read past its seq — a fetch that
returned a higher seq, or a cursor already beyond it), ``seek`` (the cursor
was moved past it by hand, ``set_cursor``, after it committed: a deliberate
skip), ``gap_timeout`` (``read_mode="gap"`` waited for it and gave up — the
consumer's ``gap_skipped`` event spans its seq; a row skipped so, then committed
later, is this and not ``late_commit``), ``pruned`` (retention deleted it before the consumer handled it), else
``unknown``.

``valid`` is true when no loss has cause ``late_commit`` or ``unknown`` and
every duplicate has a cause: a seek, retention and a gap timeout are
documented ways to drop a row; re-delivery after a crash is the at-least-once
promise.

Latency (``latency_*_s`` per consumer) runs from a row's commit to the end of
its first handling step (the row behind the consumer).

The topic bus is reported apart (``bus``): a row is *published* when a live
dispatcher pushed it to the subscribers of its topic then (``receivers`` of
them), else *unpublished*: it became visible below the bus's position — it
committed late, under rows already published, or before a new process went
live at the end of the log (after a crash). That is the bus's contract (best
effort, not durable; a page re-fetches when it reconnects), so it never counts
as a loss and never touches ``valid``.
"""
from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from fanoutsim.kernel.check import CheckedReport, causes, refuse_unreadable
from fanoutsim.kernel.gcpause import gc_paused
from fanoutsim.kernel.timeutil import US

LOSS_CAUSES = ("late_commit", "seek", "gap_timeout", "pruned", "unknown")
DUPLICATE_CAUSES = ("crash", "reset", "unknown")
_PROMISED = ("late_commit", "unknown")
_GAP_SPAN = re.compile(r"seqs (\d+)\.\.(\d+) ")


@dataclass
class OutboxReport(CheckedReport):
    """The outbox checker's report; it meets :mod:`fanoutsim.kernel.check`'s
    contract (``unit`` is ``"consumer"``, ``per_unit`` is ``per_consumer``)."""

    per_consumer: pd.DataFrame
    duplicates: pd.DataFrame
    lost: pd.DataFrame
    parked: pd.DataFrame
    bus: pd.DataFrame = field(default_factory=pd.DataFrame)
    total: dict = field(default_factory=dict)

    unit = "consumer"

    @property
    def valid(self) -> bool:
        return bool(self.total.get("valid", True))

    @property
    def summary(self) -> dict:
        """The totals every design shares (:data:`fanoutsim.kernel.check.SUMMARY_KEYS`)."""
        t = self.total
        return {"valid": self.valid, "delivered": int(t["delivered"]), "duplicates": int(t["extra_deliveries"]),
                "lost": int(t["lost"]), "pending": int(t["pending"]),
                "duplicates_by_cause": causes(t["duplicates_by_cause"]), "lost_by_cause": causes(t["lost_by_cause"])}

    def __str__(self) -> str:
        lines = [f"outbox check: {'valid' if self.valid else 'INVALID'} — "
                 f"{self.total['committed']} committed, {self.total['delivered']} delivered, "
                 f"{self.total['extra_deliveries']} duplicates, {self.total['lost']} lost, "
                 f"{self.total['parked']} parked"]
        if len(self.per_consumer):
            lines.append(self.per_consumer.to_string(index=False))
        if self.total.get("bus_published") or self.total.get("bus_unpublished"):
            lines.append(f"topic bus (best effort, not delivery): {self.total['bus_published']} rows published, "
                         f"{self.total['bus_unpublished']} never (visible only below the bus's position), "
                         f"{self.total['bus_receipts']} receipts")
        return "\n".join(lines)


@gc_paused()  # a burst of allocations over a finished run: see fanoutsim.kernel.gcpause
def check_outbox(sim) -> OutboxReport:
    refuse_unreadable(sim, "outbox", "fanoutsim.check_outbox")
    trace = sim.trace()
    kind = trace["kind"].to_numpy()
    who_col = trace["consumer"].to_numpy()
    seq_col = trace["seq"].to_numpy()
    t_col = trace["t"].to_numpy()
    detail = trace["detail"].to_numpy()

    def events(k):
        return np.flatnonzero(kind == k)

    # the rare kinds, in a plain loop; the per-row kinds (committed, handled, cursor) as arrays
    starts: dict[str, int] = {}
    for i in events("cursor_start"):
        starts.setdefault(who_col[i], int(seq_col[i]))
    resets = defaultdict(list)                       # consumer -> [(index, cursor)]: moves by hand
    for i in events("reset"):
        resets[who_col[i]].append((int(i), int(seq_col[i])))
    gap_skips = defaultdict(dict)                    # consumer -> {seq: index of its first skip}
    for i in events("gap_skipped"):
        # the event's seq is the first missing one; its detail ("seqs 22..24 missing ...") spans the gap
        first = int(seq_col[i])
        m = _GAP_SPAN.match(str(detail[i]))
        last = int(m.group(2)) if m and int(m.group(1)) == first else first
        for seq in range(first, last + 1):
            gap_skips[who_col[i]].setdefault(seq, int(i))
    pruned: dict[int, int] = {}                      # seq -> index of its prune
    for i in events("pruned"):
        pruned.setdefault(int(seq_col[i]), int(i))
    crashes = events("crashed")
    published: dict[int, tuple[str, int]] = {}       # seq -> (topic, receivers)
    for i in events("published"):
        published[int(seq_col[i])] = (who_col[i], int(detail[i]))
    ci = events("committed")
    commits = pd.DataFrame({"seq": seq_col[ci].astype(np.int64), "tc": t_col[ci].astype(np.int64), "ic": ci})
    commits = commits.drop_duplicates("seq", keep="last").sort_values("ic", kind="stable")  # commit order
    # the consumer's effects (deliveries), and the ends of its handling steps (latency)
    di = events("delivered")
    delivered = pd.DataFrame({"consumer": who_col[di], "seq": seq_col[di].astype(np.int64), "i": di})
    hi = events("handled")
    handled = pd.DataFrame({"consumer": who_col[hi], "seq": seq_col[hi].astype(np.int64),
                            "t": t_col[hi].astype(np.int64)})
    # how far each consumer had read: its cursor moves, and the last seq of each fetch
    mi = np.sort(np.concatenate([events("cursor"), events("fetched")]))
    moves = pd.DataFrame({"consumer": who_col[mi], "seq": seq_col[mi].astype(np.int64), "i": mi})

    parked_rows = sim.store.rows("parked")
    parked = {(r["consumer"], r["seq"]) for r in parked_rows}
    deferred = {(r["consumer"], r["seq"]) for r in sim.store.rows("deferred")}
    cursors = {r["consumer"]: r["seq"] for r in sim.store.rows("cursors")}
    retained = {r["seq"]: r["topic"] for r in sim.store.rows("outbox")}

    per, dups, lost = [], [], []
    by_consumer = dict(tuple(delivered.groupby("consumer", sort=False)))
    handled_by = dict(tuple(handled.groupby("consumer", sort=False)))
    moves_of = dict(tuple(moves.groupby("consumer", sort=False)))
    for name in sorted(cursors):
        start = starts.get(name, 0)
        expected = commits[commits["seq"] > start]
        h = by_consumer.get(name, delivered.iloc[:0])
        h = h[h["seq"].isin(expected["seq"])]
        first = h.drop_duplicates("seq")
        n = dict(delivered=len(first), duplicates=0, lost=0, parked=0, pending=0)
        done = handled_by.get(name, handled.iloc[:0]).drop_duplicates("seq")
        got = expected.merge(done[["seq", "t"]], on="seq", how="inner", sort=False)
        lat = (got["t"] - got["tc"]).to_numpy() / US
        # each delivery after the first is a duplicate: which event came between it and the one before?
        h = h.assign(prev=h.groupby("seq")["i"].shift())
        again = h[h["prev"].notna()]
        if len(again):
            nxt, prev = again["i"].to_numpy(), again["prev"].to_numpy().astype(np.int64)
            crashed = np.searchsorted(crashes, nxt) > np.searchsorted(crashes, prev, side="right")
            r = np.asarray([i for i, _ in resets[name]], dtype=np.int64)
            was_reset = np.searchsorted(r, nxt) > np.searchsorted(r, prev, side="right")
            # a reset replays by design, whatever else happened in between
            cause = np.where(was_reset, "reset", np.where(crashed, "crash", "unknown"))
            order = expected.set_index("seq")["ic"]
            d = pd.DataFrame({"consumer": name, "seq": again["seq"].to_numpy(), "cause": cause,
                              "_ic": order.loc[again["seq"]].to_numpy(), "_i": nxt})
            d = d.sort_values(["_ic", "_i"], kind="stable")
            dups += d[["consumer", "seq", "cause"]].to_dict("records")
            n["duplicates"] = len(d)
        # the rest were not handled: parked, still pending, or lost (and why)
        missing = expected[~expected["seq"].isin(first["seq"])]
        if len(missing):
            m = moves_of.get(name)
            idx = m["i"].to_numpy() if m is not None else np.empty(0, dtype=np.int64)
            high = np.maximum.accumulate(m["seq"].to_numpy()) if m is not None else idx
            for seq, ic in zip(missing["seq"].tolist(), missing["ic"].tolist()):
                if (name, seq) in parked:
                    n["parked"] += 1
                    continue
                if (name, seq) in deferred or (seq > cursors[name] and seq in retained):
                    n["pending"] += 1
                    continue
                k = int(np.searchsorted(idx, ic))  # how far it had read when the row committed
                # the first move by hand past it after it committed (and before retention took it)
                seek = next((i for i, pos in resets[name] if i > ic and pos >= seq), None)
                skipped = gap_skips[name].get(seq)
                if skipped is not None and skipped < ic:
                    # read_mode="gap" waited for it, gave up, and it committed later: the
                    # documented gap timeout, not a late commit passed over unawares
                    cause = "gap_timeout"
                elif k and high[k - 1] >= seq:
                    cause = "late_commit"
                elif seek is not None and pruned.get(seq, seek) >= seek:
                    cause = "seek"
                elif skipped is not None:
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
    lost_df = pd.DataFrame(lost, columns=["consumer", "seq", "cause"])
    dup_df = pd.DataFrame(dups, columns=["consumer", "seq", "cause"])
    total = {
        "committed": len(commits),
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
          "receivers": published.get(seq, (None, 0))[1]} for seq in sorted(commits["seq"].tolist())],
        columns=["seq", "topic", "published", "receivers"])
    total["bus_published"] = int(bus["published"].sum())
    total["bus_unpublished"] = int((~bus["published"]).sum())
    total["bus_receipts"] = int(bus["receivers"].sum())
    total["valid"] = (not lost_df["cause"].isin(_PROMISED).any()) and not (dup_df["cause"] == "unknown").any()
    cols = ["consumer", "cursor", "delivered", "duplicates", "lost", "parked", "pending",
            "latency_mean_s", "latency_p50_s", "latency_p99_s", "latency_max_s"]
    return OutboxReport(pd.DataFrame(per, columns=cols), dup_df, lost_df, pd.DataFrame(parked_rows), bus, total)
