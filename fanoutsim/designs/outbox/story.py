"""One outbox row's story, told from the tables a run leaves (``fanoutsim explain FILE SEQ``).

The row (its commit time, topic, kind, page, when it is due) and, for each
consumer, where its cursor stands: past the row (handled), parked on it after
its retry budget, deferred until it is due, or still before it. A cursor
moves only after a row is durably handled, so "past" means handled at least
once; a crash between handle and cursor re-delivers it. For a duplicate or a
loss the story gives the cause the checker named, in the report's words (the
verdicts ``fanoutsim run --store`` kept in the file, :mod:`fanoutsim.verdicts`);
a file without them (a served run) shows the restarts that followed no clean
stop instead.
"""

from __future__ import annotations

from fanoutsim.kernel.report import verdict_text, verdicts_below
from fanoutsim.kernel.store.record import recorded_for
from fanoutsim.kernel.timeutil import from_us

from .causes import CAUSES

__all__ = ["story", "backlog"]


def _when(us: int | None) -> str:
    return "never" if us is None else from_us(int(us)).isoformat().replace("+00:00", "Z")


def _seq(text) -> int:
    try:
        seq = int(text)
    except (TypeError, ValueError):
        raise ValueError(f"an outbox row is named by its seq, a whole number; got {text!r}") from None
    if seq < 1:
        raise ValueError(f"an outbox seq is 1 or more; got {seq}")
    return seq


def _unclean_starts(store) -> int:
    starts, stopped = 0, True
    for row in store.rows("runner_log"):
        if row["event"] == "start" and not stopped:
            starts += 1
        stopped = row["event"] == "stop"
    return starts


def _consumer_line(
    name: str, cursor: int, seq: int, parked: dict | None, deferred: dict | None, lost: bool = False
) -> str:
    if parked is not None:
        return (
            f"parked after {parked['attempts']} failed attempt(s) at {_when(parked['parked_at'])}: "
            f"{parked['error']} (its cursor moved on; the row waits for an operator)"
        )
    if deferred is not None:
        return f"deferred until {_when(deferred['due_at'])}: handled then, restarts or not"
    if cursor >= seq and lost:  # the check saw no delivery: the cursor passed it unhandled
        return f"never handled, though its cursor ({cursor}) is past the row"
    if cursor >= seq:
        return f"handled: its cursor ({cursor}) is past the row"
    return f"not yet: its cursor ({cursor}) is {seq - cursor} row(s) before it"


def story(rt, seq_text) -> str:
    """The story of outbox row ``seq_text`` in the tables of ``rt`` (a runtime or
    simulation with a ``store``): raises KeyError when the run never had it."""
    store = rt.store
    seq = _seq(seq_text)
    rows = store.rows("outbox")
    row = next((r for r in rows if r["seq"] == seq), None)
    cursors = {r["consumer"]: r["seq"] for r in store.rows("cursors")}
    head = max([r["seq"] for r in rows] + list(cursors.values()), default=0)
    if row is None and seq > head:
        raise KeyError(f"no outbox row {seq} in this run (its last seq is {head})")
    if row is None:
        lines = [
            f"outbox row {seq}: no longer in the outbox (pruned by retention, or a seq its transaction never committed)"
        ]
    else:
        due = f", due at {_when(row['due_at'])}" if row.get("due_at") is not None else ""
        lines = [
            f"outbox row {seq}: committed at {_when(row['ts'])}, topic {row['topic'] or '-'}, "
            f"kind {row['kind']}, page {row['ref']}{due}"
        ]
    parked = {(r["consumer"], r["seq"]): r for r in store.rows("parked")}
    deferred = {(r["consumer"], r["seq"]): r for r in store.rows("deferred")}
    verdicts = recorded_for(store, str(seq))
    for name in sorted(cursors):
        mine = [v for v in verdicts or () if v["reader"] == name]
        lost = any(v["kind"] == "lost" for v in mine)
        line = _consumer_line(name, cursors[name], seq, parked.get((name, seq)), deferred.get((name, seq)), lost)
        lines.append(f"  -> {name}: {line}")
        lines += [f"      {verdict_text(v, CAUSES)}" for v in mine]
    if not cursors:
        lines.append("  no consumer has a cursor yet")
    lines += _unexplained(store, verdicts, set(cursors))
    return "\n".join(lines) + "\n"


def _unexplained(store, verdicts: list[dict] | None, listed: set[str]) -> list[str]:
    """What the story adds below the consumers: the checker's verdicts of
    consumers without a cursor now, or, where no check kept verdicts (a
    served run), the restarts that may have repeated a row."""
    if verdicts is not None:
        return verdicts_below(verdicts, listed, CAUSES)
    unclean = _unclean_starts(store)
    if not unclean:
        return []
    return [
        f"  {unclean} restart(s) followed no clean stop: a row handled just before one may have "
        f"been handled again (a crash between handle and cursor; no check of this run kept its verdicts)"
    ]


BACKLOG_NAME = "unhandled"  # what :func:`backlog` counts, in one word (fanoutsim status)


def backlog(rt) -> int:
    """Rows past the consumers' cursors, summed: what grows when the dispatcher falls behind."""
    head = max((r["seq"] for r in rt.store.rows("outbox")), default=0)
    return sum(max(head - r["seq"], 0) for r in rt.store.rows("cursors"))
