"""One leased event's story, told from the tables a run leaves (``fanoutsim explain FILE ID``).

The event (its id ``<commit:ordinal>``, partition, kind, commit time) and,
for each durable consumer: resolved (the contiguous checkpoint is past it, or
an ack is held as a sparse resolution), leased now (attempt, expiry), waiting
to be retried after failed attempts, dead-lettered, not for it (the consumer
starts after it), or not leased yet; for a duplicate or a loss, the cause the
checker named, in the report's words (the verdicts ``fanoutsim run --store``
kept in the file, :mod:`fanoutsim.verdicts`).
"""

from __future__ import annotations

import json

from fanoutsim.kernel.report import verdict_text, verdicts_below
from fanoutsim.kernel.store.record import recorded_for
from fanoutsim.kernel.timeutil import from_us

from .causes import CAUSES

__all__ = ["story", "backlog"]


def _when(us: int | None) -> str:
    return "never" if us is None else from_us(int(us)).isoformat().replace("+00:00", "Z")


def _rows(rt, table: str) -> list[dict]:
    rows = getattr(rt, "table_rows", None)  # the runtime's named database
    return rows(table) if rows is not None else rt.store.rows(table)


def _by_consumer(rt, table: str, event_id: str) -> dict[str, dict]:
    return {r["consumer"]: r for r in _rows(rt, table) if r["event_id"] == event_id}


def _consumer_line(rt, c: dict, ev: dict, found: dict, lost: bool = False) -> str:
    name = c["consumer"]
    checkpoint = next(
        (cp["seq"] for cp in _rows(rt, "checkpoints") if cp["consumer"] == name and cp["partition"] == ev["partition"]),
        None,
    )
    if name in found["dead_letters"]:
        d = found["dead_letters"][name]
        return f"dead-lettered at {_when(d['dead_at'])} after {d['attempts']} failed attempts: {d['error']}"
    if ev["seq"] < c["start_seq"]:
        return f"not for it: it starts at seq {c['start_seq']}, after this event"
    if checkpoint is not None and checkpoint >= ev["seq"]:
        if lost:  # the check saw no delivery: a seek or a restore moved the checkpoint past it
            return f"never delivered, though its checkpoint on {ev['partition']} (seq {checkpoint}) is past it"
        return f"resolved: its checkpoint on {ev['partition']} (seq {checkpoint}) is past it"
    if name in found["resolutions"]:
        return (
            f"acked ({found['resolutions'][name]['kind']}), held as a sparse resolution until every "
            f"earlier event of {ev['partition']} is resolved"
        )
    if name in found["leases"]:
        lease = found["leases"][name]
        return (
            f"leased now: attempt {lease['attempt']}, token {lease['token'][:8]}..., expires "
            f"{_when(lease['expires_at'])} (an ack after that fails closed and the event comes again)"
        )
    if name in found["retries"]:
        r = found["retries"][name]
        return (
            f"{r['attempts']} failed attempt(s), retried from {_when(r['not_before'])}: {r['error']} "
            f"(the 10th makes a dead letter)"
        )
    return "not leased yet: it waits behind the consumer's window and limits"


def story(rt, event_id: str) -> str:
    """The story of event ``event_id`` in the tables of ``rt`` (a runtime or
    simulation with a ``store``): raises KeyError when the log does not hold it."""
    if not isinstance(event_id, str) or ":" not in event_id:
        raise ValueError(f"a leased event is named by its id <commit:ordinal> (e.g. 12:0); got {event_id!r}")
    ev = next((e for e in _rows(rt, "events") if e["event_id"] == event_id), None)
    found = {t: _by_consumer(rt, t, event_id) for t in ("leases", "retries", "dead_letters", "resolutions")}
    verdicts = recorded_for(rt.store, event_id)
    if ev is None:
        dead = found["dead_letters"]
        if not dead and not verdicts:
            raise KeyError(f"no event {event_id!r} in this run's log (pruned by retention, or never published)")
        lines = [
            f"event {event_id}: pruned from the log"
            + (f"; dead-lettered for {', '.join(sorted(dead))}" if dead else "")
        ]
        lines += [f"  -> {v['reader']}: {verdict_text(v, CAUSES)}" for v in verdicts or ()]
        return "\n".join(lines) + "\n"
    payload = json.dumps(ev["payload"], default=str) if ev.get("payload") is not None else "null"
    lines = [
        f"event {event_id}: partition {ev['partition']}, kind {ev['kind']}, seq {ev['seq']}, committed at "
        f"{_when(ev['committed_at'])}",
        f"  payload {payload[:200]}",
    ]
    consumers = sorted(_rows(rt, "lease_consumers"), key=lambda c: c["consumer"])
    for c in consumers:
        mine = [v for v in verdicts or () if v["reader"] == c["consumer"]]
        lost = any(v["kind"] == "lost" for v in mine)
        lines.append(f"  -> {c['consumer']}: {_consumer_line(rt, c, ev, found, lost)}")
        lines += [f"      {verdict_text(v, CAUSES)}" for v in mine]
    if not consumers:
        lines.append("  no durable consumer: nothing is to be delivered")
    lines += verdicts_below(verdicts, {c["consumer"] for c in consumers}, CAUSES)
    return "\n".join(lines) + "\n"


BACKLOG_NAME = "unresolved"  # what :func:`backlog` counts, in one word (fanoutsim status)


def backlog(rt) -> int:
    """Events each consumer has not resolved yet (past its checkpoint, not held
    as a sparse ack), summed: what grows when the consumers fall behind."""
    events = _rows(rt, "events")
    checkpoints = {(c["consumer"], c["partition"]): c["seq"] for c in _rows(rt, "checkpoints")}
    sparse = {(r["consumer"], r["event_id"]) for r in _rows(rt, "resolutions")}
    total = 0
    for c in _rows(rt, "lease_consumers"):
        name = c["consumer"]
        total += sum(
            1
            for e in events
            if e["seq"] >= c["start_seq"]
            and e["seq"] > checkpoints.get((name, e["partition"]), -1)
            and (name, e["event_id"]) not in sparse
        )
    return total
