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
    """The reactor runner's knobs (``fanoutsim.ReactorConfig`` is the same class):
    the real system's four, then the policies the seeds and the shipped code
    document differently (the module's text tells each at length), then the
    executor's. A scenario file's ``[config]`` table sets the same fields. Every
    field is checked when the config is made: a bad value raises ValueError naming
    the field and what is allowed (:meth:`from_dict` also names an unknown key).

    Attributes
    ----------
    reactor_poll_interval : float
        How often the poll loop reads each subscription's firings past its
        watermark: a firing waits for the next poll, uniform on [0, P).

        :Unit: seconds
        :Default: ``1.0``
        :Allowed: a finite number >= 1e-06 (1 µs, the clock's unit)
    reactor_poll_batch_limit : int
        The most firings one poll fetches per subscription; a stream faster than
        batch limit / poll interval falls behind (the knee).

        :Unit: firings
        :Default: ``100``
        :Allowed: an integer >= 1
    reactor_firings_prune_interval : float
        How often the prune loop runs.

        :Unit: seconds
        :Default: ``3600.0`` (an hour)
        :Allowed: a finite number >= 1e-06 (1 µs, the clock's unit)
    reactor_firings_retention : float
        How old a firing must be (by ``fired_at``) before the prune loop deletes it
        (``prune_policy`` says whether the watermarks hold it back).

        :Unit: seconds
        :Default: ``604800.0`` (7 days)
        :Allowed: 0, or a finite number >= 1e-06 (1 µs, the clock's unit)
    prune_policy : str
        ``"ttl"``: the prune deletes firings older than the retention whatever the
        watermarks say (as shipped: a subscription behind loses them);
        ``"conservative"``: only those every enabled subscription of the firing's
        reactor and tenant has passed (seed 000).

        :Unit: none (a name)
        :Default: ``"ttl"``
        :Allowed: ``"ttl"`` or ``"conservative"``
    predicate_error_policy : str
        What a filter that fails on a firing (an error, or a result that is not a
        bool) does: ``"skip"`` counts it as false and the watermark moves on (seed
        001); ``"hold"`` keeps the watermark on the firing and evaluates it again at
        each poll, up to ``predicate_error_limit`` errors in a row.

        :Unit: none (a name)
        :Default: ``"skip"``
        :Allowed: ``"skip"`` or ``"hold"``
    predicate_error_limit : int
        With ``predicate_error_policy="hold"``: the error in a row on one firing that
        dead-letters it (the watermark moves past it, the subscription is marked
        degraded until a clean evaluation).

        :Unit: errors
        :Default: ``5``
        :Allowed: an integer >= 1
    predicate_error_count_after_dead_letter : str
        With ``predicate_error_policy="hold"``: the subscription's stored count of
        errors in a row once the limit-th dead-letters a firing. ``"reset"``
        (Cloacina's code, ``mark_predicate_degraded``): 0, so the next firing starts
        a fresh budget; ``"keep"``: the limit stays stored (fanoutsim's earlier
        reading; the seeds say nothing of it).

        :Unit: none (a name)
        :Default: ``"reset"``
        :Allowed: ``"reset"`` or ``"keep"``
    last_predicate_error_text : str
        How the subscription stores its last predicate error's text: ``"truncated"``
        (Cloacina's ``truncate_predicate_text``: the first 240 characters, then
        ``…[truncated]``, cut on a character boundary) or ``"whole"``. The trace
        keeps the whole text either way.

        :Unit: none (a name)
        :Default: ``"truncated"``
        :Allowed: ``"truncated"`` or ``"whole"``
    dispatch_failure_policy : str
        What a failed execution insert does: ``"hold"`` stops that subscription's
        drain for the tick and keeps its watermark (retried next tick, as shipped);
        ``"advance"`` logs it and moves past the firing (seed 000's wording; the
        firing is lost).

        :Unit: none (a name)
        :Default: ``"hold"``
        :Allowed: ``"hold"`` or ``"advance"``
    watermark_commit : str
        How dispatches and watermark moves are committed: ``"per_firing"`` (each its
        own transaction, as the real code does), ``"per_batch"`` (one watermark
        commit per subscription batch) or ``"atomic"`` (the insert and the move in
        one transaction per firing: a crash cannot split them).

        :Unit: none (a name)
        :Default: ``"per_firing"``
        :Allowed: ``"per_firing"``, ``"per_batch"`` or ``"atomic"``
    watermark : str
        How a subscription's cursor reads the log: ``"fired_at"`` (as shipped:
        ``fired_at > last_seen_fired_at``, with its holes for ties and late
        commits), ``"fired_at_id"`` (the compound cursor ``(fired_at, id)``: no tie
        holes) or ``"settled"`` (the compound cursor over firings at least
        ``watermark_settle`` seconds old: no late-visibility hole shorter than that).

        :Unit: none (a name)
        :Default: ``"fired_at"``
        :Allowed: ``"fired_at"``, ``"fired_at_id"`` or ``"settled"``
    watermark_settle : float
        With ``watermark="settled"``: how old a firing's ``fired_at`` must be before
        the poll reads it — that much latency, for commits and clock lags shorter.

        :Unit: seconds
        :Default: ``5.0``
        :Allowed: 0, or a finite number >= 1e-06 (1 µs, the clock's unit)
    reactor_firings_prune_chunk : int
        The prune deletes in chunks of this many rows, each its own transaction (a
        crash mid-prune leaves the earlier chunks deleted).

        :Unit: rows
        :Default: ``1000``
        :Allowed: an integer >= 1
    executor_poll_interval : float
        How often the executor claims pending executions.

        :Unit: seconds
        :Default: ``0.1``
        :Allowed: a finite number >= 1e-06 (1 µs, the clock's unit)
    executor_workers : int
        How many workflow bodies the executor runs at once (it claims up to the
        free workers at each tick).

        :Unit: workers
        :Default: ``4``
        :Allowed: an integer >= 1
    """

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
        """Every field by name, as a scenario file's ``[config]`` table holds them."""
        return asdict(self)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The fields' names, in order."""
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
