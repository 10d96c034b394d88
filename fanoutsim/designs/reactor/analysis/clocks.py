"""Real time against virtual time: do the two clocks tell the same story?

The same scenario runs under the SimPy clock and on the wall clock; what
should match is the *distribution* of fire-to-dispatch latency (uniform on
[0, P) from the poll wait, plus whatever the wall clock adds: the inserts,
the statement round trips, thread wake-ups). :func:`compare_latency` puts the
two side by side with a two-sample Kolmogorov-Smirnov statistic.
"""

from __future__ import annotations

import numpy as np

from fanoutsim.kernel.stats import ks_2samp as ks_statistic  # the largest gap between the two empirical CDFs
from fanoutsim.kernel.stats import ks_critical

__all__ = ["compare_latency", "ks_critical", "ks_statistic"]


def compare_latency(virtual, real, column: str = "fire_to_dispatch") -> dict:
    """Mean, p50, p95 of both latency samples (seconds) and their KS statistic."""
    v, r = np.asarray(virtual[column], float), np.asarray(real[column], float)
    out = {"n_virtual": len(v), "n_real": len(r)}
    for name, x in (("virtual", v), ("real", r)):
        out[f"mean_{name}"] = float(x.mean())
        out[f"p50_{name}"] = float(np.percentile(x, 50))
        out[f"p95_{name}"] = float(np.percentile(x, 95))
    out["mean_gap"] = out["mean_real"] - out["mean_virtual"]
    out["ks"] = ks_statistic(v, r)
    out["ks_critical_5pct"] = ks_critical(len(v), len(r))
    return out
