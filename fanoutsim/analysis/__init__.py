"""Analysis of runs: pure functions from a Simulation's tables to numbers.

One module per subject: :mod:`.delivery` (latency per execution, watermarks,
the delivery report).
"""
from .delivery import (
    LATENCY_COLUMNS, SUBSCRIPTION_KEY, delivery_report, latency_frame, metric_total, percentiles, watermarks,
)

__all__ = ["LATENCY_COLUMNS", "SUBSCRIPTION_KEY", "delivery_report", "latency_frame", "metric_total",
           "percentiles", "watermarks"]
