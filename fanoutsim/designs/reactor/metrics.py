"""What each metric of the reactor design means (``Design.metrics``): the
``# HELP`` and ``# TYPE`` lines of ``GET /metrics`` and the documentation's
metrics page. The steps count them; :meth:`~fanoutsim.designs.reactor.host.ReactorHost.metrics`
adds the gauges, read from the tables when asked."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from typing import Any

from fanoutsim.kernel.metrics import Help, series
from fanoutsim.kernel.timeutil import US

FIRE_TO_DISPATCH = "fanoutsim_reactor_fire_to_dispatch_seconds"
WATERMARK_LAG = "fanoutsim_reactor_watermark_lag_seconds"

METRICS: dict[str, Help] = {
    "fanoutsim_reactor_firings_total": Help(
        "counter",
        "Firings written to reactor_firings (the durable log), by reactor and by the computation graph "
        "that fired (the reactor's own name when none).",
    ),
    "fanoutsim_reactor_graph_errors_total": Help(
        "counter",
        "In-process computation-graph calls that raised; the firing is still written to the log.",
    ),
    "fanoutsim_reactor_poll_queries_total": Help(
        "counter",
        "Queries the poll loop sent: one firings fetch per subscription per tick, counted also when "
        "fanoutsim knew the fetch would find nothing (the real loop sends it): the database load.",
    ),
    "fanoutsim_reactor_predicate_errors_total": Help(
        "counter",
        "CEL filter evaluations that failed or gave no bool, by reactor; what followed is "
        "predicate_error_policy's (skip: counted as false; hold: the watermark waits).",
    ),
    "fanoutsim_reactor_predicate_dead_letters_total": Help(
        "counter",
        "Firings dead-lettered by the hold policy: the predicate_error_limit-th error in a row on one "
        "firing moved the watermark past it and marked the subscription degraded.",
    ),
    "fanoutsim_reactor_dispatch_failures_total": Help(
        "counter",
        "Workflow execution inserts that failed at dispatch, by reactor (held and retried next tick, "
        "or passed, as dispatch_failure_policy says).",
    ),
    "fanoutsim_reactor_firings_pruned_total": Help(
        "counter", "Firings deleted by the prune loop (older than reactor_firings_retention)."
    ),
    "fanoutsim_reactor_firings_retained": Help("gauge", "Firings in reactor_firings now, read from the table."),
    "fanoutsim_executions_requeued_total": Help(
        "counter",
        "Workflow executions a restarted runner found claimed and unfinished and set back to pending "
        "(they run again: workflows should be idempotent).",
    ),
    "fanoutsim_trigger_subscriber_failures_total": Help(
        "counter",
        "Trigger-name fan-out dispatches whose execution insert failed, by trigger and by the "
        "subscriber's role (primary or secondary).",
    ),
    FIRE_TO_DISPATCH: Help(
        "histogram",
        "Seconds from a firing's fired_at to the insert of its workflow execution by a subscription's "
        "poll (one observation per execution dispatched, a repeat after a crash included), by reactor.",
    ),
    WATERMARK_LAG: Help(
        "gauge",
        "Seconds a subscription's watermark lags, as fanoutsim status and the report give watermark_lag_s: "
        "the age of the oldest retained firing of its reactor and tenant that it has not read yet "
        "(now - its fired_at), 0 when it has read every one; below the poll interval while it keeps up.",
    ),
}


def watermark_lags(
    subscriptions: Iterable[dict[str, Any]], firings: Iterable[dict[str, Any]], now_us: int
) -> dict[str, float]:
    """:data:`WATERMARK_LAG` of each subscription at ``now_us``, over the retained
    ``firings``: the one definition (:func:`watermark_lag_us`) that
    the report, ``status`` and the figure use too."""
    streams: dict[tuple[str, str], list[int]] = {}
    for f in firings:
        streams.setdefault((f["reactor_name"], f["tenant_id"]), []).append(f["fired_at"])
    for stamps in streams.values():
        stamps.sort()
    return {
        series(WATERMARK_LAG, reactor=s["reactor_name"], workflow=s["workflow_name"], tenant=s["tenant_id"]): (
            watermark_lag_us(now_us, s["last_seen_fired_at"], streams.get((s["reactor_name"], s["tenant_id"]), [])) / US
        )
        for s in subscriptions
    }


def watermark_lag_us(now_us: int, watermark_us: int | None, fired_us: Sequence[int]) -> int:
    """The watermark lag at ``now_us`` (µs; the definition is
    :data:`~fanoutsim.designs.reactor.analysis.lag.WATERMARK_LAG`) of a
    subscription whose watermark is ``watermark_us`` (None: it never moved, so
    every firing is unread), over its stream's ``fired_at`` stamps
    ``fired_us``, sorted, each visible by now."""
    first_unread = 0 if watermark_us is None else bisect_right(fired_us, watermark_us)
    if first_unread >= len(fired_us):
        return 0
    return max(int(now_us) - int(fired_us[first_unread]), 0)
