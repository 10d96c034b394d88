"""The experiments of the outbox lessons (notebooks 8 and 9), to read and to change.

Each function builds one small seeded run of fanoutsim's transactional outbox
(Subspace's design) on the virtual clock — or, :func:`clock_comparison`, on both
clocks — with the times and rates the lesson uses; the numbers come from the
readers in :mod:`fanoutsim.analysis.outbox` and the checker
:func:`fanoutsim.check_outbox`. Nothing here is part of the library: copy a
function into your notebook and change it. Every run is deterministic in its
arguments and ``seed`` (the wall-clock half of :func:`clock_comparison` aside).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

from fanoutsim import OutboxRealtime, OutboxSimulation, check_outbox
from fanoutsim.analysis import outbox as oa
from fanoutsim.designs.outbox import OutboxConfig
from fanoutsim.designs.outbox.derived import ChangeCounter, PageIndex, page_reader
from fanoutsim.faults import Backfill, CrashAtPoint, FaultPlan, Notifications
from fanoutsim.kernel.validate import is_real


def _sim(config: OutboxConfig | None = None, seed: int = 0, plan: FaultPlan | None = None):
    """An OutboxSimulation under ``config`` with the fault ``plan``."""
    return OutboxSimulation(config or OutboxConfig(), seed=seed, faults=plan)


def _lossy(drop: float) -> FaultPlan | None:
    """A plan that loses ``drop`` of the hints; none when nothing is lost."""
    return FaultPlan([Notifications(drop=drop)]) if drop > 0 else None


def _indexer(target, rate: float, stop: float, duration: float):
    """``target`` (a simulation or a wall-clock runtime) with one consumer
    ``indexer`` (``duration`` s a row) and ``rate`` commits/s until ``stop``.
    (:func:`latency_run` spells this out, with :func:`_lossy`: lesson 8 shows its code.)"""
    target.register_consumer("indexer", duration=duration)
    target.add_workload(rate, stop=stop)
    return target


def _delivery(report, lat: pd.DataFrame) -> dict[str, Any]:
    """The checker's committed, delivered and lost, and the share of rows whose
    own hint arrived (``lat``: ``oa.latency_frame``): a summary row's start."""
    return {
        "committed": report.total["committed"],
        "delivered": report.total["delivered"],
        "lost": report.total["lost"],
        "hinted_share": float(lat["hinted"].mean()),
    }


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


def latency_sweep(
    drops=(0.0, 0.05, 0.2, 0.5, 1.0), polls=(1.0, 5.0, 15.0), **kw
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every (drop, poll) pair: a summary table and every row's latency.

    Summary columns: drop, poll, committed, delivered, lost, hinted_share,
    mean_s, p50_s, p99_s, max_s, and ``max_over_poll`` (the worst latency as a
    multiple of the poll interval)."""
    rows, frames = [], []
    for poll in polls:
        for drop in drops:
            sim = latency_run(drop, poll, **kw)
            lat = oa.latency_frame(sim)
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
        "description": (
            "one consumer behind a lossy hint channel; the safety poll rescues (notebook 8)"
        ),
        "run": {"seed": 0, "until": stop + float(max_poll) + 1.0},
        "outbox": {"safety_poll_interval": 5.0},
        "consumers": [{"name": "indexer", "duration": float(duration)}],
        "workload": [{"rate": float(rate), "pages": 100, "stop": stop}],
        "faults": [{"kind": "notifications", "drop": 0.0}],
    }


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
    config, plan = OutboxConfig(safety_poll_interval=poll), _lossy(drop)
    sim = _indexer(_sim(config, seed=seed, plan=plan), rate, seconds, duration)
    sim.run(until=seconds + poll + 1.0)
    runs = [("virtual", sim, check_outbox(sim), oa.latency_frame(sim))]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(folder or tmp) / f"clocks-{seed}.duckdb"
        rt = OutboxRealtime(config, store=str(db), faults=plan, seed=seed)
        try:
            _indexer(rt, rate, seconds, duration).start()
            time.sleep(seconds + poll + 1.0)
            rt.stop()
            runs.append(("wall", rt, check_outbox(rt), oa.latency_frame(rt)))
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


def _steady(sim, n: int, every: float = 1.0, poison_at: int | None = None) -> None:
    """Commit ``n`` rows, one every ``every`` seconds (row ``poison_at`` is the poison one)."""
    for i in range(n):
        sim.run(until=i * every + every / 2)
        sim.commit(f"p{i % 10}" if i != poison_at else "poison")


def hung_run(
    *, hang: float = 300.0, timeout: float = 5.0, at_row: int = 10, rows: int = 60, seed: int = 0
):
    """Two consumers see the same hang (their ``at_row``-th step never returns
    for ``hang`` seconds): ``guarded`` has a ``timeout``, ``unguarded`` none."""
    sim = _sim(seed=seed)

    def hangs_once():
        calls = {"n": 0}

        def duration(rng):
            calls["n"] += 1
            return hang if calls["n"] == at_row else 0.01

        return duration

    sim.register_consumer(
        "guarded", duration=hangs_once(), timeout=timeout, backoff=1.0, jitter=0.0
    )
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
    sim.register_consumer(
        "triage", triage, retry_budget=retry_budget, backoff=0.5, backoff_cap=60.0
    )
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
    *,
    rate: float = 0.5,
    join_at: float = 600.0,
    seconds: float = 900.0,
    row_cost: float = 0.05,
    seed: int = 0,
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


def derived_run(
    *,
    crash_every: int = 25,
    crashes: int = 4,
    rate: float = 2.0,
    seconds: float = 120.0,
    pages: int = 10,
    seed: int = 0,
):
    """Two consumers of one feed: ``index`` (a ``PageIndex``:
    idempotent, rebuildable) and ``counter`` (a ``ChangeCounter``:
    neither). The process crashes ``crashes`` times, each at the
    ``crash_every``-th pass through ``dispatch.after_handle_before_cursor`` (the
    effect has landed, the cursor has not moved: the row is handed over again
    on restart). Returns the run, with the views as ``sim.views``."""
    plan = FaultPlan(
        tuple(
            CrashAtPoint(
                "dispatch.after_handle_before_cursor", nth=crash_every * (i + 1), downtime=1.0
            )
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
    ``Backfill`` fault holds every shared pool
    connection during ``backfill``; the listener has its reserved connection
    or takes one from the pool (``reserve_listener``)."""
    cfg = OutboxConfig(
        safety_poll_interval=poll,
        pool_size=pool_size,
        reserve_listener=reserve_listener,
        listener_wait=listener_wait,
    )
    sim = _indexer(
        _sim(cfg, seed=seed, plan=FaultPlan([Backfill(window=tuple(backfill))])),
        rate,
        seconds,
        0.01,
    )
    sim.run(until=seconds + poll + 1.0)
    sim.backfill_window = tuple(backfill)
    return sim
