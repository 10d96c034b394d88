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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fanoutsim.designs.reactor.faults import InsertFailed
from fanoutsim.designs.reactor.payload import decode_sources, encode_decoded
from fanoutsim.designs.reactor.predicate import Predicate, activation, truncate_predicate_text
from fanoutsim.designs.reactor.tables import cursor_of
from fanoutsim.kernel.timeutil import US, rfc3339

if TYPE_CHECKING:
    from fanoutsim.designs.reactor.steps import Engine
    from fanoutsim.designs.reactor.tables.port import (
        ExecutionRow,
        FiringRow,
        ReactorTx,
        SubscriptionChanges,
        SubscriptionRow,
    )

_COUNTS = tuple(map(str, range(1025)))  # a batch's size as a trace detail: one string per size, not one per event


@dataclass
class PollStats:
    subscriptions: int = 0
    fetched: int = 0
    dispatched: int = 0
    filtered: int = 0
    predicate_errors: int = 0
    dead_letters: int = 0
    dispatch_failures: int = 0


# what a drain counts into when its caller keeps no count (drain_next): never read
_UNKEPT = PollStats()


class _Firing:
    """A fetched firing, decoded once per pass however many subscriptions read it."""

    __slots__ = ("sources", "act", "context", "stamp")

    def __init__(self, row: FiringRow) -> None:
        self.sources = decode_sources(row["payload"])
        self.stamp = str(row["fired_at"])  # a watermark's trace detail: one string however many move to it
        self.act: dict[str, Any] | None = None  # the CEL activation, built on the first filter
        self.context: str | None = None  # the execution context, the same for every subscription


def poll_once(e: Engine, now: int) -> PollStats:
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


def poll_subscriptions(e: Engine, now: int) -> list[SubscriptionRow]:
    """The enabled subscriptions, in poll order."""
    with e.store.transaction() as tx:
        return list(tx.poll_subscriptions())


def fetch(e: Engine, now: int, sub: SubscriptionRow) -> list[FiringRow]:
    """The batch in hand: firings past the watermark, up to the batch limit."""
    return fetch_next(e, now, [sub])[1]


def fetch_next(e: Engine, now: int, subs: Sequence[SubscriptionRow], start: int = 0) -> tuple[int, list[FiringRow]]:
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


def start_pass(e: Engine, now: int) -> tuple[Sequence[SubscriptionRow], int, list[FiringRow]]:
    """:func:`poll_subscriptions`, then :func:`fetch_next` from the first, at
    one instant in one read-only transaction: ``(subs, index, batch)``. A
    pass over subscriptions with nothing new is then one step."""
    with e.store.transaction() as tx:
        subs = tx.poll_subscriptions()  # read, never changed: the store may share its rows
        i, batch = _scan(e, tx, now, subs, 0)
    return (subs, *_found(e, now, subs, i, batch))


def drain_next(
    e: Engine, now: int, subs: Sequence[SubscriptionRow], i: int, batch: list[FiringRow], decoded: dict[str, _Firing]
) -> tuple[int, list[FiringRow]]:
    """:func:`drain` of ``subs[i]``'s batch, then :func:`fetch_next` from
    ``subs[i + 1]``: one step, as no time passes between a drain and the
    next fetch. ``(index, batch)`` of the next subscription with a batch, or
    ``(len(subs), [])`` at the end of the pass."""
    drain(e, now, subs[i], batch, decoded, _UNKEPT)
    if i + 1 < len(subs):
        return fetch_next(e, now, subs, i + 1)
    return len(subs), []


def repeats_until_written(e: Engine) -> bool:
    """Whether a pass that found nothing would find nothing again until a
    step writes: what :func:`_scan` may take depends on the store alone, not
    also on the time (a settle horizon, a fault plan that limits polls)."""
    return e.config.watermark != "settled" and not e.limits_polls


def _scan(e: Engine, tx: ReactorTx, now: int, subs: Sequence[SubscriptionRow], i: int) -> tuple[int, list[FiringRow]]:
    """The fetches of :func:`fetch_next` in ``tx``: the first batch and its index."""
    cfg = e.config
    limit = cfg.reactor_poll_batch_limit
    poll_limit = e.faults.poll_limit if e.limits_polls else None
    compound = cfg.watermark != "fired_at"
    until = now - e.settle_us if cfg.watermark == "settled" else None

    def fetch_batch(sub: SubscriptionRow, lim: int) -> list[FiringRow]:
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


def _found(
    e: Engine, now: int, subs: Sequence[SubscriptionRow], i: int, batch: list[FiringRow]
) -> tuple[int, list[FiringRow]]:
    if not batch:
        return i, batch
    sid = subs[i]["id"]
    n = len(batch)
    e.trace.add(now, "polled", e.poller, sid, None, None, _COUNTS[n] if n < len(_COUNTS) else str(n))
    point = e.points["poll.after_fetch"]
    if point is not None:
        point("poll.after_fetch", now, who=sid)
    return i, batch


