"""Instructions per delivery, counted by valgrind's callgrind: a figure a loaded
machine does not move (CPU time on two cores shared by many varies by 20%).

    python benchmarks/instructions.py day            # bench-day, one virtual hour
    python benchmarks/instructions.py outbox --seconds 900

Only the run is counted: the child calls ``os.getppid()`` just before
``sim.run`` (callgrind zeroes its counters there) and ``os.getpid()`` just
after (callgrind dumps them), so imports and set-up are left out. Needs
``valgrind`` on the PATH; takes a minute or two (callgrind runs ~50x slower).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = ("day", "outbox", "scale", "leases")
SECONDS = {"day": 600.0, "outbox": 300.0, "scale": 2.0, "leases": 600.0}


def build(case: str):
    """The case's simulation, not yet run, and how to count its deliveries afterwards."""
    sys.path.insert(0, str(HERE))
    import targets

    if case == "day":
        sim, _ = targets._bench_day(0.0)
        return sim, lambda: targets._executions(sim)
    if case == "scale":
        from bench_scale import build as scale_build

        sim = scale_build(10000)
        sim.run(until=1.0)  # the warm-up bench_scale does: the first pass compiles the filters
        n0 = targets._executions(sim)
        return sim, lambda: targets._executions(sim) - n0
    if case == "outbox":
        from bench_outbox import build as outbox_build

        sim = outbox_build(trace=False)
        return sim, lambda: targets._total(sim.metrics(), "fanoutsim_outbox_handled_total")
    from bench_leases import build as leases_build

    sim = leases_build(trace=False)
    return sim, lambda: targets._total(sim.metrics(), "fanoutsim_lease_acked_total")


def child(case: str, seconds: float) -> None:
    sim, count = build(case)
    until = sim.now + seconds
    os.getppid()  # callgrind: zero the counters
    sim.run(until=until)
    os.getpid()  # callgrind: dump them
    print(json.dumps({"deliveries": count()}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case", choices=CASES)
    ap.add_argument("--seconds", type=float, help="virtual seconds counted (default: the case's)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    seconds = args.seconds or SECONDS[args.case]
    if args.child:
        child(args.case, seconds)
        return
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={tmp}/cg.out",
            "--zero-before=os_getppid",
            "--dump-before=os_getpid",
            sys.executable,
            __file__,
            args.case,
            "--seconds",
            str(seconds),
            "--child",
        ]
        env = {**os.environ, "PYTHONHASHSEED": "0"}  # str hashes fixed: the same dict probes every run
        done = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
        deliveries = json.loads(done.stdout.strip().splitlines()[-1])["deliveries"]
        dumps = sorted(glob.glob(f"{tmp}/cg.out.*"))  # the dump at getpid (the final one is the rest)
        # the dump's summary: the instructions counted since the zeroing (its "totals"
        # also charge the frames that were open when the counters were zeroed)
        summary = [line for line in Path(dumps[0]).read_text().splitlines() if line.startswith("summary:")]
    instructions = int(summary[0].split()[1])
    print(
        json.dumps(
            {
                "case": args.case,
                "seconds": seconds,
                "deliveries": deliveries,
                "instructions": instructions,
                "per_delivery": round(instructions / deliveries),
            }
        )
    )


if __name__ == "__main__":
    main()
