"""Analysis of runs: pure functions from a Simulation's tables to numbers.

One module per subject: :mod:`.delivery` (latency per execution, watermarks,
the delivery report).
"""
from .delivery import (
    LATENCY_COLUMNS, SUBSCRIPTION_KEY, delivery_report, latency_frame, metric_total, percentiles, watermarks,
)

__all__ = ["LATENCY_COLUMNS", "SUBSCRIPTION_KEY", "delivery_report", "latency_frame", "metric_total",
           "percentiles", "watermarks"]
from .clocks import compare_latency, ks_statistic  # noqa: E402

__all__ += ["compare_latency", "ks_statistic"]
from .latency import (  # noqa: E402
    BUDGET_COMPONENTS, budget_table, expected_budget, graph_latency, latency_budget, poll_wait_uniformity,
)
from .sweep import knee_rate, recommend, seed_summary, stream_shares  # noqa: E402

__all__ += ["BUDGET_COMPONENTS", "budget_table", "expected_budget", "graph_latency", "latency_budget",
            "poll_wait_uniformity", "knee_rate", "recommend", "seed_summary", "stream_shares"]
