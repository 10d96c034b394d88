"""The leases checker: per consumer, delivered, duplicated, lost, dead-lettered,
pending and out of order — and why — from the trace and the tables alone
(never the fault plan).

A consumer *life* runs from its ``consumer_start`` to its ``retired`` (or the
end): retire deletes a consumer, and the same name may start afresh, as a new
life reported as ``name#2``, ``name#3``, ... . An event is *expected* by a life
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
expired in recovery with no crash between), ``late_ack`` (the lease had expired
before the effect landed, the event was leased again, and the broker honoured
the late ack all the same: ``LeaseConfig.late_ack = "honour"``), ``claimed``
(an idle lease was claimed by a pull: ``lease_expiry = "claim"``), ``crash``
(the node died after the effect and before the ack), else ``unknown``. Causes
of a loss: ``seek`` (seeked past it before it was delivered), ``retired`` (the
consumer was retired first), ``restore`` (a backup was restored: the event was
published after the backup and was gone from the log before it was delivered
— or the consumer itself was created after the backup, and the restore took it
away), ``term`` (a worker terminated it: no redelivery), ``max_deliver`` (its
last allowed delivery failed and ``at_max_deliver = "drop"`` forgot it; a
dead letter or a max-deliveries advisory counts as dead-lettered instead),
``pruned`` (retention deleted it — the fence should make this impossible for
a consumer that exists), ``not_retained`` (the same under a retention policy
with no fence, ``interest`` or ``limits``, where it is the broker's rule),
else ``unknown``. A restore from backup (``backup_restored``,
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

The checker runs the phases of :mod:`fanoutsim.kernel.check` per life:
:func:`consumer_lives` (whose life a trace row belongs to, and when each life
ends), :func:`owed`, :func:`delivered`, :func:`duplicate_causes`,
:func:`undelivered` with :func:`loss_cause`, and :func:`out_of_order`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from fanoutsim.kernel.check import (
    CheckedReport,
    Repeats,
    any_between,
    first_cause,
    highest_before,
    refuse_unreadable,
    repeats,
)
from fanoutsim.kernel.gcpause import gc_paused

LOSS_CAUSES = ("seek", "retired", "restore", "term", "max_deliver", "pruned", "not_retained", "unknown")
DUPLICATE_CAUSES = ("seek", "restore", "lease_expired", "late_ack", "claimed", "crash", "unknown")
_BROKEN = ("pruned", "unknown")
_COUNTS = ("delivered", "duplicates", "lost", "dead_lettered", "pending", "out_of_order")


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

    def __str__(self) -> str:
        t = self.total
        head = (
            f"leases check: {'valid' if self.valid else 'INVALID'} — {t['published']} published, "
            f"{t['delivered']} delivered, {t['duplicates']} duplicates, {t['lost']} lost, "
            f"{t['dead_lettered']} dead-lettered, {t['out_of_order']} out of order"
        )
        return head + ("\n" + self.per_consumer.to_string(index=False) if len(self.per_consumer) else "")


# -- reading the run -----------------------------------------------------------------
class _Trace:
    """The run's trace as arrays, each row's kind as a small integer code.
    ``who`` is a copy: :func:`consumer_lives` renames a later life's rows."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.rows = len(frame)
        self.codes, kinds = pd.factorize(frame["kind"].to_numpy())
        self.code_of = {k: c for c, k in enumerate(kinds)}
        self.who, self.event_id, self.detail, self.partition = (
            frame[c].to_numpy() for c in ("consumer", "event_id", "detail", "partition")
        )
        self.who = self.who.copy()

    def events(self, *kinds: str) -> np.ndarray:
        """The trace positions of the rows of these kinds, in trace order."""
        cs = [self.code_of[k] for k in kinds if k in self.code_of]
        if not cs:
            return np.empty(0, dtype=np.int64)
        return np.flatnonzero(self.codes == cs[0] if len(cs) == 1 else np.isin(self.codes, cs))


