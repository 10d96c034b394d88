"""One consumer's step of the dispatcher (seed 002, "Reading past the cursor").

A wake-up — a hint, or the periodic safety poll — never trusts the hint's
seq. For each consumer, independently:

1. :func:`fetch` reads the rows past the consumer's cursor in seq order, up to
   ``batch_limit`` (deferred rows that fell due come first, :func:`fetch_due`);
2. :func:`begin` hands one row to the consumer: its function runs — the
   consumer's effect, a ``delivered`` event in the trace when it does not
   raise — and the step takes the consumer's duration — or is cut off at its
   timeout (then the function does not run);
3. :func:`finish` records the outcome. Handled: the cursor moves to the row
   (*after* the handling: a crash at ``dispatch.after_handle_before_cursor``
   re-delivers it on restart — at-least-once). Failed: back off and retry, and
   the ``retry_budget``-th failure *parks* the row (recorded with its error
   and attempts) and moves the cursor past it, so one poison row cannot wedge
   the feed. Not yet due: remember it in ``deferred`` and move on.

Retry counts live in the runtime's hands (memory): a restart starts a row's
budget again, the parked table keeps what was spent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from fanoutsim.kernel.timeutil import US, seconds_to_us

from .metrics import COMMIT_TO_HANDLED

if TYPE_CHECKING:
    from fanoutsim.designs.outbox.steps import Engine
    from fanoutsim.designs.outbox.tables.port import OutboxRow, OutboxTx


@dataclass(slots=True)
class Step:
    """One attempt at one row, begun: what the runtime waits for before :func:`finish`."""

    consumer: str
    row: OutboxRow
    duration: float  # virtual seconds until the outcome is known
    error: str | None = None
    deferred: bool = False  # not due yet: to be remembered, not handled
    due: bool = False  # came from the deferred table (it fell due)


@dataclass(frozen=True, slots=True)
class Outcome:
    kind: str  # handled, retry, parked, deferred
    delay: float = 0.0  # seconds to back off before the retry


HANDLED, PARKED, DEFERRED = Outcome("handled"), Outcome("parked"), Outcome("deferred")


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


def fetch(e: Engine, now: int, name: str) -> list[OutboxRow]:
    """The rows past the cursor this wake-up may hand to ``name``, in seq order."""
    cfg = e.config
    with e.store.transaction() as tx:
        cursor = tx.get_cursor(name)
        if cursor is None:
            raise no_cursor(e, name)
        # nothing past the cursor (the log's end): the read would find nothing; it is
        # still counted below as the query the real dispatcher sends
        rows = tx.fetch_outbox(cursor, cfg.batch_limit) if tx.has_outbox_past(cursor) else []
        # retained rows start right after the cursor, or none are retained past it:
        # nothing was pruned under this consumer, so the bounds need no read
        low = tx.outbox_bounds()[0] if rows and rows[0]["seq"] != cursor + 1 else None
        e.due_at_fetch[name] = tx.next_due(name)  # same snapshot: spares the runtime a next_due read
    e.count("fanoutsim_outbox_fetches_total", name)()
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
        e.faults.point("dispatch.after_fetch", now, who=name)
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


def begin(e: Engine, now: int, name: str, row: OutboxRow, due: bool = False) -> Step:
    """Hand ``row`` to the consumer (or find it is not due yet)."""
    spec = e.registry.spec(name)
    due_at = row["due_at"]
    if not due and due_at is not None and due_at > now:
        return Step(name, row, 0.0, deferred=True)
    d = spec.duration
    d = e.faults.run_duration(name, now, float(d(e.rng) if callable(d) else d))
    timeout = spec.timeout
    if timeout is not None and d > timeout:
        return Step(name, row, timeout, error=f"timed out after {timeout:g}s", due=due)
    error = None
    if spec.fn is not None:
        try:
            spec.fn(dict(row))
        except Exception as exc:  # a transient failure: retried under the budget
            error = f"{type(exc).__name__}: {exc}"
    if error is None:
        # the consumer's effect lands here, as the step begins: a crash before
        # the step finishes re-delivers the row, and the effect happens again
        e.trace.add(now, "delivered", e.actor, name, row["seq"], None, "due" if due else None)
    return Step(name, row, d, error, False, due)


def _done(tx: OutboxTx, step: Step) -> None:
    """The row is behind this consumer: its deferred entry goes, or its cursor moves."""
    if step.due:
        tx.delete_deferred(step.consumer, step.row["seq"])
    else:
        tx.set_cursor(step.consumer, step.row["seq"])


def finish(e: Engine, now: int, step: Step, attempt: int) -> Outcome:
    """Record the outcome of ``attempt`` (1, 2, ...) at ``step``'s row."""
    name, seq = step.consumer, step.row["seq"]
    trace, actor = e.trace, e.actor
    if step.deferred:
        with e.store.transaction() as tx:
            tx.defer(name, seq, cast(int, step.row["due_at"]))  # begin defers only a row with a due_at
            tx.set_cursor(name, seq)
        trace.add(now, "deferred", actor, who=name, what=seq, detail=str(step.row["due_at"]))
        trace.add(now, "cursor", actor, who=name, what=seq)
        return DEFERRED
    if step.error is None:
        trace.add(now, "handled", actor, name, seq, None, "due" if step.due else None)
        e.count("fanoutsim_outbox_handled_total", name)()
        e.metrics.observe(COMMIT_TO_HANDLED, (now - step.row["ts"]) / US, consumer=name)
        e.faults.point("dispatch.after_handle_before_cursor", now, who=name, what=seq)
        with e.store.transaction() as tx:
            _done(tx, step)
        if not step.due:
            trace.add(now, "cursor", actor, name, seq)
        return HANDLED
    spec = e.registry.spec(name)
    trace.add(now, "failed", actor, who=name, what=seq, detail=f"attempt {attempt}: {step.error}")
    e.count("fanoutsim_outbox_failures_total", name)()
    if attempt >= spec.retry_budget:
        with e.store.transaction() as tx:
            tx.park({"consumer": name, "seq": seq, "error": step.error, "attempts": attempt, "parked_at": now})
            _done(tx, step)
        trace.add(now, "parked", actor, who=name, what=seq, detail=step.error)
        if not step.due:
            trace.add(now, "cursor", actor, who=name, what=seq)
        e.count("fanoutsim_outbox_parked_total", name)()
        return PARKED
    return Outcome("retry", spec.backoff_for(attempt, e.rng))
