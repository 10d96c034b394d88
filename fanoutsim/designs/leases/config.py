"""The knobs of the leased-consumer design, and the limits RiffDB fixes.

RiffDB (seed 003) fixes a subscription's delivery limits at compile time:
"Batch and in-flight limits are each 1 through 8. Leases are 5 through 900
seconds" (the code agrees: ``ReactiveDeliveryLimitsV1`` in
``riffdb-query-ir/src/reactive.rs``). :func:`check_limits` enforces exactly
those ranges and names the field and the allowed range when a value is
outside them. The tenth failed attempt dead-letters an event
(:data:`MAX_ATTEMPTS`).

Bounds read from RiffDB's code, not the seed:

* :data:`RESOLUTION_WINDOW` (65, ``MAX_CONSUMER_EVENT_WINDOW_ITEMS`` in
  ``riffdb-service/src/consumer_operations.rs``): a pull, an ack and a nack
  read at most this many events past a partition's checkpoint, so no lease is
  granted further ahead than that;
* :data:`MAX_SPARSE_RESOLUTIONS` (64, ``MAX_CONSUMER_SPARSE_RESOLUTIONS`` in
  ``riffdb-storage-api/src/consumer.rs``): acknowledged or dead-lettered events
  held past the checkpoint, per partition (the window's first event is the one
  still unresolved, so the window keeps them within the cap);
* :data:`MAX_RETRY_DELAY` (3600 s, ``MAX_CONSUMER_RETRY_DELAY``): the largest
  delay a nack may ask for.

:class:`LeaseConfig` holds what the seed leaves open: how events are
retained, how often retention and recovery run, the largest nack delay (at
most :data:`MAX_RETRY_DELAY`), and how a partition's events are leased:

``partition_order = "riffdb"`` (the default: RiffDB's code)
    Leased in partition order but not one at a time: a pull leases every
    eligible event of a partition's resolution window, oldest first, up to the
    batch and in-flight limits. An ack of a later event is held as a *sparse
    resolution* and the checkpoint jumps past it once every earlier event is
    resolved. A retrying event waits for its retry time without holding a
    lease, so it does not use the in-flight budget and does not stop the
    events behind it. This is what ``ordered_delivery_retry_checkpoint_seek_
    and_retire_survive_reopen`` (``tests/durable_event_consumers.rs``) shows.
``partition_order = "head_of_line"`` (the seed's reading, fanoutsim's first model)
    "Leased in partition order" read as one lease per partition, always on
    its first unresolved event: the window is that one event, so a retrying
    event holds its partition until it is acknowledged or dead-lettered.

The brokers' rules (issue 39)
=============================

The systems people run for leased, acknowledged consumption are close
cousins of RiffDB's: NATS JetStream's durable pull consumers and Redis
Streams' consumer groups. Each rule where they differ from RiffDB is one
field of :class:`LeaseConfig`; every default is RiffDB's, and
``LeaseConfig.preset("nats-jetstream-2.15")`` / ``preset("redis-streams-6.2")``
set a broker's (:mod:`~fanoutsim.designs.leases.presets`: each value with its source). The sources
read: nats-server ``server/consumer.go`` and ``server/filestore.go`` (main at
2.15.0-dev, commit 1787eee; the issue's runs used 2.15.1), nats.py ``nats/js/api.py``
(``ConsumerConfig``: field names and units) and Redis 6.2.14
``src/t_stream.c``.

``limits``
    ``"riffdb"`` (the default): a consumer's batch and in-flight limits are
    1 through 8 and its lease 5 through 900 s, RiffDB's compiled bounds, with
    RiffDB's window of 65 events past a checkpoint and 64 sparse
    resolutions. ``"open"``: any batch up to :data:`OPEN_BATCH_RANGE`'s top,
    any in-flight limit up to :data:`OPEN_IN_FLIGHT_RANGE`'s (JetStream's
    ``MaxAckPending`` defaults to 1,000, ``JsDefaultMaxAckPending``; a Redis
    PEL has no bound), any lease from 1 ms (JetStream's ``AckWait`` is any
    duration, ``JsAckWaitDefault`` 30 s), nack delays up to
    :data:`OPEN_MAX_RETRY_DELAY`, and the window and sparse resolutions
    bounded only by :data:`OPEN_WINDOW` (JetStream keeps every ack above its
    ack floor).
``batch_limit``, ``in_flight_limit``, ``lease_seconds``
    A new consumer's limits when ``register_consumer`` (or a scenario's
    ``[[consumers]]``) gives none: 4, 4 and 60 s, the model's defaults; a
    preset sets the broker's (JetStream: a pull's batch, ``MaxAckPending``,
    ``AckWait``; Redis: ``COUNT``, none, XAUTOCLAIM's ``min-idle-time``).
``max_deliver``
    How many deliveries (attempts) an event gets: 10 (:data:`MAX_ATTEMPTS`,
    RiffDB's "tenth failed attempt"); ``-1``: no limit (JetStream's default,
    ``setConsumerConfigDefaults`` sets ``MaxDeliver = -1``; Redis has none).
``max_deliver_rule``
    ``"failures"`` (RiffDB): the ``max_deliver``-th failed attempt is final
    at once, whether a nack, a lease expiry or a restore failed it.
    ``"deliveries"`` (JetStream): ``MaxDeliver`` counts deliveries, and the
    limit acts when the next delivery would be made: at the expiry of the
    last allowed delivery's lease (``checkPending`` -> ``hasMaxDeliveries``),
    or, after a nack, when its retry comes due and a pull would lease it
    (``getNextMsg``: ``dc > o.maxdc``).
``at_max_deliver``
    What happens at the limit: ``"dead_letter"`` (RiffDB: a dead letter
    kept with a copy of the payload; the checkpoint passes it at once) or
    ``"drop"`` (the consumer forgets it: no row; passed at once too), or
    ``"advisory"`` (JetStream: the
    ``$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES`` advisory,
    ``notifyDeliveryExceeded``; the message is kept in the stream, ``needAck``
    reads ``rdc``: a dead letter row without a copy of the payload). Under
    ``"advisory"`` the checkpoint is the ack floor nats-server reports
    (``consumer_info``'s, read from the consumer store: ``server/filestore.go``,
    ``consumerFileStore.UpdateAcks``; ``consumer.go``'s ``moveAckFloor`` at
    the limit moves only the in-memory ``o.asflr``), and it moves only at an
    ack or a term: to the last delivered message when nothing else is pending
    (leased or waiting to retry), or, when the acked message is the first
    past the floor (``dseq == AckFloor.Consumer+1``), to just below the first
    message still pending. A message past the limit left the pending list
    (``UpdateDelivered`` with ``dc > maxdc``), so such an ack passes it; the
    limit itself, a nak and an expiry never move the floor (nats-server 2.15.1:
    floor 1 at the limit with message 2 poisoned, 5 after the next ack).
``backoff``
    JetStream's ``BackOff``: seconds, the lease (ack wait) of each
    delivery — delivery *n* gets ``backoff[min(n - 1, len - 1)]``, and the
    first entry replaces ``lease_seconds`` (``setConsumerConfigDefaults``:
    "BackOff ... will override the AckWait"); an expired delivery is
    redelivered at once. ``()`` (the default): every lease is the
    consumer's ``lease_seconds``. A list longer than ``max_deliver`` is
    refused, as nats-server refuses it (``NewJSConsumerMaxDeliverBackoffError``).
``nack_delay_rule``
    When a nack's retry comes due: ``"as_asked"`` (RiffDB: its delay after
    the nack) or ``"plus_backoff"`` (nats-server: ``processNak`` sets the
    pending timestamp to ``now - AckWait + delay`` and ``checkPending``
    measures it against the delivery's ``BackOff`` entry, so with a
    ``backoff`` list the retry is due ``delay + backoff[dc - 1] - backoff[0]``
    after the nak; without one, as asked).
``late_ack``
    ``"refuse"`` (RiffDB): an ack at or after the lease's expiry fails
    closed (``expired``), and an ack with a token of an earlier delivery fails
    closed (``wrong_token``/``no_lease``). ``"honour"`` (JetStream, Redis): the
    broker knows the message by its sequence, not by which delivery is
    acking: ``processAckMsg`` acks whatever is in ``o.pending[sseq]``, and
    ``XACK`` removes the PEL entry whoever holds it. A late ack resolves
    the event while it is unresolved — leased again, or waiting to be.
``lease_expiry``
    ``"recovery"`` (RiffDB, JetStream): a lease expires at its time, and
    recovery (or the broker's timer) makes the event eligible again.
    ``"claim"`` (Redis): nothing expires by itself; a pull first claims its
    consumer's leases idle for at least their lease
    (``XAUTOCLAIM ... min-idle-time``), up to its batch, each claim a new
    delivery (``nack->delivery_count++``) — until then the holder's ack
    stands.
``expiry_timer``
    When expired leases are found: ``"interval"`` (the model's RiffDB node:
    recovery every ``recovery_interval``, and inside a pull) or
    ``"deadline"`` (nats-server: the consumer's pending timer fires at the
    next deadline, ``checkPending`` -> ``resetPtmr(next)``; the model's
    recovery wakes at the earliest expiry, at most ``recovery_interval`` on).
    nats-server adds ``ackWaitDelay`` (1 ms) to each timer; the model does not.
``retention_policy``
    ``"fence"`` (RiffDB): events older than ``retention`` are pruned, never
    past the lowest consumer's contiguous fence. ``"interest"`` (JetStream's
    ``InterestPolicy``/``WorkQueuePolicy``): an event is removed as soon as
    every consumer has acknowledged (or terminated) it, and ``retention`` is
    the stream's ``MaxAge``, which holds for no consumer; a consumer's
    resolution of a removed event stays until its checkpoint passes it, as
    the ack floor passes removed messages (``UpdateAcks`` reads only the
    pending list, never the stream). ``"limits"``
    (JetStream's ``LimitsPolicy``, Redis's ``XTRIM MINID``): age only; no
    consumer holds anything back.
``deliver_cost``, ``ack_cost``
    Costs measured on a real broker (seconds, or a law: empirical from the
    harness's measurement): a lease reaches its worker ``deliver_cost`` after
    the broker granted it (publish -> delivered, the hand-off), and an ack
    lands ``ack_cost`` after the worker's effect (the ack's round trip).
    None (the default): no cost, no draw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fanoutsim.designs.leases.faults import FAULTS
from fanoutsim.kernel.dist import Dist, parse_dist
from fanoutsim.kernel.names import check_name  # noqa: F401  (a name of this module too)
from fanoutsim.kernel.validate import CLOCK_UNIT, below_unit, duration, is_number, is_whole, plain_fields

BATCH_RANGE = (1, 8)
IN_FLIGHT_RANGE = (1, 8)
LEASE_RANGE = (5.0, 900.0)  # seconds
MAX_ATTEMPTS = 10  # the 10th failed attempt is retained as a dead letter
RESOLUTION_WINDOW = 65  # events past a partition's checkpoint a pull may lease
MAX_SPARSE_RESOLUTIONS = 64  # resolutions held past a partition's checkpoint
MAX_RETRY_DELAY = 3600.0  # seconds: the largest delay a nack may ask for
PARTITION_ORDERS = ("riffdb", "head_of_line")
DEFAULT_LIMITS = {"batch_limit": 4, "in_flight_limit": 4, "lease_seconds": 60.0}

# limits = "open": the brokers' (sane caps where the broker has none)
OPEN_BATCH_RANGE = (1, 10_000)
OPEN_IN_FLIGHT_RANGE = (1, 100_000)
OPEN_LEASE_RANGE = (0.001, 7 * 86400.0)  # seconds: 1 ms through a week
OPEN_MAX_RETRY_DELAY = 7 * 86400.0  # seconds: a nak delay of up to a week
OPEN_WINDOW = 1_000_000  # events past a checkpoint: leased and held resolved above it

# the brokers' rules: each field's values, RiffDB's first (the default)
LIMITS = ("riffdb", "open")
MAX_DELIVER_RULES = ("failures", "deliveries")
AT_MAX_DELIVER = ("dead_letter", "advisory", "drop")
NACK_DELAY_RULES = ("as_asked", "plus_backoff")
LATE_ACKS = ("refuse", "honour")
LEASE_EXPIRIES = ("recovery", "claim")
EXPIRY_TIMERS = ("interval", "deadline")
RETENTION_POLICIES = ("fence", "interest", "limits")
CHOICES = {
    "partition_order": PARTITION_ORDERS,
    "limits": LIMITS,
    "max_deliver_rule": MAX_DELIVER_RULES,
    "at_max_deliver": AT_MAX_DELIVER,
    "nack_delay_rule": NACK_DELAY_RULES,
    "late_ack": LATE_ACKS,
    "lease_expiry": LEASE_EXPIRIES,
    "expiry_timer": EXPIRY_TIMERS,
    "retention_policy": RETENTION_POLICIES,
}


def _int_in(value, field: str, low: int, high: int) -> int:
    if not is_whole(value) or not low <= value <= high:
        raise ValueError(f"{field} must be an integer from {low} through {high}, got {value!r}")
    return int(value)


def _seconds(value, field: str, low: float, high: float, note: str = "") -> float:
    if not is_number(value) or not low <= value <= high:
        raise ValueError(
            f"{field} must be {low:g} through {high:g} seconds{f' ({note})' if note else ''}, got {value!r}"
        )
    if low == 0 and below_unit(value):  # a delay is 0, or at least what the clock can tell from 0
        raise ValueError(
            f"{field} must be 0 or at least {CLOCK_UNIT:g} seconds (1 µs, the clock's unit), got {value!r}"
        )
    return float(value)


def ranges(limits: str = "riffdb") -> dict[str, tuple]:
    """The allowed range of each delivery limit under ``limits`` (``"riffdb"`` or ``"open"``)."""
    if limits == "open":
        return {
            "batch_limit": OPEN_BATCH_RANGE,
            "in_flight_limit": OPEN_IN_FLIGHT_RANGE,
            "lease_seconds": OPEN_LEASE_RANGE,
        }
    return {"batch_limit": BATCH_RANGE, "in_flight_limit": IN_FLIGHT_RANGE, "lease_seconds": LEASE_RANGE}


def check_batch(value, limits: str = "riffdb") -> int:
    """A ``batch_limit``: an integer in ``limits``' range (1 through 8 under RiffDB's),
    or a ValueError naming the range."""
    return _int_in(value, "batch_limit", *ranges(limits)["batch_limit"])


def check_nack_delay(value, max_retry_delay: float = MAX_RETRY_DELAY) -> float:
    """A client's ``nack_delay``: what its nacks will ask for, checked when the
    client is made (not at its first nack); scenario files use it too, so the
    two say the same. Returns it as float seconds; one outside 0 through
    ``max_retry_delay`` (or between 0 and 1 µs) raises ValueError naming the range."""
    return _seconds(value, "nack_delay", 0.0, max_retry_delay, note="leases.max_retry_delay")


def check_limits(batch_limit, in_flight_limit, lease_seconds, limits: str = "riffdb") -> dict:
    """The three delivery limits, checked against ``limits``' ranges (RiffDB's by
    default: batch and in-flight limits 1 through 8, a lease 5 through 900 seconds;
    ``"open"``: the brokers'); returns them as the consumer table's columns. One
    outside its range raises ValueError naming the field and the range."""
    r = ranges(limits)
    checked = {}
    for field, value in (("batch_limit", batch_limit), ("in_flight_limit", in_flight_limit)):
        try:
            checked[field] = _int_in(value, field, *r[field])
        except ValueError as exc:
            raise ValueError(f"{exc} ({limits_note(field, limits)})") from None
    try:
        checked["lease_seconds"] = _seconds(lease_seconds, "lease_seconds", *r["lease_seconds"])
    except ValueError as exc:
        raise ValueError(f"{exc} ({limits_note('lease_seconds', limits)})") from None
    return checked


def limits_note(field: str, limits: str = "riffdb") -> str:
    """Whose range a delivery limit's error names; under RiffDB's, what
    ``limits = 'open'`` (``[leases] limits = "open"`` in a scenario,
    ``LeaseConfig(limits="open")`` in Python) allows instead: one refused a
    short lease must learn how to ask for one."""
    if limits == "open":
        return "limits = 'open'"
    low, high = ranges("open")[field]
    unit = " seconds" if field == "lease_seconds" else ""
    return f"RiffDB's range; limits = 'open' allows {low:g} through {high:g}{unit}"


def _one_of(value, field: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{field} must be one of {', '.join(map(repr, allowed))}, got {value!r}")


def check_backoff(value, max_deliver: int = -1, limits: str = "riffdb") -> tuple[float, ...]:
    """JetStream's ``BackOff``: a list of seconds, each a lease in ``limits``'
    range (no more entries than ``max_deliver``, unless it is -1); returns it as a tuple."""
    low, high = ranges(limits)["lease_seconds"]
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise ValueError(f"backoff must be a list of seconds (each {low:g} through {high:g}), got {value!r}")
    out = tuple(value)
    for i, x in enumerate(out):
        if not is_number(x) or not low <= x <= high or not math.isfinite(x):
            raise ValueError(
                f"backoff[{i}] must be {low:g} through {high:g} seconds"
                + (" (limits = 'open')" if limits == "open" else " (RiffDB's lease range; limits = 'open' allows more)")
                + f", got {x!r}"
            )
    if max_deliver != -1 and len(out) > max_deliver:
        raise ValueError(
            f"backoff must have at most max_deliver ({max_deliver}) entries, got {len(out)} "
            "(nats-server refuses it: NewJSConsumerMaxDeliverBackoffError)"
        )
    return tuple(float(x) for x in out)


# the fault kinds the leases runtimes act on (a plan with another is refused): its faults module's
LEASE_FAULT_KINDS = FAULTS.kind_names

# the scenario file's table of the LeaseConfig fields (a sweep grid key naming one is set there)
TABLE = "leases"


@dataclass(frozen=True)
class LeaseConfig:
    """What the seed leaves open: how events are retained, how often retention and
    recovery run, the largest nack delay, and how a partition's events are leased
    (see the module's text for ``partition_order``); and the brokers' rules (the
    module's text: "The brokers' rules"), each defaulting to RiffDB's, which
    :meth:`preset` sets to a broker's. A scenario file's ``[leases]`` table sets the
    same fields. Every field is checked when the config is made: a bad value raises
    ValueError naming the field and what is allowed.

    Attributes
    ----------
    retention : float
        How long the log keeps an event: retention may prune one older than this,
        but never one a consumer still needs (past the lowest retention fence).

        :Unit: seconds
        :Default: ``604800.0`` (7 days)
        :Allowed: a finite number >= 1e-06 (1 µs, the clock's unit)
    retention_interval : float
        How often the retention step runs, pruning the events past ``retention``
        that no fence holds.

        :Unit: seconds
        :Default: ``3600.0`` (an hour)
        :Allowed: a finite number >= 1e-06
    recovery_interval : float
        How often recovery runs: each pass expires the leases whose time is up, a
        failed attempt each (a retry, or at the 10th the dead letter). A lease that
        expired is refused at its ack at once; recovery makes its event eligible
        again. A start recovers first, whatever the interval.

        :Unit: seconds
        :Default: ``1.0``
        :Allowed: a finite number >= 1e-06
    max_retry_delay : float
        The largest delay a nack may ask for (a client's ``nack_delay`` is checked
        against it when the client is registered).

        :Unit: seconds
        :Default: ``3600.0`` (RiffDB's bound, :data:`MAX_RETRY_DELAY`)
        :Allowed: a finite number from 1e-06 through 3600
    partition_order : str
        How a partition's events are leased: ``"riffdb"``, RiffDB's code (a pull
        leases every eligible event of the partition's resolution window, 65
        events, and acks past the checkpoint are held as sparse resolutions), or
        ``"head_of_line"``, the seed's reading (one lease per partition, on its
        first unresolved event; a retrying event holds its partition).

        :Unit: none (a name)
        :Default: ``"riffdb"``
        :Allowed: ``"riffdb"`` or ``"head_of_line"``
    limits : str
        Which bounds a consumer's delivery limits are checked against: RiffDB's
        compiled ones, or the brokers' wider ranges (a lease of any length, many
        messages in flight).

        :Unit: none (a name)
        :Default: ``"riffdb"``
        :Allowed: ``"riffdb"`` (batch and in-flight 1 through 8, a lease 5 through
            900 s, a nack delay up to 3600 s) or ``"open"`` (batch up to 10,000,
            in-flight up to 100,000, a lease from 0.001 s to a week)
    batch_limit : int
        A new consumer's batch limit (the most leases one pull grants) when it is
        registered without one (JetStream: a pull's batch; Redis: ``COUNT``).

        :Unit: events
        :Default: ``4``
        :Allowed: an integer in ``limits``' range (1 through 8 under RiffDB's)
    in_flight_limit : int
        A new consumer's in-flight limit (the most unresolved leases it holds) when
        it is registered without one (JetStream: ``MaxAckPending``).

        :Unit: events
        :Default: ``4``
        :Allowed: an integer in ``limits``' range (1 through 8 under RiffDB's)
    lease_seconds : float
        A new consumer's lease when it is registered without one (JetStream:
        ``AckWait``; Redis: XAUTOCLAIM's ``min-idle-time``).

        :Unit: seconds
        :Default: ``60.0``
        :Allowed: a number in ``limits``' range (5 through 900 under RiffDB's)
    max_deliver : int
        How many deliveries (attempts) an event gets before the limit acts (RiffDB:
        the tenth failed attempt; JetStream: ``MaxDeliver``).

        :Unit: deliveries
        :Default: ``10``
        :Allowed: an integer >= 1, or -1 for no limit
    max_deliver_rule : str
        How the limit counts: ``"failures"`` (RiffDB: the ``max_deliver``-th failed
        attempt is final at once) or ``"deliveries"`` (JetStream: the limit acts
        when a further delivery would be made).

        :Unit: none (a name)
        :Default: ``"failures"``
        :Allowed: ``"failures"`` or ``"deliveries"``
    at_max_deliver : str
        What happens at the limit: a dead letter with a copy of the payload
        (RiffDB), JetStream's max-deliveries advisory (the message stays in the
        stream; the checkpoint, nats-server's ack floor, passes it only at a
        later ack), or the consumer forgets it.

        :Unit: none (a name)
        :Default: ``"dead_letter"``
        :Allowed: ``"dead_letter"``, ``"advisory"`` or ``"drop"``
    backoff : tuple of float
        JetStream's ``BackOff``: the lease of each delivery in turn (delivery *n*
        gets entry ``min(n, len) - 1``; the first replaces ``lease_seconds``). Empty:
        every lease is the consumer's ``lease_seconds``.

        :Unit: seconds (each entry)
        :Default: ``()``
        :Allowed: entries in ``limits``' lease range, at most ``max_deliver`` of them
    nack_delay_rule : str
        When a nack's retry comes due: after the delay asked (RiffDB), or, as
        nats-server does with a ``backoff`` list, after ``delay + backoff[n-1] -
        backoff[0]``.

        :Unit: none (a name)
        :Default: ``"as_asked"``
        :Allowed: ``"as_asked"`` or ``"plus_backoff"``
    late_ack : str
        Whether an ack after its lease expired (or from an earlier delivery) still
        resolves the event: refused as ``expired`` (RiffDB's fail-closed rule) or
        honoured (JetStream, Redis: the broker knows the message by its sequence).

        :Unit: none (a name)
        :Default: ``"refuse"``
        :Allowed: ``"refuse"`` or ``"honour"``
    lease_expiry : str
        How a lease ends without an ack: it expires at its time (RiffDB,
        JetStream), or only when a pull claims it after it was idle for its lease
        (Redis's XAUTOCLAIM; the claim is a new delivery).

        :Unit: none (a name)
        :Default: ``"recovery"``
        :Allowed: ``"recovery"`` or ``"claim"``
    expiry_timer : str
        When expired leases are found: by recovery every ``recovery_interval``, or
        at each lease's deadline (nats-server's pending timer).

        :Unit: none (a name)
        :Default: ``"interval"``
        :Allowed: ``"interval"`` or ``"deadline"``
    retention_policy : str
        What retention keeps: events older than ``retention`` pruned but never past
        the lowest consumer's fence (RiffDB); each event removed once every
        consumer acked it (JetStream's interest and work-queue streams); or age
        only (JetStream's limits policy, Redis's ``XTRIM MINID``).

        :Unit: none (a name)
        :Default: ``"fence"``
        :Allowed: ``"fence"``, ``"interest"`` or ``"limits"``
    deliver_cost : Dist or None
        The hand-off a real broker adds: how long after the grant a lease reaches
        its worker (publish -> delivered), a number or a law (the presets read
        one measured on a real broker). None: no cost.

        :Unit: seconds
        :Default: ``None``
        :Allowed: None, a number >= 0 or a law (``fanoutsim.kernel.dist``)
    ack_cost : Dist or None
        How long after the worker's effect its ack lands (the ack's round trip), a
        number or a law. None: no cost.

        :Unit: seconds
        :Default: ``None``
        :Allowed: None, a number >= 0 or a law (``fanoutsim.kernel.dist``)
    """

    retention: float = 7 * 86400.0  # events older than this may be pruned (never past a fence)
    retention_interval: float = 3600.0  # how often the retention step runs
    recovery_interval: float = 1.0  # how often recovery expires leases
    max_retry_delay: float = MAX_RETRY_DELAY  # the largest delay a nack may ask for (<= 3600 s)
    partition_order: str = "riffdb"  # "riffdb" (RiffDB's code) or "head_of_line" (the seed's reading)
    limits: str = "riffdb"  # "riffdb": batch, in-flight 1-8, lease 5-900 s; "open": the brokers' ranges
    batch_limit: int = 4  # a new consumer's batch limit, unless it is registered with one
    in_flight_limit: int = 4  # a new consumer's in-flight limit (JetStream: MaxAckPending)
    lease_seconds: float = 60.0  # a new consumer's lease (JetStream: AckWait; Redis: min-idle-time)
    max_deliver: int = MAX_ATTEMPTS  # deliveries an event gets (-1: no limit)
    max_deliver_rule: str = "failures"  # "failures": the max_deliver-th failure is final; "deliveries": JetStream's
    at_max_deliver: str = "dead_letter"  # "dead_letter", "advisory" (JetStream) or "drop"
    backoff: tuple[float, ...] = ()  # JetStream's BackOff: seconds, the lease of delivery n (empty: lease_seconds)
    nack_delay_rule: str = "as_asked"  # "as_asked" or "plus_backoff" (nats-server: delay + backoff[n-1] - backoff[0])
    late_ack: str = "refuse"  # "refuse": an expired lease fails closed; "honour": JetStream's and Redis's
    lease_expiry: str = "recovery"  # "recovery": leases expire; "claim": only a pull's claim ends one (Redis)
    expiry_timer: str = "interval"  # "interval": recovery every recovery_interval; "deadline": at each expiry
    retention_policy: str = "fence"  # "fence" (RiffDB), "interest" (JetStream) or "limits" (age only)
    deliver_cost: Dist | None = None  # seconds from a grant to its worker (publish -> delivered), or a law
    ack_cost: Dist | None = None  # seconds from a worker's effect to its ack landing (the round trip), or a law

    @classmethod
    def preset(cls, name: str, **overrides) -> LeaseConfig:
        """A real broker's rules and defaults (``"nats-jetstream-2.15"``,
        ``"redis-streams-6.2"``), with its costs as measured where measured; see
        :mod:`fanoutsim.designs.leases.presets` for each value's source.
        ``overrides`` set any field, e.g. ``lease_seconds=1.0``."""
        from fanoutsim.designs.leases.presets import preset

        return cls(**{**preset(name).config_values(), **overrides})

    def __post_init__(self):
        plain_fields(self)  # NumPy numbers kept as Python's
        for name in ("retention", "retention_interval", "recovery_interval", "max_retry_delay"):
            duration(getattr(self, name), name, positive=True)  # at least the clock's unit
        for name, allowed in CHOICES.items():
            _one_of(getattr(self, name), name, allowed)
        top = OPEN_MAX_RETRY_DELAY if self.limits == "open" else MAX_RETRY_DELAY
        if self.max_retry_delay > top:
            raise ValueError(
                f"max_retry_delay must be at most {top:g} seconds ("
                + ("limits = 'open'" if self.limits == "open" else "RiffDB's bound on a nack's retry delay")
                + f"), got {self.max_retry_delay!r}"
            )
        check_limits(self.batch_limit, self.in_flight_limit, self.lease_seconds, self.limits)
        if not is_whole(self.max_deliver) or not (self.max_deliver == -1 or self.max_deliver >= 1):
            raise ValueError(f"max_deliver must be an integer >= 1, or -1 (no limit), got {self.max_deliver!r}")
        object.__setattr__(self, "backoff", check_backoff(self.backoff, self.max_deliver, self.limits))
        for name in ("deliver_cost", "ack_cost"):
            if getattr(self, name) is not None:  # a number, a law's table or a Dist: kept as a checked Dist
                object.__setattr__(self, name, parse_dist(getattr(self, name), name))

    @property
    def window(self) -> int:
        """Events past a partition's checkpoint that a pull may lease: 65 under
        RiffDB's rule, 1 (the head) under head-of-line, :data:`OPEN_WINDOW`
        under ``limits = "open"``."""
        if self.partition_order != "riffdb":
            return 1
        return OPEN_WINDOW if self.limits == "open" else RESOLUTION_WINDOW

    @property
    def max_sparse(self) -> int:
        """Resolutions held past a partition's checkpoint: 64, or :data:`OPEN_WINDOW` under
        ``limits = "open"`` — and under interest retention, where the resolutions of the
        events it removed are held too, beyond what the window of retained events bounds."""
        if self.limits == "open" or self.retention_policy == "interest":
            return OPEN_WINDOW
        return MAX_SPARSE_RESOLUTIONS

    def defaults(self) -> dict:
        """A new consumer's delivery limits, when it is registered without them."""
        return {
            "batch_limit": self.batch_limit,
            "in_flight_limit": self.in_flight_limit,
            "lease_seconds": self.lease_seconds,
        }

    def lease_for(self, lease_seconds: float, attempt: int) -> float:
        """The lease (seconds) of delivery ``attempt`` of a consumer whose lease is
        ``lease_seconds``: ``backoff[min(attempt - 1, len - 1)]`` with a BackOff
        list (nats-server's ``checkPending``), else ``lease_seconds``."""
        if not self.backoff:
            return lease_seconds
        return self.backoff[min(max(attempt, 1), len(self.backoff)) - 1]

    def first_lease(self, lease_seconds: float) -> float:
        """A consumer's lease as registered: ``backoff[0]`` when there is a
        BackOff list (it overrides AckWait), else ``lease_seconds``."""
        return self.backoff[0] if self.backoff else lease_seconds

    def check_delay(self, delay) -> float:
        """A nack's ``delay`` in seconds, 0 through :attr:`max_retry_delay` (and 0 or
        at least 1 µs, the clock's unit); else a ValueError naming the range."""
        return _seconds(delay, "delay", 0.0, self.max_retry_delay)
