"""The outbox dispatcher (seed 002): lost hints, the safety poll, the guardrails.

Pure functions over :class:`~fanoutsim.designs.outbox.simulation.OutboxSimulation` runs:

* :func:`handled_latency` — commit → first handled, per (consumer, seq);
* :func:`latency_run` / :func:`latency_sweep` — that latency against the share
  of hints dropped and the safety-poll interval; :func:`latency_scenario` /
  :func:`latency_table` — the same study as a :func:`fanoutsim.sweep`;
* :func:`cursor_path` / :func:`lag_path` — a consumer's cursor (and its lag
  behind the head of the log) over virtual time;
* four small seeded scenarios: :func:`hung_run` (a hung step, with and without
  a timeout), :func:`poison_run` (a row that always fails), :func:`slow_fast_run`
  (a slow consumer beside a fast one) and :func:`backfill_run` (a consumer
  added late, reading from the beginning), with :func:`scenario_summary`;
* :func:`clock_comparison` — the same lossy-hint run under the virtual clock
  and on the wall clock (:class:`~fanoutsim.designs.outbox.realtime.OutboxRealtime`);
* :func:`outbox_report` — one run's report as a JSON-ready dict (what
  ``fanoutsim run`` prints for an outbox scenario).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd

from fanoutsim.designs.faults import Notifications
from fanoutsim.designs.outbox import OutboxConfig
from fanoutsim.designs.outbox.checker import check_outbox
from fanoutsim.kernel.faults import FaultPlan
from fanoutsim.kernel.frames import json_ready
from fanoutsim.kernel.report import run_span
from fanoutsim.kernel.scenario import jsonable
from fanoutsim.kernel.timeutil import US
from fanoutsim.kernel.validate import is_real


def _sim(config=None, seed=0, plan=None):
    from fanoutsim.designs.outbox.simulation import OutboxSimulation

    return OutboxSimulation(config or OutboxConfig(), seed=seed, faults=plan)


def _lossy(drop: float) -> FaultPlan | None:
    """A plan that loses ``drop`` of the hints; none when nothing is lost."""
    return FaultPlan([Notifications(drop=drop)]) if drop > 0 else None


def _indexer(target, rate: float, stop: float, duration: float):
    """``target`` (a simulation or a wall-clock runtime) with one consumer
    ``indexer`` (``duration`` s a row) and ``rate`` commits/s until ``stop``.
    (:func:`latency_run` spells this out, with :func:`_lossy`: lesson 08 shows its code.)"""
    target.register_consumer("indexer", duration=duration)
    target.add_workload(rate, stop=stop)
    return target


def _delivery(report, lat: pd.DataFrame) -> dict[str, Any]:
    """The checker's committed, delivered and lost, and the share of rows whose
    own hint arrived (``lat``: :func:`latency_frame`): a summary row's start."""
    return {
        "committed": report.total["committed"],
        "delivered": report.total["delivered"],
        "lost": report.total["lost"],
        "hinted_share": float(lat["hinted"].mean()),
    }


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


def latency_run(
    drop: float = 0.0,
    poll: float = 5.0,
    *,
    rate: float = 0.2,
    minutes: float = 60.0,
    seed: int = 0,
    duration: float = 0.01,
):
    """One consumer behind a lossy hint channel: ``rate`` commits/s for ``minutes``,
    ``drop`` of the hints lost, a safety poll every ``poll`` seconds."""
    plan = FaultPlan([Notifications(drop=drop)]) if drop > 0 else None
    sim = _sim(OutboxConfig(safety_poll_interval=poll), seed=seed, plan=plan)
    sim.register_consumer("indexer", duration=duration)
    stop = minutes * 60.0
    sim.add_workload(rate, stop=stop)
    sim.run(until=stop + poll + 1.0)
    return sim


