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
* :func:`needed` / :func:`remove_unneeded` — JetStream's interest retention:
  an event no consumer still needs is removed (``needAck``).
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


def needed(tx: Any, consumer: dict, event: dict) -> bool:
    """Whether ``consumer`` (its row) still needs ``event`` (JetStream's
    ``needAck``): past its start, and either past its partition's checkpoint
    and not acknowledged, terminated or dropped there, or below it with a dead
    letter (a max-deliveries advisory keeps the message in the stream)."""
    name, seq = consumer["consumer"], event["seq"]
    if seq <= consumer["start_seq"]:
        return False
    cp = next((c for c in tx.list_checkpoints(name) if c["partition"] == event["partition"]), None)
    if cp is not None and seq <= cp["seq"]:
        return any(d["event_id"] == event["event_id"] for d in tx.list_dead_letters(name))
    done = {r["event_id"]: r["kind"] for r in tx.list_resolutions(name, event["partition"])}
    return done.get(event["event_id"]) not in DONE_WITH


def remove_unneeded(tx: Any, events: list[dict]) -> list[dict]:
    """Interest retention, in ``tx``: delete each of ``events`` that no consumer
    needs any more (with every consumer's resolution of it: nothing is left to
    hold past a checkpoint); returns the deleted ones, in seq order."""
    consumers = tx.list_lease_consumers()
    gone = []
    for ev in sorted(events, key=lambda ev: ev["seq"]):
        if any(needed(tx, c, ev) for c in consumers):
            continue
        tx.delete_event(ev["seq"])
        for c in consumers:
            tx.delete_resolution(c["consumer"], ev["event_id"])
        gone.append(ev)
    return gone
