"""The DuckDB store under the virtual clock against the memory store, mostly idle.

A 20-minute scenario with 4 subscriptions (one filtered) and 300 firings in
all (a quarter per second on average), run on the memory store and on DuckDB
(in memory) in one process, same seed: the deliveries must be the same; the
ratio of the two CPU times is printed, and the statements DuckDB was sent.
Most poll passes and executor claims find nothing: the store's answers to
"is there anything past this watermark / pending" let them skip their
statements, which is what keeps DuckDB usable here.

    python benchmarks/bench_duckdb_idle.py
    python benchmarks/bench_duckdb_idle.py --seconds 60 --repeat 1   # briefly

Target: DuckDB <= 20x the memory store. CPU seconds of this process, the
best of several runs of each (the machine may be shared); a figure to read,
not an assertion.

The floor: as many statements as the run sent, each the cheapest kind of
write a delivery makes (an execution's insert, then its finish: an update by
key), sent bare on the store's own connection, with no engine around them.
What that costs against the memory store's whole run is a ratio no store
sending the run's statements can beat on this machine: the statements that
remain are the model's writes, one transaction each (a crash between two of
them is what makes a duplicate), not reads a hint could skip.
"""

from __future__ import annotations

import argparse
import os
import time

import fanoutsim as fs
from fanoutsim.designs.reactor.tables import statements as tables_sql
from fanoutsim.kernel.store.sql import native_timestamps

SECONDS = 1200.0


def run(store: str, seconds: float = SECONDS) -> tuple[float, list, int | None]:
    sim = fs.Simulation(fs.SchedulerConfig(), seed=0, store=store)
    for wf in ("audit", "ledger", "alerts", "billing"):
        sim.runner.register_workflow(wf, duration=0.05)
    sim.runner.subscribe_workflow_to_reactor("orders", "audit")
    sim.runner.subscribe_workflow_to_reactor("orders", "ledger")
    sim.runner.subscribe_workflow_to_reactor("orders", "alerts", when="payload.quote.price > 120")
    sim.runner.subscribe_workflow_to_reactor("pricing", "billing")
    sim.add_workload("orders", 0.125)
    sim.add_workload("pricing", 0.125)
    t0 = time.process_time()
    sim.run(until=seconds)
    cpu = time.process_time() - t0
    rows = [(r["workflow_name"], r["context"]) for r in sim.store.rows("workflow_executions")]
    return cpu, rows, getattr(sim.store, "statements", None)


def best(store: str, times: int, seconds: float = SECONDS) -> tuple[float, list, int | None]:
    """The fastest of ``times`` runs (the memory store's few hundredths of a
    second are at the mercy of one slow moment of a shared machine)."""
    runs = [run(store, seconds) for _ in range(times)]
    assert all(r[1] == runs[0][1] for r in runs), "a store delivers differently from run to run"
    return min(r[0] for r in runs), runs[0][1], runs[0][2]


def floor(statements: int) -> float:
    """CPU seconds DuckDB takes for ``statements`` bare writes, half inserts of
    an execution row and half finishes of one (the statements the store sends
    for them, timestamps bound as it binds them), on the store's connection."""
    sim = fs.Simulation(fs.SchedulerConfig(), seed=0, store="duckdb")
    con = sim.store.con
    start = 1_700_000_000_000_000
    insert = [
        native_timestamps(
            tables_sql.INSERT_EXECUTION,
            [f"00000000-0000-4000-8000-{i:012d}", "audit", "default", "{}", "pending", start + i, None, None],
        )
        for i in range(statements // 2 + statements % 2)
    ]
    finish = [
        native_timestamps(
            tables_sql.FINISH_EXECUTION, ["completed", start + i + 50_000, f"00000000-0000-4000-8000-{i:012d}"]
        )
        for i in range(statements // 2)
    ]
    t0 = time.process_time()
    for sql, params in insert:
        con.execute(sql, params)
    for sql, params in finish:
        con.execute(sql, params)
    cpu = time.process_time() - t0
    done = con.execute("SELECT count(*) FROM workflow_executions WHERE status = 'completed'").fetchone()[0]
    assert done == len(finish), f"the floor's finishes found {done} of {len(finish)} rows"
    sim.store.close()
    return cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=SECONDS, help="virtual seconds (default 1200)")
    ap.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="DuckDB runs and floors; the fastest is shown (default 3; the memory store: 7)",
    )
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error(f"--repeat must be at least 1, got {args.repeat}")
    if not 0 < args.seconds < float("inf"):
        ap.error(f"--seconds must be a finite number of virtual seconds > 0, got {args.seconds}")
    n = args.repeat
    mem_cpu, mem_rows, _ = best("memory", max(n, 7), args.seconds)
    duck_cpu, duck_rows, statements = best("duckdb", n, args.seconds)
    assert mem_rows == duck_rows, "the stores deliver differently"
    print(
        f"duckdb idle: {args.seconds / 60:g} virtual minutes, 4 subscriptions, {len(mem_rows)} deliveries (identical)"
    )
    print(f"  memory store   {mem_cpu:8.3f} CPU s   (best of {max(n, 7)})")
    print(f"  DuckDB store   {duck_cpu:8.3f} CPU s   (best of {n}; {statements} statements)")
    print(f"  DuckDB / memory {duck_cpu / mem_cpu:7.1f}x   (target <= 20x)")
    bare = min(floor(statements) for _ in range(n))
    print(f"  DuckDB alone   {bare:8.3f} CPU s   (best of {n}; {statements} bare writes: inserts and updates by key)")
    print(f"  floor / memory {bare / mem_cpu:8.1f}x   (no store sending the run's statements does better here)")
    print(f"  DuckDB's share {bare / duck_cpu:8.0%}    of the DuckDB run; the engine and the store the rest")
    print(f"  load average (1 min) {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
