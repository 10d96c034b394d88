"""The leased-consumer design's speed: events/s over partitions, several consumers
pulling with leases; wall time, deliveries per wall second, the checker's time.

    .venv/bin/python benchmarks/bench_leases.py              # a virtual day
    .venv/bin/python benchmarks/bench_leases.py --hours 1    # a shorter run
    .venv/bin/python benchmarks/bench_leases.py --trace      # record the trace and run the checker

The workload: 10 events/s over 8 partitions; four consumers (work of 20 ms, 5%
of attempts nacked, 30 s leases, in-flight 8, batch 8, a pull every 0.2 s) and
one slow consumer whose work sometimes outlasts its lease (duplicates by
expiry). Crashes: one a virtual hour on average, 5 s down.
"""

from __future__ import annotations

import resource
import time

from fanoutsim.designs.leases.checker import check_leases
from fanoutsim.designs.leases.simulation import LeaseSimulation
from fanoutsim.kernel.faults import CrashRandomly, FaultPlan


def build(trace: bool) -> LeaseSimulation:
    """The benchmark's node, its consumers and its workload, not yet run."""
    sim = LeaseSimulation(seed=0, faults=FaultPlan([CrashRandomly(mean_gap=3600.0, downtime=5.0)]), trace=trace)
    for i in range(4):
        sim.register_consumer(
            f"consumer{i}",
            duration=0.02,
            fail=0.05,
            nack_delay=1.0,
            lease_seconds=30,
            in_flight_limit=8,
            batch_limit=8,
            poll_interval=0.2,
        )
    sim.register_consumer(
        "slow",
        duration=lambda rng: rng.expovariate(1 / 4.0),
        lease_seconds=10,
        in_flight_limit=8,
        batch_limit=8,
        poll_interval=0.2,
    )
    sim.add_workload(10.0, partitions=8)
    return sim


def main() -> None:
    from bench_outbox import day_args  # this folder is on sys.path when run as a script

    args = day_args(__doc__)
    t0 = time.perf_counter()
    sim = build(args.trace)
    sim.run(until=args.hours * 3600)
    wall = time.perf_counter() - t0
    m = sim.metrics()
    acked = sum(v for k, v in m.items() if k.startswith("fanoutsim_lease_acked_total"))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{args.hours:g} virtual h: {wall:.1f} s wall, {acked:.0f} acks, {acked / wall:,.0f} acks per wall s, "
        f"{len(sim.events())} events retained, peak RSS {rss:.0f} MiB"
    )
    if args.trace:
        t1 = time.perf_counter()
        report = check_leases(sim)
        print(
            f"checker: {time.perf_counter() - t1:.1f} s; lost {report.total['lost']}, "
            f"duplicates {report.total.get('duplicates_by_cause')}, valid {report.valid}"
        )


if __name__ == "__main__":
    main()
