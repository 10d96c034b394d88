"""The brokers' rules where they differ from RiffDB's: pieces of the lease steps.

Each is a function of an open transaction, called by :mod:`.leasing` (and
:mod:`.log` for retention) only when :class:`~.config.LeaseConfig` asks for
the broker's rule; under the defaults none of them changes anything. The
rules, and where each is read from, are in :mod:`.config`'s docstring ("The
brokers' rules").

* :func:`lease_until` — a lease's expiry: the consumer's lease, or the
  delivery's ``BackOff`` entry (nats-server ``checkPending``);
* :func:`retry_due` — when a nack's retry comes due (``nack_delay_rule``);
* :func:`at_limit` — whether a failed attempt (or a retry coming due) is the
  last allowed one (``max_deliver``, ``max_deliver_rule``);
* :func:`floor_walks` — whether a resolution moves the checkpoint now
  (``at_max_deliver = "advisory"``: nats-server's stored ack floor);
* :class:`Interest` / :func:`remove_unneeded` — JetStream's interest retention:
  an event no consumer still needs is removed (``needAck``), its resolutions kept
  for the checkpoint to pass;
* :func:`forget` — retention without a fence deleted events some consumer
  still held: their leases, retries and resolutions go.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fanoutsim.kernel.timeutil import seconds_to_us

if TYPE_CHECKING:
    from fanoutsim.designs.leases.config import LeaseConfig

# resolutions that end a consumer's interest in an event (JetStream: acked, or
# terminated — "treat like an ack"; the model's drop: forgotten); a dead letter
# or a max-deliveries advisory keeps it (needAck reads rdc)
DONE_WITH = ("acknowledged", "terminated", "dropped")
# resolutions that move nats-server's stored ack floor (processTermLocked acks too)
ACKS = ("acknowledged", "terminated")


def lease_until(config: LeaseConfig, now: int, lease_seconds: float, attempt: int) -> int:
    """The expiry (µs) of delivery ``attempt``'s lease granted (or extended) at ``now``."""
    return now + seconds_to_us(config.lease_for(lease_seconds, attempt))


def retry_due(config: LeaseConfig, now: int, delay: float, attempt: int) -> int:
    """When a nack at ``now`` of delivery ``attempt`` asking ``delay`` seconds
    comes due: ``delay`` on (RiffDB), or with ``nack_delay_rule =
    "plus_backoff"`` and a BackOff list, ``delay + backoff[attempt - 1] -
    backoff[0]`` on (nats-server: ``processNak`` sets the pending timestamp to
    ``now - AckWait + delay``, AckWait being ``backoff[0]``, and
    ``checkPending`` measures it against the delivery's entry). A nak with no
    delay is redelivered at once either way."""
    if delay > 0 and config.backoff and config.nack_delay_rule == "plus_backoff":
        offset = config.lease_for(0.0, attempt) - config.backoff[0]
        return now + seconds_to_us(delay + offset)
    return now + seconds_to_us(delay)


def at_limit(config: LeaseConfig, attempts: int, *, due: bool) -> bool:
    """Whether delivery ``attempts``, failed, is the last: never with
    ``max_deliver = -1``; under ``"failures"`` (RiffDB) at the failure itself
    (``due`` either way); under ``"deliveries"`` (JetStream) only when the
    next delivery would be made (``due``: a lease expired — ``checkPending`` —
    or a retry came due to a pull — ``getNextMsg``)."""
    if config.max_deliver == -1 or attempts < config.max_deliver:
        return False
    return config.max_deliver_rule == "failures" or due


def floor_walks(config: LeaseConfig, tx: Any, start: int, lease: dict, kind: str | None, held: list[dict]) -> bool:
    """Whether resolving ``lease``'s event as ``kind`` (None: a failed attempt)
    lets its partition's checkpoint walk now, ``held`` being the consumer's
    resolutions in that partition (``start``: its start seq). Under RiffDB's
    rules, always. Under ``at_max_deliver = "advisory"``, as nats-server's
    ack floor — the one ``consumer_info`` reports, the consumer store's
    (``server/filestore.go``, ``consumerFileStore.UpdateAcks``) — moves: only
    at an ack or a term, and only when nothing else of the partition is
    pending (leased or waiting to retry: the floor goes to the last delivered
    message) or the acked event is the first past the checkpoint (its
    delivery sequence is the floor's plus one: the floor goes to just below
    the first still pending). A message past MaxDeliver leaves the pending
    list without moving that floor (``UpdateDelivered`` with ``dc > maxdc``),
    and a nak or an expiry never moves it, so a max-deliveries event is passed
    only at such an ack."""
    if config.at_max_deliver != "advisory":
        return True
    if kind not in ACKS:
        return False
    consumer, part = lease["consumer"], lease["partition"]
    if not any(r["partition"] == part for r in (*tx.list_leases(consumer), *tx.list_retries(consumer))):
        return True
    first = tx.event_window(consumer, start, 1, part)
    return bool(first) and first[0]["seq"] == lease["seq"] and all(r["seq"] > lease["seq"] for r in held)


class Interest:
    """What each consumer still needs, read once from ``tx`` (JetStream's
    ``needAck``): an event past its start, and either past its partition's
    checkpoint and not acknowledged, terminated or dropped there, or below it
    with a dead letter (a max-deliveries advisory keeps the message in the
    stream)."""

    def __init__(self, tx: Any) -> None:
        self.consumers = []
        for c in tx.list_lease_consumers():
            name = c["consumer"]
            self.consumers.append(
                (
                    c["start_seq"],
                    {cp["partition"]: cp["seq"] for cp in tx.list_checkpoints(name)},
                    {r["event_id"] for r in tx.list_resolutions(name) if r["kind"] in DONE_WITH},
                    {d["event_id"] for d in tx.list_dead_letters(name)},
                )
            )

    def needed(self, event: dict) -> bool:
        """Whether any consumer still needs ``event``."""
        seq, eid = event["seq"], event["event_id"]
        for start, cps, done, dead in self.consumers:
            if seq <= start:
                continue
            if seq <= cps.get(event["partition"], -1):
                if eid in dead:
                    return True
            elif eid not in done:
                return True
        return False


def remove_unneeded(tx: Any, events: list[dict]) -> list[dict]:
    """Interest retention, in ``tx``: delete each of ``events`` that no consumer
    needs any more; returns the deleted ones, in seq order. No consumer holds a
    lease or a retry of one; a consumer's resolution of one past its checkpoint
    stays, standing in for the event, so that the checkpoint passes it once
    every earlier event is resolved — as nats-server's ack floor passes the
    messages an interest stream removed (``UpdateAcks`` reads only the pending
    list)."""
    interest = Interest(tx)
    gone = [ev for ev in sorted(events, key=lambda ev: ev["seq"]) if not interest.needed(ev)]
    for ev in gone:
        tx.delete_event(ev["seq"])
    return gone


def forget(tx: Any, event_ids: list[str]) -> None:
    """Retention without a fence deleted ``event_ids``: every consumer's lease,
    retry and resolution of them goes (a worker's ack of one then finds no
    lease), so nothing waits for an event the log no longer has."""
    if not event_ids:
        return
    for c in tx.list_lease_consumers():
        name = c["consumer"]
        for eid in event_ids:
            tx.delete_lease(name, eid)
            tx.delete_retry(name, eid)
            tx.delete_resolution(name, eid)
