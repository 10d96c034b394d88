"""Figures, in one house style.

Every function takes a Simulation (or a DataFrame where noted) and an optional
``ax``; it draws into ``ax`` or into a new figure, and returns the Figure.
New figures are built with :class:`matplotlib.figure.Figure` directly, not
through pyplot: no GUI backend is touched, nothing is registered globally
(so nothing leaks and a notebook does not show a figure twice), and saving
renders with Agg. Times on the x axis are virtual time since the run's start.

The reactor design's, one module per subject, under
``fanoutsim.designs.reactor.plots`` (:mod:`fanoutsim.designs.reactor.plots.delivery`:
latency, executions, watermark lag of one run);
:mod:`fanoutsim.kernel.plotting` holds the style.
"""

from fanoutsim.designs.reactor.plots.delivery import (
    executions_over_time,
    latency_histogram,
    save_report_figures,
    watermark_lag,
)
from fanoutsim.kernel.plotting import STYLE, plain_log, plain_number, style

__all__ = [
    "STYLE",
    "style",
    "plain_log",
    "plain_number",
    "latency_histogram",
    "executions_over_time",
    "watermark_lag",
    "save_report_figures",
]
from fanoutsim.designs.reactor.plots.latency import budget_bars, poll_wait_histogram  # noqa: E402,F401
from fanoutsim.designs.reactor.plots.sweep import (  # noqa: E402,F401
    backlog_vs_rate,
    latency_vs_interval,
    polls_vs_interval,
    recommendation_chart,
)

__all__ += [
    "poll_wait_histogram",
    "budget_bars",
    "latency_vs_interval",
    "polls_vs_interval",
    "backlog_vs_rate",
    "recommendation_chart",
]
from fanoutsim.designs.reactor.plots.faults import (  # noqa: E402,F401
    duplicates_per_crash,
    firing_timeline,
    hole_losses,
    strategy_latency,
    table_size_over_time,
)
from fanoutsim.designs.reactor.plots.filters import recorded_rate, selectivity_dispatch, selectivity_lag  # noqa: E402,F401

__all__ += [
    "duplicates_per_crash",
    "firing_timeline",
    "hole_losses",
    "strategy_latency",
    "table_size_over_time",
    "recorded_rate",
    "selectivity_dispatch",
    "selectivity_lag",
]
from fanoutsim.designs.reactor.plots.clocks import latency_side_by_side  # noqa: E402,F401

__all__ += ["latency_side_by_side"]
from fanoutsim.designs.reactor.plots.lag import watermark_lag_over_time_figure  # noqa: E402,F401

__all__ += ["watermark_lag_over_time_figure"]
from fanoutsim.designs.outbox.plots import (  # noqa: E402,F401
    consumer_latency_histogram,
    cursor_progress,
    outbox_latency_cdf,
    outbox_latency_histogram,
    outbox_tail_vs_drop,
    save_outbox_figures,
)

__all__ += [
    "consumer_latency_histogram",
    "cursor_progress",
    "outbox_latency_cdf",
    "outbox_latency_histogram",
    "outbox_tail_vs_drop",
    "save_outbox_figures",
]
from fanoutsim.designs.leases.plots import (  # noqa: E402,F401
    checkpoint_progress,
    delivery_per_consumer,
    duplicates_vs_lease,
    events_table_size,
    inflight_throughput,
    lease_outcomes,
    lease_tradeoff,
    orders_side_by_side,
    poison_side_by_side,
    save_leases_figures,
)

__all__ += [
    "checkpoint_progress",
    "delivery_per_consumer",
    "duplicates_vs_lease",
    "events_table_size",
    "inflight_throughput",
    "lease_outcomes",
    "lease_tradeoff",
    "orders_side_by_side",
    "poison_side_by_side",
    "save_leases_figures",
]
# the designs' figure modules, as ``from fanoutsim.plots import leases``
from fanoutsim.designs.leases import plots as leases  # noqa: E402,F401
from fanoutsim.designs.outbox import plots as outbox  # noqa: E402,F401
