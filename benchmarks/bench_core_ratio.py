"""The engine against a minimal hand-written SimPy model of the same fan-out.

The shape is bench-day's (``fanoutsim/examples/bench-day.toml``): Poisson firings
at 1/s over 4 reactors and 2 tenants, 20 subscriptions of which a quarter
carry a CEL filter, a poll every second taking up to 100 firings past each
watermark (``fired_at >``, as shipped). The minimal model is what one would
write by hand for that: a list per stream, a watermark per subscription, the
filters as Python expressions, a delivery appended to a list — no store, no
transactions, no trace, no executor. Both draw the same firings (the same
seeded workload streams), and the bench asserts they deliver the same
(workflow, tenant, reactor, fired_at) multiset before it prints a ratio.

The engine's time spent evaluating CEL (celpy today) is measured on its own
and printed beside the ratio, with the ratio without it: the CEL filter is a
separate piece of work.

    python benchmarks/bench_core_ratio.py              # 6 virtual hours
    python benchmarks/bench_core_ratio.py --hours 1

Times are CPU seconds of this process (the machine may be shared), both models
in one process. Target: engine/minimal <= 10x. A figure to read, not an
assertion on time.
"""

from __future__ import annotations

import argparse
import collections
import gc
import os
import random
import time
from pathlib import Path

import simpy

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "fanoutsim" / "examples" / "bench-day.toml"

# bench-day's filters, written by hand (the CEL texts they stand for are checked below)
FILTERS = {
    "payload.quote.price > 100 && payload.quote.region == 'us-east'": lambda p: (
        p["quote"]["price"] > 100 and p["quote"]["region"] == "us-east"
    ),
    "payload.quote.region == 'eu-central'": lambda p: p["quote"]["region"] == "eu-central",
    "payload.quote.price > 130": lambda p: p["quote"]["price"] > 130,
}


def minimal(scenario, until: float, seed: int = 0) -> tuple[float, list]:
    """The hand-written model; returns (wall seconds, deliveries)."""
    from fanoutsim.designs.reactor.workload import GENERATORS
    from fanoutsim.kernel.timeutil import US, parse_start, rfc3339

    start_us = parse_start(scenario.start)
    cfg = scenario.config
    env = simpy.Environment()
    logs: dict[tuple[str, str], list] = collections.defaultdict(list)  # stream -> [(fired_at, payload)]
    subs = sorted(scenario.subscriptions, key=lambda s: (s.tenant, s.reactor, s.workflow))
    marks = [None] * len(subs)
    filters = [None if s.when is None else FILTERS[s.when] for s in subs]
    delivered: list = []

    def workload(w, rng):
        gen = GENERATORS[w.payload]
        k = 0
        while True:
            yield env.timeout(rng.expovariate(w.rate))
            logs[(w.reactor, w.tenant)].append((start_us + round(env.now * US), gen(rng, k)))
            k += 1

    def poll():
        limit = cfg.reactor_poll_batch_limit
        while True:
            for i, s in enumerate(subs):
                log = logs[(s.reactor, s.tenant)]
                mark = marks[i]
                lo = 0
                if mark is not None:  # the first firing past the watermark
                    hi = len(log)
                    while lo < hi:
                        mid = (lo + hi) // 2
                        if log[mid][0] <= mark:
                            lo = mid + 1
                        else:
                            hi = mid
                keep = filters[i]
                for fired_at, payload in log[lo : lo + limit]:
                    if keep is None or keep(payload):
                        delivered.append((s.workflow, s.tenant, s.reactor, fired_at))
                    marks[i] = fired_at
            yield env.timeout(cfg.reactor_poll_interval)

    for n, w in enumerate(scenario.workloads):
        env.process(workload(w, random.Random(f"fanoutsim:workload:{seed}:{n}")))
    env.process(poll())
    t0 = time.process_time()
    env.run(until=until)
    cpu = time.process_time() - t0
    return cpu, [(*d[:3], rfc3339(d[3])) for d in delivered]  # as the engine's context says it


def timed_run(sim, until: float) -> tuple[float, float]:
    """Run ``sim`` to ``until``; returns (CPU s, of which evaluating CEL filters)."""
    from fanoutsim.designs.reactor import predicate

    spent = [0.0]
    evaluate = predicate.Predicate.evaluate

    def timed(self, act):
        t0 = time.process_time()
        try:
            return evaluate(self, act)
        finally:
            spent[0] += time.process_time() - t0

    predicate.Predicate.evaluate = timed
    try:
        gc.collect()
        t0 = time.process_time()
        sim.run(until=until)
        cpu = time.process_time() - t0
    finally:
        predicate.Predicate.evaluate = evaluate
    return cpu, spent[0]


def engine(scenario, until: float) -> tuple[float, float, list]:
    """The engine (memory store, trace on); returns (wall s, of which CEL s, deliveries)."""
    import json

    sim = scenario.build(store="memory")
    wall, cel = timed_run(sim, until)
    out = []
    for r in sim.store.rows("workflow_executions"):
        ctx = json.loads(r["context"])
        out.append((r["workflow_name"], r["tenant_id"], ctx["reactor_name"], ctx["reactor_fired_at"]))
    return wall, cel, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=6.0, help="virtual hours (default 6)")
    args = ap.parse_args()
    from fanoutsim.designs.reactor.scenario import load_scenario

    scenario = load_scenario(SCENARIO)
    until = args.hours * 3600
    assert {s.when for s in scenario.subscriptions if s.when} <= set(FILTERS), "a filter has no hand-written twin"
    m_wall, m_out = minimal(scenario, until)
    e_wall, cel, e_out = engine(scenario, until)
    assert collections.Counter(m_out) == collections.Counter(e_out), (
        f"the models deliver differently: {len(m_out)} vs {len(e_out)}"
    )
    load = os.getloadavg()[0]
    print(
        f"core ratio: {args.hours:g} virtual h, {len(scenario.subscriptions)} subscriptions "
        f"({sum(1 for s in scenario.subscriptions if s.when)} filtered), {len(e_out)} deliveries (identical)"
    )
    print(f"  minimal SimPy model      {m_wall:8.2f} CPU s")
    print(f"  engine                   {e_wall:8.2f} CPU s (CEL evaluation {cel:.2f} s of it)")
    print(f"  engine / minimal         {e_wall / m_wall:8.1f}x   (target <= 10x)")
    print(f"  without CEL              {(e_wall - cel) / m_wall:8.1f}x   (engine minus its CEL time)")
    print(f"  load average (1 min)     {load:8.2f}")


if __name__ == "__main__":
    main()
