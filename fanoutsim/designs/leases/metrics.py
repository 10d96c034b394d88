"""What each metric of the leased-consumer design means (``Design.metrics``):
the ``# HELP`` and ``# TYPE`` lines of ``GET /metrics`` and the
documentation's metrics page. The steps count them; the runtime's
``metrics()`` adds the gauges, read from the tables when asked."""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Any

from fanoutsim.kernel.metrics import Help, series
from fanoutsim.kernel.timeutil import US

PUBLISH_TO_ACK = "fanoutsim_lease_publish_to_ack_seconds"
CHECKPOINT_LAG_EVENTS = "fanoutsim_lease_checkpoint_lag_events"
CHECKPOINT_LAG = "fanoutsim_lease_checkpoint_lag_seconds"

METRICS: dict[str, Help] = {
    "fanoutsim_lease_events_published_total": Help("counter", "Events appended to the log by publish commits."),
    "fanoutsim_lease_events_pruned_total": Help(
        "counter", "Events deleted by retention (older than retention, never past the lowest consumer's fence)."
    ),
    "fanoutsim_lease_leases_total": Help(
        "counter", "Leases granted, by consumer: a first delivery attempt, or a retry after a nack or an expiry."
    ),
    "fanoutsim_lease_delivered_total": Help(
        "counter",
        "Effects that landed, by consumer: a worker finished an event (a duplicate included, when a lease "
        "expired under it).",
    ),
    "fanoutsim_lease_acked_total": Help(
        "counter", "Acks that resolved their event (the exact event, token and incarnation), by consumer."
    ),
    "fanoutsim_lease_refused_total": Help(
        "counter",
        "Requests that failed closed, by consumer and result (expired, wrong_token, no_lease, "
        "stale_incarnation, ...): a late worker's ack after its lease expired is one.",
    ),
    "fanoutsim_lease_expired_total": Help(
        "counter", "Leases that expired in recovery: their events were retried (or dead-lettered on the 10th attempt)."
    ),
    "fanoutsim_lease_dead_letters_total": Help(
        "counter", "Events dead-lettered after their last allowed attempt failed, by consumer."
    ),
    "fanoutsim_lease_backups_total": Help("counter", "Backups taken of the consumer state and the log."),
    "fanoutsim_lease_restores_total": Help(
        "counter", "Restores from a backup, each publishing a new history incarnation (older lease tokens fail closed)."
    ),
    "fanoutsim_lease_events_retained": Help("gauge", "Events in the log now, read from the table."),
    "fanoutsim_lease_in_flight": Help("gauge", "Leases held now, over every consumer (rows of the leases table)."),
    "fanoutsim_lease_dead_letters_retained": Help("gauge", "Dead-lettered events kept now, over every consumer."),
    PUBLISH_TO_ACK: Help(
        "histogram",
        "Seconds from an event's publish commit (committed_at) to the ack that resolved it, by consumer: one "
        "observation per ack that resolved its event (an ack that failed closed is not one).",
    ),
    CHECKPOINT_LAG_EVENTS: Help(
        "gauge",
        "Events of a partition past a consumer's checkpoint (retained, not yet behind the point up to "
        "which every event is resolved; sparse acks past it included), by consumer and partition.",
    ),
    CHECKPOINT_LAG: Help(
        "gauge",
        "Seconds since the publish commit (committed_at) of the oldest retained event past a consumer's "
        "checkpoint in a partition, by consumer and partition: how long the event holding the checkpoint "
        "back has waited; 0 when none is past it.",
    ),
}


def checkpoint_lags(rows: Callable[[str], list[dict[str, Any]]], now_us: int) -> dict[str, float]:
    """:data:`CHECKPOINT_LAG_EVENTS` and :data:`CHECKPOINT_LAG` of each
    consumer in each partition of the retained log, at ``now_us``: ``rows`` is
    the runtime's ``table_rows`` (its named database). A partition without a
    checkpoint row yet counts from the consumer's start."""
    by_partition: dict[str, list[tuple[int, int]]] = {}
    for ev in rows("events"):
        by_partition.setdefault(ev["partition"], []).append((ev["seq"], ev["committed_at"]))
    for log in by_partition.values():
        log.sort()
    checkpoints = {(c["consumer"], c["partition"]): c["seq"] for c in rows("checkpoints")}
    out: dict[str, float] = {}
    for consumer in rows("lease_consumers"):
        name = consumer["consumer"]
        for partition, log in sorted(by_partition.items()):
            past = checkpoints.get((name, partition), consumer["start_seq"])
            first = bisect.bisect_right(log, (past, float("inf")))  # the oldest event past the checkpoint
            out[series(CHECKPOINT_LAG_EVENTS, consumer=name, partition=partition)] = len(log) - first
            out[series(CHECKPOINT_LAG, consumer=name, partition=partition)] = (
                (now_us - log[first][1]) / US if first < len(log) else 0.0
            )
    return out
