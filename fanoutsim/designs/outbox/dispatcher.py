"""One consumer's step of the dispatcher (seed 002, "Reading past the cursor").

A wake-up — a hint, or the periodic safety poll — never trusts the hint's
seq. For each consumer, independently:

1. :func:`fetch` reads the rows past the consumer's cursor in seq order, up to
   ``batch_limit`` (deferred rows that fell due come first, :func:`fetch_due`);
2. each row is *begun*: handed to the consumer, whose function runs — the
   consumer's effect, a ``delivered`` event in the trace when it does not
   raise — and the attempt takes the consumer's duration — or is cut off at its
   timeout (then the function does not run);
3. and *finished*: its outcome recorded. Handled: the cursor moves to the row
   (*after* the handling: a crash at ``dispatch.after_handle_before_cursor``
   re-delivers it on restart — at-least-once). Failed: back off and retry, and
   the ``retry_budget``-th failure *parks* the row (recorded with its error
   and attempts) and moves the cursor past it, so one poison row cannot wedge
   the feed. Not yet due: remember it in ``deferred`` and move on.

The runtime takes a batch through these in steps that end where time must
pass (:class:`Batch`): :func:`read` fetches and begins the first row,
:func:`advance` finishes the attempt in hand once its work is done and begins
the next row; rows that take no time are begun and finished in the same step,
so a batch of them is one step. Only the consumer's own code runs apart
(:func:`effect`), outside the store lock on the wall clock.

Retry counts live in the runtime's hands (memory): a restart starts a row's
budget again, the parked table keeps what was spent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from fanoutsim.kernel.timeutil import US, seconds_to_us

if TYPE_CHECKING:
    from fanoutsim.designs.outbox.metrics import Meters
    from fanoutsim.designs.outbox.steps import Engine
    from fanoutsim.designs.outbox.tables.port import OutboxRow, OutboxTx


@dataclass(slots=True, eq=False)
class Batch:
    """One read of a consumer and its rows' handling, a step at a time: the
    due rows first, then the new ones, in order (``rows[i]`` is in hand). After
    a step the runtime waits for what the batch says — the consumer's ``effect``
    to run, its ``duration`` of work on the attempt in hand, or a retry's
    ``backoff`` — and calls :func:`advance`; ``done``: every row is behind the
    consumer. Its fields are the attempt's own, so that a row allocates nothing."""

    consumer: str
    meters: Meters
    rows: list[OutboxRow]
    due: int  # how many of ``rows`` (the first) fell due from the deferred table
    new: int  # how many were read past the cursor
    first_due: int | None  # the consumer's next due time, read with the fetch
    i: int = 0  # the row in hand
    attempt: int = 0  # its attempts finished
    begun: bool = False  # an attempt at it is begun, its outcome not yet recorded
    duration: float = 0.0  # virtual seconds until the begun attempt's outcome is known
    error: str | None = None  # the begun attempt's failure
    effect: bool = False  # the consumer's code is still to run (:func:`effect`)
    not_due: bool = False  # the row in hand is not due yet: to be remembered, not handled
    backoff: float | None = None  # seconds to wait before the next attempt at the row in hand
    deferred: bool = False  # a row of the batch was deferred
    done: bool = False
    # rows that take no time begun and finished in one step (the driver's
    # zero_time_together); else a step ends after each begin, so the store lock
    # is held for one row and a crash may land between a delivery and its cursor
    together: bool = True


def cursor_of(e: Engine, name: str) -> int:
    with e.store.transaction() as tx:
        cursor = tx.get_cursor(name)
    if cursor is None:
        raise no_cursor(e, name)
    return cursor


def no_cursor(e: Engine, name: str) -> KeyError:
    """The error for a consumer with no cursor row: registered (its code) or not."""
    if name in e.registry.consumers:
        return KeyError(
            f"consumer {name!r} is registered but has no cursor row; "
            "register_consumer gives it one (add_consumer, for an engine)"
        )
    return KeyError(
        f"consumer {name!r} has no cursor and is not registered; registered consumers: "
        f"{', '.join(sorted(e.registry.consumers)) or 'none'}"
    )


def fetch_due(e: Engine, now: int, name: str) -> list[OutboxRow]:
    """Deferred rows of this consumer whose time has come, as outbox rows."""
    out: list[OutboxRow] = []
    with e.store.transaction() as tx:
        for d in tx.fetch_due(name, now, e.config.batch_limit):
            rows = tx.fetch_outbox(d["seq"] - 1, 1)
            if rows and rows[0]["seq"] == d["seq"]:
                out.append(rows[0])
    return out


def next_due(e: Engine, now: int, name: str) -> int | None:
    with e.store.transaction() as tx:
        return tx.next_due(name)


