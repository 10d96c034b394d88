"""Analysis of runs: pure functions from a Simulation's tables to numbers.

The reactor design's, one module per subject, under
``fanoutsim.designs.reactor.analysis`` (:mod:`fanoutsim.designs.reactor.analysis.delivery`:
latency per execution, watermarks, the delivery report; and the others
this package re-exports).
"""

from fanoutsim.designs.reactor.analysis.delivery import (
    LATENCY_COLUMNS,
    SUBSCRIPTION_KEY,
    delivery_report,
    latency_frame,
    metric_total,
    percentiles,
    watermarks,
)

__all__ = [
    "LATENCY_COLUMNS",
    "SUBSCRIPTION_KEY",
    "delivery_report",
    "latency_frame",
    "metric_total",
    "percentiles",
    "watermarks",
]
from fanoutsim.designs.reactor.analysis.lag import watermark_lag_over_time  # noqa: E402,F401

__all__ += ["watermark_lag_over_time"]
from fanoutsim.designs.reactor.analysis.clocks import compare_latency, ks_statistic  # noqa: E402,F401

__all__ += ["compare_latency", "ks_statistic"]
from fanoutsim.designs.reactor.analysis.latency import (  # noqa: E402,F401
    BUDGET_COMPONENTS,
    budget_table,
    expected_budget,
    graph_latency,
    latency_budget,
    poll_wait_uniformity,
)
from fanoutsim.designs.reactor.analysis.sweep import (  # noqa: E402,F401
    backlog_growth,
    knee_interval,
    knee_rate,
    recommend,
    seed_summary,
    stream_shares,
)

__all__ += [
    "BUDGET_COMPONENTS",
    "budget_table",
    "expected_budget",
    "graph_latency",
    "latency_budget",
    "poll_wait_uniformity",
    "knee_rate",
    "knee_interval",
    "backlog_growth",
    "recommend",
    "seed_summary",
    "stream_shares",
]
from fanoutsim.designs.reactor.analysis.faults import (  # noqa: E402,F401
    CRASH_MODES,
    HOLES,
    WATERMARKS,
    crash_points,
    crash_run,
    crash_sweep,
    duplicates_per_crash,
    firing_outcomes,
    hole_matrix,
    hole_run,
    hole_summary,
    retention_cost,
    retention_run,
    retention_table,
    table_size,
    table_size_summary,
    watermark_path,
)
from fanoutsim.designs.reactor.analysis.filters import (  # noqa: E402,F401
    poll_lag,
    predicate_verdicts,
    quote_rates,
    subscriber_lag,
)
from fanoutsim.designs.reactor.analysis.idempotency import EffectTable, dedup_report, idempotency_run, recording_body  # noqa: E402,F401

__all__ += [
    "CRASH_MODES",
    "HOLES",
    "WATERMARKS",
    "crash_points",
    "crash_run",
    "crash_sweep",
    "duplicates_per_crash",
    "firing_outcomes",
    "hole_matrix",
    "hole_run",
    "hole_summary",
    "retention_cost",
    "retention_run",
    "retention_table",
    "table_size",
    "table_size_summary",
    "watermark_path",
    "poll_lag",
    "predicate_verdicts",
    "quote_rates",
    "subscriber_lag",
    "EffectTable",
    "dedup_report",
    "idempotency_run",
    "recording_body",
]
# the outbox lessons' experiments (lost hints, the four guardrail scenarios, derived
# state, the listener under a backfill, both clocks) live beside the notebooks, in
# notebooks/experiments/outbox.py
from fanoutsim.designs.outbox.analysis import (  # noqa: E402,F401
    caught_up_at,
    cursor_path,
    handled_latency,
    head_path,
    lag_path,
    outbox_report,
    scenario_summary,
)

__all__ += [
    "caught_up_at",
    "cursor_path",
    "handled_latency",
    "head_path",
    "lag_path",
    "outbox_report",
    "scenario_summary",
]
from fanoutsim.designs.leases.analysis import (  # noqa: E402,F401
    ack_outcomes,
    checkpoint_path,
    event_outcomes,
    events_size,
    lease_summary,
    orphan_holds,
    partition_summary,
    restore_summary,
)

# the leases lessons' experiments (a lease sweep, the fence, a restore in a running
# system, ...) live beside the notebooks, in notebooks/experiments/leases.py
__all__ += [
    "ack_outcomes",
    "checkpoint_path",
    "event_outcomes",
    "events_size",
    "lease_summary",
    "orphan_holds",
    "partition_summary",
    "restore_summary",
]
# the designs' analysis modules, as ``from fanoutsim.analysis import leases``
from fanoutsim.designs.leases import analysis as leases  # noqa: E402,F401
from fanoutsim.designs.outbox import analysis as outbox  # noqa: E402,F401
