"""bench-day: one virtual day of the reactor subscription design, timed.

The scenario (``data/scenarios/bench-day.toml``): SchedulerConfig defaults,
Poisson firings at 1/s over 4 reactors, 20 subscriptions in 2 tenants, a
quarter of them with CEL filters. Prints wall seconds, simulated deliveries
per wall second, peak memory, and the ratio against a bare SimPy loop that
processes the same number of events, measured in the same run. Then one
virtual hour of the same on the DuckDB store.

    python benchmarks/bench_day.py                 # the whole report
    python benchmarks/bench_day.py --until 3600    # a shorter day
    python benchmarks/bench_day.py --skip-duckdb

Targets (issue "engine core"): bench-day under 60 s and 1.5 GiB in memory.
These are figures to read, not assertions: no test times anything.
"""
from __future__ import annotations

import argparse
import gc
import resource
import time
from pathlib import Path

import simpy

from fanoutsim.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "data" / "scenarios" / "bench-day.toml"


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def bare_simpy(events: int) -> float:
    """Wall seconds for one SimPy process doing ``events`` timeouts."""
    env = simpy.Environment()

    def loop():
        for _ in range(events):
            yield env.timeout(1.0)

    env.process(loop())
    t0 = time.perf_counter()
    env.run()
    return time.perf_counter() - t0


def run(store: str, until: float, trace: bool = True) -> dict:
    scenario = load_scenario(SCENARIO)
    sim = scenario.build(store=store)
    if not trace:
        from fanoutsim.trace import NullTrace
        sim._trace = NullTrace()
        sim.engine.trace = sim._trace
    gc.collect()
    t0 = time.perf_counter()
    sim.run(until=until)
    wall = time.perf_counter() - t0
    events = next(sim.env._eid)  # SimPy numbers every scheduled event
    deliveries = len(sim.store.rows("workflow_executions"))
    return {"store": store, "virtual_s": until, "wall_s": wall, "events": events,
            "deliveries": deliveries, "firings": sum(
                v for k, v in sim.metrics().items() if k.startswith("fanoutsim_reactor_firings_total")),
            "trace_rows": len(sim._trace)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--until", type=float, default=86400.0, help="virtual seconds (default: a day)")
    ap.add_argument("--duckdb-until", type=float, default=3600.0, help="virtual seconds on DuckDB")
    ap.add_argument("--skip-duckdb", action="store_true")
    args = ap.parse_args()

    r = run("memory", args.until)
    peak = peak_rss_mib()
    bare = bare_simpy(r["events"])
    print(f"bench-day, in-memory store, {r['virtual_s']:.0f} virtual s (trace on)")
    print(f"  wall time              {r['wall_s']:8.2f} s    (target < 60 s)")
    print(f"  firings / deliveries   {r['firings']:8.0f} / {r['deliveries']}")
    print(f"  deliveries per wall s  {r['deliveries'] / r['wall_s']:8.0f}")
    print(f"  virtual s per wall s   {r['virtual_s'] / r['wall_s']:8.0f}")
    print(f"  trace rows             {r['trace_rows']:8d}")
    print(f"  peak memory (RSS)      {peak:8.0f} MiB  (target < 1536 MiB)")
    print(f"  SimPy events           {r['events']:8d}")
    print(f"  bare SimPy, same count {bare:8.2f} s    -> engine/bare ratio {r['wall_s'] / bare:.1f}x")
    if not args.skip_duckdb:
        d = run("duckdb", args.duckdb_until)
        print(f"bench-day, DuckDB store (in memory), {d['virtual_s']:.0f} virtual s")
        print(f"  wall time              {d['wall_s']:8.2f} s")
        print(f"  deliveries per wall s  {d['deliveries'] / d['wall_s']:8.0f}")
        print(f"  virtual s per wall s   {d['virtual_s'] / d['wall_s']:8.1f}")


if __name__ == "__main__":
    main()
