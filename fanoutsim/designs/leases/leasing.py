"""Leases: consume, ack, nack, recover, restore (seed 003, "durable consumption").

**Partition order with in-flight > 1.** The seed says eligible events are
"leased in partition order", that a failed event is *retried* (nack, expiry),
and that the dead letter exists "so later eligible events can continue" —
i.e. later events of a partition wait while an earlier one is still being
retried. The faithful reading is therefore *head-of-line per partition*: a
consumer holds at most one lease per partition, always on that partition's
first required event, and the next event of the partition becomes eligible
only after an exact ack or a dead letter moves the partition's checkpoint
past it. ``in_flight_limit`` (1..8) bounds leases across *different*
partitions; ``batch_limit`` (1..8) bounds one ``consume`` call. So a consumer
of a single partition has one event in flight whatever its limits, and
delivery order within a partition is the log order (the checker verifies it).
Across partitions, heads are leased oldest first (by seq).

``consume`` leases up to the batch: each lease carries a 64-hex token
(sha256 of the seed, consumer, event id, attempt and the grant counter), the
current history incarnation and ``expires_at = now + lease_seconds``. The
lease is committed *before* the reply: a crash at
``consume.after_lease_before_reply`` leaves a lease nobody holds, which
recovery expires.

``ack(event_id, token, incarnation)`` advances the partition's checkpoint
only when all three match a live lease; otherwise it fails closed and changes
nothing, with one of the results below. ``nack(..., delay)`` and recovery's
expiry of a lease both count a failed attempt: the retry waits ``delay``
seconds (expiry: none); the 10th failed attempt is retained in
``dead_letters`` (with its payload, so retention cannot take it) and the
checkpoint moves past it — it is never reported as acknowledged.

``restore`` publishes a new history incarnation and voids every lease:
pre-restore tokens fail closed (``stale_incarnation``) and consumers resume
from their checkpoints (retry counts are kept).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from fanoutsim.kernel.timeutil import seconds_to_us
from fanoutsim.designs.leases.config import MAX_ATTEMPTS, check_batch
from fanoutsim.kernel.names import check_name
from fanoutsim.designs.leases.consumers import consumer_row

# the results of ack and nack: only the first three changed anything
ACKED, RETRY, DEAD_LETTERED = "acked", "retry_scheduled", "dead_lettered"
RETIRED, STALE, NO_LEASE, WRONG_TOKEN, EXPIRED = (
    "retired", "stale_incarnation", "no_lease", "wrong_token", "expired")
FAILED_CLOSED = (RETIRED, STALE, NO_LEASE, WRONG_TOKEN, EXPIRED)


@dataclass(frozen=True, slots=True)
class Lease:
    """One leased event, as ``consume`` replies it."""

    consumer: str
    event_id: str
    seq: int
    partition: str
    kind: str
    payload: str | None
    token: str
    incarnation: int
    attempt: int
    expires_at: int


def lease_token(seed: int, consumer: str, event_id: str, attempt: int, grant: int) -> str:
    return hashlib.sha256(f"{seed}/{consumer}/{event_id}/{attempt}/{grant}".encode()).hexdigest()


def consume(e, now: int, consumer: str, batch_limit: int | None = None) -> list[Lease]:
    """Lease up to ``batch_limit`` (default: the consumer's) eligible events."""
    if batch_limit is not None:
        check_batch(batch_limit)
    out: list[Lease] = []
    with e.store.transaction() as tx:
        row = consumer_row(tx, consumer)
        if row["retired"]:
            raise ValueError(f"consumer {consumer!r} is retired; it cannot consume")
        held = tx.list_leases(consumer)
        room = min(row["batch_limit"] if batch_limit is None else batch_limit,
                   row["in_flight_limit"] - len(held))
        if room <= 0:
            return out
        busy = {lease["partition"] for lease in held}
        h = tx.get_history()
        expires = now + seconds_to_us(row["lease_seconds"])
        for ev in tx.event_heads(consumer, row["start_seq"]):
            if len(out) >= room:
                break
            if ev["partition"] in busy:
                continue
            retry = tx.get_retry(consumer, ev["event_id"])
            if retry is not None and retry["not_before"] > now:
                continue
            attempt = 1 if retry is None else retry["attempts"] + 1
            h["leases_granted"] += 1
            token = lease_token(e.seed, consumer, ev["event_id"], attempt, h["leases_granted"])
            tx.insert_lease({"consumer": consumer, "event_id": ev["event_id"], "seq": ev["seq"],
                             "partition": ev["partition"], "token": token, "incarnation": h["incarnation"],
                             "attempt": attempt, "leased_at": now, "expires_at": expires})
            out.append(Lease(consumer, ev["event_id"], ev["seq"], ev["partition"], ev["kind"], ev["payload"],
                             token, h["incarnation"], attempt, expires))
        if out:
            tx.set_history(h)
    for lease in out:
        e.trace.add(now, "leased", e.actor, consumer, lease.event_id, lease.partition, f"attempt {lease.attempt}")
    if out:
        e.metrics.inc("fanoutsim_lease_leases_total", len(out), consumer=consumer)
        e.faults.point("consume.after_lease_before_reply", now, subscription=consumer, firing=out[0].event_id)
    return out


def _check(tx, now: int, consumer: str, event_id: str, token, incarnation) -> tuple[str | None, dict | None]:
    """(failure result or None, the live lease)."""
    row = consumer_row(tx, consumer)
    check_name("event_id", event_id)
    if row["retired"]:
        return RETIRED, None
    if incarnation != tx.get_history()["incarnation"]:
        return STALE, None
    lease = tx.get_lease(consumer, event_id)
    if lease is None:
        return NO_LEASE, None
    if lease["token"] != token:
        return WRONG_TOKEN, None
    if lease["expires_at"] <= now:
        return EXPIRED, None
    return None, lease


def _refused(e, now, consumer, event_id, what, result):
    e.trace.add(now, f"{what}_refused", e.actor, consumer, event_id, None, result)
    e.metrics.inc("fanoutsim_lease_refused_total", consumer=consumer, result=result)
    return result


def ack(e, now: int, consumer: str, event_id: str, token: str, incarnation: int) -> str:
    """Acknowledge exactly one leased event: ``acked``, or a fail-closed result."""
    with e.store.transaction() as tx:
        failed, lease = _check(tx, now, consumer, event_id, token, incarnation)
        if failed is None:
            tx.delete_lease(consumer, event_id)
            tx.delete_retry(consumer, event_id)
            tx.set_checkpoint(consumer, lease["partition"], lease["seq"])
            e.faults.point("ack.before_commit", now, subscription=consumer, firing=event_id)
    if failed is not None:
        return _refused(e, now, consumer, event_id, "ack", failed)
    e.trace.add(now, "acked", e.actor, consumer, event_id, lease["partition"], f"attempt {lease['attempt']}")
    e.metrics.inc("fanoutsim_lease_acked_total", consumer=consumer)
    return ACKED


def _fail(e, tx, now: int, lease: dict, delay_us: int, error: str | None) -> str:
    """One failed attempt at a leased event: retry later, or the dead letter."""
    consumer, event_id = lease["consumer"], lease["event_id"]
    tx.delete_lease(consumer, event_id)
    attempts = lease["attempt"]
    if attempts >= MAX_ATTEMPTS:
        ev = tx.get_event(event_id)
        tx.insert_dead_letter({"consumer": consumer, "event_id": event_id, "seq": lease["seq"],
                               "partition": lease["partition"], "attempts": attempts, "error": error,
                               "payload": None if ev is None else ev["payload"], "dead_at": now})
        tx.delete_retry(consumer, event_id)
        tx.set_checkpoint(consumer, lease["partition"], lease["seq"])
        return DEAD_LETTERED
    tx.put_retry({"consumer": consumer, "event_id": event_id, "seq": lease["seq"],
                  "partition": lease["partition"], "attempts": attempts, "not_before": now + delay_us,
                  "error": error})
    return RETRY


def _failed_trace(e, now, lease, result, error, kind):
    e.trace.add(now, kind, e.actor, lease["consumer"], lease["event_id"], lease["partition"],
                f"attempt {lease['attempt']}: {error}")
    if result == DEAD_LETTERED:
        e.trace.add(now, "dead_lettered", e.actor, lease["consumer"], lease["event_id"], lease["partition"],
                    f"{lease['attempt']} attempts: {error}")
        e.metrics.inc("fanoutsim_lease_dead_letters_total", consumer=lease["consumer"])


def nack(e, now: int, consumer: str, event_id: str, token: str, incarnation: int,
         delay: float = 0.0, error: str | None = None) -> str:
    """A failed attempt, reported: ``retry_scheduled`` (after ``delay`` seconds),
    ``dead_lettered`` (the 10th), or a fail-closed result."""
    delay_us = seconds_to_us(e.config.check_delay(delay))
    with e.store.transaction() as tx:
        failed, lease = _check(tx, now, consumer, event_id, token, incarnation)
        if failed is None:
            result = _fail(e, tx, now, lease, delay_us, error or "nack")
            e.faults.point("nack.before_commit", now, subscription=consumer, firing=event_id)
    if failed is not None:
        return _refused(e, now, consumer, event_id, "nack", failed)
    _failed_trace(e, now, lease, result, error or "nack", "nacked")
    return result


def recover(e, now: int, limit: int = 1000) -> int:
    """Expire leases whose time is up: each is a failed attempt (retry at once,
    or the dead letter). Returns how many expired."""
    done = []
    with e.store.transaction() as tx:
        for lease in tx.expired_leases(now, limit):
            done.append((lease, _fail(e, tx, now, lease, 0, "lease expired")))
            e.faults.point("recover.mid_expire", now, subscription=lease["consumer"], firing=lease["event_id"])
    for lease, result in done:
        _failed_trace(e, now, lease, result, "lease expired", "expired")
    if done:
        e.metrics.inc("fanoutsim_lease_expired_total", len(done))
    return len(done)


def restore(e, now: int) -> int:
    """Publish a new history incarnation (as a restore from backup does) and void
    every outstanding lease; returns the new incarnation."""
    with e.store.transaction() as tx:
        h = tx.get_history()
        h["incarnation"] += 1
        tx.set_history(h)
        voided = tx.list_leases()
        for lease in voided:
            tx.delete_lease(lease["consumer"], lease["event_id"])
    for lease in voided:
        e.trace.add(now, "lease_voided", e.actor, lease["consumer"], lease["event_id"], lease["partition"],
                    "restore")
    e.trace.add(now, "restored", e.actor, detail=str(h["incarnation"]))
    return h["incarnation"]
