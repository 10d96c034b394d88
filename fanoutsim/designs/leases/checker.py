"""The leases checker: per consumer, delivered, duplicated, lost, dead-lettered,
pending and out of order — and why — from the trace and the tables alone
(never the fault plan).

A consumer *life* runs from its ``consumer_start`` to its ``retired`` (or the
end): retire deletes a consumer, and the same name may start afresh, as a new
life reported as ``name#2``, ``name#3``, ... . A retire that a later restore
undoes (the backup was taken while the life ran, before the retire) does not
end it: the consumer is back, with the backup's checkpoint, and the life goes
on. An event is *expected* by a life
when it was published (a ``published`` event) with a seq past the life's start,
and before the life was retired (a retired consumer owes nothing published
later). A worker's effect is a ``delivered`` event. Then an expected event is

*delivered*      delivered once or more (each extra delivery is a *duplicate*);
*dead_lettered*  dead-lettered (a ``dead_lettered`` event, or a row of
                 ``dead_letters``) and not required again by a later seek back,
                 never delivered;
*pending*        not done yet: the consumer still exists, the event is
                 retained and past both its start and its partition's checkpoint;
*lost*           otherwise.

Causes of a duplicate (what happened between two deliveries): ``seek`` (the
consumer was seeked), ``restore`` (a new history incarnation turned the lease
into a retry), ``lease_expired`` (the earlier delivery's ack was refused — the
lease had expired, or had expired before the effect landed — or the lease
expired in recovery with no crash between), ``crash`` (the node died after the
effect and before the ack), else ``unknown``. Causes of a loss: ``seek``
(seeked past it before it was delivered), ``retired`` (the consumer was retired
first), ``restore`` (a backup was restored: the event was published after
the backup and was gone from the log before it was delivered — or the consumer
itself was created after the backup, and the restore took it away), ``pruned``
(retention deleted it — the fence should make this impossible for a consumer
that exists), else ``unknown``. A restore from backup (``backup_restored``,
matched to its ``backup`` by label) also writes ``restored``, so deliveries on
either side of it are duplicates with cause ``restore``.

*Out of order* depends on the leasing rule (``sim.config.partition_order``),
because the two promise different things:

``riffdb``        several leases of a partition are out at once, so effects may
                  land in any order within the window: that is normal, not a
                  fault. What the broker promises is to *lease* in partition
                  order: a first lease of an event (its attempt that is the
                  first of the life) with a lower seq than an event of the same
                  partition already leased is out of order, cause ``unknown``
                  (nothing in the mechanism explains it) — unless a reordering
                  explains it (below).
``head_of_line``  one lease per partition, so first *deliveries* are in seq
                  order; one behind an event already delivered in its
                  partition is out of order. It emerges when a worker whose
                  lease was already gone (expired, then the event
                  dead-lettered or moved past) applies its effect late — cause
                  ``stale_lease`` (its ack was refused) — else as below, else
                  ``unknown``.

Either way a ``seek`` of the consumer (its position moved by hand: back over
events it never leased, or forward, then undone) or a ``restore`` (a backup's
older checkpoints brought back) is a documented reordering: an out-of-order
row with such a reordering between it and every earlier row of its partition
with a higher seq (it is in order among the rows since) takes its name,
``seek`` over ``restore`` when both lie between, as for duplicates.

``valid``: no loss with cause ``pruned`` or ``unknown``, every duplicate has
a cause, and no out-of-order lease or delivery with cause ``unknown``.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from fanoutsim.kernel.check import CheckedReport, causes, refuse_unreadable
from fanoutsim.kernel.gcpause import gc_paused

LOSS_CAUSES = ("seek", "retired", "restore", "pruned", "unknown")
DUPLICATE_CAUSES = ("seek", "restore", "lease_expired", "crash", "unknown")
_BROKEN = ("pruned", "unknown")


@dataclass
class LeaseReport(CheckedReport):
    """The leases checker's report; it meets :mod:`fanoutsim.kernel.check`'s
    contract (``unit`` is ``"consumer"``, ``per_unit`` is ``per_consumer``)."""

    per_consumer: pd.DataFrame
    duplicates: pd.DataFrame
    lost: pd.DataFrame
    out_of_order: pd.DataFrame
    total: dict = field(default_factory=dict)

    unit = "consumer"

    @property
    def valid(self) -> bool:
        return bool(self.total.get("valid", True))

    @property
    def summary(self) -> dict:
        """The totals every design shares (:data:`fanoutsim.kernel.check.SUMMARY_KEYS`)."""
        t = self.total
        return {"valid": self.valid, "delivered": int(t["delivered"]), "duplicates": int(t["duplicates"]),
                "lost": int(t["lost"]), "pending": int(t["pending"]),
                "duplicates_by_cause": causes(t["duplicates_by_cause"]), "lost_by_cause": causes(t["lost_by_cause"])}

    def __str__(self) -> str:
        t = self.total
        head = (f"leases check: {'valid' if self.valid else 'INVALID'} — {t['published']} published, "
                f"{t['delivered']} delivered, {t['duplicates']} duplicates, {t['lost']} lost, "
                f"{t['dead_lettered']} dead-lettered, {t['out_of_order']} out of order")
        return head + ("\n" + self.per_consumer.to_string(index=False) if len(self.per_consumer) else "")


class _Keyed:
    """Trace rows of one kind for every (consumer, event_id) pair, as one sorted
    int64 array of ``key * n + index`` (``n`` > every trace index): the rows of a
    pair are one contiguous run, in trace order, so a searchsorted finds the row
    of a pair just before or after an index."""

    def __init__(self, key: np.ndarray, idx: np.ndarray, n: int, *values: np.ndarray):
        combined = key[idx] * n + idx
        order = np.argsort(combined, kind="stable")
        self.a, self.n = combined[order], n
        self.values = tuple(v[order] for v in values)

    def before(self, k: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(has, position): the pair's last row with index < ``at``."""
        q = np.searchsorted(self.a, k * self.n + at, side="left") - 1
        qc = np.maximum(q, 0)
        has = (q >= 0) & (self.a[qc] // self.n == k) if len(self.a) else np.zeros(len(k), bool)
        return has, qc

    def after(self, k: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(has, position): the pair's first row with index > ``at``."""
        q = np.searchsorted(self.a, k * self.n + at, side="right")
        qc = np.minimum(q, max(len(self.a) - 1, 0))
        has = (q < len(self.a)) & (self.a[qc] // self.n == k) if len(self.a) else np.zeros(len(k), bool)
        return has, qc

    def between(self, k: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """The pair has a row strictly between lo and hi."""
        return (np.searchsorted(self.a, k * self.n + hi, side="left")
                > np.searchsorted(self.a, k * self.n + lo, side="right"))

    def index(self, pos: np.ndarray) -> np.ndarray:
        return self.a[pos] % self.n


def _rows(sim):
    """The reader of ``sim``'s tables (of its named database, if it has one)."""
    return getattr(sim, "table_rows", None) or sim.store.rows


def _between(idx: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Some index in the sorted ``idx`` lies strictly between lo and hi (elementwise)."""
    return np.searchsorted(idx, hi, side="left") > np.searchsorted(idx, lo, side="right")


def _attempt(detail) -> int | None:
    """The attempt number of a ``leased`` or ``delivered`` event ("attempt N")."""
    if isinstance(detail, str) and detail.startswith("attempt "):
        return int(detail.split()[1].rstrip(":"))
    return None


@gc_paused()  # a burst of allocations over a finished run: see fanoutsim.kernel.gcpause
def check_leases(sim) -> LeaseReport:
    refuse_unreadable(sim, "leases", "fanoutsim.check_leases")
    t = sim.trace()
    n_rows = len(t)
    codes, names = pd.factorize(t["kind"].to_numpy())
    code_of = {k: c for c, k in enumerate(names)}
    who, eids, details, parts = (t[c].to_numpy() for c in ("consumer", "event_id", "detail", "partition"))

    def events(*ks) -> np.ndarray:
        cs = [code_of[k] for k in ks if k in code_of]
        if not cs:
            return np.empty(0, dtype=np.int64)
        return np.flatnonzero(codes == cs[0] if len(cs) == 1 else np.isin(codes, cs))

    # published events, in seq order: (event_id, seq, partition, index published)
    pi = events("published")
    pub = pd.DataFrame({"event_id": eids[pi], "seq": details[pi].astype(np.int64), "partition": parts[pi],
                        "ip": pi})
    if not pub["event_id"].is_unique:  # as a dict would: the first one's place, the last one's values
        pub = pub.drop_duplicates("event_id")[["event_id"]].merge(
            pub.drop_duplicates("event_id", keep="last"), on="event_id", how="left")
    pub = pub.sort_values("seq", kind="stable").reset_index(drop=True)
    p_eid, p_seq, p_part, p_ip = (pub[c].to_numpy() for c in ("event_id", "seq", "partition", "ip"))

    # consumer lives: a second consumer_start of a name (after a retire) is a new life, name#2
    who = who.copy()
    lives: dict[str, dict] = {}                          # life -> start, index, name
    by_name = defaultdict(list)
    for i in events("consumer_start"):
        by_name[who[i]].append((int(i), int(details[i])))
    for name, lst in by_name.items():
        if len(lst) > 1:
            rows_of = np.flatnonzero(who == name)
            for k, (i, _) in enumerate(lst[1:], start=2):
                who[rows_of[rows_of >= i]] = f"{name}#{k}"
        for k, (i, start) in enumerate(lst, start=1):
            lives[name if k == 1 else f"{name}#{k}"] = {"name": name, "start": start, "index": i,
                                                        "last": k == len(lst)}
    table_rows = {r["consumer"]: r for r in _rows(sim)("lease_consumers")}
    for name, r in table_rows.items():  # a consumer from an earlier process (a resumed file)
        if name not in by_name:
            lives[name] = {"name": name, "start": r["start_seq"], "index": -1, "last": True}

    # the rare kinds, in a plain loop
    seeks = defaultdict(list)                            # life -> [(index, position)]
    for i in events("seek"):
        seeks[who[i]].append((int(i), int(details[i])))
    restores, crashes = events("restored"), events("crashed")
    pruned = set(eids[events("pruned")].tolist())
    # restores from backup: (index of the backup, index of the restore)
    taken = {details[i]: int(i) for i in events("backup")}
    undone = [(taken[details[i]], int(i)) for i in events("backup_restored") if details[i] in taken]
    retired_at = {}
    for i in events("retired"):
        life = lives.get(who[i])
        began = -1 if life is None else life["index"]
        # a restore of a backup taken while the life ran, made after the retire, brings it back
        if not any(began < bi < i < ri for bi, ri in undone):
            retired_at[who[i]] = int(i)
    undone_at = {}                                       # life -> the restore that took it away
    for life_name, life in lives.items():
        if life["last"] and life["name"] not in table_rows and life_name not in retired_at:
            gone = [ri for bi, ri in undone if bi < life["index"] < ri]
            if gone:
                undone_at[life_name] = gone[0]
    dead_at = defaultdict(dict)                          # life -> event_id -> index dead-lettered
    for i in events("dead_lettered"):
        dead_at[who[i]].setdefault(eids[i], int(i))

    # the per-row kinds: every row keyed by its (consumer, event_id) pair
    di, li, oi = events("delivered"), events("leased"), events("acked", "ack_refused")
    xi, vi = events("expired"), events("lease_voided")
    sel = np.concatenate([di, li, oi, xi, vi])
    ccode, cons_uni = pd.factorize(who[sel], use_na_sentinel=False)
    ecode, _ = pd.factorize(eids[sel], use_na_sentinel=False)
    key = np.full(n_rows, -1, dtype=np.int64)
    key[sel] = ccode.astype(np.int64) * (int(ecode.max()) + 1 if len(ecode) else 1) + ecode
    n = n_rows + 1
    refused_code = code_of.get("ack_refused", -1)
    outcomes = _Keyed(key, oi, n, codes[oi] == refused_code)                  # acks: refused?
    inv_idx = np.concatenate([xi, vi])
    inv_cause = np.array(["lease_expired"] * len(xi)
                         + [v if v in ("seek", "restore") else "retired" for v in details[vi].tolist()],
                         dtype=object)
    invalidated = _Keyed(key, inv_idx, n, inv_cause)                         # expiries and voided leases
    expired = _Keyed(key, xi, n)
    l_key = key[li]

    def stale_of(d: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Per delivery at ``d`` (the next one of its pair at ``end``): why it was
        stale, or None. Stale: the ack after it (before ``end``) was refused — why:
        the pair's last invalidation before the refusal, else lease_expired — or
        the lease it worked under (the last grant of its attempt) was invalidated
        between that grant and the effect — why: the last such invalidation."""
        out = np.full(len(d), None, dtype=object)
        if not len(d):
            return out
        k = key[d]
        has, q = outcomes.after(k, d)
        if len(outcomes.a):
            at = outcomes.index(q)
            refused = has & (at < end) & outcomes.values[0][q]
            why, w = invalidated.before(k, at)
            if len(invalidated.a):
                out[refused] = np.where(why, invalidated.values[0][w], "lease_expired")[refused]
            else:
                out[refused] = "lease_expired"
        else:
            refused = np.zeros(len(d), bool)
        # the grants of these pairs: (pair, attempt) -> the last index leased
        mine = li[np.isin(l_key, np.unique(k))]
        granted = {(kk, _attempt(dt)): i for kk, dt, i in zip(key[mine].tolist(), details[mine].tolist(),
                                                               mine.tolist())}
        g = np.array([granted.get((kk, _attempt(dt)), -1) for kk, dt in zip(k.tolist(), details[d].tolist())],
                     dtype=np.int64)
        why, w = invalidated.before(k, d)
        if len(invalidated.a):
            gone = ~refused & why & (g >= 0) & (invalidated.index(w) > g)
            out[gone] = invalidated.values[0][w][gone]
        return out

    # the deliveries: consumer, position of the event in `pub` (-1: never published)
    d_cons = ccode[:len(di)]
    d_pos = pd.Index(p_eid).get_indexer(eids[di]) if len(pub) else np.full(len(di), -1)
    code_of_consumer = {c: j for j, c in enumerate(cons_uni.tolist())}

    tables: dict = {}

    def table(name):
        if name not in tables:
            if name == "dead":
                tables[name] = {(r["consumer"], r["event_id"]) for r in _rows(sim)("dead_letters")}
            elif name == "cps":
                cps = defaultdict(dict)
                for r in _rows(sim)("checkpoints"):
                    cps[r["consumer"]][r["partition"]] = r["seq"]
                tables[name] = cps
            else:
                tables[name] = {r["event_id"] for r in _rows(sim)("events")}
        return tables[name]

    by_leases = getattr(getattr(sim, "config", None), "partition_order", "riffdb") != "head_of_line"
    l_cons = pd.Index(cons_uni).get_indexer(who[li]) if len(li) else np.empty(0, dtype=np.int64)
    l_pos = pd.Index(p_eid).get_indexer(eids[li]) if len(pub) and len(li) else np.full(len(li), -1)

    def first_in_order(m_i, m_pos, reorders=()):
        """(trace index, position in pub, seq before it, cause) of every first row of a
        pair below the highest seq already seen in its partition, rows in trace order.
        ``reorders`` is ``(cause, sorted trace indices)`` by rising precedence: a late
        row is explained by (named after) a reordering that lies between it and every
        earlier first row of its partition with a higher seq — i.e. it is in order
        among the rows since the last such reordering — else its cause is None."""
        first = ~pd.Series(key[m_i]).duplicated().to_numpy()
        fi, fpos = m_i[first & (m_pos >= 0)], m_pos[first & (m_pos >= 0)]
        if not len(fi):
            return fi, fpos, np.empty(0), np.empty(0, dtype=object)
        f = pd.DataFrame({"seq": p_seq[fpos], "part": p_part[fpos]})
        seq = f["seq"].to_numpy()

        def high_before(*by):
            high = f.groupby(list(by), sort=False, dropna=False)["seq"].cummax()
            before = high.groupby(list(by), sort=False, dropna=False).shift().to_numpy(dtype=float)
            return np.where(np.isnan(before), -np.inf, before)

        before = high_before(f["part"])
        late = np.flatnonzero(seq < before)
        why = np.full(len(late), None, dtype=object)
        for cause, at in reorders:
            if len(late) and len(at):
                since = pd.Series(np.searchsorted(at, fi, side="left"))      # reorderings before each row
                why[seq[late] >= high_before(f["part"], since)[late]] = cause
        return fi[late], fpos[late], before[late], why

    per, dups, lost, disorder = [], [], [], []
    for name in sorted(lives):
        life = lives[name]
        start = life["start"]
        row = table_rows.get(life["name"]) if life["last"] else None      # the consumer's row, if it exists
        retired = row is None
        seek_idx = np.array([i for i, _ in seeks[name]], dtype=np.int64)
        reorders = (("restore", restores), ("seek", seek_idx))             # as for duplicates: seek wins
        n_ = dict(delivered=0, duplicates=0, lost=0, dead_lettered=0, pending=0, out_of_order=0)
        c = code_of_consumer.get(name)
        mine = np.flatnonzero(d_cons == c) if c is not None else np.empty(0, dtype=np.int64)
        m_i, m_pos = di[mine], d_pos[mine]                                # in trace order

        if by_leases:
            # out of order: a first lease below the highest seq already leased in its partition
            lm = np.flatnonzero(l_cons == c) if c is not None else np.empty(0, dtype=np.int64)
            fi, fpos, before, why = first_in_order(li[lm], l_pos[lm], reorders)
            for j in range(len(fi)):
                n_["out_of_order"] += 1
                disorder.append((name, eids[fi[j]], p_part[fpos[j]], int(before[j]), why[j] or "unknown"))
        else:
            # out of order: a first delivery below the highest seq already delivered in its partition
            fi, fpos, before, why = first_in_order(m_i, m_pos, reorders)
            if len(fi):
                stale = stale_of(fi, np.full(len(fi), n_rows, dtype=np.int64))
                for j, st_ in enumerate(stale.tolist()):
                    n_["out_of_order"] += 1
                    disorder.append((name, eids[fi[j]], p_part[fpos[j]], int(before[j]),
                                     "stale_lease" if st_ else why[j] or "unknown"))

        # the expected events: published past its start, not after it retired
        retired_i = retired_at.get(name, undone_at.get(name))
        expected = p_seq > start
        if retired_i is not None:
            expected &= ~(p_ip > retired_i)
        got = (m_pos >= 0)
        got[got] = expected[m_pos[got]]
        g_i, g_pos = m_i[got], m_pos[got]
        order = np.lexsort((g_i, g_pos))                                  # by event (seq order), then time
        g_i, g_pos = g_i[order], g_pos[order]
        again = np.flatnonzero(g_pos[1:] == g_pos[:-1]) + 1                # each delivery after an event's first
        n_["delivered"] = int(len(g_pos) - len(again))
        if len(again):
            # the deliveries of events delivered more than once, and where the next one landed
            multi = np.zeros(len(g_pos), bool)
            multi[again] = multi[again - 1] = True
            end = np.append(g_i[1:], n_rows)
            end[np.append(g_pos[1:] != g_pos[:-1], True)] = n_rows
            stale = np.full(len(g_pos), None, dtype=object)
            mi = np.flatnonzero(multi)
            stale[mi] = stale_of(g_i[mi], end[mi])
            prev, nxt = g_i[again - 1], g_i[again]
            s_prev, s_next = stale[again - 1], stale[again]
            has_prev = pd.notna(s_prev)
            either = np.where(has_prev, s_prev, s_next)
            k = key[nxt]
            cause = np.where(expired.between(k, prev, nxt), "lease_expired", "unknown").astype(object)
            cause = np.where(_between(crashes, prev, nxt), "crash", cause)
            cause = np.where(has_prev | pd.notna(s_next), either, cause)
            cause = np.where(_between(restores, prev, nxt), "restore", cause)
            cause = np.where(_between(seek_idx, prev, nxt), "seek", cause)
            dups += zip([name] * len(again), p_eid[g_pos[again]].tolist(), cause.tolist())
            n_["duplicates"] = int(len(again))

        # the rest were never delivered: dead-lettered, pending, or lost (and why)
        delivered_pos = np.zeros(len(pub), bool)
        delivered_pos[g_pos] = True
        for j in np.flatnonzero(expected & ~delivered_pos).tolist():
            eid, seq, part, ip = p_eid[j], int(p_seq[j]), p_part[j], int(p_ip[j])
            dead_i = dead_at[name].get(eid)
            if (row is not None and (life["name"], eid) in table("dead")) or (
                    dead_i is not None and not any(i > dead_i and pos < seq for i, pos in seeks[name])
                    and not any(bi < dead_i < ri for bi, ri in undone)):
                n_["dead_lettered"] += 1
                continue
            if (row is not None and eid in table("retained") and seq > row["start_seq"]
                    and seq > table("cps")[life["name"]].get(part, -1)):
                n_["pending"] += 1
                continue
            if any(i > ip and pos >= seq for i, pos in seeks[name]):
                cause = "seek"
            elif name in retired_at:
                cause = "retired"
            elif name in undone_at or any(bi < ip < ri for bi, ri in undone):
                cause = "restore"
            elif eid in pruned:
                cause = "pruned"
            else:
                cause = "unknown"
            n_["lost"] += 1
            lost.append((name, eid, cause))
        per.append({"consumer": name, "retired": retired, **n_})
    dup_df = pd.DataFrame(dups, columns=["consumer", "event_id", "cause"])
    lost_df = pd.DataFrame(lost, columns=["consumer", "event_id", "cause"])
    ooo_df = pd.DataFrame(disorder, columns=["consumer", "event_id", "partition", "after_seq", "cause"])
    total = {
        "published": len(pub),
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
