"""bench-sweep: a poll-interval sweep, timed.

6 poll intervals x 3 batch limits x 5 seeds = 90 runs of one virtual hour of
``fanoutsim/examples/sweep.toml`` (2 firings/s, 4 unfiltered subscriptions), on
two worker processes, without the cache. Prints the wall time of the whole
sweep (target: under 30 s), the sum of the runs' own wall times (the
speed-up the pool gives) and a small table of what the sweep found.

    .venv/bin/python benchmarks/bench_sweep.py
    .venv/bin/python benchmarks/bench_sweep.py --workers 4 --until 600
    .venv/bin/python benchmarks/bench_sweep.py --only pool --repeat 3   # the best of 3 sweeps, and the range

The Dask path (``--dask``, or ``--only dask``): 120 runs of one virtual hour
(6 poll intervals x 4 batch limits x 5 seeds) on the same two-process pool
and on a 2-worker ``LocalCluster`` (1 thread each, worker processes), without
the cache. Prints both wall times and their ratio (target: Dask within 20% of
the pool), the per-task overhead (120 runs of one virtual second on the same
cluster: worker time not spent running, per task), and from them a projected
wall time of a 10,000-run sweep on 64 workers, naming what bounds it.

    .venv/bin/python benchmarks/bench_sweep.py --only dask

A figure to read, not an assertion: no test times anything.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "fanoutsim" / "examples" / "sweep.toml"
POLL_INTERVALS = [0.1, 0.25, 0.5, 1.0, 2.0, 5.0]
BATCH_LIMITS = [1, 10, 100]
TARGET_S = 30.0  # issue 11: 6 P x 3 batch limits x 5 seeds on 2 workers


DASK_INTERVALS = [0.1, 0.25, 0.5, 1.0, 2.0, 5.0]
DASK_BATCHES = [1, 10, 50, 100]  # x 6 intervals x 5 seeds = 120 runs
DASK_TARGET = 1.20  # Dask's wall time at most 20% over the pool's
PROJECT_RUNS, PROJECT_WORKERS = 10_000, 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--until", type=float, default=3600.0, help="virtual seconds per run")
    parser.add_argument("--progress", action="store_true", help="show the progress bar")
    parser.add_argument(
        "--repeat", type=int, default=1, help="sweeps on the pool; the fastest is shown, with the range (default 1)"
    )
    parser.add_argument("--only", choices=["pool", "dask"], help="run one part (default: both)")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, got {args.repeat}")
    if args.only != "dask":
        pool_sweep(args)
    if args.only != "pool":
        dask_sweep(args)


def dask_sweep(args) -> None:
    import os

    from distributed import Client, LocalCluster

    import fanoutsim as fs

    grid = {"reactor_poll_interval": DASK_INTERVALS, "reactor_poll_batch_limit": DASK_BATCHES}
    runs = len(DASK_INTERVALS) * len(DASK_BATCHES) * args.seeds
    kw = dict(grid=grid, seeds=range(args.seeds), until=args.until, cache=None, progress=args.progress)
    print(
        f"\nbench-sweep, Dask: {runs} runs of {args.until:g} virtual s, no cache; load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    t0 = time.perf_counter()
    pooled = fs.sweep(SCENARIO, workers=args.workers, **kw)
    pool_wall = time.perf_counter() - t0
    print(
        f"process pool, {args.workers} workers: wall {pool_wall:.1f} s "
        f"(runs' own wall time summed {pooled['wall_s'].sum():.1f} s)"
    )
    t0 = time.perf_counter()
    with (
        LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        started = time.perf_counter() - t0
        t1 = time.perf_counter()
        on_dask = fs.sweep(SCENARIO, client=client, **kw)
        dask_wall = time.perf_counter() - t1
        # the overhead: the same number of runs of one virtual second each
        t2 = time.perf_counter()
        tiny = fs.sweep(SCENARIO, client=client, **{**kw, "until": 1.0})
        tiny_wall = time.perf_counter() - t2
    same = on_dask.drop(columns="wall_s").equals(pooled.drop(columns="wall_s"))
    ratio = dask_wall / pool_wall
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"LocalCluster, {args.workers} workers x 1 thread: wall {dask_wall:.1f} s (cluster start {started:.1f} s "
        f"apart); Dask / pool = {ratio:.2f} (target <= {DASK_TARGET:.2f}: "
        f"{'met' if ratio <= DASK_TARGET else 'MISSED'}); same table row for row: {same}; load average now {load}"
    )
    run_s = float(on_dask["wall_s"].mean())
    overhead_s = max(0.0, (tiny_wall * args.workers - float(tiny["wall_s"].sum())) / len(tiny))
    # every result passes through the scheduler and this process one at a time; that serial share of a
    # task is part of the overhead measured, so 10,000 x overhead bounds it from above
    print(
        f"per-task overhead: {overhead_s * 1000:.1f} ms of worker time per task beyond the run "
        f"({len(tiny)} runs of 1 virtual s: wall {tiny_wall:.2f} s, runs' own {tiny['wall_s'].sum():.2f} s); "
        f"a one-hour run takes {run_s:.2f} s"
    )
    compute = PROJECT_RUNS * (run_s + overhead_s) / PROJECT_WORKERS
    serial = PROJECT_RUNS * overhead_s
    bound = (
        "the runs themselves (compute / workers)"
        if compute >= serial
        else "the calling process handling each result (scheduler + cache)"
    )
    print(
        f"projected: {PROJECT_RUNS:,} one-hour runs on {PROJECT_WORKERS} workers ~ "
        f"{max(compute, serial) / 60:.1f} min: compute {PROJECT_RUNS:,} x ({run_s:.2f} + {overhead_s:.3f}) s "
        f"/ {PROJECT_WORKERS} = {compute:.0f} s, against at most {serial:.0f} s of serial result handling "
        f"({PROJECT_RUNS:,} x the overhead); bound by {bound}. "
        f"On paper: assumes {PROJECT_WORKERS} workers as fast as these cores, no stragglers, "
        "and a scheduler that keeps up (Dask's handles thousands of tasks a second)"
    )


def pool_sweep(args) -> None:
    import fanoutsim as fs

    grid = {"reactor_poll_interval": POLL_INTERVALS, "reactor_poll_batch_limit": BATCH_LIMITS}
    runs = len(POLL_INTERVALS) * len(BATCH_LIMITS) * args.seeds
    print(
        f"bench-sweep: {len(POLL_INTERVALS)} poll intervals x {len(BATCH_LIMITS)} batch limits x "
        f"{args.seeds} seeds = {runs} runs of {args.until:g} virtual s, workers={args.workers}, no cache"
    )
    sweeps = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        df = fs.sweep(
            SCENARIO,
            grid=grid,
            seeds=range(args.seeds),
            workers=args.workers,
            until=args.until,
            cache=None,
            progress=args.progress,
        )
        sweeps.append((time.perf_counter() - t0, df))
    walls = sorted(w for w, _ in sweeps)
    wall, df = min(sweeps, key=lambda s: s[0])
    if any(not d.drop(columns="wall_s").equals(df.drop(columns="wall_s")) for _, d in sweeps):
        raise SystemExit("the repeated sweeps found different tables")
    busy = float(df["wall_s"].sum())
    spread = f"; best of {len(sweeps)}, {walls[0]:.1f}-{walls[-1]:.1f} s" if len(sweeps) > 1 else ""
    print(
        f"wall {wall:.1f} s for {len(df)} runs ({wall / len(df):.2f} s a run{spread}; target < {TARGET_S:.0f} s: "
        f"{'met' if wall < TARGET_S else 'MISSED'})"
    )
    print(f"runs' own wall time summed: {busy:.1f} s, i.e. {busy / wall:.2f} runs in flight on average")
    summary = (
        df.groupby(["reactor_poll_batch_limit", "reactor_poll_interval"])[
            ["fire_to_dispatch_p50_s", "fire_to_dispatch_p99_s", "polls_per_s", "backlog"]
        ]
        .mean()
        .round(3)
    )
    print(summary.to_string())


if __name__ == "__main__":
    main()