def fetch(e: Engine, now: int, name: str, meters: Meters | None = None) -> list[OutboxRow]:
    """The rows past the cursor this wake-up may hand to ``name``, in seq order
    (``meters``: the consumer's, if the caller has them)."""
    cfg = e.config
    with e.store.transaction() as tx:
        # nothing past the cursor (the log's end): the read finds nothing; it is
        # still counted below as the query the real dispatcher sends
        cursor, rows, due_next = tx.past_cursor(name, cfg.batch_limit)
        if cursor is None:
            raise no_cursor(e, name)
        e.due_at_fetch[name] = due_next  # same snapshot: spares the runtime a next_due read
        # retained rows start right after the cursor, or none are retained past it:
        # nothing was pruned under this consumer, so the bounds need no read
        low = tx.outbox_bounds()[0] if rows and rows[0]["seq"] != cursor + 1 else None
    (meters or e.meters(name)).fetches()
    if low is not None and cursor < low - 1 and (name, low) not in e.behind_noted:
        # retention pruned rows this consumer never read: it fell behind the window
        e.behind_noted.add((name, low))
        e.trace.add(now, "fell_behind", e.actor, who=name, detail=f"cursor {cursor} < oldest retained seq {low}")
    if cfg.read_mode == "settled":
        horizon = now - seconds_to_us(cfg.settle)
        for i, r in enumerate(rows):
            if r["ts"] > horizon:  # the first unsettled row: wait for it, and for all after it
                e.wake_at[name] = r["ts"] + seconds_to_us(cfg.settle)
                rows = rows[:i]
                break
    elif cfg.read_mode == "gap":
        rows = _until_gap(e, now, name, cursor, rows)
    if rows:
        # the last seq read: a seq below it that commits later was passed over (a late commit)
        e.trace.add(now, "fetched", e.actor, name, rows[-1]["seq"], None, str(len(rows)))
        point = e.points["dispatch.after_fetch"]
        if point is not None:
            point("dispatch.after_fetch", now, who=name)
    return rows


def ready(e: Engine, now: int, name: str) -> bool:
    """Whether rows are committed past ``name``'s cursor (a probe after a round:
    a row that committed after the round's last read began is one)."""
    with e.store.transaction() as tx:
        cursor = tx.get_cursor(name)
        if cursor is None:
            raise no_cursor(e, name)
        return tx.has_outbox_past(cursor)


def _until_gap(e: Engine, now: int, name: str, cursor: int, rows: list[OutboxRow]) -> list[OutboxRow]:
    """Stop at the first missing seq until it fills or has waited ``gap_timeout``."""
    expected = cursor + 1
    for i, r in enumerate(rows):
        # a seq below the oldest retained one may be pruned or never committed:
        # the log cannot tell, so it waits like any gap (once, for a consumer behind)
        if r["seq"] > expected:
            key = (name, expected)
            first = e.gaps.setdefault(key, now)
            waited = (now - first) / US
            if waited < e.config.gap_timeout:
                if first == now:
                    e.trace.add(now, "gap_wait", e.actor, who=name, what=expected)
                e.wake_at[name] = first + seconds_to_us(e.config.gap_timeout)
                return rows[:i]
            e.trace.add(
                now,
                "gap_skipped",
                e.actor,
                who=name,
                what=expected,
                detail=f"seqs {expected}..{r['seq'] - 1} missing for {waited:g}s",
            )
            e.gaps.pop(key, None)
        expected = r["seq"] + 1
    return rows


def read(e: Engine, now: int, name: str, begin: bool = True, together: bool = True) -> Batch:
    """One read of ``name``: its new rows (:func:`fetch`) and, once the first is
    due, its due rows (:func:`fetch_due`), as a :class:`Batch`; with ``begin``,
    its rows handled up to the first that takes time (see :func:`advance`;
    ``together``: :attr:`Batch.together`)."""
    meters = e.meters(name)
    rows = fetch(e, now, name, meters)
    first_due = e.due_at_fetch.get(name)
    due = fetch_due(e, now, name) if first_due is not None and first_due <= now else None
    n_due = len(due) if due else 0
    b = Batch(name, meters, [*due, *rows] if due else rows, n_due, len(rows), first_due, together=together)
    return advance(e, now, b) if begin else b


def advance(e: Engine, now: int, b: Batch) -> Batch:
    """The batch's next step, once what it waited for is over: the outcome of
    the attempt in hand (its work is done), then the next rows begun — each
    that takes no time finished at once — up to the first that takes time, a
    retry's backoff, or the batch's end (without ``together``: up to the next
    row begun)."""
    if b.begun:
        if not _finish(e, now, b):
            return b  # a retry: its backoff first
    else:
        b.backoff = None  # the backoff is over (or, after a read, nothing was begun yet)
    n = len(b.rows)
    while b.i < n:
        _begin(e, now, b)
        if b.effect or b.duration > 0 or not b.together or not _finish(e, now, b):
            return b
    b.done = True
    return b


