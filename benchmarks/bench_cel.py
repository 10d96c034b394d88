"""CEL filters: microseconds per evaluation, the fast path against celpy.

Each filter is compiled twice, ``compile_predicate(expr)`` (the closures of
``fanoutsim.kernel.cel``, celpy outside their subset) and
``compile_predicate(expr, fast=False)`` (celpy only), and evaluated over the
same activations (quote payloads as the quote workload makes them, one
activation per firing, built once as the poll loop builds it). Printed per
filter: µs per evaluation on each path, the ratio, and whether the filter is
inside the compiled subset. Building the activation's payload
(``fanoutsim.kernel.cel.to_cel``, the values of ``celpy.json_to_cel``) is per
firing, shared by every subscription, and printed apart.

    .venv/bin/python benchmarks/bench_cel.py            # every filter
    .venv/bin/python benchmarks/bench_cel.py --n 2000   # evaluations per timing

Target: <= 10 µs per evaluation on the compiled subset (celpy: ~200 µs).
A figure to read, not an assertion: no test times anything.
"""

from __future__ import annotations

import argparse
import os
import random
import time

import celpy

from fanoutsim.designs.reactor.predicate import activation, compile_predicate
from fanoutsim.kernel.cel import to_cel

FILTERS = [
    "payload.quote.price > 100",
    "payload.quote.price > 100 && payload.quote.region == 'us-east'",
    "payload.quote.region == 'eu-central'",
    "has(payload.quote.price) && payload.quote.price > 100.0",
    "payload.quote.region in ['us-east', 'eu-central'] && tenant != 'b'",
    "payload.quote.symbol.startsWith('A') || payload.quote.price < 50.0",
    "payload.quote.tags.exists(t, t == 'hot')",
    "size(payload.quote.tags) > 1 ? payload.quote.price > 120.0 : true",
    "payload.quote.region.matches('^us-')",
    "payload.quote.qty * 2 > 10 && payload.quote.qty % 3 != 0",
]


def payloads(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    return [
        {
            "quote": {
                "symbol": rng.choice(["AAA", "BBB", "CCC"]),
                "region": rng.choice(["us-east", "eu-central", "ap-south"]),
                "price": round(rng.uniform(50, 200), 2),
                "qty": rng.randint(1, 20),
                "tags": rng.sample(["hot", "new", "big", "odd"], rng.randint(0, 3)),
            }
        }
        for _ in range(n)
    ]


def per_eval_us(predicate, acts: list[dict], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for act in acts:
            predicate.evaluate(act)
        best = min(best, time.perf_counter() - t0)
    return best / len(acts) * 1e6


def best_us(run, n: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
    return best / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000, help="activations (evaluations per timing)")
    ap.add_argument("--repeat", type=int, default=3, help="timings per figure; the best is kept")
    args = ap.parse_args()
    sources = payloads(args.n)
    acts = [activation(s, "pricing_reactor", "acme") for s in sources]
    build_us = best_us(lambda: [to_cel(s) for s in sources], args.n, args.repeat)
    build_ref_us = best_us(lambda: [celpy.json_to_cel(s) for s in sources], args.n, args.repeat)
    slow_n = max(50, args.n // 10)  # celpy is slow: fewer evaluations, same payloads
    print(f"load average {os.getloadavg()[0]:.2f}; {args.n} activations (celpy: {slow_n}), best of {args.repeat}")
    print(
        f"one activation's payload (per firing, shared by its subscriptions): {build_us:.1f} µs "
        f"(celpy.json_to_cel: {build_ref_us:.1f} µs, {build_ref_us / build_us:.1f}x)\n"
    )
    print(f"{'filter':<68} {'fast µs':>8} {'celpy µs':>9} {'ratio':>6}  compiled")
    fast_all, slow_all = [], []
    for expr in FILTERS:
        fast, slow = compile_predicate(expr), compile_predicate(expr, fast=False)
        for act in acts[:slow_n]:
            assert fast.evaluate(act) == slow.evaluate(act), expr  # same answers, or the figures mean nothing
        f_us = per_eval_us(fast, acts, args.repeat)
        s_us = per_eval_us(slow, acts[:slow_n], args.repeat)
        fast_all.append(f_us)
        slow_all.append(s_us)
        print(f"{expr[:68]:<68} {f_us:8.2f} {s_us:9.1f} {s_us / f_us:6.0f}x  {'yes' if fast.fast else 'no'}")
    mean_f, mean_s = sum(fast_all) / len(fast_all), sum(slow_all) / len(slow_all)
    print(f"\n{'mean':<68} {mean_f:8.2f} {mean_s:9.1f} {mean_s / mean_f:6.0f}x")
    print(f"slowest fast filter: {max(fast_all):.2f} µs (target <= 10 µs per evaluation)")


if __name__ == "__main__":
    main()
