"""One pass of the poll loop (seed 000, "The dispatch loop").

For each enabled subscription, in ``(tenant, reactor, workflow)`` order:

1. fetch up to ``reactor_poll_batch_limit`` firings of its reactor and tenant
   with ``fired_at > last_seen_fired_at`` (all retained firings while the
   watermark is NULL), ordered by ``fired_at``;
2. per firing, evaluate the cached CEL filter; on a match *dispatch* — insert
   one ``workflow_executions`` row whose context carries the sources,
   ``reactor_name``, ``reactor_firing_id`` and ``reactor_fired_at``;
3. advance the watermark to the firing's ``fired_at`` — also past a filtered-out
   firing, so a CEL false never stalls the subscription.

The strict ``>`` is kept exactly as shipped (``watermark="fired_at"``), holes
included: two firings that share a ``fired_at`` and fall either side of a batch
boundary lose the second. The other ``watermark`` strategies read through the
compound cursor ``(fired_at, id)`` and, for ``"settled"``, only up to a settle
horizon (see :class:`~fanoutsim.designs.reactor.config.SchedulerConfig`).

Which writes share a transaction is ``watermark_commit``: ``per_firing`` (the
real code: the insert commits, then the watermark commits), ``per_batch``
(one watermark commit at the end of the batch) or ``atomic`` (insert and
watermark together). The window between a committed insert and its committed
watermark is where a crash turns into a duplicate delivery.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from fanoutsim.kernel.faults import InsertFailed
from fanoutsim.designs.reactor.payload import decode_sources
from fanoutsim.designs.reactor.predicate import Predicate, activation
from fanoutsim.designs.reactor.tables import cursor_of
from fanoutsim.kernel.timeutil import rfc3339

_JSON = json.JSONEncoder(separators=(",", ":"))  # json.dumps(..., separators=(",", ":")), built once


@dataclass
class PollStats:
    subscriptions: int = 0
    fetched: int = 0
    dispatched: int = 0
    filtered: int = 0
    predicate_errors: int = 0
    dead_letters: int = 0
    dispatch_failures: int = 0


class _Firing:
    """A fetched firing, decoded once per pass however many subscriptions read it."""

    __slots__ = ("sources", "act", "context")

    def __init__(self, row: dict) -> None:
        self.sources = decode_sources(row["payload"])
        self.act = None
        self.context: str | None = None  # the execution context, the same for every subscription


def poll_once(e, now: int) -> PollStats:
    """A whole pass at one instant: list, then fetch and drain each subscription."""
    stats = PollStats()
    decoded: dict[str, _Firing] = {}  # this pass only: dropped with the pass
    for sub in poll_subscriptions(e, now):
        stats.subscriptions += 1
        batch = fetch(e, now, sub)
        if batch:
            drain(e, now, sub, batch, decoded, stats)
    return stats


# The pass in steps, for runtimes that let time pass between a fetch and its
# drain (so that other processes — other pollers — run in between).

def poll_subscriptions(e, now: int) -> list[dict]:
    """The enabled subscriptions, in poll order."""
    with e.store.transaction() as tx:
        return list(tx.poll_subscriptions())


def fetch(e, now: int, sub: dict) -> list[dict]:
    """The batch in hand: firings past the watermark, up to the batch limit."""
    return fetch_next(e, now, [sub])[1]


def fetch_next(e, now: int, subs: list[dict], start: int = 0) -> tuple[int, list[dict]]:
    """:func:`fetch` for ``subs[start]``, ``subs[start + 1]``, ... until one
    brings a batch: ``(its index, the batch)``, or ``(len(subs), [])``. The
    same fetches as one :func:`fetch` each, at one instant, in one read-only
    transaction: for a runtime whose pass lets no time pass between empty
    fetches, so that a pass over idle subscriptions is one step.

    The store is asked first whether a stream has anything past the
    watermark; if not, the fetch is skipped — it would have returned nothing —
    but still counted as the query the real poll loop sends."""
    with e.store.transaction() as tx:
        i, batch = _scan(e, tx, now, subs, start)
    return _found(e, now, subs, i, batch)


def start_pass(e, now: int) -> tuple[list[dict], int, list[dict]]:
    """:func:`poll_subscriptions`, then :func:`fetch_next` from the first, at
    one instant in one read-only transaction: ``(subs, index, batch)``. A
    pass over subscriptions with nothing new is then one step."""
    with e.store.transaction() as tx:
        subs = tx.poll_subscriptions()  # read, never changed: the store may share its rows
        i, batch = _scan(e, tx, now, subs, 0)
    return (subs, *_found(e, now, subs, i, batch))


def repeats_until_written(e) -> bool:
    """Whether a pass that found nothing would find nothing again until a
    step writes: what :func:`_scan` may take depends on the store alone, not
    also on the time (a settle horizon, a fault plan that limits polls)."""
    return e.config.watermark != "settled" and not getattr(e.faults, "limits_polls", True)


def _scan(e, tx, now: int, subs: list[dict], i: int) -> tuple[int, list[dict]]:
    """The fetches of :func:`fetch_next` in ``tx``: the first batch and its index."""
    cfg = e.config
    limit = cfg.reactor_poll_batch_limit
    poll_limit = e.faults.poll_limit if getattr(e.faults, "limits_polls", True) else None
    compound = cfg.watermark != "fired_at"
    until = now - e.settle_us if cfg.watermark == "settled" else None

    def fetch_batch(sub: dict, lim: int) -> list[dict]:
        after, after_id = cursor_of(sub, compound)
        return tx.fetch_firings(sub["reactor_name"], sub["tenant_id"], after, lim, after_id=after_id, until=until)

    n, queries = len(subs), 0
    try:
        if poll_limit is None:  # every subscription may fetch: the skips are one call
            first_with_firings_past = tx.first_with_firings_past
            while i < n:
                j = first_with_firings_past(subs, i, compound)
                queries += j - i  # the poll loop's load on the database: one per subscription
                if j == n:
                    return n, []
                queries += 1
                batch = fetch_batch(subs[j], limit)
                if batch:
                    return j, batch
                i = j + 1
            return n, []
        while i < n:  # a fault plan limits some polls: each subscription asks it
            sub = subs[i]
            lim = poll_limit(sub, now, limit)
            if lim > 0:
                queries += 1  # the poll loop's load on the database
                if tx.has_firings_past(sub["reactor_name"], sub["tenant_id"], *cursor_of(sub, compound)):
                    batch = fetch_batch(sub, lim)
                    if batch:
                        return i, batch
            i += 1
        return n, []
    finally:
        if queries:
            e.poll_queries(queries)


def _found(e, now: int, subs: list[dict], i: int, batch: list[dict]) -> tuple[int, list[dict]]:
    if not batch:
        return i, batch
    sid = subs[i]["id"]
    e.trace.add(now, "polled", e.poller, subscription=sid, detail=str(len(batch)))
    e.faults.point("poll.after_fetch", now, subscription=sid)
    return i, batch


def _commit(e, now: int, sub_id: str, changes: dict, firing: str | None) -> None:
    """Write the subscription's pending changes; trace a watermark move."""
    if not changes:
        return
    with e.store.transaction() as tx:
        tx.update_subscription(sub_id, changes)
    if "last_seen_fired_at" in changes:
        e.trace.add(now, "watermark", e.poller, subscription=sub_id, firing=firing,
                    detail=str(changes["last_seen_fired_at"]))