def _commit(
    e: Engine, now: int, sub_id: str, changes: SubscriptionChanges, firing: str | None, stamp: str | None = None
) -> None:
    """Write the subscription's pending changes; trace a watermark move
    (``stamp``: the new watermark as text, if the caller has it)."""
    if not changes:
        return
    with e.store.transaction() as tx:
        tx.update_subscription(sub_id, changes)
    if "last_seen_fired_at" in changes:
        detail = stamp if stamp is not None else str(changes["last_seen_fired_at"])
        e.trace.add(now, "watermark", e.poller, sub_id, firing, None, detail)


def drain(
    e: Engine,
    now: int,
    sub: SubscriptionRow,
    batch: list[FiringRow],
    decoded: dict[str, _Firing] | None = None,
    stats: PollStats | None = None,
) -> PollStats:
    """Filter, dispatch and advance the watermark over one fetched batch.

    Per firing: :func:`_filter` (the CEL verdict), :func:`_predicate_error`
    on an error (the ``hold`` policy may stop the drain here), then
    :func:`_dispatch` on a match (a failed insert under the ``hold`` policy
    stops it too), then the watermark's move to the firing — committed per
    firing, or once at the end of the batch under ``per_batch``; under
    ``atomic`` it moved with the insert."""
    sid = sub["id"]
    decoded = {} if decoded is None else decoded
    stats = PollStats() if stats is None else stats
    stats.fetched += len(batch)
    predicate = e.predicate_for(sub)
    per_batch = e.config.watermark_commit == "per_batch"
    # the row's predicate error state as the drain moves (None: clean, until an error)
    errors = _Errors(sub) if sub["predicate_error_count"] or sub["predicate_degraded"] else None
    changes: SubscriptionChanges = {}  # subscription writes not yet committed
    wm_firing = wm_stamp = None  # the firing whose fired_at ``changes`` moves the watermark to, and that as text

    for f in batch:
        fid = f["id"]
        d = decoded.get(fid)
        if d is None:
            d = decoded[fid] = _Firing(f)
        match, error = (True, None) if predicate is None else _filter(e, now, sub, predicate, f, d)
        if error is not None:
            if errors is None:
                errors = _Errors(sub)
            if _predicate_error(e, now, sub, fid, error, errors, changes, stats):
                _commit(e, now, sid, changes, wm_firing, wm_stamp)  # hold: the watermark stays, drain stops
                return stats
        elif errors is not None and (errors.count or errors.degraded):  # a clean evaluation clears the error state
            errors.clear(changes)
        if match:
            step = _dispatch(e, now, sub, f, d, changes, stats)
            if step is _HOLD:
                _commit(e, now, sid, changes, wm_firing, wm_stamp)  # this firing's watermark stays; retried next tick
                return stats
            if step is _MOVED:
                changes = {}
                continue
        else:
            stats.filtered += 1
        changes["last_seen_fired_at"] = f["fired_at"]
        changes["last_seen_firing_id"] = fid
        changes["updated_at"] = now
        wm_firing, wm_stamp = fid, d.stamp
        if not per_batch:
            _commit(e, now, sid, changes, wm_firing, wm_stamp)
            changes = {}
    if changes:
        point = e.points["poll.before_batch_commit"]
        if point is not None:
            point("poll.before_batch_commit", now, who=sid)
        _commit(e, now, sid, changes, wm_firing, wm_stamp)
    return stats


def _filter(
    e: Engine, now: int, sub: SubscriptionRow, predicate: Predicate | str, f: FiringRow, d: _Firing
) -> tuple[bool, str | None]:
    """The subscription's cached CEL filter on one firing, traced:
    ``(match, error)``. The activation is built once per pass however many
    subscriptions read the firing; a filter that did not compile is its error."""
    if isinstance(predicate, Predicate):
        if d.act is None:
            d.act = activation(d.sources, sub["reactor_name"], sub["tenant_id"])
        value, error = predicate.evaluate(d.act)
    else:
        value, error = None, predicate
    match = bool(value)
    e.trace.add(now, "predicate", e.poller, sub["id"], f["id"], None, f"error: {error}" if error else str(match))
    return match, error


class _Errors:
    """The subscription's predicate error state as the drain moves through a batch."""

    __slots__ = ("count", "firing", "degraded")

    def __init__(self, sub: SubscriptionRow) -> None:
        self.count, self.firing = sub["predicate_error_count"], sub["predicate_error_firing_id"]
        self.degraded = sub["predicate_degraded"]

    def clear(self, changes: SubscriptionChanges) -> None:
        self.count, self.firing, self.degraded = 0, None, False
        changes.update({"predicate_error_count": 0, "predicate_error_firing_id": None, "predicate_degraded": False})