@dataclass
class _Published:
    """What was written: every published event, in seq order."""

    event_id: np.ndarray
    seq: np.ndarray
    partition: np.ndarray
    index: np.ndarray  # where in the trace it was published

    @cached_property
    def _ids(self) -> pd.Index:
        return pd.Index(self.event_id)

    def position(self, event_ids: np.ndarray) -> np.ndarray:
        """Each event's place in seq order; -1 for one never published."""
        if not len(self.event_id):
            return np.full(len(event_ids), -1)
        return self._ids.get_indexer(event_ids)


def _published(trace: _Trace) -> _Published:
    """The ``published`` events, one per event id (as a dict would keep them:
    the first one's place, the last one's values), in seq order."""
    at = trace.events("published")
    pub = pd.DataFrame(
        {
            "event_id": trace.event_id[at],
            "seq": trace.detail[at].astype(np.int64),
            "partition": trace.partition[at],
            "index": at,
        }
    )
    if not pub["event_id"].is_unique:
        pub = pub.drop_duplicates("event_id")[["event_id"]].merge(
            pub.drop_duplicates("event_id", keep="last"), on="event_id", how="left"
        )
    pub = pub.sort_values("seq", kind="stable").reset_index(drop=True)
    return _Published(*(pub[c].to_numpy() for c in ("event_id", "seq", "partition", "index")))


def _rows(sim):
    """The reader of ``sim``'s tables (of its named database, if it has one)."""
    return getattr(sim, "table_rows", None) or sim.store.rows


class _Tables:
    """The tables the undelivered events are judged by, each read on first use."""

    def __init__(self, sim) -> None:
        self._read = _rows(sim)

    @cached_property
    def dead(self) -> set[tuple]:
        """(consumer, event_id) of every row of ``dead_letters``."""
        return {(r["consumer"], r["event_id"]) for r in self._read("dead_letters")}

    @cached_property
    def checkpoints(self) -> dict[str, dict]:
        """consumer -> partition -> its checkpoint's seq."""
        out: dict[str, dict] = defaultdict(dict)
        for r in self._read("checkpoints"):
            out[r["consumer"]][r["partition"]] = r["seq"]
        return out

    @cached_property
    def retained(self) -> set:
        """The event ids still in the log."""
        return {r["event_id"] for r in self._read("events")}


def _restored_backups(trace: _Trace) -> list[tuple[int, int]]:
    """Each restore from a backup (``backup_restored``, matched to its
    ``backup`` by label) as (trace index of the backup, of the restore): what
    happened between the two was undone."""
    taken = {trace.detail[i]: int(i) for i in trace.events("backup")}
    return [(taken[trace.detail[i]], int(i)) for i in trace.events("backup_restored") if trace.detail[i] in taken]


# -- whose life a row belongs to -------------------------------------------------------
@dataclass
class _Life:
    """One life of a consumer: from its ``consumer_start`` until it was
    retired, or a restore took it away, or the end of the ev."""

    name: str  # the consumer's name for its first life, name#2, name#3, ... after
    consumer: str
    start: int  # the seq it starts after
    begun: int  # where its consumer_start is in the trace (-1: an earlier process's)
    latest: bool  # the consumer's last life, the one its table row belongs to
    row: dict | None = None  # its lease_consumers row, when it exists
    retired: int | None = None  # where it was retired in the trace
    taken: int | None = None  # the restore that took it away (it began after the backup)

    @property
    def ended(self) -> int | None:
        """Where it stopped being owed events: its retire, else the restore
        that took it away; None while it lives."""
        return self.retired if self.retired is not None else self.taken


