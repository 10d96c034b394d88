"""The delivery checker: what was lost, what was duplicated, and why.

In the spirit of Jepsen's total-queue checker, it compares what writers put in
(the trace's firing history) with what subscribers got out (the
``workflow_executions`` table), per subscription, and explains every
difference from the trace alone — never from the fault plan.

For each subscription, a firing is

*expected*
    when it was durably logged for the subscription's reactor and tenant after the
    subscription existed, and the subscription's CEL filter, evaluated here
    independently, is true for it;
*delivered*
    once or more (each extra delivery is a *duplicate*);
*pending*
    when undelivered but still in the log past the watermark: backlog, not loss;
*lost*
    otherwise.

Causes of a duplicate (the extra delivery's story in the trace):

``ambiguous_insert``
    the previous insert committed but reported failure, and was retried
``crash``
    the runner crashed after the dispatch and before the watermark passed it
``several_pollers``
    another poller replica dispatched it too, or wrote the watermark between two
    dispatches of one
``watermark_rewind``
    the watermark moved backwards and the firing was read again

Causes of a loss:

``pruned``
    deleted by the prune loop before any delivery
``tie``
    the watermark landed exactly on its ``fired_at`` via a sibling firing with the
    same timestamp (the strict ``>`` skips it)
``late_visibility``
    it became visible after the watermark had passed its ``fired_at`` (a late
    commit or a lagging writer clock)
``dispatch_failed``
    its insert failed and the watermark advanced anyway
``never_logged``
    the writer crashed after the in-process graphs ran and before the row was
    written (reported apart: not expected)

``valid`` is true when nothing was lost that the configuration promises to
deliver: a TTL prune (``prune_policy="ttl"``) and ``dispatch_failure_policy=
"advance"`` are documented ways to drop firings, every other loss is a broken
promise.

The checker runs the phases of :mod:`fanoutsim.kernel.check` per subscription:
:func:`owed` (with the filters, :func:`_evaluate_filters`), what was
delivered (the ``workflow_executions`` rows, :func:`_executions`),
:func:`duplicate_cause`, :func:`pending` and :func:`loss_cause` with
:func:`promised`, and :func:`out_of_order`.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

import numpy as np
import pandas as pd

from fanoutsim.designs.reactor.payload import context_firing, decode_sources
from fanoutsim.designs.reactor.predicate import activation, compile_predicate
from fanoutsim.kernel.check import CheckedReport, happened_between, highest_before, refuse_unreadable
from fanoutsim.kernel.gcpause import gc_paused
from fanoutsim.kernel.report import cause_lines

LOSS_CAUSES = ("pruned", "tie", "late_visibility", "dispatch_failed", "unknown")
DUPLICATE_CAUSES = ("ambiguous_insert", "crash", "several_pollers", "watermark_rewind", "unknown")

_COUNTED = (
    "expected",
    "delivered_once",
    "duplicated",
    "extra_deliveries",
    "lost",
    "lost_promised",
    "pending",
    "out_of_order",
    "backfilled",
)
_PER_SUB_COLUMNS = ["subscription", "reactor_name", "workflow_name", "tenant_id", *_COUNTED, "valid"]
_LOST_COLUMNS = ["subscription", "workflow_name", "tenant_id", "firing", "cause", "promised", "detail"]
_NEVER_COLUMNS = ["subscription", "workflow_name", "tenant_id", "firing", "cause"]


def _per_sub_row(s: Any, counts: tuple[int, ...], *, valid: bool) -> dict[str, Any]:
    """One row of ``per_subscription``: subscription ``s``, its ``counts`` (in
    :data:`_COUNTED`'s order) and whether it is valid."""
    return {
        "subscription": s["id"],
        "reactor_name": s["reactor_name"],
        "workflow_name": s["workflow_name"],
        "tenant_id": s["tenant_id"],
        **dict(zip(_COUNTED, counts, strict=True)),
        "valid": valid,
    }


@dataclass
class CheckReport(CheckedReport):
    """The reactor checker's report; it meets :mod:`fanoutsim.kernel.check`'s
    contract (``unit`` is ``"subscription"``, ``per_unit`` is
    ``per_subscription``).

    ``per_subscription``: one row per subscription (its reactor, workflow and
    tenant), with the counts ``expected``, ``delivered_once``, ``duplicated``,
    ``extra_deliveries``, ``lost``, ``lost_promised``, ``pending``,
    ``out_of_order``, ``backfilled`` and its own ``valid``. ``duplicates``: one row
    per extra delivery (``firing``, ``execution``, ``cause``). ``lost``: one row per
    (subscription, lost firing), with its ``cause``, whether the configuration
    ``promised`` it, and a ``detail``. ``never_logged``: firings whose writer
    crashed after the in-process graphs and before the row (not expected of any
    subscription). ``total``: the run's counts, the causes counted and the
    verdict ``valid``. ``str(report)`` is :func:`format_check`'s text."""

    per_subscription: pd.DataFrame
    duplicates: pd.DataFrame  # one row per extra delivery
    lost: pd.DataFrame  # one row per (subscription, lost firing)
    never_logged: pd.DataFrame
    total: dict = field(default_factory=dict)

    unit = "subscription"
    summary_names = {"delivered": ("delivered_once", "duplicated"), "duplicates": "extra_deliveries"}

    def __str__(self) -> str:
        return format_check(self)

    def _repr_html_(self) -> str:
        return f"<pre>{format_check(self)}</pre>"


class _F:
    """One firing of the history, as the loops below read it."""

    __slots__ = ("firing", "fired_at", "logged_at")

    def __init__(self, firing, fired_at, logged_at):
        self.firing, self.fired_at, self.logged_at = firing, fired_at, logged_at


def _firings(frame: pd.DataFrame) -> list[_F]:
    return [_F(*r) for r in zip(frame["firing"], frame["fired_at"], frame["logged_at"])]


def _columns(frame: pd.DataFrame, names) -> dict[str, list]:
    """A frame's columns as lists, every missing value None (as a recorder's lists hold them)."""
    return {n: frame[n].astype(object).where(frame[n].notna(), None).tolist() for n in names}


# -- reading the run -----------------------------------------------------------------
# what the checker reads of the trace's events and of its firing history
_EVENT_COLUMNS = ("t", "kind", "actor", "subscription", "firing", "execution", "detail")
_HISTORY_COLUMNS = ("firing", "reactor_name", "tenant_id", "fired_at", "logged_at", "payload")


def _trace_columns(sim) -> tuple[dict[str, list], dict[str, list]]:
    """The run's events and firing history as columns: straight from the
    recorder when the host offers them (no frame built), else from its
    trace frame (traces merged from several processes)."""
    read = getattr(sim, "trace_columns", None)
    if read is not None:
        return read()
    trace = sim.trace()
    return _columns(trace, _EVENT_COLUMNS), _columns(trace.history, _HISTORY_COLUMNS)


def _sub_key(row) -> tuple:
    return (row["workflow_name"], row["tenant_id"], row["reactor_name"])


def _executions(store) -> tuple[dict[tuple, dict[str, list[str]]], set]:
    """What was delivered, straight from the store (only the keys of each row
    are needed): subscription key -> firing -> its execution ids in the order
    the rows are read (dispatched_at, id); and every execution id."""
    by_sub: dict[tuple, dict[str, list[str]]] = defaultdict(dict)
    existing = set()
    parsed: dict[str, tuple] = {}  # a firing's context is one text, in each subscription's row
    for row in store.rows("workflow_executions"):
        context = row["context"]
        got = parsed.get(context)
        if got is None:
            got = parsed[context] = context_firing(context)
        fid, reactor, _ = got
        existing.add(row["id"])
        if fid is not None:
            delivered = by_sub[(row["workflow_name"], row["tenant_id"], reactor)]
            ids = delivered.get(fid)
            if ids is None:
                delivered[fid] = [row["id"]]
            else:
                ids.append(row["id"])
    return by_sub, existing


_PER_SUB_KINDS = frozenset(("dispatched", "dispatch_failed", "watermark", "subscription"))


@dataclass
class Evidence:
    """What every subscription's phases read, read once from the run by
    :func:`evidence`: its ``config`` and whether its cursor is ``compound``
    (``(fired_at, id)``); the trace's ``events`` (columns); each stream's
    firings, ``logged`` and ``never`` logged; the ``executions`` and the
    ``existing`` execution ids; the firings ``retained`` in the log; each
    (subscription, kind)'s trace places (``per_sub_kind``); the ``crashes``;
    where each firing was pruned (``pruned_at``); and the filters' ``verdicts``."""

    config: object
    compound: bool  # the cursor is (fired_at, id)
    events: dict[str, list]  # the trace's columns
    logged: dict[tuple, list[_F]]  # stream (reactor, tenant) -> its logged firings, in history order
    never: dict[tuple, list[_F]]  # stream -> its firings never logged
    executions: dict[tuple, dict]  # see _executions
    existing: set  # every execution id
    retained: set  # the firings still in reactor_firings
    per_sub_kind: dict[tuple, list[int]]  # (subscription, kind) -> its events' places in the trace
    crashes: list[int]
    pruned_at: dict[str, int]  # firing -> where it was pruned
    verdicts: dict  # see _evaluate_filters


def evidence(sim, subs: pd.DataFrame) -> Evidence:
    """Read a finished run (its trace's columns, its tables, its config) for
    the phases below; ``subs``: its subscriptions, whose filters are evaluated."""
    events, history = _trace_columns(sim)
    executions, existing = _executions(sim.store)
    # each stream's firings, logged or never, built once however many subscriptions read the stream
    logged: dict[tuple, list[_F]] = defaultdict(list)
    never: dict[tuple, list[_F]] = defaultdict(list)
    for fid, reactor, tenant, fired_at, logged_at in zip(
        history["firing"], history["reactor_name"], history["tenant_id"], history["fired_at"], history["logged_at"]
    ):
        (never if logged_at is None else logged)[(reactor, tenant)].append(_F(fid, fired_at, logged_at))
    # one pass over the events, a position in the trace (``seq``) for each: each
    # subscription's events of each kind in trace order, the crashes, and when
    # each firing was pruned (a prune and a watermark move in the same instant
    # are ordered by what happened first)
    ev_firing = events["firing"]
    per_sub_kind: dict[tuple, list[int]] = defaultdict(list)
    crashes: list[int] = []
    pruned_at: dict[str, int] = {}
    for seq, (kind, sid) in enumerate(zip(events["kind"], events["subscription"])):
        if kind in _PER_SUB_KINDS:
            if sid is not None:
                per_sub_kind[(sid, kind)].append(seq)
        elif kind == "crashed":
            crashes.append(seq)
        elif kind == "pruned":
            fid = ev_firing[seq]
            if fid is not None:
                pruned_at[fid] = seq
    cfg = sim.config
    return Evidence(
        cfg,
        cfg.watermark != "fired_at",
        events,
        logged,
        never,
        executions,
        existing,
        {row["id"] for row in sim.store.rows("reactor_firings")},
        per_sub_kind,
        crashes,
        pruned_at,
        # the filters, evaluated here and independently of the engine's verdicts
        _evaluate_filters(subs, _streams(history)),
    )


class Story:
    """One subscription's events in the trace: its dispatches, failed
    inserts, watermark moves and enable/disable toggles, each by its place in
    the trace."""

    def __init__(self, ev: Evidence, sid: str) -> None:
        ev_t, ev_actor, ev_firing = ev.events["t"], ev.events["actor"], ev.events["firing"]
        ev_execution, ev_detail = ev.events["execution"], ev.events["detail"]
        per_sub_kind = ev.per_sub_kind
        dispatched = per_sub_kind.get((sid, "dispatched"), ())
        dispatched_ex = [ev_execution[q] for q in dispatched]
        self.dispatch_seq = dict(zip(dispatched_ex, dispatched))
        self.dispatch_actor = dict(zip(dispatched_ex, [ev_actor[q] for q in dispatched]))
        self.failed_by_firing = defaultdict(list)
        for q in per_sub_kind.get((sid, "dispatch_failed"), ()):
            self.failed_by_firing[ev_firing[q]].append((q, ev_execution[q]))
        wm_seq = self.wm_seq = per_sub_kind.get((sid, "watermark"), [])
        wm_val = self.wm_val = [int(ev_detail[q]) for q in wm_seq]
        self.wm_t = [ev_t[q] for q in wm_seq]
        self.wm_firing = [ev_firing[q] for q in wm_seq]
        self.wm_by = [(q, ev_actor[q]) for q in wm_seq]
        self.rewinds = [wm_seq[i] for i in range(1, len(wm_val)) if wm_val[i] < wm_val[i - 1]]
        self.wm_high = list(accumulate(wm_val, max))  # running maximum: bisectable
        self.toggle_seq = per_sub_kind.get((sid, "subscription"), [])
        self.toggle_on = [ev_detail[q] != "disabled" for q in self.toggle_seq]

    def enabled_at(self, seq: int) -> bool:
        """Was the subscription enabled at this point of the trace? (conservative
        pruning only protects enabled subscriptions, as seed 000 says)"""
        i = bisect_left(self.toggle_seq, seq)
        return self.toggle_on[i - 1] if i else True


# -- the phases, per subscription ----------------------------------------------------
def owed(ev: Evidence, s) -> tuple[list[_F], int, list[dict]]:
    """Who was owed what: ``(expected, backfilled, never logged)``. A
    subscription is owed the firings of its reactor and tenant that its filter
    passes and that were logged after it existed; those logged before it are
    ``backfilled`` (counted, not owed); a firing its writer never logged is
    reported apart (``never_logged``), not owed."""
    key = (s["reactor_name"], s["tenant_id"])
    created = int(s["created_at"].value // 1000)
    passing = ev.verdicts.get((s["predicate"], key))
    stream = ev.logged.get(key, ())
    if passing is not None:
        stream = [f for f in stream if f.firing in passing]
    expected = [f for f in stream if f.logged_at >= created]
    never = [
        {
            "subscription": s["id"],
            "workflow_name": s["workflow_name"],
            "tenant_id": s["tenant_id"],
            "firing": f.firing,
            "cause": "never_logged",
        }
        for f in ev.never.get(key, ())
        if passing is None or f.firing in passing
    ]
    return expected, len(stream) - len(expected), never


def duplicate_cause(ev: Evidence, story: Story, prev: tuple[int, str], nxt: tuple[int, str]) -> str:
    """Why the execution row ``nxt`` repeated ``prev`` (each ``(place in the
    trace, execution id)``, in commit order): ``ambiguous_insert`` when the
    earlier insert was reported failed (it committed all the same), then
    ``several_pollers`` when another poller dispatched it, ``crash`` when the
    runner crashed in between, ``watermark_rewind`` when the watermark moved
    back in between, ``several_pollers`` again when another poller wrote the
    watermark in between (across processes a write blocked on the row lock
    lands after its trace event: a lost update), else ``unknown``."""
    (prev_seq, prev_eid), (seq, eid) = prev, nxt
    actor = story.dispatch_actor.get(eid)
    if prev_eid not in story.dispatch_seq:
        return "ambiguous_insert"
    if story.dispatch_actor.get(prev_eid) != actor:
        return "several_pollers"
    if happened_between(ev.crashes, prev_seq, seq):
        return "crash"
    if happened_between(story.rewinds, prev_seq, seq):
        return "watermark_rewind"
    if any(prev_seq < w < seq and by != actor for w, by in story.wm_by):
        return "several_pollers"
    return "unknown"


def _duplicates(ev: Evidence, story: Story, s, f: _F, got: list[str]) -> tuple[int | None, list[dict]]:
    """A firing delivered more than once: the place of its first dispatch
    (None if none is in the trace), and one row per extra delivery — every
    row of the firing, in the order they were committed, after the first."""
    dispatch_seq = story.dispatch_seq
    dispatches = [(dispatch_seq[e], e) for e in got if e in dispatch_seq]
    commits = sorted(dispatches + [(seq, e) for seq, e in story.failed_by_firing.get(f.firing, ()) if e in ev.existing])
    rows = [
        {
            "subscription": s["id"],
            "workflow_name": s["workflow_name"],
            "tenant_id": s["tenant_id"],
            "firing": f.firing,
            "execution": nxt[1],
            "cause": duplicate_cause(ev, story, prev, nxt),
        }
        for prev, nxt in zip(commits, commits[1:])
    ]
    return (min(dispatches)[0] if dispatches else None), rows


def pending(ev: Evidence, f: _F, end_wm: int | None, end_wm_id: str) -> bool:
    """Backlog, not loss: still in the log and ahead of the subscription's
    cursor (past ``fired_at``, or past ``(fired_at, id)`` when compound)."""
    compound = ev.compound
    return f.firing in ev.retained and (
        end_wm is None or (f.fired_at, f.firing if compound else "") > (end_wm, end_wm_id if compound else "\uffff")
    )


def loss_cause(ev: Evidence, story: Story, f: _F) -> tuple[str, str | None, int | None]:
    """Why an owed firing was lost: ``(cause, detail, where it was pruned)``,
    from the first watermark move at or past its ``fired_at`` when that came
    before any prune: ``dispatch_failed`` (its insert failed before the move —
    under per_batch the move names the batch's last firing, not this one, but
    passes it all the same — or the move was its own after a failure),
    ``late_visibility`` (it became visible after the move: the compound cursor
    closes ties, so a move in the same instant did not see it either), ``tie``
    (the move landed on its ``fired_at`` via a sibling); else ``pruned`` when
    the prune came first; else ``unknown``."""
    cause, detail = "unknown", None
    passed = bisect_left(story.wm_high, f.fired_at)  # the first move at or past it
    passed = passed if passed < len(story.wm_high) else None
    pruned = ev.pruned_at.get(f.firing)
    if passed is not None and (pruned is None or story.wm_seq[passed] < pruned):
        failed = story.failed_by_firing.get(f.firing, ())
        moved_at = story.wm_t[passed]
        if failed and failed[0][0] < story.wm_seq[passed]:
            cause = "dispatch_failed"
        elif story.wm_firing[passed] == f.firing:  # moved past it by its own hand
            if failed:
                cause = "dispatch_failed"
        elif f.logged_at > moved_at or (ev.compound and f.logged_at == moved_at):
            cause = "late_visibility"
            detail = f"visible {(f.logged_at - moved_at) / 1e6:.3f} s after the watermark passed it"
        elif story.wm_val[passed] == f.fired_at:
            cause = "tie"
    elif pruned is not None:
        cause = "pruned"
    return cause, detail, pruned


def promised(ev: Evidence, story: Story, cause: str, pruned: int | None) -> bool:
    """Whether the configuration promised to deliver what was lost so: a TTL
    prune (or a prune while the subscription was disabled) and a failed
    insert under ``dispatch_failure_policy="advance"`` are documented drops."""
    cfg = ev.config
    return not (
        (cause == "pruned" and (cfg.prune_policy == "ttl" or not story.enabled_at(pruned)))
        or (cause == "dispatch_failed" and cfg.dispatch_failure_policy == "advance")
    )


def _check_subscription(ev: Evidence, s) -> tuple[dict, list[dict], list[dict], list[dict], list[tuple]]:
    """One subscription's row of ``per_subscription`` (its ``out_of_order``
    filled in later), its duplicates, losses and never-logged firings, and
    each delivered firing's first dispatch as ``(place in the trace,
    fired_at)`` for :func:`out_of_order`."""
    expected, backfilled, never = owed(ev, s)
    story = Story(ev, s["id"])
    deliveries = ev.executions.get(_sub_key(s), {})  # firing -> [execution ids]
    dispatch_seq = story.dispatch_seq
    end_wm = s["last_seen_fired_at"]
    end_wm = None if pd.isna(end_wm) else int(end_wm.value // 1000)
    end_wm_id = s["last_seen_firing_id"] or ""
    once = dup_firings = lost = lost_promised = waiting = 0
    firsts, dup_rows, lost_rows = [], [], []
    for f in expected:
        got = deliveries.get(f.firing)
        if got:
            if len(got) == 1:
                once += 1
                first = dispatch_seq.get(got[0])
            else:
                dup_firings += 1
                first, rows = _duplicates(ev, story, s, f, got)
                dup_rows += rows
            if first is not None:
                firsts.append((first, f.fired_at))
        elif pending(ev, f, end_wm, end_wm_id):
            waiting += 1
        else:
            cause, detail, pruned = loss_cause(ev, story, f)
            kept = promised(ev, story, cause, pruned)
            lost += 1
            lost_promised += kept
            lost_rows.append(
                {
                    "subscription": s["id"],
                    "workflow_name": s["workflow_name"],
                    "tenant_id": s["tenant_id"],
                    "firing": f.firing,
                    "cause": cause,
                    "promised": kept,
                    "detail": detail,
                }
            )
    # the counts in _COUNTED's order: expected, delivered once, duplicated, extra deliveries,
    # lost, lost promised, pending, out of order (counted later, over every row), backfilled
    counts = (len(expected), once, dup_firings, len(dup_rows), lost, lost_promised, waiting, 0, backfilled)
    row = _per_sub_row(s, counts, valid=lost_promised == 0)
    return row, dup_rows, lost_rows, never, firsts


def out_of_order(firsts: list[list[tuple[int, int]]]) -> list[int]:
    """Per subscription, the firings first delivered after a firing with a
    later ``fired_at`` was (``firsts``: per subscription, each delivered
    firing's first dispatch as (place in the trace, fired_at)). A tie of
    stamps is in order either way."""
    for mine in firsts:
        mine.sort()
    fired_at = np.fromiter((t for mine in firsts for _, t in mine), dtype=np.int64, count=sum(map(len, firsts)))
    owner = np.repeat(np.arange(len(firsts)), [len(mine) for mine in firsts])
    late = fired_at < highest_before(fired_at, owner)
    return np.bincount(owner[late], minlength=len(firsts)).tolist()


def _report(
    rows: list[dict],
    dup_rows: list[dict],
    dup_columns: list[str],
    lost_rows: list[dict],
    never_rows: list[dict],
    **also: int,
) -> CheckReport:
    """The report from the rows of every subscription; ``also``: totals after ``never_logged``."""
    per_sub = pd.DataFrame(rows, columns=_PER_SUB_COLUMNS)
    dups = pd.DataFrame(dup_rows, columns=dup_columns)
    lost_df = pd.DataFrame(lost_rows, columns=_LOST_COLUMNS)
    never_df = pd.DataFrame(never_rows, columns=_NEVER_COLUMNS)
    total = {k: int(per_sub[k].sum()) for k in _COUNTED}
    total["never_logged"] = len(never_df)
    total.update(also)
    total["duplicates_by_cause"] = {c: int(n) for c, n in dups["cause"].value_counts().items()}
    total["lost_by_cause"] = {c: int(n) for c, n in lost_df["cause"].value_counts().items()}
    total["valid"] = bool(per_sub["valid"].all()) if len(per_sub) else True
    return CheckReport(per_sub, dups, lost_df, never_df, total)


@gc_paused()  # a burst of allocations over a finished run: see fanoutsim.kernel.gcpause
def check(sim) -> CheckReport:
    """Check every subscription of a finished (or paused) reactor run, from its
    trace and tables alone (never the fault plan): the firings each was owed (its
    filter evaluated here independently), what was dispatched, every duplicate and
    loss with its cause (the module's text says which), out-of-order dispatches.
    Returns a :class:`CheckReport`; ``report.valid`` is the verdict. Refuses a run
    of another design or an object without a trace (TypeError), and a run made with
    ``trace=False`` (ValueError): without the trace it would find nothing and call
    the run valid."""
    refuse_unreadable(sim, "reactor", "fanoutsim.check")
    subs = sim.subscriptions()
    ev = evidence(sim, subs)
    rows, dup_rows, lost_rows, never_rows, firsts = [], [], [], [], []
    for _, s in subs.iterrows():
        row, dups, lost, never, mine = _check_subscription(ev, s)
        rows.append(row)
        dup_rows += dups
        lost_rows += lost
        never_rows += never
        firsts.append(mine)
    for row, late in zip(rows, out_of_order(firsts)):
        row["out_of_order"] = late
    return _report(
        rows,
        dup_rows,
        ["subscription", "workflow_name", "tenant_id", "firing", "execution", "cause"],
        lost_rows,
        never_rows,
    )


# Above this many evaluations the filters are evaluated by two processes:
# cel-python takes 100-400 us an evaluation, and a day of firings is ~10^5.
PARALLEL_EVALUATIONS = 20_000


def _streams(history: dict[str, list]) -> dict[tuple, tuple[list, list]]:
    """Each stream's firings of the history (logged or not), as
    ``(reactor, tenant) -> ([firing ids], [payloads])``, in history order."""
    out: dict[tuple, tuple[list, list]] = {}
    for fid, reactor, tenant, payload in zip(
        history["firing"], history["reactor_name"], history["tenant_id"], history["payload"]
    ):
        got = out.get((reactor, tenant))
        if got is None:
            got = out[(reactor, tenant)] = ([], [])
        got[0].append(fid)
        got[1].append(payload)
    return out


def _evaluate_filters(subs: pd.DataFrame, streams: dict[tuple, tuple[list, list]]) -> dict:
    """(predicate, (reactor, tenant)) -> set of firing ids for which it is true
    (``streams``: :func:`_streams`); a subscription with no predicate has none."""
    jobs = []
    for (expr, reactor, tenant), _ in subs.groupby(["predicate", "reactor_name", "tenant_id"], sort=True):
        firings, payloads = streams.get((reactor, tenant), ([], []))
        jobs.append((expr, reactor, tenant, firings, payloads))
    total = sum(len(j[3]) for j in jobs)
    if total >= PARALLEL_EVALUATIONS:
        results = _parallel(jobs)
    else:
        results = [_evaluate_job(job) for job in jobs]
    return {(job[0], (job[1], job[2])): result for job, result in zip(jobs, results)}


def _evaluate_job(job) -> set:
    expr, reactor, tenant, firings, payloads = job
    predicate = compile_predicate(expr)
    true = set()
    seen: dict[tuple, bool] = {}  # firings the program cannot tell apart share one evaluation
    for fid, payload in zip(firings, payloads):
        sources = decode_sources(payload)
        key = predicate.inputs(sources, reactor, tenant)
        value = seen.get(key)
        if value is None:
            value = seen[key] = predicate.evaluate(activation(sources, reactor, tenant))[0] is True
        if value:
            true.add(fid)
    return true


def _parallel(jobs) -> list[set]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    try:
        ctx = multiprocessing.get_context("fork")
    except ValueError:  # no fork on this platform: one process it is
        return [_evaluate_job(job) for job in jobs]
    chunks, owners = [], []
    for i, (expr, reactor, tenant, firings, payloads) in enumerate(jobs):
        half = (len(firings) + 1) // 2
        for lo in range(0, len(firings), max(half, 1)):
            chunks.append((expr, reactor, tenant, firings[lo : lo + half], payloads[lo : lo + half]))
            owners.append(i)
    results = [set() for _ in jobs]
    with ProcessPoolExecutor(max_workers=2, mp_context=ctx) as pool:
        for owner, part in zip(owners, pool.map(_evaluate_job, chunks)):
            results[owner] |= part
    return results


def format_check(report: CheckReport) -> str:
    """The report as the text ``fanoutsim run`` prints: the verdict, the totals,
    each duplicate and loss cause in plain words, and a line per subscription."""
    t = report.total
    lines = [
        f"delivery check: {'VALID' if report.valid else 'INVALID'}",
        f"  expected {t['expected']}  delivered once {t['delivered_once']}  "
        f"duplicated {t['duplicated']} (+{t['extra_deliveries']} extra deliveries)  "
        f"lost {t['lost']} ({t['lost_promised']} promised)  pending {t['pending']}  "
        f"out of order {t['out_of_order']}  never logged {t['never_logged']}",
    ]
    lines += cause_lines(t)
    if len(report.per_subscription):
        lines += ["", *_subscription_lines(report.per_subscription)]
    return "\n".join(lines)


def _subscription_lines(df: pd.DataFrame) -> list[str]:
    """The per-subscription table under the totals, and a key to its columns.
    Its counts add up as the totals line's do: once + dup + lost + pend =
    expected, with dup counting firings; extra counts deliveries."""
    names = [f"{r.reactor_name}->{r.workflow_name}@{r.tenant_id}" for r in df.itertuples(index=False)]
    w = max(36, *map(len, names))  # whole names: a tenant cut short is another tenant
    lines = [
        f"  {'subscription':<{w}} {'expected':>8} {'once':>6} {'dup':>5} {'lost':>5} {'pend':>5} "
        f"{'extra':>5} {'ooo':>5}  valid"
    ]
    for name, r in zip(names, df.itertuples(index=False)):
        lines.append(
            f"  {name:<{w}} {r.expected:>8} {r.delivered_once:>6} {r.duplicated:>5} {r.lost:>5} "
            f"{r.pending:>5} {r.extra_deliveries:>5} {r.out_of_order:>5}  {'yes' if r.valid else 'NO'}"
        )
    lines.append(
        "  dup: firings delivered more than once; extra: their deliveries beyond the first; ooo: delivered out of order"
    )
    return lines


def explain(sim, firing_id: str, subscription: str | None = None, *, show: bool = True) -> pd.DataFrame:
    """One firing's timeline: its own events, the watermark moves of the
    subscription(s) around it (``subscription``: one subscription's id; None: every
    subscription of its reactor and tenant), and crashes. Prints it, with the
    firing's stamps, unless ``show=False``; returns it as a DataFrame (``time``,
    ``kind``, ``actor``, ``subscription``, ``execution``, ``attempt``, ``detail``).
    A firing not in the run's history, or a subscription that does not exist,
    raises KeyError."""
    trace = sim.trace()
    hist = trace.history
    h = hist[hist["firing"] == firing_id]
    if h.empty:
        raise KeyError(f"firing {firing_id!r} is not in this run's history")
    f = h.iloc[0]
    subs = sim.subscriptions()
    if subscription is not None:
        if subscription not in set(subs["id"]):
            raise KeyError(f"subscription {subscription!r} does not exist; known: {', '.join(subs['id'])}")
        sub_ids = {subscription}
    else:
        sub_ids = set(subs[(subs["reactor_name"] == f["reactor_name"]) & (subs["tenant_id"] == f["tenant_id"])]["id"])
    mask = (trace["firing"] == firing_id) | (trace["kind"].isin(["crashed", "restarted"]))
    wm = (trace["kind"] == "watermark") & trace["subscription"].isin(sub_ids)
    ex_ids = set(sim.executions().query("reactor_firing_id == @firing_id")["id"])
    mask |= trace["execution"].isin(ex_ids)
    # watermark moves from just before the firing's stamp until it was passed
    start_t = min(int(f["fired_at"]), int(f["logged_at"]) if pd.notna(f["logged_at"]) else int(f["fired_at"]))
    mask |= wm & (trace["t"] >= start_t)
    timeline = trace[mask & (trace["t"] >= start_t - 1)].copy()
    moves = timeline[timeline["kind"] == "watermark"]
    passed = moves[moves["detail"].astype("int64") >= int(f["fired_at"])]
    if len(passed):  # stop a little after the watermarks passed it
        last = passed.groupby("subscription")["t"].min().max()
        keep = (timeline["kind"] != "watermark") | (timeline["t"] <= last)
        timeline = timeline[keep]
    timeline = pd.DataFrame(timeline[["time", "kind", "actor", "subscription", "execution", "attempt", "detail"]])
    timeline["detail"] = _plain_filter_errors(timeline, subs, f.get("payload"))
    if show:
        print(
            f"firing {firing_id}: {f['reactor_name']}@{f['tenant_id']}, fired_at "
            f"{pd.to_datetime(f['fired_at'], unit='us', utc=True)}, "
            + (
                f"logged at {pd.to_datetime(f['logged_at'], unit='us', utc=True)}"
                if pd.notna(f["logged_at"])
                else "never logged"
            )
        )
        print(timeline.to_string(index=False))
    return timeline


def _plain_filter_errors(timeline: pd.DataFrame, subs: pd.DataFrame, payload) -> pd.Series:
    """The timeline's details with each filter error in the report's plain words
    (``error: payload.quote.price is null; '>' needs a number``), not cel-python's
    message, which the trace keeps as evaluated (a payload that does not decode:
    kept as it is)."""
    from fanoutsim.designs.reactor.predicate import explain_error

    detail = timeline["detail"]
    failed = (timeline["kind"] == "predicate") & detail.astype(str).str.startswith("error: ")
    if not failed.any() or not isinstance(payload, (bytes, bytearray)):
        return detail
    try:
        sources = decode_sources(bytes(payload))
    except ValueError:
        return detail
    filters = dict(zip(subs["id"], subs["predicate"]))
    detail = detail.copy()
    for i in timeline.index[failed]:
        raw = str(detail.at[i]).removeprefix("error: ")
        detail.at[i] = f"error: {explain_error(filters.get(timeline.at[i, 'subscription']) or '', sources, raw)}"
    return detail


def check_store(store, config=None) -> CheckReport:
    """Check a store on its own — a DuckDB file a killed process left behind —
    with no trace: the log is the history, ``runner_log`` tells the crashes.

    What it can see: every durably logged firing that is still retained, every
    execution, each subscription's watermark, and every start of the runner
    process. A start with no clean stop before it is a crash; a duplicate whose
    two dispatches straddle one is caused by it (``crash``), any other is
    ``unknown``. A retained firing behind the watermark and never delivered is
    lost (``behind_watermark``). Pruned firings and never-logged ones are out
    of its sight: use :func:`check` on a live run for those. A path is
    opened (and closed again) here; a missing file is refused, not created,
    and so is a PostgreSQL database that holds no run (nothing is created in
    it), ``"postgres"`` (a new empty server) and a store of another design.
    Returns a :class:`CheckReport`; ``config`` (a SchedulerConfig; None: the
    defaults) says which losses the configuration promises.
    """
    if not isinstance(store, str):
        return _check_store(store, config)
    from fanoutsim.designs.stores import open_store
    from fanoutsim.kernel.store import is_postgres

    if store in ("memory", "duckdb", "postgres"):  # a new, empty store: an empty run checks valid
        raise ValueError(
            f"check_store checks the tables a run left behind: give a DuckDB file's path or a "
            f"PostgreSQL URI (or a store object), not {store!r}, which opens a new empty store"
        )
    if is_postgres(store):
        _holds_a_reactor_run(store)
    elif not os.path.isfile(store):
        # opening it would create an empty file, and an empty run checks valid
        raise FileNotFoundError(
            f"{store}: no such file; check_store reads a DuckDB file a run left behind and does not create one"
        )
    with open_store(store) as opened:
        _refuse_another_design(opened, opened.meta("design"))
        return _check_store(opened, config)


def _holds_a_reactor_run(uri: str) -> None:
    """A PostgreSQL database must hold a run before check_store opens it
    (opening makes every table): checked by reading alone."""
    from fanoutsim.kernel.store.postgres import StoreError, read_meta, safe_dsn

    made, design = read_meta(uri, "design")
    if not made:
        raise StoreError(
            f"{safe_dsn(uri)} holds no fanoutsim run; check_store reads the tables a run left behind and creates none"
        )
    _refuse_another_design(safe_dsn(uri), design)


def _refuse_another_design(where, design: str | None) -> None:
    if design is not None and design != "reactor":
        from fanoutsim.kernel.store.duckdb import StoreError

        name = getattr(where, "where", where)
        raise StoreError(
            f"{name} holds a run of the {design} design, not of the reactor design, whose tables "
            f"check_store checks (use that design's checker on a run of it)"
        )


def _check_store(store, config) -> CheckReport:
    """The store-only check: each subscription's expected firings (those its
    filter passes, logged after it was created) against its executions and its
    watermark."""
    from fanoutsim.designs.reactor.config import SchedulerConfig

    cfg = config or SchedulerConfig()
    compound = cfg.watermark != "fired_at"
    history = _store_history(store)
    subs = store.rows("reactor_subscriptions")
    subs_df = pd.DataFrame(subs, columns=["id", "reactor_name", "tenant_id", "predicate"])
    verdicts = _evaluate_filters(
        subs_df, _streams(_columns(history, ("firing", "reactor_name", "tenant_id", "payload")))
    )
    crash_times = _store_crash_times(store)
    deliveries = _store_deliveries(store)
    by_stream = {k: g for k, g in history.groupby(["reactor_name", "tenant_id"], sort=False)}

    rows, dup_rows, lost_rows = [], [], []
    for s in subs:
        key = (s["reactor_name"], s["tenant_id"])
        passing = verdicts.get((s["predicate"], key))
        stream = by_stream.get(key)
        expected = [
            f
            for f in (_firings(stream) if stream is not None else ())
            if (passing is None or f.firing in passing) and f.logged_at >= s["created_at"]
        ]
        rows.append(_store_subscription_row(s, expected, deliveries, crash_times, compound, dup_rows, lost_rows))
    return _report(
        rows,
        dup_rows,
        ["subscription", "workflow_name", "tenant_id", "firing", "execution", "cause", "crash_at"],
        lost_rows,
        [],
        crashes=len(crash_times),
    )


def _store_history(store) -> pd.DataFrame:
    """The firings table as the checker's history frame (``firing``,
    ``logged_at``: the names the trace-based check uses)."""
    firings = pd.DataFrame(
        store.rows("reactor_firings"), columns=["id", "reactor_name", "tenant_id", "payload", "fired_at", "created_at"]
    )
    return pd.DataFrame(
        {
            "firing": firings["id"],
            "reactor_name": firings["reactor_name"],
            "tenant_id": firings["tenant_id"],
            "fired_at": firings["fired_at"],
            "logged_at": firings["created_at"],
            "payload": firings["payload"],
        }
    )


def _store_crash_times(store) -> list:
    """The crashes in the runner log: starts that no clean stop preceded (the
    first start is a boot)."""
    crash_times, previous = [], None
    for row in store.rows("runner_log"):
        if row["event"] == "start" and previous == "start":
            crash_times.append(row["happened_at"])
        previous = row["event"]
    return crash_times


def _store_deliveries(store) -> dict[tuple, list[tuple[int, str, str]]]:
    """The executions by (workflow, tenant, reactor, firing): each one's
    ``(dispatched_at, execution id, firing)``."""
    deliveries: dict[tuple, list[tuple[int, str, str]]] = defaultdict(list)
    for row in store.rows("workflow_executions"):
        fid, reactor, _ = context_firing(row["context"])
        deliveries[(row["workflow_name"], row["tenant_id"], reactor, fid)].append(
            (row["dispatched_at"], row["id"], fid)
        )
    return deliveries


def _store_subscription_row(
    s: dict, expected: list, deliveries: dict, crash_times: list, compound: bool, dup_rows: list, lost_rows: list
) -> dict:
    """One subscription's verdict row: each expected firing delivered once,
    more than once (each extra a ``dup_rows`` entry, its cause a crash between
    the two deliveries or unknown), still ahead of the watermark (pending) or
    behind it undelivered (lost, a ``lost_rows`` entry)."""
    wm, wm_id = s["last_seen_fired_at"], s["last_seen_firing_id"] or ""
    once = dup_firings = extra = lost = pending = 0
    for f in expected:
        got = sorted(deliveries.get((s["workflow_name"], s["tenant_id"], s["reactor_name"], f.firing), ()))
        if len(got) == 1:
            once += 1
        elif got:
            dup_firings += 1
            for (t0, _, _), (t1, eid, _) in zip(got, got[1:]):
                extra += 1
                cause = "crash" if any(t0 <= c <= t1 for c in crash_times) else "unknown"
                dup_rows.append(
                    {
                        "subscription": s["id"],
                        "workflow_name": s["workflow_name"],
                        "tenant_id": s["tenant_id"],
                        "firing": f.firing,
                        "execution": eid,
                        "cause": cause,
                        "crash_at": next((c for c in crash_times if t0 <= c <= t1), None),
                    }
                )
        elif wm is None or (f.fired_at, f.firing if compound else "") > (wm, wm_id if compound else "\uffff"):
            pending += 1
        else:
            lost += 1
            lost_rows.append(
                {
                    "subscription": s["id"],
                    "workflow_name": s["workflow_name"],
                    "tenant_id": s["tenant_id"],
                    "firing": f.firing,
                    "cause": "behind_watermark",
                    "promised": True,
                    "detail": None,
                }
            )
    # in _COUNTED's order; every loss here is a promised one, nothing is backfilled
    return _per_sub_row(s, (len(expected), once, dup_firings, extra, lost, lost, pending, 0, 0), valid=lost == 0)
