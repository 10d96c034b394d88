"""A run of ten million deliveries, to see that it fits: wall time, CPU time, peak RSS.

The reactor at bench_scale's shape (100 reactors, 1,000 subscriptions, a quarter
filtered, about 1,000 deliveries per virtual second), memory store, the trace
on and spilled to Parquet in chunks (``trace=FOLDER``), so that what grows in
memory is the tables: every execution row stays, as the real table keeps it.
Runs until the executions table holds ``--deliveries`` rows, printing its
progress; the spilled trace goes to a temporary folder that is removed at
the end (``--keep DIR`` keeps it there).

    nice python benchmarks/ten_million.py                        # ten million (long: tens of minutes)
    python benchmarks/ten_million.py --deliveries 200000         # a smaller one

Prints one JSON line at the end: deliveries, virtual seconds, wall and CPU
seconds, peak RSS, the trace's rows and its size on disk.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--deliveries", type=int, default=10_000_000)
    ap.add_argument("--subs", type=int, default=1000, help="subscriptions (a multiple of 100)")
    ap.add_argument("--step", type=float, default=100.0, help="virtual seconds between progress lines")
    ap.add_argument("--keep", type=Path, help="spill the trace to this (new) folder and keep it")
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from bench_scale import build
    from targets import _executions as executions

    folder = args.keep or Path(tempfile.mkdtemp(prefix="fanoutsim-trace-")) / "trace"
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        sim = build(args.subs, trace=folder)
        until = 0.0
        while executions(sim) < args.deliveries:
            until += args.step
            sim.run(until=until)
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
            print(f"t={until:8.0f} s  deliveries {executions(sim):10,d}  peak RSS {rss:6.2f} GiB", file=sys.stderr)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        sim._trace.spill()
        disk = sum(f.stat().st_size for f in folder.iterdir())
        out = {
            "deliveries": executions(sim),
            "virtual_s": until,
            "wall_s": round(wall, 1),
            "cpu_s": round(cpu, 1),
            "us_cpu_per_delivery": round(cpu / executions(sim) * 1e6, 1),
            "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
            "trace_files": sim._trace._parts,
            "trace_disk_mib": round(disk / 2**20),
        }
        print(json.dumps(out))
    finally:
        if args.keep is None:
            shutil.rmtree(folder.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