def consumer_lives(trace: _Trace, table_rows: dict[str, dict], restored: list[tuple[int, int]]) -> dict[str, _Life]:
    """Every consumer life, by name, and where each ended.

    A second ``consumer_start`` of a name (after a retire) begins a new life,
    ``name#2``: the rows of ``trace.who`` from it on are renamed, so that every
    later phase reads a life's rows under its own name. A consumer in the table
    with no start in the trace came from an earlier process (a resumed file).
    A life ends at its ``retired`` (unless a restore of a backup taken while it
    ran brings the consumer back after it), or — when it is the consumer's latest, has
    no row and was never retired — at the first restore of a backup taken
    before it began: the restore took the consumer away."""
    starts = defaultdict(list)
    for i in trace.events("consumer_start"):
        starts[trace.who[i]].append((int(i), int(trace.detail[i])))
    lives: dict[str, _Life] = {}
    for consumer, begun in starts.items():
        if len(begun) > 1:
            rows_of = np.flatnonzero(trace.who == consumer)
            for k, (i, _) in enumerate(begun[1:], start=2):
                trace.who[rows_of[rows_of >= i]] = f"{consumer}#{k}"
        for k, (i, start) in enumerate(begun, start=1):
            latest = k == len(begun)
            name = consumer if k == 1 else f"{consumer}#{k}"
            lives[name] = _Life(name, consumer, start, i, latest, table_rows.get(consumer) if latest else None)
    for consumer, row in table_rows.items():
        if consumer not in starts:
            lives[consumer] = _Life(consumer, consumer, row["start_seq"], -1, True, row)
    for i in trace.events("retired"):
        life = lives.get(trace.who[i])
        # a restore of a backup taken while the life ran, made after the retire,
        # brings the consumer back with the backup's checkpoint: the life goes on
        if life is not None and not any(life.begun < bi < i < ri for bi, ri in restored):
            life.retired = int(i)
    for life in lives.values():
        if life.latest and life.consumer not in table_rows and life.retired is None:
            gone = [ri for bi, ri in restored if bi < life.begun < ri]
            if gone:
                life.taken = gone[0]
    return lives


@dataclass
class _Marks:
    """The rarer events the causes are read from."""

    seeks: dict[str, list[tuple[int, int]]]  # life -> [(trace index, position it was seeked to)]
    restores: np.ndarray  # where a history incarnation was restored
    crashes: np.ndarray
    pruned: set  # event ids retention deleted
    dead_at: dict[str, dict]  # life -> event_id -> where it was first dead-lettered (or its advisory sent)
    restored: list[tuple[int, int]]  # (backup, its restore): see _restored_backups
    # life -> event_id -> (where, cause): redelivery stopped unprocessed (term; max deliveries: drop)
    stopped: dict[str, dict] = field(default_factory=dict)

    def seeks_of(self, life: str) -> np.ndarray:
        return np.array([i for i, _ in self.seeks[life]], dtype=np.int64)


def _marks(trace: _Trace, restored: list[tuple[int, int]]) -> _Marks:
    seeks = defaultdict(list)
    for i in trace.events("seek"):
        seeks[trace.who[i]].append((int(i), int(trace.detail[i])))
    dead_at = defaultdict(dict)
    for i in trace.events("dead_lettered", "max_deliveries"):
        dead_at[trace.who[i]].setdefault(trace.event_id[i], int(i))
    stopped: dict[str, dict] = defaultdict(dict)
    for i in trace.events("terminated", "dropped"):
        cause = "term" if trace.codes[i] == trace.code_of.get("terminated", -1) else "max_deliver"
        stopped[trace.who[i]].setdefault(trace.event_id[i], (int(i), cause))
    return _Marks(
        seeks,
        trace.events("restored"),
        trace.events("crashed"),
        set(trace.event_id[trace.events("pruned")].tolist()),
        dead_at,
        restored,
        stopped,
    )


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
        return np.searchsorted(self.a, k * self.n + hi, side="left") > np.searchsorted(
            self.a, k * self.n + lo, side="right"
        )

    def index(self, pos: np.ndarray) -> np.ndarray:
        return self.a[pos] % self.n


def _attempt(detail) -> int | None:
    """The attempt number of a ``leased`` or ``delivered`` event ("attempt N")."""
    if isinstance(detail, str) and detail.startswith("attempt "):
        return int(detail.split()[1].rstrip(":"))
    return None


