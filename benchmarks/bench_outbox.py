"""The outbox dispatcher's speed: a virtual day at 10 commits/s, 6 consumers,
hints on with 5% dropped; wall time and deliveries per wall second.

    .venv/bin/python benchmarks/bench_outbox.py            # a virtual day (target < 60 s wall)
    .venv/bin/python benchmarks/bench_outbox.py --hours 1  # a shorter run
"""

from __future__ import annotations

import argparse
import time

from fanoutsim.designs.outbox.checker import check_outbox
from fanoutsim.designs.outbox.simulation import OutboxSimulation
from fanoutsim.faults import FaultPlan, Notifications


def build(trace: bool) -> OutboxSimulation:
    """The benchmark's dispatcher, its consumers and its workload, not yet run."""
    sim = OutboxSimulation(seed=0, faults=FaultPlan([Notifications(drop=0.05)]), trace=trace)
    for i in range(6):
        sim.register_consumer(f"consumer{i}", duration=0.001)
    sim.add_workload(10.0)
    return sim


def day_args(doc: str) -> argparse.Namespace:
    """The arguments of a design's day benchmark: ``--hours`` (24) and ``--trace``."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--trace", action="store_true", help="record the trace (and run the checker)")
    return ap.parse_args()


def main() -> None:
    args = day_args(__doc__)
    t0 = time.perf_counter()
    sim = build(args.trace)
    sim.run(until=args.hours * 3600)
    wall = time.perf_counter() - t0
    m = sim.metrics()
    delivered = sum(v for k, v in m.items() if k.startswith("fanoutsim_outbox_handled_total"))
    print(
        f"{args.hours:g} virtual h: {wall:.1f} s wall, {delivered:.0f} deliveries, "
        f"{delivered / wall:,.0f} deliveries/s, {m['fanoutsim_outbox_hints_dropped_total']} hints dropped"
    )
    if args.trace:
        t1 = time.perf_counter()
        report = check_outbox(sim)
        print(f"checker: {time.perf_counter() - t1:.1f} s; lost {report.total['lost']}, valid {report.valid}")


if __name__ == "__main__":
    main()
