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
"""

from __future__ import annotations

from dataclasses import dataclass

from fanoutsim.designs.leases.faults import FAULTS
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


def check_batch(value) -> int:
    """A ``batch_limit``: an integer from 1 through 8, or a ValueError naming the range."""
    return _int_in(value, "batch_limit", *BATCH_RANGE)


def check_nack_delay(value, max_retry_delay: float = MAX_RETRY_DELAY) -> float:
    """A client's ``nack_delay``: what its nacks will ask for, checked when the
    client is made (not at its first nack); scenario files use it too, so the
    two say the same. Returns it as float seconds; one outside 0 through
    ``max_retry_delay`` (or between 0 and 1 µs) raises ValueError naming the range."""
    return _seconds(value, "nack_delay", 0.0, max_retry_delay, note="leases.max_retry_delay")


def check_limits(batch_limit, in_flight_limit, lease_seconds) -> dict:
    """The three delivery limits, checked against RiffDB's ranges (batch and
    in-flight limits 1 through 8, a lease 5 through 900 seconds); returns them as
    the consumer table's columns. One outside its range raises ValueError naming
    the field and the range."""
    return {
        "batch_limit": check_batch(batch_limit),
        "in_flight_limit": _int_in(in_flight_limit, "in_flight_limit", *IN_FLIGHT_RANGE),
        "lease_seconds": _seconds(lease_seconds, "lease_seconds", *LEASE_RANGE),
    }


# the fault kinds the leases runtimes act on (a plan with another is refused): its faults module's
LEASE_FAULT_KINDS = FAULTS.kind_names

# the scenario file's table of the LeaseConfig fields (a sweep grid key naming one is set there)
TABLE = "leases"


@dataclass(frozen=True)
class LeaseConfig:
    """What the seed leaves open: how events are retained, how often retention and
    recovery run, the largest nack delay, and how a partition's events are leased
    (see the module's text for ``partition_order``). A scenario file's ``[leases]``
    table sets the same fields. Every field is checked when the config is made: a
    bad value raises ValueError naming the field and what is allowed.

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
    """

    retention: float = 7 * 86400.0  # events older than this may be pruned (never past a fence)
    retention_interval: float = 3600.0  # how often the retention step runs
    recovery_interval: float = 1.0  # how often recovery expires leases
    max_retry_delay: float = MAX_RETRY_DELAY  # the largest delay a nack may ask for (<= 3600 s)
    partition_order: str = "riffdb"  # "riffdb" (RiffDB's code) or "head_of_line" (the seed's reading)

    def __post_init__(self):
        plain_fields(self)  # NumPy numbers kept as Python's
        for name in ("retention", "retention_interval", "recovery_interval", "max_retry_delay"):
            duration(getattr(self, name), name, positive=True)  # at least the clock's unit
        if self.max_retry_delay > MAX_RETRY_DELAY:
            raise ValueError(
                f"max_retry_delay must be at most {MAX_RETRY_DELAY:g} seconds (RiffDB's bound on "
                f"a nack's retry delay), got {self.max_retry_delay!r}"
            )
        if self.partition_order not in PARTITION_ORDERS:
            raise ValueError(
                f"partition_order must be one of {', '.join(map(repr, PARTITION_ORDERS))}, got {self.partition_order!r}"
            )

    @property
    def window(self) -> int:
        """Events past a partition's checkpoint that a pull may lease: 65 under
        RiffDB's rule, 1 (the head) under head-of-line."""
        return RESOLUTION_WINDOW if self.partition_order == "riffdb" else 1

    def check_delay(self, delay) -> float:
        """A nack's ``delay`` in seconds, 0 through :attr:`max_retry_delay` (and 0 or
        at least 1 µs, the clock's unit); else a ValueError naming the range."""
        return _seconds(delay, "delay", 0.0, self.max_retry_delay)