class _Pairs:
    """Every delivery, lease, ack and invalidation, keyed by its (life, event)
    pair: which lease a delivery worked under, and what became of it."""

    def __init__(self, trace: _Trace, published: _Published) -> None:
        self.trace = trace
        di, li, oi = trace.events("delivered"), trace.events("leased"), trace.events("acked", "ack_refused")
        xi, vi, ci = trace.events("expired"), trace.events("lease_voided"), trace.events("claimed")
        sel = np.concatenate([di, li, oi, xi, vi, ci])
        life_code, lives = pd.factorize(trace.who[sel], use_na_sentinel=False)
        event_code, _ = pd.factorize(trace.event_id[sel], use_na_sentinel=False)
        key = np.full(trace.rows, -1, dtype=np.int64)
        key[sel] = life_code.astype(np.int64) * (int(event_code.max()) + 1 if len(event_code) else 1) + event_code
        n = trace.rows + 1
        self.key = key
        refused = trace.code_of.get("ack_refused", -1)
        self.outcomes = _Keyed(key, oi, n, trace.codes[oi] == refused)  # acks: refused?
        causes = np.array(
            ["lease_expired"] * len(xi)
            + [v if v in ("seek", "restore") else "retired" for v in trace.detail[vi].tolist()]
            + ["claimed"] * len(ci),
            dtype=object,
        )
        # expiries, voided leases and claims (a Redis claim ends the holder's lease)
        self.invalidated = _Keyed(key, np.concatenate([xi, vi, ci]), n, causes)
        self.expired = _Keyed(key, xi, n)
        self.claimed = _Keyed(key, ci, n)
        self.code_of_life = {c: j for j, c in enumerate(lives.tolist())}
        self.deliveries, self.delivery_life = di, life_code[: len(di)]
        self.delivery_pos = published.position(trace.event_id[di])
        self.leases = li
        self.lease_life = pd.Index(lives).get_indexer(trace.who[li]) if len(li) else np.empty(0, dtype=np.int64)
        self.lease_pos = published.position(trace.event_id[li]) if len(li) else np.full(0, -1)

    def of_life(self, name: str, leases: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """A life's deliveries (or leases), in trace order: (trace index, place in seq order)."""
        c = self.code_of_life.get(name)
        life, at, pos = (
            (self.lease_life, self.leases, self.lease_pos)
            if leases
            else (self.delivery_life, self.deliveries, self.delivery_pos)
        )
        mine = np.flatnonzero(life == c) if c is not None else np.empty(0, dtype=np.int64)
        return at[mine], pos[mine]

    def stale(self, d: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Per delivery at ``d`` (the next one of its pair at ``end``): why it was
        stale, or None. Stale: the ack after it (before ``end``) was refused — why:
        the pair's last invalidation before the refusal, else lease_expired — or
        the lease it worked under (the last grant of its attempt) was invalidated
        between that grant and the effect — why: the last such invalidation, or
        ``late_ack`` when that was an expiry and the ack after the effect was
        honoured all the same (``LeaseConfig.late_ack = "honour"``)."""
        out = np.full(len(d), None, dtype=object)
        if not len(d):
            return out
        k = self.key[d]
        outcomes, invalidated = self.outcomes, self.invalidated
        has, q = outcomes.after(k, d)
        if len(outcomes.a):
            at = outcomes.index(q)
            refused = has & (at < end) & outcomes.values[0][q]
            honoured = has & (at < end) & ~outcomes.values[0][q]
            why, w = invalidated.before(k, at)
            if len(invalidated.a):
                out[refused] = np.where(why, invalidated.values[0][w], "lease_expired")[refused]
            else:
                out[refused] = "lease_expired"
        else:
            refused = honoured = np.zeros(len(d), bool)
        granted = self._grants(k, d)
        why, w = invalidated.before(k, d)
        if len(invalidated.a):
            gone = ~refused & why & (granted >= 0) & (invalidated.index(w) > granted)
            cause = invalidated.values[0][w]
            late = honoured & (cause == "lease_expired")  # only a broker that honours a late ack accepts one
            out[gone] = np.where(late, "late_ack", cause)[gone]
        return out

    def _grants(self, k: np.ndarray, d: np.ndarray) -> np.ndarray:
        """Per delivery, where the lease of its attempt was last granted (-1: none)."""
        details, li = self.trace.detail, self.leases
        mine = li[np.isin(self.key[li], np.unique(k))]
        granted = {
            (kk, _attempt(dt)): i for kk, dt, i in zip(self.key[mine].tolist(), details[mine].tolist(), mine.tolist())
        }
        return np.array(
            [granted.get((kk, _attempt(dt)), -1) for kk, dt in zip(k.tolist(), details[d].tolist())], dtype=np.int64
        )


@dataclass
class Evidence:
    """What every life's phases read: the run's trace, what was published,
    the consumer lives, the marks, the pairs and the tables."""

    trace: _Trace
    published: _Published
    lives: dict[str, _Life]
    marks: _Marks
    pairs: _Pairs
    tables: _Tables
    by_leases: bool  # riffdb order: leases are ordered, not deliveries
    fenced: bool = True  # retention keeps what a consumer needs (retention_policy "fence")


def evidence(sim) -> Evidence:
    """Read a finished leases run (its ``trace()``, its tables and its
    ``config.partition_order`` and ``config.retention_policy``) for the phases below."""
    trace = _Trace(sim.trace())
    published = _published(trace)
    restored = _restored_backups(trace)
    lives = consumer_lives(trace, {r["consumer"]: r for r in _rows(sim)("lease_consumers")}, restored)
    config = getattr(sim, "config", None)
    order = getattr(config, "partition_order", "riffdb")
    return Evidence(
        trace,
        published,
        lives,
        _marks(trace, restored),
        _Pairs(trace, published),
        _Tables(sim),
        by_leases=order != "head_of_line",
        fenced=getattr(config, "retention_policy", "fence") == "fence",
    )


# -- the phases, per life ----------------------------------------------------------
def owed(life: _Life, published: _Published) -> np.ndarray:
    """Who was owed what: the published events (as a mask over seq order) a
    life is due — a seq past its start, and not published after it ended (a
    retired consumer owes nothing published later)."""
    due = published.seq > life.start
    if life.ended is not None:
        due &= ~(published.index > life.ended)
    return due


def delivered(ev: Evidence, life: _Life, due: np.ndarray) -> Repeats:
    """What was delivered: the life's effects on events it was due, sorted by
    event (seq order), then by time; the repeats are its duplicates."""
    at, pos = ev.pairs.of_life(life.name)
    keep = pos >= 0
    keep[keep] = due[pos[keep]]
    return repeats(pos[keep], at[keep])


def duplicate_causes(ev: Evidence, life: _Life, got: Repeats) -> np.ndarray:
    """Why each extra delivery happened: the first that holds, in this order,
    of something between it and the delivery before — a ``seek``, a
    ``restore`` — then a stale lease on either side (its ack refused, or its
    lease invalidated before the effect landed: the invalidation's cause),
    then a ``crash`` in between, then the lease ``expired`` in between (in
    recovery), then a Redis claim in between (``claimed``), else ``unknown``."""
    again, prev, nxt = got.again, got.previous, got.at[got.again]
    # each delivery of an event delivered more than once, and where the next one of it landed
    multi = np.zeros(len(got.item), bool)
    multi[again] = multi[again - 1] = True
    end = np.append(got.at[1:], ev.trace.rows)
    end[np.append(got.item[1:] != got.item[:-1], True)] = ev.trace.rows
    stale = np.full(len(got.item), None, dtype=object)
    mi = np.flatnonzero(multi)
    stale[mi] = ev.pairs.stale(got.at[mi], end[mi])
    stale_prev, stale_next = stale[again - 1], stale[again]
    has_prev = pd.notna(stale_prev)
    marks = ev.marks
    return first_cause(
        len(again),
        [
            ("seek", any_between(marks.seeks_of(life.name), prev, nxt)),
            ("restore", any_between(marks.restores, prev, nxt)),
            (np.where(has_prev, stale_prev, stale_next), has_prev | pd.notna(stale_next)),
            ("crash", any_between(marks.crashes, prev, nxt)),
            ("lease_expired", ev.pairs.expired.between(ev.pairs.key[nxt], prev, nxt)),
            ("claimed", ev.pairs.claimed.between(ev.pairs.key[nxt], prev, nxt)),
        ],
    )


def dead_lettered(ev: Evidence, life: _Life, event_id, seq: int) -> bool:
    """The event was dead-lettered for this life: a row of ``dead_letters``
    (while the consumer exists), or a ``dead_lettered`` event that no later
    seek back before it required again and no restore undid."""
    if life.row is not None and (life.consumer, event_id) in ev.tables.dead:
        return True
    dead_i = ev.marks.dead_at[life.name].get(event_id)
    return (
        dead_i is not None
        and not any(i > dead_i and pos < seq for i, pos in ev.marks.seeks[life.name])
        and not any(bi < dead_i < ri for bi, ri in ev.marks.restored)
    )


def pending(ev: Evidence, life: _Life, event_id, seq: int, partition) -> bool:
    """Not done yet: the consumer exists, the event is retained and past both
    its start and its partition's checkpoint."""
    row = life.row
    return (
        row is not None
        and event_id in ev.tables.retained
        and seq > row["start_seq"]
        and seq > ev.tables.checkpoints[life.consumer].get(partition, -1)
    )


def stopped(ev: Evidence, life: _Life, event_id, seq: int) -> str | None:
    """Why the event's redelivery was stopped unprocessed for this life —
    ``term`` (its worker terminated it) or ``max_deliver`` (its last allowed
    delivery failed and ``at_max_deliver = "drop"`` forgot it) — unless a later
    seek back required it again or a restore undid it; else None."""
    found = ev.marks.stopped.get(life.name, {}).get(event_id)
    if found is None:
        return None
    at, cause = found
    if any(i > at and pos < seq for i, pos in ev.marks.seeks[life.name]):
        return None
    return None if any(bi < at < ri for bi, ri in ev.marks.restored) else cause


def loss_cause(ev: Evidence, life: _Life, event_id, seq: int, published_at: int) -> str:
    """Why an owed event was never delivered: seeked past after it was
    published (``seek``), the consumer ``retired``, a backup ``restore``
    took it (the consumer, or the event published between the backup and
    the restore), its redelivery stopped (``term``, ``max_deliver``:
    :func:`stopped`), retention ``pruned`` it — ``not_retained`` under a
    retention policy that holds nothing for a consumer
    (``LeaseConfig.retention_policy`` ``"interest"`` or ``"limits"``) — else
    ``unknown``."""
    marks = ev.marks
    if any(i > published_at and pos >= seq for i, pos in marks.seeks[life.name]):
        return "seek"
    if life.retired is not None:
        return "retired"
    if life.taken is not None or any(bi < published_at < ri for bi, ri in marks.restored):
        return "restore"
    why = stopped(ev, life, event_id, seq)
    if why is not None:
        return why
    if event_id in marks.pruned:
        return "pruned" if ev.fenced else "not_retained"
    return "unknown"


def undelivered(ev: Evidence, life: _Life, due: np.ndarray, got: Repeats) -> tuple[int, int, list[tuple]]:
    """The owed events never delivered: (dead-lettered, pending, the lost
    ones as (life, event_id, cause))."""
    pub = ev.published
    was_delivered = np.zeros(len(pub.seq), bool)
    was_delivered[got.item] = True
    dead = waiting = 0
    lost = []
    for j in np.flatnonzero(due & ~was_delivered).tolist():
        event_id, seq = pub.event_id[j], int(pub.seq[j])
        if dead_lettered(ev, life, event_id, seq):
            dead += 1
        elif stopped(ev, life, event_id, seq) is None and pending(ev, life, event_id, seq, pub.partition[j]):
            waiting += 1
        else:
            lost.append((life.name, event_id, loss_cause(ev, life, event_id, seq, int(pub.index[j]))))
    return dead, waiting, lost


def _late_firsts(ev: Evidence, at: np.ndarray, pos: np.ndarray, reorders) -> tuple:
    """(trace index, place in seq order, seq before it, cause) of every first
    row of a pair below the highest seq already seen in its partition, rows in
    trace order. ``reorders`` is ``(cause, sorted trace indices)`` by rising
    precedence: a late row is explained by (named after) a reordering that lies
    between it and every earlier first row of its partition with a higher seq
    — i.e. it is in order among the rows since the last such reordering —
    else its cause is None."""
    first = ~pd.Series(ev.pairs.key[at]).duplicated().to_numpy() & (pos >= 0)
    at, pos = at[first], pos[first]
    if not len(at):
        return at, pos, np.empty(0), np.empty(0, dtype=object)
    seq, partition = ev.published.seq[pos], ev.published.partition[pos]
    before = highest_before(seq, partition)
    late = np.flatnonzero(seq < before)
    why = np.full(len(late), None, dtype=object)
    for cause, marks in reorders:
        if len(late) and len(marks):
            since = np.searchsorted(marks, at, side="left")  # reorderings before each row
            why[seq[late] >= highest_before(seq, partition, since)[late]] = cause
    return at[late], pos[late], before[late], why


def out_of_order(ev: Evidence, life: _Life) -> list[tuple]:
    """The life's rows out of partition order, as (life, event_id, partition,
    the seq before it, cause). Under ``riffdb`` a first lease below the
    highest seq already leased in its partition; under ``head_of_line`` a
    first delivery below the highest seq already delivered, ``stale_lease``
    when the late effect's lease was already gone. A ``seek`` or a
    ``restore`` between it and the higher rows explains it (seek first)."""
    reorders = (("restore", ev.marks.restores), ("seek", ev.marks.seeks_of(life.name)))
    at, pos = ev.pairs.of_life(life.name, leases=ev.by_leases)
    late, late_pos, before, why = _late_firsts(ev, at, pos, reorders)
    if ev.by_leases or not len(late):
        stale = [None] * len(late)
    else:
        stale = ev.pairs.stale(late, np.full(len(late), ev.trace.rows, dtype=np.int64)).tolist()
    pub = ev.published
    return [
        (
            life.name,
            ev.trace.event_id[late[j]],
            pub.partition[late_pos[j]],
            int(before[j]),
            "stale_lease" if stale[j] else why[j] or "unknown",
        )
        for j in range(len(late))
    ]


def _check_life(ev: Evidence, life: _Life) -> tuple[dict, list, list, list]:
    """One life's row of ``per_consumer``, its duplicates, losses and
    out-of-order rows."""
    disorder = out_of_order(ev, life)
    due = owed(life, ev.published)
    got = delivered(ev, life, due)
    dups = []
    if len(got.again):
        causes = duplicate_causes(ev, life, got)
        dups = list(
            zip([life.name] * len(got.again), ev.published.event_id[got.item[got.again]].tolist(), causes.tolist())
        )
    dead, waiting, lost = undelivered(ev, life, due, got)
    counts = dict(zip(_COUNTS, (got.delivered, len(dups), len(lost), dead, waiting, len(disorder))))
    return {"consumer": life.name, "retired": life.row is None, **counts}, dups, lost, disorder


def _report(per: list[dict], dups: list, lost: list, disorder: list, published: int) -> LeaseReport:
    dup_df = pd.DataFrame(dups, columns=["consumer", "event_id", "cause"])
    lost_df = pd.DataFrame(lost, columns=["consumer", "event_id", "cause"])
    ooo_df = pd.DataFrame(disorder, columns=["consumer", "event_id", "partition", "after_seq", "cause"])
    total = {
        "published": published,
        "delivered": sum(p["delivered"] for p in per),
        "duplicates": len(dup_df),
        "lost": len(lost_df),
        "dead_lettered": sum(p["dead_lettered"] for p in per),
        "pending": sum(p["pending"] for p in per),
        "out_of_order": len(ooo_df),
        "duplicates_by_cause": dup_df["cause"].value_counts().to_dict(),
        "lost_by_cause": lost_df["cause"].value_counts().to_dict(),
    }
    total["valid"] = (
        not lost_df["cause"].isin(_BROKEN).any()
        and not (dup_df["cause"] == "unknown").any()
        and not (ooo_df["cause"] == "unknown").any()
    )
    per_df = pd.DataFrame(per, columns=["consumer", "retired", *_COUNTS])
    return LeaseReport(per_df, dup_df, lost_df, ooo_df, total)


@gc_paused()  # a burst of allocations over a finished run: see fanoutsim.kernel.gcpause
def check(sim) -> LeaseReport:
    """Check every consumer life of a finished (or paused) leases ev."""
    refuse_unreadable(sim, "leases", "fanoutsim.check_leases")
    ev = evidence(sim)
    per, dups, lost, disorder = [], [], [], []
    for name in sorted(ev.lives):
        row, life_dups, life_lost, life_disorder = _check_life(ev, ev.lives[name])
        per.append(row)
        dups += life_dups
        lost += life_lost
        disorder += life_disorder
    return _report(per, dups, lost, disorder, len(ev.published.seq))


check_leases = check  # its first name, kept: every design's checker is ``check``
