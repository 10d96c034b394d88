"""Watermark lag: how far behind each subscription reads, at the end and through the run.

**Watermark lag** (the one definition every report, figure and ``status``
uses, :data:`WATERMARK_LAG`): at a moment t, the age of the oldest firing of
the subscription's stream that is visible (its row committed) and not yet
read (still ahead of the watermark): ``t - fired_at`` of that firing, 0 when
the watermark has passed everything visible. It grows while firings wait and
drops at each poll that moves the watermark past them: a sawtooth below one
poll interval P while the subscription keeps up, rising without bound when it
falls behind or stops. A quiet stream reads 0, not "behind": the time since
the stream last fired is not lag (the clock minus the watermark would count
it).

:func:`watermark_lag_us` gives it at one moment from a stream's ``fired_at``
stamps (the report's and ``status``'s number, at the end); over a run of many
polls the teeth are finer than a pixel, so :func:`watermark_lag_over_time`
gives the largest lag in each time bin, exactly, from the trace (every commit
of a firing, every move of a watermark).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fanoutsim.designs.reactor.metrics import watermark_lag_us  # noqa: F401  (a name of this module too)
from fanoutsim.kernel.validate import is_whole

US = 1_000_000
COLUMNS = ["subscription", "label", "t0_s", "t1_s", "lag_max_s"]

# the definition, in one line, printed wherever a watermark lag is (report, report.json, figure, status)
WATERMARK_LAG = (
    "the age of the oldest firing the subscription has not read yet (now - its fired_at; "
    "0 when it has read every firing): below the poll interval while it keeps up"
)


def watermark_lag_over_time(sim, bins: int = 300) -> pd.DataFrame:
    """One row per subscription and time bin (``bins`` equal bins from the
    start to now): ``subscription`` (its id), ``label`` (``tenant: reactor →
    workflow``), ``t0_s`` and ``t1_s`` (the bin, virtual seconds since start)
    and ``lag_max_s``, the largest lag within the bin (seconds; see the module
    documentation). Empty when the run kept no trace."""
    if not is_whole(bins) or bins < 1:
        raise ValueError(f"bins must be a positive integer, got {bins!r}")
    tr = sim.trace()
    if tr.empty or "kind" not in tr:
        return pd.DataFrame(columns=COLUMNS)
    hist = tr.history
    hist = hist[hist["logged_at"].notna()]
    moves = tr[tr["kind"] == "watermark"]
    start_us, now_us = sim.start_us, sim.now_us()
    edges_us = start_us + np.round(np.linspace(0.0, (now_us - start_us), bins + 1)).astype(np.int64)
    streams = {
        key: (g["fired_at"].to_numpy(dtype=np.int64), g["logged_at"].to_numpy(dtype=np.int64))
        for key, g in hist.groupby(["reactor_name", "tenant_id"], sort=False)
    }
    frames = []
    for sub in sim.subscriptions().itertuples(index=False):
        mine = moves[moves["subscription"] == sub.id]
        fired, visible = streams.get((sub.reactor_name, sub.tenant_id), (np.empty(0, np.int64),) * 2)
        worst = _lag_bins(
            mine["t"].to_numpy(dtype=np.int64), mine["detail"].astype("int64").to_numpy(), fired, visible, edges_us
        )
        frames.append(
            pd.DataFrame(
                {
                    "subscription": sub.id,
                    "label": f"{sub.tenant_id}: {sub.reactor_name} \u2192 {sub.workflow_name}",
                    "t0_s": (edges_us[:-1] - start_us) / US,
                    "t1_s": (edges_us[1:] - start_us) / US,
                    "lag_max_s": worst / US,
                }
            )
        )
    if not frames:
        return pd.DataFrame(columns=COLUMNS)
    return pd.concat(frames, ignore_index=True)[COLUMNS]


def _lag_bins(t: np.ndarray, w: np.ndarray, fired: np.ndarray, visible: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The largest lag in each bin (µs). The lag only drops when the watermark
    moves, so its largest value in a bin is at the bin's end or just before a
    move inside it: evaluate it there."""
    order = np.argsort(t, kind="stable")
    t, w = t[order], w[order]
    never = np.iinfo(np.int64).min  # a watermark that never moved: everything visible is unread
    # the watermark just before each move (none: a run too short for one)
    before = np.concatenate([[never], w[:-1]]) if t.size else np.empty(0, dtype=np.int64)
    at_end = edges[1:]
    idx = np.searchsorted(t, at_end, side="right") - 1  # the last move at or before each bin's end
    wm_end = w[np.maximum(idx, 0)] if t.size else np.full(at_end.size, never)
    wm_end = np.where(idx >= 0, wm_end, never)
    x = np.concatenate([at_end, t])
    wm = np.concatenate([wm_end, before])
    lag = _oldest_unread_age(x, wm, fired, visible)
    n = edges.size - 1
    where = np.concatenate([np.arange(n), np.clip(np.searchsorted(edges, t, side="left") - 1, 0, n - 1)])
    worst = np.zeros(n, dtype=np.int64)
    np.maximum.at(worst, where, lag)
    return worst


def _oldest_unread_age(x: np.ndarray, wm: np.ndarray, fired: np.ndarray, visible: np.ndarray) -> np.ndarray:
    """At each time ``x[i]``, with the watermark at ``wm[i]``: ``x - fired_at`` of
    the oldest firing visible by then with ``fired_at > wm``, else 0."""
    out = np.zeros(x.size, dtype=np.int64)
    if fired.size == 0 or x.size == 0:
        return out
    order = np.argsort(fired, kind="stable")
    f, v = fired[order], visible[order]
    k = np.searchsorted(f, wm, side="right")  # the oldest firing past the watermark ...
    pending = np.ones(x.size, dtype=bool)
    for _ in range(64):  # ... that is visible already (late commits are the exception)
        inside = k < f.size
        kk = np.minimum(k, f.size - 1)
        found = pending & inside & (f[kk] <= x) & (v[kk] <= x)
        out[found] = x[found] - f[kk[found]]
        pending &= ~found & inside & (f[kk] <= x)  # nothing fired by x is left: lag 0
        if not pending.any():
            return out
        k = np.where(pending, k + 1, k)
    for i in np.flatnonzero(pending):  # a long run of late commits: walk it
        j = int(k[i])
        while j < f.size and f[j] <= x[i]:
            if v[j] <= x[i]:
                out[i] = x[i] - f[j]
                break
            j += 1
    return out
