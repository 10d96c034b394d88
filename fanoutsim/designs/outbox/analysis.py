"""The outbox dispatcher (seed 002): lost hints, the safety poll, the guardrails.

Readers of :class:`~fanoutsim.designs.outbox.simulation.OutboxSimulation` runs
(the lessons' experiments that make those runs are beside the notebooks, in
``notebooks/experiments/outbox.py``):

* :func:`handled_latency` — commit → first handled, per (consumer, seq), and
  :func:`latency_frame` — with whether each row's own hint arrived;
  :func:`latency_table` — a :func:`fanoutsim.sweep` over the hint drop and the
  safety-poll interval as one row per pair;
* :func:`cursor_path` / :func:`lag_path` — a consumer's cursor (and its lag
  behind the head of the log) over virtual time; :func:`caught_up_at`;
* :func:`scenario_summary` — per consumer: delivered, duplicates, lost, parked,
  failures, worst lag;
* :func:`derived_drift` / :func:`derived_summary` — derived state against the
  base tables; :func:`pool_summary` — the listener's connection under a backfill;
* :func:`outbox_report` — one run's report as a JSON-ready dict (what
  ``fanoutsim run`` prints for an outbox scenario).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd

from fanoutsim.designs.outbox.checker import check_outbox
from fanoutsim.kernel.frames import json_ready
from fanoutsim.kernel.report import run_span
from fanoutsim.kernel.scenario import jsonable
from fanoutsim.kernel.timeutil import US


def _rel(sim, t) -> np.ndarray:
    return (np.asarray(t, dtype="int64") - sim.start_us) / US


def handled_latency(sim) -> pd.DataFrame:
    """One row per (consumer, seq) handled: commit time, first handled time and
    ``latency_s`` between them (virtual seconds since the run's start)."""
    t = sim.trace()
    com = t[t["kind"] == "committed"][["seq", "t"]].drop_duplicates("seq").rename(columns={"t": "t_commit"})
    h = t[t["kind"] == "handled"][["consumer", "seq", "t"]]
    h = h.groupby(["consumer", "seq"], as_index=False)["t"].min().rename(columns={"t": "t_handled"})
    out = h.merge(com, on="seq", how="inner")
    out["latency_s"] = (out["t_handled"] - out["t_commit"]) / US
    out["committed_s"] = _rel(sim, out["t_commit"])
    out["handled_s"] = _rel(sim, out["t_handled"])
    return (
        out[["consumer", "seq", "committed_s", "handled_s", "latency_s"]]
        .sort_values(["consumer", "seq"])
        .reset_index(drop=True)
    )


def hinted_seqs(sim) -> set[int]:
    """Seqs whose own hint reached the listener."""
    t = sim.trace()
    return set(t.loc[t["kind"] == "hint", "seq"].astype(int))


def latency_frame(sim) -> pd.DataFrame:
    """:func:`handled_latency` with ``hinted`` (did this row's own hint arrive?)."""
    lat = handled_latency(sim)
    lat["hinted"] = lat["seq"].isin(hinted_seqs(sim))
    return lat


def latency_table(df: pd.DataFrame, drop: str = "faults.0.drop", poll: str = "safety_poll_interval") -> pd.DataFrame:
    """A :func:`fanoutsim.sweep` table of lesson 8's lost-hints scenario
    (``latency_scenario`` in ``notebooks/experiments/outbox.py``), one row per
    (drop, poll): ``drop``, ``poll``, ``committed``, ``delivered``, ``lost``,
    ``hinted_share``, ``mean_s``, ``p50_s``, ``p99_s``, ``max_s`` and
    ``max_over_poll`` (plus ``seed`` and ``valid``)."""
    missing = [c for c in (drop, poll, "commit_to_handled_max_s", "hinted_share") if c not in df.columns]
    if missing:
        raise KeyError(f"latency_table needs an outbox sweep over {drop!r} and {poll!r}; missing: {', '.join(missing)}")
    out = pd.DataFrame({"drop": df[drop].astype(float), "poll": df[poll].astype(float)})
    if "seed" in df.columns:
        out["seed"] = df["seed"].to_numpy()
    for c in ("committed", "delivered", "lost", "hinted_share"):
        out[c] = df[c].to_numpy()
    for s in ("mean", "p50", "p99", "max"):
        out[f"{s}_s"] = df[f"commit_to_handled_{s}_s"].to_numpy()
    out["max_over_poll"] = out["max_s"] / out["poll"]
    out["valid"] = df["valid"].to_numpy()
    return out


def cursor_path(sim, consumer: str) -> pd.DataFrame:
    """The consumer's cursor over time: ``t_s`` and ``cursor`` (starting at its first cursor)."""
    t = sim.trace()
    sel = t[(t["consumer"] == consumer) & t["kind"].isin(["cursor_start", "cursor", "reset"])]
    return pd.DataFrame({"t_s": _rel(sim, sel["t"]), "cursor": sel["seq"].astype(int).to_numpy()})


def head_path(sim) -> pd.DataFrame:
    """The head of the log over time: ``t_s`` and the highest committed ``seq``."""
    t = sim.trace()
    c = t[t["kind"] == "committed"]
    return pd.DataFrame({"t_s": _rel(sim, c["t"]), "seq": c["seq"].astype(int).cummax().to_numpy()})


def lag_path(sim, consumer: str, step: float = 1.0) -> pd.DataFrame:
    """Rows committed but not yet behind ``consumer``'s cursor, sampled every ``step`` seconds."""
    head, cur = head_path(sim), cursor_path(sim, consumer)
    grid = np.arange(0.0, sim.now + step / 2, step)

    def at(ts, vs):
        k = np.searchsorted(np.asarray(ts), grid, side="right") - 1
        return np.where(k >= 0, np.asarray(vs)[np.maximum(k, 0)], 0)

    return pd.DataFrame({"t_s": grid, "lag": at(head["t_s"], head["seq"]) - at(cur["t_s"], cur["cursor"])})


# -- the four scenarios --------------------------------------------------------


def caught_up_at(sim, consumer: str, after: float = 0.0) -> float | None:
    """The first time after ``after`` at which ``consumer``'s lag is back to 0."""
    lag = lag_path(sim, consumer, step=0.1)
    ok = lag[(lag["t_s"] >= after) & (lag["lag"] == 0)]
    return None if ok.empty else float(ok["t_s"].iloc[0])


def scenario_summary(sim) -> pd.DataFrame:
    """Per consumer: delivered, duplicates, lost, parked, failures, worst lag
    (rows) and latency p50 / max (seconds), from the checker and the trace."""
    report = check_outbox(sim)
    t = sim.trace()
    pc = report.per_consumer.set_index("consumer")
    rows = []
    for name in pc.index:
        lag = lag_path(sim, name, step=0.5)
        rows.append(
            {
                "consumer": name,
                "delivered": int(pc.loc[name, "delivered"]),
                "duplicates": int(pc.loc[name, "duplicates"]),
                "lost": int(pc.loc[name, "lost"]),
                "parked": int(pc.loc[name, "parked"]),
                "failures": int(((t["kind"] == "failed") & (t["consumer"] == name)).sum()),
                "max_lag_rows": int(lag["lag"].max()),
                "latency_p50_s": round(float(pc.loc[name, "latency_p50_s"]), 3),
                "latency_max_s": round(float(pc.loc[name, "latency_max_s"]), 3),
            }
        )
    return pd.DataFrame(rows)


# -- the report of one run -------------------------------------------------------


def _causes(frame: pd.DataFrame, consumer: str) -> dict[str, int]:
    if frame.empty:
        return {}
    counts = frame.loc[frame["consumer"] == consumer, "cause"].value_counts()
    return {str(c): int(n) for c, n in sorted(counts.items())}


def outbox_report(sim, *, name: str | None = None, checked=None) -> dict[str, Any]:
    """One outbox run as a plain, JSON-ready dict: per consumer delivered,
    duplicates and lost (with causes), parked, pending, failures and commit →
    handled latency (p50, p99, max, in seconds); the hint channel's counts; the
    topic bus; crashes; and the checker's totals under ``check``.

    Every delivery count is the checker's (:func:`check_outbox`, or ``checked``
    if given: a check of this same run), so the report and the verdict agree."""
    checked = check_outbox(sim) if checked is None else checked
    t = sim.trace()
    failures = t.loc[t["kind"] == "failed", "consumer"].value_counts()
    kinds = t["kind"].value_counts()
    total = checked.total
    consumers = []
    for r in checked.per_consumer.to_dict("records"):
        c = r["consumer"]
        consumers.append(
            {
                "consumer": c,
                "cursor": r["cursor"],
                "delivered": r["delivered"],
                "duplicates": r["duplicates"],
                "duplicates_by_cause": _causes(checked.duplicates, c),
                "lost": r["lost"],
                "lost_by_cause": _causes(checked.lost, c),
                "parked": r["parked"],
                "pending": r["pending"],
                "failures": int(failures.get(c, 0)),
                "latency_s": {"p50": r["latency_p50_s"], "p99": r["latency_p99_s"], "max": r["latency_max_s"]},
            }
        )
    ch = sim.channel
    report = {
        **run_span(sim, name, "outbox"),
        # as a scenario file writes it: a law as its table ({"dist": "empirical", "samples": [...]})
        "config": {f.name: jsonable(getattr(sim.config, f.name)) for f in dataclasses.fields(sim.config)},
        "outbox": {
            "committed": total["committed"],
            "retained": len(sim.store.rows("outbox")),
            "pruned": int(kinds.get("pruned", 0)),
            "deferred": len(sim.store.rows("deferred")),
        },
        "consumers": consumers,
        "totals": {
            k: total[k]
            for k in (
                "committed",
                "delivered",
                "extra_deliveries",
                "lost",
                "parked",
                "pending",
                "lost_by_cause",
                "duplicates_by_cause",
            )
        },
        "hints": {
            "sent": ch.sent,
            "dropped": ch.dropped,
            "missed": ch.missed,
            "coalesced": ch.coalesced,
            "delivered": ch.delivered,
        },
        "bus": {
            "published": total["bus_published"],
            "unpublished": total["bus_unpublished"],
            "receipts": total["bus_receipts"],
        },
        "crashes": int(kinds.get("crashed", 0)),
        "check": dict(total),
    }
    return json_ready(report)


# -- derived state: idempotent and rebuildable, or neither -------------------------------


def derived_drift(sim, consumer: str, view=None):
    """The drift of ``consumer``'s derived state (``view``, default
    ``sim.views[consumer]``) from what the base tables say it should be (see
    :func:`~.derived.drift`): one row per page that is off."""
    from fanoutsim.designs.outbox.derived import drift

    view = sim.views[consumer] if view is None else view
    t = sim.trace()
    starts = t[(t["kind"] == "cursor_start") & (t["consumer"] == consumer)]["seq"]
    start = int(starts.iloc[0]) if len(starts) else 0
    return drift(view, sim.store.rows("pages"), sim.store.rows("outbox"), start)


def derived_summary(sim) -> pd.DataFrame:
    """Per consumer of a derived-state run (its views as ``sim.views``:
    ``derived_run`` in ``notebooks/experiments/outbox.py``): whether it is
    rebuildable, the checker's duplicates (by cause), and the derived state's
    drift — keys off and the sum of the drift (for a counter: the changes
    counted twice)."""
    r = check_outbox(sim)
    rows = []
    for name, view in sim.views.items():
        d = derived_drift(sim, name, view)
        dup = r.duplicates[r.duplicates["consumer"] == name]
        rows.append(
            {
                "consumer": name,
                "rebuildable": view.rebuildable,
                "duplicates": len(dup),
                "duplicates_by_cause": dup["cause"].value_counts().to_dict(),
                "keys": len(view.state),
                "keys_off": len(d),
                "drift": int(d["drift"].sum()) if len(d) else 0,
            }
        )
    return pd.DataFrame(rows)


# -- the listener's connection under a backfill ----------------------------------------


def pool_summary(runs: dict) -> pd.DataFrame:
    """Per run (``{label: sim}``, each with its ``backfill_window``: ``pool_run``
    in ``notebooks/experiments/outbox.py``) and per phase (before, during,
    after the backfill): rows committed, hints heard, waiting, missed for want
    of a connection, and the commit → handled latency (p50, p99, max)."""
    rows = []
    for label, sim in runs.items():
        lo, hi = sim.backfill_window
        t = sim.trace()
        rel = pd.Series(_rel(sim, t["t"]), index=t.index)
        lat = handled_latency(sim)
        for phase, a, b in (("before", 0.0, lo), ("during", lo, hi), ("after", hi, float("inf"))):
            inside = (rel >= a) & (rel < b)
            x = lat.loc[(lat["committed_s"] >= a) & (lat["committed_s"] < b), "latency_s"]
            rows.append(
                {
                    "run": label,
                    "phase": phase,
                    "committed": int(((t["kind"] == "committed") & inside).sum()),
                    "hints": int(((t["kind"] == "hint") & inside).sum()),
                    "hints_waiting": int(((t["kind"] == "hint_waiting") & inside).sum()),
                    "hints_missed": int(
                        ((t["kind"] == "hint_missed") & (t["detail"] == "no free connection") & inside).sum()
                    ),
                    "p50_s": float(x.quantile(0.5)) if len(x) else float("nan"),
                    "p99_s": float(x.quantile(0.99)) if len(x) else float("nan"),
                    "max_s": float(x.max()) if len(x) else float("nan"),
                    "lost": int(check_outbox(sim).total["lost"]),
                }
            )
    return pd.DataFrame(rows)
