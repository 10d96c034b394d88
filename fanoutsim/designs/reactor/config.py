"""SchedulerConfig: the knobs of the reactor -> workflow subscription design.

The first four fields and their defaults are the real system's (seed 001's
configuration table). The policy fields choose between the behaviours that the
seeds and the shipped code document differently, so a notebook can show each:

``prune_policy``
    ``"ttl"`` deletes firings older than the retention whatever the watermarks
    say (as shipped: the TTL gotcha). ``"conservative"`` (seed 000) also
    requires every enabled subscription of the firing's reactor and tenant to
    have a watermark at or past it, so a never-polled subscription holds its
    reactor's log open.
``predicate_error_policy``
    ``"skip"``: an error or a non-bool result counts as false, the watermark
    advances (seed 001). ``"hold"``: the watermark stays and the error is
    counted against that firing; the ``predicate_error_limit``-th consecutive
    error on the same firing dead-letters it (advance, mark the subscription
    degraded).
``predicate_error_count_after_dead_letter``
    What the dead letter leaves in the subscription's stored
    ``predicate_error_count`` under ``hold``. ``"reset"`` (Cloacina's code:
    ``mark_predicate_degraded`` writes 0, so the next firing starts with a
    full budget of ``predicate_error_limit`` errors). ``"keep"``: the count
    stays at the limit, as fanoutsim stored it before. The seeds are silent on
    this (seed 001 knows only ``skip``); either way the next error on
    another firing counts from 1, so what differs is the stored row (what
    ``subscriptions()``, ``explain`` and ``status`` show) and a dead-lettered
    firing read again (by a second poller), which ``keep`` dead-letters at
    its first error and ``reset`` retries ``predicate_error_limit`` times.
``last_predicate_error_text``
    How much of an error's text the subscription's ``last_predicate_error``
    keeps. ``"truncated"`` (Cloacina's code, ``truncate_predicate_text``): a
    text over 240 characters keeps its first 240 and gets the marker
    ``…[truncated]`` after them (the marker is not counted in the 240: the
    stored text is at most 252 characters), cut between characters (code
    points), never inside one. ``"whole"``: the whole text, as fanoutsim
    stored it before; the seeds are silent on it. The trace keeps the whole
    text either way.
``dispatch_failure_policy``
    ``"hold"``: a failed execution insert stops that subscription's drain for
    the tick and keeps its watermark (retried next tick, as shipped).
    ``"advance"``: log it and move past the firing (seed 000's wording).
``watermark_commit``
    ``"per_firing"``: each dispatch and each watermark update is its own
    transaction, as the real code does. ``"per_batch"``: one watermark commit
    per subscription batch (seed 000's "commit the watermark update").
    ``"atomic"``: the execution insert and the watermark move in one
    transaction per firing, so a crash cannot split them.

``watermark``
    How a subscription's cursor reads the log. ``"fired_at"`` (as shipped):
    ``fired_at > last_seen_fired_at``, which loses the second of two firings
    that share a timestamp when a batch ends between them, and any firing that
    becomes visible below the watermark (a late commit, a lagging writer
    clock). ``"fired_at_id"``: the compound cursor ``(fired_at, id) >
    (last_seen_fired_at, last_seen_firing_id)``, which closes the tie holes.
    ``"settled"``: the compound cursor, reading only firings with ``fired_at``
    at least ``watermark_settle`` seconds old, which also closes the
    late-visibility hole for commits and clock lags shorter than that — at the
    price of that much latency.
``reactor_firings_prune_chunk``
    The prune loop deletes in chunks of this many rows, each its own
    transaction, so a crash mid-prune leaves the earlier chunks deleted.

The executor fields drive the claim-and-run half of the latency budget.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from fanoutsim.kernel.validate import duration, is_whole, plain_fields

POLICIES: dict[str, tuple[str, ...]] = {
    "prune_policy": ("ttl", "conservative"),
    "predicate_error_policy": ("skip", "hold"),
    "predicate_error_count_after_dead_letter": ("reset", "keep"),
    "last_predicate_error_text": ("truncated", "whole"),
    "dispatch_failure_policy": ("hold", "advance"),
    "watermark_commit": ("per_firing", "per_batch", "atomic"),
    "watermark": ("fired_at", "fired_at_id", "settled"),
}
_POSITIVE = (
    "reactor_poll_interval",
    "reactor_firings_prune_interval",
    "executor_poll_interval",
)
_NON_NEGATIVE = ("reactor_firings_retention", "watermark_settle")
_AT_LEAST_ONE = ("reactor_poll_batch_limit", "predicate_error_limit", "executor_workers", "reactor_firings_prune_chunk")


@dataclass(frozen=True)
class SchedulerConfig:
    reactor_poll_interval: float = 1.0
    reactor_poll_batch_limit: int = 100
    reactor_firings_prune_interval: float = 3600.0
    reactor_firings_retention: float = 604800.0
    prune_policy: str = "ttl"
    predicate_error_policy: str = "skip"
    predicate_error_limit: int = 5
    predicate_error_count_after_dead_letter: str = "reset"
    last_predicate_error_text: str = "truncated"
    dispatch_failure_policy: str = "hold"
    watermark_commit: str = "per_firing"
    watermark: str = "fired_at"
    watermark_settle: float = 5.0
    reactor_firings_prune_chunk: int = 1000
    executor_poll_interval: float = 0.1
    executor_workers: int = 4

    def __post_init__(self) -> None:
        plain_fields(self)  # NumPy numbers kept as Python's
        for name in _POSITIVE:  # at least the clock's unit: a shorter interval never moves the clock
            duration(getattr(self, name), name, positive=True)
        for name in _NON_NEGATIVE:
            duration(getattr(self, name), name)
        for name in _AT_LEAST_ONE:
            value = getattr(self, name)
            if not is_whole(value) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        for name, allowed in POLICIES.items():
            value = getattr(self, name)
            if value not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_dict(cls, values: dict[str, Any], *, where: str = "config") -> SchedulerConfig:
        """Build from a mapping, naming any unknown key and the allowed ones."""
        unknown = sorted(set(values) - set(cls.field_names()))
        if unknown:
            raise ValueError(
                f"{where}: unknown setting(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(cls.field_names())}"
            )
        return cls(**values)