def _begin(e: Engine, now: int, b: Batch) -> None:
    """Begin an attempt at the row in hand (or find it is not due yet); the
    consumer's code, if it has some, is left for :func:`effect`."""
    name, i = b.consumer, b.i
    row, due = b.rows[i], i < b.due
    b.begun, b.error, b.effect = True, None, False
    due_at = row["due_at"]
    b.not_due = not due and due_at is not None and due_at > now
    if b.not_due:
        b.duration = 0.0
        return
    spec = e.registry.spec(name)
    d = spec.duration
    d = b.duration = e.faults.run_duration(name, now, float(d(e.rng) if callable(d) else d))
    timeout = spec.timeout
    if timeout is not None and d > timeout:
        b.duration, b.error = timeout, f"timed out after {timeout:g}s"
    elif spec.fn is not None:
        b.effect = True
    else:  # the consumer's effect lands here, as the attempt begins (see effect)
        e.trace.add(now, "delivered", e.actor, name, row["seq"], None, "due" if due else None)


def effect(e: Engine, now: int, b: Batch) -> Batch:
    """The consumer's code on the row in hand (raising: a failed attempt). Its
    effect lands here, as the attempt begins: a crash before the attempt
    finishes re-delivers the row, and the effect happens again."""
    b.effect = False
    fn = e.registry.spec(b.consumer).fn
    row, due = b.rows[b.i], b.i < b.due
    try:
        if fn is not None:
            fn(dict(row))
    except Exception as exc:  # a transient failure: retried under the budget
        b.error = f"{type(exc).__name__}: {exc}"
        return b
    e.trace.add(now, "delivered", e.actor, b.consumer, row["seq"], None, "due" if due else None)
    return b


def _done(tx: OutboxTx, name: str, seq: int, due: bool) -> None:
    """The row is behind this consumer: its deferred entry goes, or its cursor moves."""
    if due:
        tx.delete_deferred(name, seq)
    else:
        tx.set_cursor(name, seq)


def _finish(e: Engine, now: int, b: Batch) -> bool:
    """Record the outcome of the attempt in hand: True when its row is behind
    the consumer — handled, parked or deferred — and the batch moves on to the
    next; False when a retry waits for its ``backoff``."""
    b.begun = False
    b.attempt += 1
    name, i = b.consumer, b.i
    row, due = b.rows[i], i < b.due
    seq = row["seq"]
    trace, actor = e.trace, e.actor
    if b.not_due:
        with e.store.transaction() as tx:
            tx.defer(name, seq, cast(int, row["due_at"]))  # only a row with a due_at is not due
            tx.set_cursor(name, seq)
        trace.add(now, "deferred", actor, name, seq, None, str(row["due_at"]))
        trace.add(now, "cursor", actor, name, seq)
        b.deferred = True
    elif b.error is None:
        trace.add(now, "handled", actor, name, seq, None, "due" if due else None)
        m = b.meters
        m.handled()
        e.commit_to_handled[name]((now - row["ts"]) / US)
        point = e.points["dispatch.after_handle_before_cursor"]  # None: passing it does nothing
        if point is not None:
            point("dispatch.after_handle_before_cursor", now, who=name, what=seq)
        with e.store.transaction() as tx:
            _done(tx, name, seq, due)
        if not due:
            trace.add(now, "cursor", actor, name, seq)
    elif not _failed(e, now, b, seq, due):
        return False
    if e.unreported is not None and not b.not_due:  # handled or parked: for the consumer's next status write
        e.unreported[name] = seq
    b.i = i + 1
    b.attempt = 0
    return True


def _failed(e: Engine, now: int, b: Batch, seq: int, due: bool) -> bool:
    """The attempt in hand failed: its row parked at the ``retry_budget``-th
    failure (True), else a retry after a backoff (False)."""
    name, error, attempt = b.consumer, b.error, b.attempt
    spec = e.registry.spec(name)
    trace, actor = e.trace, e.actor
    trace.add(now, "failed", actor, name, seq, None, f"attempt {attempt}: {error}")
    b.meters.failures()
    if attempt < spec.retry_budget:
        b.backoff = spec.backoff_for(attempt, e.rng)
        return False
    with e.store.transaction() as tx:
        tx.park({"consumer": name, "seq": seq, "error": error, "attempts": attempt, "parked_at": now})
        _done(tx, name, seq, due)
    trace.add(now, "parked", actor, name, seq, None, error)
    if not due:
        trace.add(now, "cursor", actor, name, seq)
    b.meters.parked()
    return True
