"""Durable consumers: add, seek, retire, status (the administrative half).

A consumer row holds its delivery limits (checked against the seed's ranges)
and ``start_seq``: the log position it started from, or was last seeked to.
Its per-partition ``checkpoints`` say how far each partition is done
(acknowledged or dead-lettered). An event is *required* by a consumer when its
seq is past both.

``seek`` is the seed's administrative checkpoint move: every checkpoint is
dropped and ``start_seq`` set to the position, and the consumer's leases are
voided (their tokens then fail closed) and its retry counts cleared. A seek
back re-delivers (duplicates with cause ``seek``); a seek forward skips events
on purpose (losses with cause ``seek``). ``retire`` is permanent: the row
stays, marked retired, its leases and retries go, and it no longer holds a
retention fence; the name cannot be used again.
"""
from __future__ import annotations

from fanoutsim.designs.leases.config import DEFAULT_LIMITS, check_limits
from fanoutsim.kernel.names import check_name


def consumer_row(tx, name: str) -> dict:
    check_name("consumer", name)
    row = tx.get_lease_consumer(name)
    if row is None:
        known = ", ".join(c["consumer"] for c in tx.list_lease_consumers()) or "none"
        raise KeyError(f"unknown consumer {name!r}; known: {known}")
    return row


def resolve_position(tx, name: str, position) -> int:
    """The ``start_seq`` that ``"beginning"``, ``"end"`` or a seq stands for, checked."""
    low, _ = tx.event_bounds()
    last = tx.get_history()["last_seq"]
    horizon = last if low is None else low - 1
    if position == "end":
        return last
    if position == "beginning":
        return horizon
    if isinstance(position, bool) or not isinstance(position, int):
        raise ValueError(f"position for {name!r} must be 'beginning', 'end' or a seq (int), got {position!r}")
    if position > last:
        raise ValueError(f"position {position} for {name!r} is past the end of the log (last seq {last})")
    if position < horizon:
        raise ValueError(f"position {position} for {name!r} is before the retention horizon: seqs "
                         f"{position + 1}..{horizon} were pruned (lowest allowed position {horizon})")
    return position


def add_consumer(e, now: int, name: str, start="beginning", **limits) -> dict:
    """Create a durable consumer (kept as it is if it exists); returns its row."""
    check_name("consumer", name)
    unknown = set(limits) - set(DEFAULT_LIMITS)
    if unknown:
        raise TypeError(f"unknown limit(s) {sorted(unknown)}; allowed: {', '.join(DEFAULT_LIMITS)}")
    checked = check_limits(**{**DEFAULT_LIMITS, **limits})
    with e.store.transaction() as tx:
        row = tx.get_lease_consumer(name)
        if row is not None:
            if row["retired"]:
                raise ValueError(f"consumer {name!r} is permanently retired; use another name")
            return row
        row = {"consumer": name, "start_seq": resolve_position(tx, name, start), **checked, "retired": False}
        tx.put_lease_consumer(row)
    e.trace.add(now, "consumer_start", e.actor, name, None, None, str(row["start_seq"]))
    return row


def _void_leases(e, tx, name: str) -> list[dict]:
    leases = tx.list_leases(name)
    for lease in leases:
        tx.delete_lease(name, lease["event_id"])
    return leases


def seek(e, now: int, name: str, position) -> int:
    """Move the consumer's checkpoint to ``position`` (administrative); the new start_seq."""
    with e.store.transaction() as tx:
        row = consumer_row(tx, name)
        if row["retired"]:
            raise ValueError(f"consumer {name!r} is retired; it cannot seek")
        start = resolve_position(tx, name, position)
        voided = _void_leases(e, tx, name)
        for r in tx.list_retries(name):
            tx.delete_retry(name, r["event_id"])
        tx.clear_checkpoints(name)
        tx.put_lease_consumer({**row, "start_seq": start})
    for lease in voided:
        e.trace.add(now, "lease_voided", e.actor, name, lease["event_id"], lease["partition"], "seek")
    e.trace.add(now, "seek", e.actor, name, None, None, str(start))
    return start


def retire(e, now: int, name: str) -> None:
    """Permanently retire the consumer and release its retention fence."""
    with e.store.transaction() as tx:
        row = consumer_row(tx, name)
        if row["retired"]:
            return
        voided = _void_leases(e, tx, name)
        for r in tx.list_retries(name):
            tx.delete_retry(name, r["event_id"])
        tx.put_lease_consumer({**row, "retired": True})
    for lease in voided:
        e.trace.add(now, "lease_voided", e.actor, name, lease["event_id"], lease["partition"], "retire")
    e.trace.add(now, "retired", e.actor, name)


def status(e, now: int, name: str) -> dict:
    """What ``riffdb event status`` tells: limits, checkpoints, in flight, retrying,
    dead letters, the first required event, and the history incarnation."""
    with e.store.transaction() as tx:
        row = consumer_row(tx, name)
        heads = [] if row["retired"] else tx.event_heads(name, row["start_seq"])
        leases = tx.list_leases(name)
        return {**row, "incarnation": tx.get_history()["incarnation"],
                "checkpoints": tx.get_checkpoints(name),
                "in_flight": [lease["event_id"] for lease in leases],
                "retrying": {r["event_id"]: r["attempts"] for r in tx.list_retries(name)},
                "dead_letters": [d["event_id"] for d in tx.list_dead_letters(name)],
                "first_required": heads[0]["event_id"] if heads else None,
                "fence_commit": heads[0]["commit_seq"] if heads else None}