def _predicate_error(
    e: Engine,
    now: int,
    sub: SubscriptionRow,
    fid: str,
    error: str,
    errors: _Errors,
    changes: SubscriptionChanges,
    stats: PollStats,
) -> bool:
    """Record a filter error; True when the drain must stop on it. Under
    ``predicate_error_policy="hold"`` the watermark stays on the firing until
    ``predicate_error_limit`` consecutive errors on it, and then the firing is
    dead-lettered and the subscription marked degraded (the drain goes on), its
    stored count reset to 0 or kept (``predicate_error_count_after_dead_letter``).
    The row keeps the error's text cut as ``last_predicate_error_text`` says."""
    cfg = e.config
    reactor = sub["reactor_name"]
    stats.predicate_errors += 1
    e.metrics.inc("fanoutsim_reactor_predicate_errors_total", reactor=reactor)
    whole = cfg.last_predicate_error_text == "whole"
    changes["last_predicate_error"] = error if whole else truncate_predicate_text(error)  # Cloacina: 240 chars
    if cfg.predicate_error_policy != "hold":
        return False
    errors.count = errors.count + 1 if errors.firing == fid else 1
    errors.firing = fid
    changes.update({"predicate_error_count": errors.count, "predicate_error_firing_id": fid, "updated_at": now})
    if errors.count < cfg.predicate_error_limit:
        return True
    # the limit-th consecutive error on this firing: dead-letter it
    stats.dead_letters += 1
    e.metrics.inc("fanoutsim_reactor_predicate_dead_letters_total", reactor=reactor)
    e.trace.add(now, "dead_letter", e.poller, who=sub["id"], what=fid, detail=error)
    changes["predicate_degraded"] = errors.degraded = True
    if cfg.predicate_error_count_after_dead_letter == "reset":  # Cloacina: the next firing gets a full budget
        errors.count = changes["predicate_error_count"] = 0
    return False


_HOLD, _MOVED = "hold", "moved"  # what _dispatch tells the drain


def _dispatch(
    e: Engine,
    now: int,
    sub: SubscriptionRow,
    f: FiringRow,
    d: _Firing,
    changes: SubscriptionChanges,
    stats: PollStats,
) -> str | None:
    """Insert the firing's execution row — under ``watermark_commit="atomic"``
    with the watermark's move (and the pending ``changes``) in the same
    transaction. Returns :data:`_HOLD` when the insert failed and
    ``dispatch_failure_policy="hold"`` keeps the watermark, :data:`_MOVED`
    when the watermark moved with the insert, else None: the watermark moves
    next (after a dispatch, or a failed insert under ``advance``)."""
    sid, fid = sub["id"], f["id"]
    atomic = e.config.watermark_commit == "atomic"
    row = _execution_row(e, now, sub, f, d)
    before_insert, after_insert = e.insert_hooks
    try:
        with e.store.transaction() as tx:
            if before_insert is not None:
                before_insert(sub["workflow_name"], now, subscription=sub)
            tx.insert_execution(row)
            if atomic:
                e.faults.point("poll.after_dispatch_before_watermark", now, who=sid, what=fid)
                tx.update_subscription(
                    sid, {**changes, "last_seen_fired_at": f["fired_at"], "last_seen_firing_id": fid, "updated_at": now}
                )
        # committed; a lost reply still looks like a failure to the poller
        if after_insert is not None:
            after_insert(sub["workflow_name"], now)
    except InsertFailed as exc:
        stats.dispatch_failures += 1
        e.metrics.inc("fanoutsim_reactor_dispatch_failures_total", reactor=sub["reactor_name"])
        e.trace.add(now, "dispatch_failed", e.poller, sid, fid, row["id"], str(exc))
        return _HOLD if e.config.dispatch_failure_policy == "hold" else None
    stats.dispatched += 1
    e.fire_to_dispatch[sub["reactor_name"]]((now - f["fired_at"]) / US)
    e.trace.add(now, "dispatched", e.poller, sid, fid, row["id"])
    if atomic:
        e.trace.add(now, "watermark", e.poller, sid, fid, None, d.stamp)
        return _MOVED
    point = e.points["poll.after_dispatch_before_watermark"]
    if point is not None:
        point("poll.after_dispatch_before_watermark", now, who=sid, what=fid)
    return None


def _execution_row(e: Engine, now: int, sub: SubscriptionRow, f: FiringRow, d: _Firing) -> ExecutionRow:
    if d.context is None:
        context = dict(d.sources)
        context["reactor_name"] = f["reactor_name"]
        context["reactor_firing_id"] = f["id"]
        context["reactor_fired_at"] = rfc3339(f["fired_at"])
        d.context = encode_decoded(context)
    return {
        "id": e.ids.new(),
        "workflow_name": sub["workflow_name"],
        "tenant_id": sub["tenant_id"],
        "context": d.context,
        "status": "pending",
        "dispatched_at": now,
        "claimed_at": None,
        "finished_at": None,
    }
