"""The wall-clock runtime over a DuckDB file: latency, overhead, idle CPU, load.

For poll intervals 0.05, 0.25 and 1 s, a steady workload (20 firings/s, two
subscriptions) runs for a while on the wall clock; we report the
fire-to-dispatch latency p50/p99, the engine's own overhead above the poll
wait, the statements per second it sends to DuckDB, and the CPU it burns
while idle (no firings at all).

The overhead is measured against the same scenario, seed and duration under
the virtual clock, where the engine costs no time at all: both see the same
poll wait (uniform on [0, P), mean P/2) and the same cut at the window's
ends, so their difference is what the wall clock adds — the statements, the
thread wake-ups.

    python benchmarks/bench_realtime.py             # 20 s per interval
    python benchmarks/bench_realtime.py --seconds 5

Targets: overhead at p50 under 10 ms; idle CPU under 5% of one core.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

import fanoutsim as fs
from fanoutsim.analysis import latency_frame


def setup(host, rate: float) -> None:
    host.runner.subscribe_workflow_to_reactor("r", "audit")
    host.runner.subscribe_workflow_to_reactor("r", "alerts", when="payload.quote.price > 100")
    if rate:
        host.add_workload("r", rate)


def run(interval: float, seconds: float, rate: float, folder: Path) -> dict:
    config = fs.SchedulerConfig(reactor_poll_interval=interval)
    rt = fs.Realtime(config, store=str(folder / f"p{interval}-{rate}.duckdb"))
    setup(rt, rate)
    rt.start()
    cpu0, wall0, st0 = time.process_time(), time.monotonic(), rt.store.statements
    time.sleep(seconds)
    cpu, wall, statements = time.process_time() - cpu0, time.monotonic() - wall0, rt.store.statements - st0
    rt.stop()
    lat = latency_frame(rt)["fire_to_dispatch"].to_numpy() if rate else np.array([])
    rt.close()
    out = {"interval": interval, "cpu_share": cpu / wall, "statements_per_s": statements / wall, "n": len(lat)}
    if len(lat):
        sim = fs.Simulation(config, seed=0)
        setup(sim, rate)
        sim.run(until=seconds)
        virtual = latency_frame(sim)["fire_to_dispatch"].to_numpy()
        out.update(
            p50=float(np.percentile(lat, 50)),
            p99=float(np.percentile(lat, 99)),
            mean=float(lat.mean()),
            overhead_mean=float(lat.mean() - virtual.mean()),
            overhead_p50=float(np.percentile(lat, 50) - np.percentile(virtual, 50)),
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rate", type=float, default=20.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        print(
            f"{'P (s)':>6} {'n':>6} {'p50 ms':>8} {'p99 ms':>8} {'overhead mean ms':>17} "
            f"{'overhead p50 ms':>16} {'stmts/s':>8} {'busy CPU':>9} {'idle CPU':>9}"
        )
        for interval in (0.05, 0.25, 1.0):
            busy = run(interval, args.seconds, args.rate, folder)
            idle = run(interval, min(args.seconds, 10.0), 0.0, folder)
            print(
                f"{interval:>6} {busy['n']:>6} {busy['p50'] * 1e3:>8.1f} {busy['p99'] * 1e3:>8.1f} "
                f"{busy['overhead_mean'] * 1e3:>17.1f} {busy['overhead_p50'] * 1e3:>16.1f} "
                f"{busy['statements_per_s']:>8.0f} {busy['cpu_share']:>9.1%} {idle['cpu_share']:>9.1%}"
            )
    print("targets: overhead at p50 < 10 ms; idle CPU < 5% of one core")


if __name__ == "__main__":
    main()