def latency_frame(sim) -> pd.DataFrame:
    """:func:`handled_latency` with ``hinted`` (did this row's own hint arrive?)."""
    lat = handled_latency(sim)
    lat["hinted"] = lat["seq"].isin(hinted_seqs(sim))
    return lat


def latency_sweep(drops=(0.0, 0.05, 0.2, 0.5, 1.0), polls=(1.0, 5.0, 15.0), **kw) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every (drop, poll) pair: a summary table and every row's latency.

    Summary columns: drop, poll, committed, delivered, lost, hinted_share,
    mean_s, p50_s, p99_s, max_s, and ``max_over_poll`` (the worst latency as a
    multiple of the poll interval)."""
    rows, frames = [], []
    for poll in polls:
        for drop in drops:
            sim = latency_run(drop, poll, **kw)
            lat = latency_frame(sim)
            report = check_outbox(sim)
            lat["drop"], lat["poll"] = drop, poll
            frames.append(lat)
            x = lat["latency_s"]
            rows.append(
                {
                    "drop": drop,
                    "poll": poll,
                    **_delivery(report, lat),
                    "mean_s": float(x.mean()),
                    "p50_s": float(x.quantile(0.5)),
                    "p99_s": float(x.quantile(0.99)),
                    "max_s": float(x.max()),
                    "max_over_poll": float(x.max() / poll),
                }
            )
    return pd.DataFrame(rows), pd.concat(frames, ignore_index=True)


def latency_scenario(
    *, rate: float = 0.2, minutes: float = 60.0, duration: float = 0.01, max_poll: float = 15.0
) -> dict:
    """:func:`latency_run`'s run as a scenario (a TOML document as a dict) for
    :func:`fanoutsim.sweep`: one consumer ``indexer`` (``duration`` s a row),
    ``rate`` commits/s for ``minutes``, a ``notifications`` fault dropping no
    hint and a 5 s safety poll; the clock runs to the end of the workload plus
    ``max_poll`` + 1 s, so that every row is handled at any poll up to
    ``max_poll``. Sweep ``faults.0.drop`` and ``safety_poll_interval``; a run
    with a drop above 0 equals :func:`latency_run`'s for the same seed."""
    for key, value in (("rate", rate), ("minutes", minutes), ("max_poll", max_poll)):
        if not is_real(value) or not value > 0:
            raise ValueError(f"{key} must be a number > 0, got {value!r}")
    stop = float(minutes) * 60.0
    return {
        "design": "outbox",
        "name": "lost-hints",
        "description": "one consumer behind a lossy hint channel; the safety poll rescues (notebook 8)",
        "run": {"seed": 0, "until": stop + float(max_poll) + 1.0},
        "outbox": {"safety_poll_interval": 5.0},
        "consumers": [{"name": "indexer", "duration": float(duration)}],
        "workload": [{"rate": float(rate), "pages": 100, "stop": stop}],
        "faults": [{"kind": "notifications", "drop": 0.0}],
    }


def latency_table(df: pd.DataFrame, drop: str = "faults.0.drop", poll: str = "safety_poll_interval") -> pd.DataFrame:
    """A :func:`fanoutsim.sweep` table of :func:`latency_scenario` as
    :func:`latency_sweep`'s summary: ``drop``, ``poll``, ``committed``,
    ``delivered``, ``lost``, ``hinted_share``, ``mean_s``, ``p50_s``, ``p99_s``,
    ``max_s`` and ``max_over_poll`` (plus ``seed`` and ``valid``)."""
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


