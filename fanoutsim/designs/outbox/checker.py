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
*pending*     never delivered, and still ahead of the cursor and retained, or owed as deferred work;
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

The checker runs the phases of :mod:`fanoutsim.kernel.check` per consumer:
:func:`owed`, :func:`delivered`, :func:`duplicate_causes`, :func:`undelivered`
with :func:`loss_cause`, and :func:`latency`; the bus apart (:func:`bus`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from fanoutsim.kernel.check import CheckedReport, Repeats, any_between, first_cause, refuse_unreadable, repeats
from fanoutsim.kernel.gcpause import gc_paused
from fanoutsim.kernel.timeutil import US

LOSS_CAUSES = ("late_commit", "seek", "gap_timeout", "pruned", "unknown")
DUPLICATE_CAUSES = ("crash", "reset", "unknown")
_PROMISED = ("late_commit", "unknown")
_GAP_SPAN = re.compile(r"seqs (\d+)\.\.(\d+) ")


@dataclass
class OutboxReport(CheckedReport):
    """The outbox checker's report; it meets :mod:`fanoutsim.kernel.check`'s
    contract (``unit`` is ``"consumer"``, ``per_unit`` is ``per_consumer``).

    ``per_consumer``: one row per consumer, with its ``cursor``, the counts
    ``delivered``, ``duplicates``, ``lost``, ``parked``, ``pending`` and the latency
    from commit to handling (``latency_mean_s``, ``_p50_s``, ``_p99_s``,
    ``_max_s``). ``duplicates`` and ``lost``: one row per extra delivery or loss
    (``consumer``, ``seq``, ``cause``). ``parked``: the rows set aside after their
    retry budget. ``bus``: what the live topic bus carried (``seq``, ``topic``,
    ``published``, ``receivers``). ``total``: the run's counts (``committed``,
    ``delivered``, ``extra_deliveries``, ...), the causes counted and the verdict
    ``valid``. ``str(report)`` is the verdict, the totals and the table."""

    per_consumer: pd.DataFrame
    duplicates: pd.DataFrame
    lost: pd.DataFrame
    parked: pd.DataFrame
    bus: pd.DataFrame = field(default_factory=pd.DataFrame)
    total: dict = field(default_factory=dict)

    unit = "consumer"
    summary_names = {"duplicates": "extra_deliveries"}

    def __str__(self) -> str:
        lines = [
            f"outbox check: {'valid' if self.valid else 'INVALID'} — "
            f"{self.total['committed']} committed, {self.total['delivered']} delivered, "
            f"{self.total['extra_deliveries']} duplicates, {self.total['lost']} lost, "
            f"{self.total['parked']} parked"
        ]
        if len(self.per_consumer):
            lines.append(self.per_consumer.to_string(index=False))
        if self.total.get("bus_published") or self.total.get("bus_unpublished"):
            lines.append(
                f"topic bus (best effort, not delivery): {self.total['bus_published']} rows published, "
                f"{self.total['bus_unpublished']} never (visible only below the bus's position), "
                f"{self.total['bus_receipts']} receipts"
            )
        return "\n".join(lines)


# -- reading the run -----------------------------------------------------------------
class _Trace:
    """The run's trace as arrays."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.kind = frame["kind"].to_numpy()
        self.who = frame["consumer"].to_numpy()
        self.seq = frame["seq"].to_numpy()
        self.t = frame["t"].to_numpy()
        self.detail = frame["detail"].to_numpy()

    def events(self, kind: str) -> np.ndarray:
        """The trace positions of the rows of ``kind``, in trace order."""
        return np.flatnonzero(self.kind == kind)

    def rows(self, *kinds: str, **columns: str) -> pd.DataFrame:
        """The rows of ``kinds``, in trace order: ``columns`` (name -> the
        trace's array) and their trace position ``i``."""
        at = np.sort(np.concatenate([self.events(k) for k in kinds]))
        out = {name: getattr(self, col)[at] for name, col in columns.items()}
        for name in ("seq", "t"):
            if name in out:
                out[name] = out[name].astype(np.int64)
        return pd.DataFrame({**out, "i": at})


@dataclass
class _Marks:
    """The rarer events the causes are read from."""

    starts: dict[str, int]  # consumer -> its first cursor
    resets: dict[str, list[tuple[int, int]]]  # consumer -> [(trace index, cursor)]: moves by hand
    gap_skips: dict[str, dict[int, int]]  # consumer -> seq -> where its first gap skip spans it
    pruned: dict[int, int]  # seq -> where retention deleted it
    crashes: np.ndarray
    published: dict[int, tuple[str, int]]  # seq -> (topic, receivers): the bus


def _marks(trace: _Trace) -> _Marks:
    starts: dict[str, int] = {}
    for i in trace.events("cursor_start"):
        starts.setdefault(trace.who[i], int(trace.seq[i]))
    resets = defaultdict(list)
    for i in trace.events("reset"):
        resets[trace.who[i]].append((int(i), int(trace.seq[i])))
    gap_skips = defaultdict(dict)
    for i in trace.events("gap_skipped"):
        # the event's seq is the first missing one; its detail ("seqs 22..24 missing ...") spans the gap
        first = int(trace.seq[i])
        m = _GAP_SPAN.match(str(trace.detail[i]))
        last = int(m.group(2)) if m and int(m.group(1)) == first else first
        for seq in range(first, last + 1):
            gap_skips[trace.who[i]].setdefault(seq, int(i))
    pruned: dict[int, int] = {}
    for i in trace.events("pruned"):
        pruned.setdefault(int(trace.seq[i]), int(i))
    published = {int(trace.seq[i]): (trace.who[i], int(trace.detail[i])) for i in trace.events("published")}
    return _Marks(starts, resets, gap_skips, pruned, trace.events("crashed"), published)


def _commits(trace: _Trace) -> pd.DataFrame:
    """What was written: each committed row once (its last ``committed``
    event), as ``seq``, commit time ``tc`` and trace position ``ic``, in
    commit order."""
    at = trace.events("committed")
    commits = pd.DataFrame({"seq": trace.seq[at].astype(np.int64), "tc": trace.t[at].astype(np.int64), "ic": at})
    return commits.drop_duplicates("seq", keep="last").sort_values("ic", kind="stable")


@dataclass
class Evidence:
    """What every consumer's phases read, read once from the run by
    :func:`evidence`: the ``commits``, the trace's ``marks`` (crashes, resets,
    ...), and per consumer its effects (``deliveries``), the ends of its handling
    steps (``handled``) and its cursor ``moves``; the ``parked_rows`` (and
    :attr:`parked`), the ``deferred`` work owed, the ``cursors``, and the rows
    ``retained`` in the outbox (seq -> topic)."""

    commits: pd.DataFrame
    marks: _Marks
    deliveries: dict[str, pd.DataFrame]  # consumer -> its effects (seq, i), in trace order
    handled: dict[str, pd.DataFrame]  # consumer -> the ends of its handling steps (seq, t)
    moves: dict[str, pd.DataFrame]  # consumer -> its cursor moves and fetches' last seq (seq, i)
    parked_rows: list[dict]
    deferred: set[tuple]
    cursors: dict[str, int]
    retained: dict[int, str]  # seq -> topic of the rows still in the outbox

    @cached_property
    def parked(self) -> set[tuple]:
        """(consumer, seq) of every parked row."""
        return {(r["consumer"], r["seq"]) for r in self.parked_rows}


def evidence(sim) -> Evidence:
    """Read a finished outbox run (its ``trace()`` and its tables) for the phases below."""
    trace = _Trace(sim.trace())

    def by_consumer(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
        return dict(tuple(frame.groupby("consumer", sort=False)))

    rows = sim.store.rows
    return Evidence(
        _commits(trace),
        _marks(trace),
        by_consumer(trace.rows("delivered", consumer="who", seq="seq")),
        by_consumer(trace.rows("handled", consumer="who", seq="seq", t="t")),
        by_consumer(trace.rows("cursor", "fetched", consumer="who", seq="seq")),
        rows("parked"),
        {(r["consumer"], r["seq"]) for r in rows("deferred")},
        {r["consumer"]: r["seq"] for r in rows("cursors")},
        {r["seq"]: r["topic"] for r in rows("outbox")},
    )


# -- the phases, per consumer --------------------------------------------------------
def owed(ev: Evidence, name: str) -> pd.DataFrame:
    """Who was owed what: the committed rows with a seq above the consumer's
    first cursor, in commit order."""
    commits = ev.commits
    return commits[commits["seq"] > ev.marks.starts.get(name, 0)]


def delivered(ev: Evidence, name: str, due: pd.DataFrame) -> Repeats:
    """What was delivered: the consumer's effects on rows it was due, each as
    its row's place in ``due`` (commit order), then by time; the repeats are
    its duplicates."""
    effects = ev.deliveries.get(name)
    if effects is None:
        return repeats(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))
    item = pd.Index(due["seq"]).get_indexer(effects["seq"])
    keep = item >= 0
    return repeats(item[keep], effects["i"].to_numpy()[keep])


def duplicate_causes(ev: Evidence, name: str, got: Repeats) -> np.ndarray:
    """Why each extra delivery happened, from what lies between it and the
    delivery before: a ``reset`` of the cursor replays by design, whatever
    else happened; else a ``crash``; else ``unknown``."""
    prev, nxt = got.previous, got.at[got.again]
    resets = np.asarray([i for i, _ in ev.marks.resets[name]], dtype=np.int64)
    return first_cause(
        len(got.again), [("reset", any_between(resets, prev, nxt)), ("crash", any_between(ev.marks.crashes, prev, nxt))]
    )


def loss_cause(ev: Evidence, name: str, seq: int, committed_at: int, read_upto) -> str:
    """Why an owed row was never handled. ``read_upto(i)``: the highest seq the
    consumer had read (a fetch or its cursor) before trace position ``i``, None
    before its first read.

    ``gap_timeout`` when ``read_mode="gap"`` waited for it and gave up before
    it committed (the documented gap timeout, not a late commit passed over
    unawares); ``late_commit`` when it had already read past it when it
    committed; ``seek`` when it was moved past by hand after it committed,
    before retention took it; ``gap_timeout`` for a skip after it committed;
    ``pruned`` when retention took it; else ``unknown``."""
    marks = ev.marks
    seek = next((i for i, pos in marks.resets[name] if i > committed_at and pos >= seq), None)
    skipped = marks.gap_skips[name].get(seq)
    if skipped is not None and skipped < committed_at:
        return "gap_timeout"
    read = read_upto(committed_at)
    if read is not None and read >= seq:
        return "late_commit"
    if seek is not None and marks.pruned.get(seq, seek) >= seek:
        return "seek"
    if skipped is not None:
        return "gap_timeout"
    if seq in marks.pruned:
        return "pruned"
    return "unknown"


def _read_upto(ev: Evidence, name: str):
    """The highest seq the consumer had read before a trace position (None: nothing yet)."""
    m = ev.moves.get(name)
    idx = m["i"].to_numpy() if m is not None else np.empty(0, dtype=np.int64)
    high = np.maximum.accumulate(m["seq"].to_numpy()) if m is not None else idx

    def upto(at: int) -> int | None:
        k = int(np.searchsorted(idx, at))
        return high[k - 1] if k else None

    return upto


def undelivered(ev: Evidence, name: str, due: pd.DataFrame, got: Repeats) -> tuple[int, int, list[dict]]:
    """The owed rows never handled: (parked, pending, the lost ones with
    their cause). Parked: in the ``parked`` table (its retries ran out);
    pending: owed as deferred work, or ahead of the cursor and retained. The
    cursor is the last seq handled in full: a row whose handler ran while its
    step had not ended is delivered, above the cursor, and not pending."""
    missing = np.ones(len(due), bool)
    missing[got.item] = False
    parked = waiting = 0
    lost = []
    if not missing.any():
        return parked, waiting, lost
    read_upto = _read_upto(ev, name)
    for seq, ic in zip(due["seq"].to_numpy()[missing].tolist(), due["ic"].to_numpy()[missing].tolist()):
        if (name, seq) in ev.parked:
            parked += 1
        elif (name, seq) in ev.deferred or (seq > ev.cursors[name] and seq in ev.retained):
            waiting += 1
        else:
            lost.append({"consumer": name, "seq": seq, "cause": loss_cause(ev, name, seq, ic, read_upto)})
    return parked, waiting, lost


def latency(ev: Evidence, name: str, due: pd.DataFrame) -> dict[str, float]:
    """Commit to the end of the first handling step, seconds, over the owed rows handled."""
    handled = ev.handled.get(name)
    if handled is None:
        handled = pd.DataFrame({"seq": np.empty(0, np.int64), "t": np.empty(0, np.int64)})
    got = due.merge(handled.drop_duplicates("seq")[["seq", "t"]], on="seq", how="inner", sort=False)
    s = pd.Series((got["t"] - got["tc"]).to_numpy() / US, dtype=float)
    return {
        "latency_mean_s": s.mean(),
        "latency_p50_s": s.quantile(0.5),
        "latency_p99_s": s.quantile(0.99),
        "latency_max_s": s.max(),
    }


def _check_consumer(ev: Evidence, name: str) -> tuple[dict, list[tuple], list[dict]]:
    """One consumer's row of ``per_consumer``, its duplicates and its losses."""
    due = owed(ev, name)
    got = delivered(ev, name, due)
    dups = []
    if len(got.again):
        seqs = due["seq"].to_numpy()[got.item[got.again]]
        dups = list(zip([name] * len(seqs), seqs.tolist(), duplicate_causes(ev, name, got).tolist()))
    parked, waiting, lost = undelivered(ev, name, due, got)
    row = {
        "consumer": name,
        "cursor": ev.cursors[name],
        "delivered": got.delivered,
        "duplicates": len(dups),
        "lost": len(lost),
        "parked": parked,
        "pending": waiting,
        **latency(ev, name, due),
    }
    return row, dups, lost


def bus(ev: Evidence) -> pd.DataFrame:
    """The topic bus, apart from delivery: per committed row, whether a live
    dispatcher published it, its topic and how many subscribers received it."""
    published, retained = ev.marks.published, ev.retained
    return pd.DataFrame(
        [
            {
                "seq": seq,
                "topic": published.get(seq, (retained.get(seq), 0))[0],
                "published": seq in published,
                "receivers": published.get(seq, (None, 0))[1],
            }
            for seq in sorted(ev.commits["seq"].tolist())
        ],
        columns=["seq", "topic", "published", "receivers"],
    )


def _report(ev: Evidence, per: list[dict], dups: list[tuple], lost: list[dict]) -> OutboxReport:
    lost_df = pd.DataFrame(lost, columns=["consumer", "seq", "cause"])
    dup_df = pd.DataFrame(dups, columns=["consumer", "seq", "cause"])
    total = {
        "committed": len(ev.commits),
        "delivered": sum(p["delivered"] for p in per),
        "extra_deliveries": len(dup_df),
        "lost": len(lost_df),
        "parked": sum(p["parked"] for p in per),
        "pending": sum(p["pending"] for p in per),
        "lost_by_cause": lost_df["cause"].value_counts().to_dict(),
        "duplicates_by_cause": dup_df["cause"].value_counts().to_dict(),
    }
    topics = bus(ev)
    total["bus_published"] = int(topics["published"].sum())
    total["bus_unpublished"] = int((~topics["published"]).sum())
    total["bus_receipts"] = int(topics["receivers"].sum())
    total["valid"] = (not lost_df["cause"].isin(_PROMISED).any()) and not (dup_df["cause"] == "unknown").any()
    cols = [
        "consumer",
        "cursor",
        "delivered",
        "duplicates",
        "lost",
        "parked",
        "pending",
        "latency_mean_s",
        "latency_p50_s",
        "latency_p99_s",
        "latency_max_s",
    ]
    return OutboxReport(pd.DataFrame(per, columns=cols), dup_df, lost_df, pd.DataFrame(ev.parked_rows), topics, total)


@gc_paused()  # a burst of allocations over a finished run: see fanoutsim.kernel.gcpause
def check(sim) -> OutboxReport:
    """Check every consumer of a finished (or paused) outbox run, from its trace and
    tables alone (never the fault plan): the rows each consumer was owed, what it
    handled, every duplicate and loss with its cause, what was parked. Returns an
    :class:`OutboxReport`; ``report.valid`` is the verdict. Refuses a run of another
    design or an object without a trace (TypeError), and a run made with
    ``trace=False`` (ValueError): without the trace it would find nothing and call
    the run valid."""
    refuse_unreadable(sim, "outbox", "fanoutsim.check_outbox")
    ev = evidence(sim)
    per, dups, lost = [], [], []
    for name in sorted(ev.cursors):
        row, consumer_dups, consumer_lost = _check_consumer(ev, name)
        per.append(row)
        dups += consumer_dups
        lost += consumer_lost
    return _report(ev, per, dups, lost)


check_outbox = check  # its first name, kept: every design's checker is ``check``
