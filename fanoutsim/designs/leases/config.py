"""The knobs of the leased-consumer design, and the limits the seed fixes.

RiffDB (seed 003) fixes a subscription's delivery limits at compile time:
"Batch and in-flight limits are each 1 through 8. Leases are 5 through 900
seconds." :func:`check_limits` enforces exactly those ranges and names the
field and the allowed range when a value is outside them. The tenth failed
attempt dead-letters an event (:data:`MAX_ATTEMPTS`).

:class:`LeaseConfig` holds what the seed leaves open: how long events are
retained, how often retention and recovery (lease expiry) run, and the
largest retry delay a ``nack`` may ask for.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from fanoutsim.kernel.names import check_name  # noqa: F401  (a name of this module too)

BATCH_RANGE = (1, 8)
IN_FLIGHT_RANGE = (1, 8)
LEASE_RANGE = (5.0, 900.0)       # seconds
MAX_ATTEMPTS = 10                # the 10th failed attempt is retained as a dead letter
DEFAULT_LIMITS = {"batch_limit": 4, "in_flight_limit": 4, "lease_seconds": 60.0}


def _int_in(value, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{field} must be an integer from {low} through {high}, got {value!r}")
    return value


def _seconds(value, field: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not low <= value <= high:
        raise ValueError(f"{field} must be {low:g} through {high:g} seconds, got {value!r}")
    return float(value)


def check_batch(value) -> int:
    return _int_in(value, "batch_limit", *BATCH_RANGE)


def check_limits(batch_limit, in_flight_limit, lease_seconds) -> dict:
    """The three delivery limits, checked; returns them as table columns."""
    return {"batch_limit": check_batch(batch_limit),
            "in_flight_limit": _int_in(in_flight_limit, "in_flight_limit", *IN_FLIGHT_RANGE),
            "lease_seconds": _seconds(lease_seconds, "lease_seconds", *LEASE_RANGE)}


@dataclass(frozen=True)
class LeaseConfig:
    retention: float = 7 * 86400.0       # events older than this may be pruned (never past a fence)
    retention_interval: float = 3600.0   # how often the retention step runs
    recovery_interval: float = 1.0       # how often recovery expires leases
    max_retry_delay: float = 900.0       # the largest delay a nack may ask for

    def __post_init__(self):
        for name in ("retention", "retention_interval", "recovery_interval", "max_retry_delay"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"{name} must be a finite number of seconds > 0, got {v!r}")

    def check_delay(self, delay) -> float:
        return _seconds(delay, "delay", 0.0, self.max_retry_delay)