def clock_comparison(
    *,
    drop: float = 0.5,
    poll: float = 0.5,
    rate: float = 20.0,
    seconds: float = 5.0,
    seed: int = 0,
    duration: float = 0.01,
    folder=None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One consumer behind a lossy hint channel, ``seconds`` long, under both
    clocks: SimPy's, and the wall clock's (threads, a DuckDB file in ``folder``,
    a temporary one by default — this takes ``seconds`` of real time). Returns a
    summary per clock (committed, delivered, lost, hinted_share, p50_s, max_s,
    ``within_poll``: every row handled within one poll interval plus the step and
    0.25 s of scheduling slack) and every row's latency with a ``clock`` column."""
    import tempfile
    import time
    from pathlib import Path

    from fanoutsim.designs.outbox.realtime import OutboxRealtime

    config, plan = OutboxConfig(safety_poll_interval=poll), _lossy(drop)
    sim = _indexer(_sim(config, seed=seed, plan=plan), rate, seconds, duration)
    sim.run(until=seconds + poll + 1.0)
    runs = [("virtual", sim, check_outbox(sim), latency_frame(sim))]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(folder or tmp) / f"clocks-{seed}.duckdb"
        rt = OutboxRealtime(config, store=str(db), faults=plan, seed=seed)
        try:
            _indexer(rt, rate, seconds, duration).start()
            time.sleep(seconds + poll + 1.0)
            rt.stop()
            runs.append(("wall", rt, check_outbox(rt), latency_frame(rt)))
        finally:
            rt.close()
    rows, frames = [], []
    for clock, _, report, lat in runs:
        lat = lat.assign(clock=clock)
        frames.append(lat)
        x = lat["latency_s"]
        rows.append(
            {
                "clock": clock,
                **_delivery(report, lat),
                "p50_s": float(x.quantile(0.5)),
                "max_s": float(x.max()),
                "within_poll": bool(x.max() <= poll + duration + 0.25),
            }
        )
    return pd.DataFrame(rows), pd.concat(frames, ignore_index=True)


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


def _steady(sim, n: int, every: float = 1.0, poison_at: int | None = None) -> None:
    """Commit ``n`` rows, one every ``every`` seconds (row ``poison_at`` is the poison one)."""
    for i in range(n):
        sim.run(until=i * every + every / 2)
        sim.commit(f"p{i % 10}" if i != poison_at else "poison")


def hung_run(*, hang: float = 300.0, timeout: float = 5.0, at_row: int = 10, rows: int = 60, seed: int = 0):
    """Two consumers see the same hang (their ``at_row``-th step never returns
    for ``hang`` seconds): ``guarded`` has a ``timeout``, ``unguarded`` none."""
    sim = _sim(seed=seed)

    def hangs_once():
        calls = {"n": 0}

        def duration(rng):
            calls["n"] += 1
            return hang if calls["n"] == at_row else 0.01

        return duration

    sim.register_consumer("guarded", duration=hangs_once(), timeout=timeout, backoff=1.0, jitter=0.0)
    sim.register_consumer("unguarded", duration=hangs_once(), timeout=None)
    _steady(sim, rows)
    sim.run(until=max(rows + 10.0, at_row + hang + 10.0))
    return sim


def poison_run(*, rows: int = 60, poison_at: int = 20, retry_budget: int = 5, seed: int = 0):
    """``triage`` fails on the row with ref ``poison`` every time; ``indexer`` does not care."""

    def triage(row):
        if row["ref"] == "poison":
            raise ValueError("cannot parse")

    sim = _sim(seed=seed)
    sim.register_consumer("triage", triage, retry_budget=retry_budget, backoff=0.5, backoff_cap=60.0)
    sim.register_consumer("indexer", duration=0.01)
    _steady(sim, rows, poison_at=poison_at)
    sim.run(until=rows + 30.0)
    return sim


def slow_fast_run(*, rate: float = 1.5, seconds: float = 120.0, slow: float = 1.0, seed: int = 0):
    """A ``fast`` consumer (10 ms a row) beside a ``slow`` one (``slow`` s a row)
    under ``rate`` commits/s for ``seconds``, then quiet until the slow one drains."""
    sim = _sim(seed=seed)
    sim.register_consumer("fast", duration=0.01)
    sim.register_consumer("slow", duration=slow, timeout=None)
    sim.add_workload(rate, stop=seconds)
    sim.run(until=seconds * (1 + max(0.0, rate * slow - 1)) + 60.0)
    return sim


def backfill_run(
    *, rate: float = 0.5, join_at: float = 600.0, seconds: float = 900.0, row_cost: float = 0.05, seed: int = 0
):
    """``indexer`` runs from the start; ``search`` registers at ``join_at`` with its
    cursor at the beginning, back-fills at ``row_cost`` s a row, then keeps pace."""
    sim = _sim(seed=seed)
    sim.register_consumer("indexer", duration=0.01)
    sim.add_workload(rate, stop=seconds)
    sim.run(until=join_at)
    sim.register_consumer("search", duration=row_cost, start="beginning")
    sim.run(until=seconds + 10.0)
    return sim


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

DERIVED_CONSUMERS = ("index", "counter")


def derived_run(
    *,
    crash_every: int = 25,
    crashes: int = 4,
    rate: float = 2.0,
    seconds: float = 120.0,
    pages: int = 10,
    seed: int = 0,
):
    """Two consumers of one feed: ``index`` (a :class:`~.derived.PageIndex`:
    idempotent, rebuildable) and ``counter`` (a :class:`~.derived.ChangeCounter`:
    neither). The process crashes ``crashes`` times, each at the
    ``crash_every``-th pass through ``dispatch.after_handle_before_cursor`` (the
    effect has landed, the cursor has not moved: the row is handed over again
    on restart). Returns the run, with the views as ``sim.views``."""
    from fanoutsim.designs.outbox.derived import ChangeCounter, PageIndex, page_reader
    from fanoutsim.kernel.faults import CrashAtPoint

    plan = FaultPlan(
        tuple(
            CrashAtPoint("dispatch.after_handle_before_cursor", nth=crash_every * (i + 1), downtime=1.0)
            for i in range(crashes)
        )
    )
    sim = _sim(seed=seed, plan=plan)
    index, counter = PageIndex(page_reader(sim.store)), ChangeCounter()
    sim.register_consumer("index", index, rebuild=index.rebuild)
    sim.register_consumer("counter", counter)
    sim.views = {"index": index, "counter": counter}
    sim.add_workload(rate, pages=pages, stop=seconds)
    sim.run(until=seconds + 30.0)
    return sim


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
    """Per consumer of :func:`derived_run`: whether it is rebuildable, the
    checker's duplicates (by cause), and the derived state's drift — keys off
    and the sum of the drift (for a counter: the changes counted twice)."""
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

POOL_MODES = {"reserved listener": True, "shared pool": False}


def pool_run(
    reserve_listener: bool = True,
    *,
    backfill=(120.0, 240.0),
    rate: float = 1.0,
    seconds: float = 360.0,
    poll: float = 5.0,
    pool_size: int = 10,
    listener_wait: float = 1.0,
    seed: int = 0,
):
    """One consumer ``indexer`` at ``rate`` commits/s for ``seconds``; a
    :class:`~fanoutsim.designs.outbox.faults.Backfill` holds every shared pool
    connection during ``backfill``; the listener has its reserved connection
    or takes one from the pool (``reserve_listener``)."""
    from fanoutsim.designs.outbox.faults import Backfill

    cfg = OutboxConfig(
        safety_poll_interval=poll, pool_size=pool_size, reserve_listener=reserve_listener, listener_wait=listener_wait
    )
    sim = _indexer(_sim(cfg, seed=seed, plan=FaultPlan([Backfill(window=tuple(backfill))])), rate, seconds, 0.01)
    sim.run(until=seconds + poll + 1.0)
    sim.backfill_window = tuple(backfill)
    return sim


def pool_summary(runs: dict) -> pd.DataFrame:
    """Per run (``{label: sim}`` of :func:`pool_run`) and per phase (before,
    during, after the backfill): rows committed, hints heard, waiting, missed
    for want of a connection, and the commit → handled latency (p50, p99, max)."""
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
