"""What each metric of the outbox design means (``Design.metrics``): the
``# HELP`` and ``# TYPE`` lines of ``GET /metrics`` and the documentation's
metrics page. The steps count them; the runtime's ``metrics()`` adds the hint
counters and the gauges, read when asked."""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fanoutsim.kernel.metrics import Bump, Help, series
from fanoutsim.kernel.timeutil import US

COMMIT_TO_HANDLED = "fanoutsim_outbox_commit_to_handled_seconds"
CURSOR_LAG_ROWS = "fanoutsim_outbox_cursor_lag_rows"
CURSOR_LAG = "fanoutsim_outbox_cursor_lag_seconds"


@dataclass(slots=True)
class Meters:
    """A consumer's counters, bound once per incarnation (each series appears at
    its first bump, as with :meth:`~fanoutsim.kernel.metrics.Metrics.inc`)."""

    fetches: Bump
    handled: Bump
    failures: Bump
    parked: Bump


METRICS: dict[str, Help] = {
    "fanoutsim_outbox_commits_total": Help(
        "counter", "Changes committed with their outbox row (one row per commit), by the row's kind."
    ),
    "fanoutsim_outbox_fetches_total": Help(
        "counter",
        "Reads of the outbox past a consumer's cursor, by consumer, counted also when fanoutsim knew the "
        "read would find nothing (the real dispatcher sends it): the database load of hints and polls.",
    ),
    "fanoutsim_outbox_handled_total": Help(
        "counter", "Rows a consumer's handler finished without error, by consumer (repeats after a crash included)."
    ),
    "fanoutsim_outbox_failures_total": Help(
        "counter", "Handler attempts that failed or timed out, by consumer (each retried with backoff, or parked)."
    ),
    "fanoutsim_outbox_parked_total": Help(
        "counter", "Rows set aside after their consumer's retry_budget of failed attempts; its cursor moved past."
    ),
    "fanoutsim_outbox_pruned_total": Help("counter", "Outbox rows deleted by retention (older than retention)."),
    "fanoutsim_outbox_hints_sent_total": Help("counter", "NOTIFY hints sent (each carries one row's seq)."),
    "fanoutsim_outbox_hints_dropped_total": Help(
        "counter", "Hints lost on the way (a notifications fault): their rows wait for another wake-up."
    ),
    "fanoutsim_outbox_hints_missed_total": Help(
        "counter",
        "Hints the listener never heard: sent while it was disconnected, or while it waited in vain for a "
        "pool connection.",
    ),
    "fanoutsim_outbox_hints_coalesced_total": Help(
        "counter", "Hints merged with an identical one of the same transaction (delivered once)."
    ),
    COMMIT_TO_HANDLED: Help(
        "histogram",
        "Seconds from an outbox row's commit timestamp (ts) to its consumer's handler finishing it, by "
        "consumer: one observation per row handled, a repeat after a crash included.",
    ),
    CURSOR_LAG_ROWS: Help(
        "gauge",
        "Rows a consumer's cursor is behind the head of the outbox (the highest seq retained minus the "
        "cursor, as fanoutsim status reports lag), by consumer.",
    ),
    CURSOR_LAG: Help(
        "gauge",
        "Seconds since the commit (ts) of the oldest retained row past a consumer's cursor, by consumer: how "
        "long its oldest unhandled row has waited; 0 when the cursor is at the head.",
    ),
}


def cursor_lags(rows: Iterable[dict[str, Any]], cursors: Iterable[dict[str, Any]], now_us: int) -> dict[str, float]:
    """:data:`CURSOR_LAG_ROWS` and :data:`CURSOR_LAG` of each consumer's cursor
    (``cursors`` rows) over the retained outbox ``rows``, at ``now_us``."""
    log = sorted((r["seq"], r["ts"]) for r in rows)
    seqs = [seq for seq, _ in log]
    head = seqs[-1] if seqs else 0
    out: dict[str, float] = {}
    for c in cursors:
        name, cursor = c["consumer"], c["seq"]
        first = bisect.bisect_right(seqs, cursor)  # the oldest retained row past the cursor
        out[series(CURSOR_LAG_ROWS, consumer=name)] = max(0, head - cursor)
        out[series(CURSOR_LAG, consumer=name)] = (now_us - log[first][1]) / US if first < len(log) else 0.0
    return out
