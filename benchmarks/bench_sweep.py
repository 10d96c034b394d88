"""bench-sweep: a poll-interval sweep, timed.

6 poll intervals x 3 batch limits x 5 seeds = 90 runs of one virtual hour of
``data/scenarios/sweep.toml`` (2 firings/s, 4 unfiltered subscriptions), on
two worker processes, without the cache. Prints the wall time of the whole
sweep (target: under 2 minutes), the sum of the runs' own wall times (the
speed-up the pool gives) and a small table of what the sweep found.

    .venv/bin/python benchmarks/bench_sweep.py
    .venv/bin/python benchmarks/bench_sweep.py --workers 4 --until 600

A figure to read, not an assertion: no test times anything.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "data" / "scenarios" / "sweep.toml"
POLL_INTERVALS = [0.1, 0.25, 0.5, 1.0, 2.0, 5.0]
BATCH_LIMITS = [1, 10, 100]
TARGET_S = 120.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--until", type=float, default=3600.0, help="virtual seconds per run")
    parser.add_argument("--progress", action="store_true", help="show the progress bar")
    args = parser.parse_args()

    import fanoutsim as fs

    grid = {"reactor_poll_interval": POLL_INTERVALS, "reactor_poll_batch_limit": BATCH_LIMITS}
    runs = len(POLL_INTERVALS) * len(BATCH_LIMITS) * args.seeds
    print(f"bench-sweep: {len(POLL_INTERVALS)} poll intervals x {len(BATCH_LIMITS)} batch limits x "
          f"{args.seeds} seeds = {runs} runs of {args.until:g} virtual s, workers={args.workers}, no cache")
    t0 = time.perf_counter()
    df = fs.sweep(SCENARIO, grid=grid, seeds=range(args.seeds), workers=args.workers, until=args.until,
                  cache=None, progress=args.progress)
    wall = time.perf_counter() - t0
    busy = float(df["wall_s"].sum())
    print(f"wall {wall:.1f} s for {len(df)} runs ({wall / len(df):.2f} s a run; target < {TARGET_S:.0f} s: "
          f"{'met' if wall < TARGET_S else 'MISSED'})")
    print(f"runs' own wall time summed: {busy:.1f} s, i.e. {busy / wall:.2f} runs in flight on average")
    summary = (df.groupby(["reactor_poll_batch_limit", "reactor_poll_interval"])
                 [["fire_to_dispatch_p50_s", "fire_to_dispatch_p99_s", "polls_per_s", "backlog"]]
                 .mean().round(3))
    print(summary.to_string())


if __name__ == "__main__":
    main()