def drain(e, now: int, sub: dict, batch: list[dict], decoded: dict | None = None,
          stats: PollStats | None = None) -> PollStats:
    """Filter, dispatch and advance the watermark over one fetched batch."""
    cfg = e.config
    trace, metrics, faults, actor = e.trace, e.metrics, e.faults, e.poller
    sid, reactor, tenant = sub["id"], sub["reactor_name"], sub["tenant_id"]
    decoded = {} if decoded is None else decoded
    stats = PollStats() if stats is None else stats
    stats.fetched += len(batch)
    predicate = e.predicate_for(sub)
    mode = cfg.watermark_commit
    hold_errors = cfg.predicate_error_policy == "hold"
    err_count, err_firing = sub["predicate_error_count"], sub["predicate_error_firing_id"]
    degraded = sub["predicate_degraded"]
    changes: dict = {}  # subscription writes not yet committed
    wm_firing = None    # the firing whose fired_at ``changes`` moves the watermark to

    for f in batch:
        fid = f["id"]
        d = decoded.get(fid)
        if d is None:
            d = decoded[fid] = _Firing(f)
        # -- filter -------------------------------------------------------
        error = None
        if predicate is None:
            match = True
        else:
            if isinstance(predicate, Predicate):
                if d.act is None:
                    d.act = activation(d.sources, reactor, tenant)
                value, error = predicate.evaluate(d.act)
            else:
                value, error = None, predicate
            match = bool(value)
            trace.add(now, "predicate", actor, subscription=sid, firing=fid,
                      detail=f"error: {error}" if error else str(match))
        if error is not None:
            stats.predicate_errors += 1
            metrics.inc("fanoutsim_reactor_predicate_errors_total", reactor=reactor)
            changes["last_predicate_error"] = error
            if hold_errors:
                err_count = err_count + 1 if err_firing == fid else 1
                err_firing = fid
                changes.update(predicate_error_count=err_count, predicate_error_firing_id=fid,
                               updated_at=now)
                if err_count < cfg.predicate_error_limit:
                    _commit(e, now, sid, changes, wm_firing)  # hold: the watermark stays, drain stops
                    return stats
                # the limit-th consecutive error on this firing: dead-letter it
                stats.dead_letters += 1
                metrics.inc("fanoutsim_reactor_predicate_dead_letters_total", reactor=reactor)
                trace.add(now, "dead_letter", actor, subscription=sid, firing=fid, detail=error)
                changes["predicate_degraded"] = degraded = True
        elif err_count or degraded:  # a clean evaluation clears the error state
            err_count, err_firing, degraded = 0, None, False
            changes.update(predicate_error_count=0, predicate_error_firing_id=None,
                           predicate_degraded=False)
        # -- dispatch -------------------------------------------------------
        if match:
            row = _execution_row(e, now, sub, f, d)
            try:
                with e.store.transaction() as tx:
                    faults.before_insert(sub["workflow_name"], now, subscription=sub)
                    tx.insert_execution(row)
                    if mode == "atomic":
                        faults.point("poll.after_dispatch_before_watermark", now,
                                     subscription=sid, firing=fid)
                        tx.update_subscription(sid, {**changes, "last_seen_fired_at": f["fired_at"],
                                                     "last_seen_firing_id": fid, "updated_at": now})
                # committed; a lost reply still looks like a failure to the poller
                faults.after_insert(sub["workflow_name"], now)
            except InsertFailed as exc:
                stats.dispatch_failures += 1
                metrics.inc("fanoutsim_reactor_dispatch_failures_total", reactor=reactor)
                trace.add(now, "dispatch_failed", actor, subscription=sid, firing=fid,
                          execution=row["id"], detail=str(exc))
                if cfg.dispatch_failure_policy == "hold":
                    _commit(e, now, sid, changes, wm_firing)  # this firing's watermark stays; retried next tick
                    return stats
            else:
                stats.dispatched += 1
                trace.add(now, "dispatched", actor, subscription=sid, firing=fid, execution=row["id"])
                if mode == "atomic":
                    changes = {}
                    trace.add(now, "watermark", actor, subscription=sid, firing=fid,
                              detail=str(f["fired_at"]))
                    continue
                faults.point("poll.after_dispatch_before_watermark", now, subscription=sid, firing=fid)
        else:
            stats.filtered += 1
        # -- watermark ----------------------------------------------------------
        changes.update(last_seen_fired_at=f["fired_at"], last_seen_firing_id=fid, updated_at=now)
        wm_firing = fid
        if mode != "per_batch":
            _commit(e, now, sid, changes, wm_firing)
            changes = {}
    if changes:
        faults.point("poll.before_batch_commit", now, subscription=sid)
        _commit(e, now, sid, changes, wm_firing)
    return stats


def _execution_row(e, now: int, sub: dict, f: dict, d: _Firing) -> dict:
    if d.context is None:
        context = dict(d.sources)
        context["reactor_name"] = f["reactor_name"]
        context["reactor_firing_id"] = f["id"]
        context["reactor_fired_at"] = rfc3339(f["fired_at"])
        d.context = _JSON.encode(context)
    return {
        "id": e.ids.new(), "workflow_name": sub["workflow_name"], "tenant_id": sub["tenant_id"],
        "context": d.context, "status": "pending",
        "dispatched_at": now, "claimed_at": None, "finished_at": None,
    }
