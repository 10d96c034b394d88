"""How the engine's cost grows with the number of subscriptions.

100, 1,000 and 10,000 subscriptions over 100 reactors (one tenant), a quarter
of them filtered (``payload.quote.price > 100``, about half pass), with the
firing rate scaled so that deliveries stay near 1,000 per virtual second:
more subscriptions per reactor, fewer firings. Workflows take no time and
enough executor workers claim every 0.1 s to keep up, so what is measured is
the poll loop, the dispatch and the claim, at the SchedulerConfig defaults
otherwise (poll every 1 s, batch 100), memory store, trace on.

Each size runs ``--seconds`` virtual seconds (default 20, after a warm-up
second that is not timed) and the wall time is *extrapolated* to a virtual
hour: the load is steady, so cost per virtual second is flat. Printed per
size: CPU seconds per virtual hour, microseconds per delivery, the CEL share;
a log-log figure goes to ``--out`` (default ``out/bench_scale.png``).

    python benchmarks/bench_scale.py
    python benchmarks/bench_scale.py --sizes 100 1000 --seconds 10

Targets: < 120 s per virtual hour at 10,000 subscriptions, and at most 2x the
cost per delivery at 100: cost follows deliveries, not subscriptions x ticks.
Times are CPU seconds of this process (the machine may be shared). Figures to
read, not assertions.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REACTORS = 100
DELIVERIES_PER_S = 1000.0
FILTER = "payload.quote.price > 100"
PASS_RATE = 0.5  # of FILTER on quote payloads (prices lognormal around 100)


def build(n_subs: int, seed: int = 0, trace=True):
    """The run of ``n_subs`` subscriptions, not yet started (``trace``: as the face takes it)."""
    import fanoutsim as fs

    per_reactor = n_subs // REACTORS
    per_firing = per_reactor * (0.75 + 0.25 * PASS_RATE)  # deliveries one firing makes
    rate = DELIVERIES_PER_S / per_firing / REACTORS  # firings per second per reactor
    config = fs.SchedulerConfig(executor_workers=400)
    sim = fs.Simulation(config, seed=seed, trace=trace)
    for j in range(per_reactor):
        sim.runner.register_workflow(f"w{j}")
    for i in range(REACTORS):
        for j in range(per_reactor):
            filtered = (i * per_reactor + j) % 4 == 3  # a quarter of them
            sim.runner.subscribe_workflow_to_reactor(f"r{i}", f"w{j}", when=FILTER if filtered else None)
        sim.add_workload(f"r{i}", rate)
    return sim


def one(n_subs: int, seconds: float) -> dict:
    from bench_core_ratio import timed_run  # this folder is on sys.path when run as a script

    sim = build(n_subs)
    sim.run(until=1.0)  # warm-up: the first pass compiles the filters
    n0 = len(sim.store.rows("workflow_executions"))
    cpu, cel = timed_run(sim, 1.0 + seconds)
    deliveries = len(sim.store.rows("workflow_executions")) - n0
    per_hour = cpu / seconds * 3600
    return {
        "subs": n_subs,
        "cpu": cpu,
        "deliveries": deliveries,
        "per_hour": per_hour,
        "us_per_delivery": cpu / deliveries * 1e6,
        "cel_share": cel / cpu,
    }


def figure(rows: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    x = [r["subs"] for r in rows]
    ax.loglog(x, [r["per_hour"] for r in rows], "o-", label="CPU s per virtual hour")
    ax.loglog(x, [r["us_per_delivery"] for r in rows], "s--", label="µs per delivery")
    ax.set_xlabel("subscriptions (100 reactors, a quarter filtered)")
    ax.set_title("Engine cost at ~1,000 deliveries per virtual second")
    ax.legend()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120, bbox_inches="tight")
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    ap.add_argument("--seconds", type=float, default=20.0, help="virtual seconds timed per size (default 20)")
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench_scale.png")
    args = ap.parse_args()
    for n in args.sizes:
        if n < REACTORS or n % REACTORS:
            ap.error(f"--sizes: each must be a multiple of {REACTORS}, got {n}")
    rows = []
    print(
        f"scale: {REACTORS} reactors, a quarter filtered, ~{DELIVERIES_PER_S:.0f} deliveries per virtual s; "
        f"{args.seconds:g} virtual s per size, extrapolated to an hour"
    )
    for n in args.sizes:
        r = one(n, args.seconds)
        rows.append(r)
        print(
            f"  {n:6d} subscriptions: {r['per_hour']:8.1f} CPU s per virtual hour, "
            f"{r['us_per_delivery']:6.0f} µs per delivery ({r['deliveries']} deliveries, "
            f"CEL {r['cel_share']:.0%} of it)",
            flush=True,
        )
    if len(rows) > 1:
        print(
            f"  cost per delivery, largest / smallest: "
            f"{rows[-1]['us_per_delivery'] / rows[0]['us_per_delivery']:.2f}x (target <= 2x)"
        )
    print(f"  load average (1 min) {os.getloadavg()[0]:.2f}")
    figure(rows, args.out)
    print(f"  figure: {args.out}")


if __name__ == "__main__":
    main()
