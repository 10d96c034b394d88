"""PostgreSQL beside DuckDB: the wall-clock runtime's load and overhead, and a virtual run's cost.

1. For poll intervals 0.05, 0.25 and 1 s, the reactor on the wall clock over
   each store: a steady workload (20 firings/s, two subscriptions) gives the
   fire-to-dispatch p50, its overhead over the same scenario under the
   virtual clock (where the engine costs no time: their difference is what the
   wall clock and the database add), and the statements per second sent to
   the store; then the same with no workload gives the idle CPU of this
   process and, for PostgreSQL, of the server's processes as well.
2. A scenario under the virtual clock on each store (default: 10 virtual
   minutes of fanoutsim/examples/default.toml; ``--virtual 3600`` for an hour):
   wall seconds and statements per second.

PostgreSQL is a throwaway server this script starts (``store="postgres"``),
or yours with ``--dsn postgresql://...`` (tables go to a new schema, dropped
at the end).

    python benchmarks/bench_postgres.py                  # 10 s per interval
    python benchmarks/bench_postgres.py --seconds 20 --virtual 3600

Targets: overhead at p50 under 10 ms on both stores.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

import fanoutsim as fs
from fanoutsim.analysis import latency_frame
from fanoutsim.designs.stores import DuckDBStore, PostgresStore

ROOT = Path(__file__).resolve().parents[1]
_n = 0


def server_cpu(pid: int | None) -> float:
    """CPU seconds of the server's processes (the postmaster and its backends)."""
    if pid is None:
        return 0.0
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


class Stores:
    """New stores of one kind: a DuckDB file each, or a PostgreSQL schema each."""

    def __init__(self, kind: str, folder: Path, dsn: str | None) -> None:
        self.kind, self.folder, self.dsn, self.server, self.schemas = kind, folder, dsn, None, []
        if kind == "postgres" and dsn is None:
            from fanoutsim.kernel.pg import EmbeddedServer

            self.server = EmbeddedServer()
            self.dsn = self.server.dsn

    @property
    def server_pid(self) -> int | None:
        return self.server.pid if self.server is not None else None

    def new(self):
        global _n
        _n += 1
        if self.kind == "duckdb":
            return DuckDBStore(str(self.folder / f"s{_n}.duckdb"))
        schema = f"bench_{os.getpid()}_{_n}"
        self.schemas.append(schema)
        return PostgresStore(self.dsn, schema=schema)

    def close(self) -> None:
        if self.kind == "postgres":
            import psycopg

            with psycopg.connect(self.dsn, autocommit=True) as con:
                for schema in self.schemas:
                    con.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        if self.server is not None:
            self.server.close()


def setup(host, rate: float) -> None:
    host.runner.subscribe_workflow_to_reactor("r", "audit")
    host.runner.subscribe_workflow_to_reactor("r", "alerts", when="payload.quote.price > 100")
    if rate:
        host.add_workload("r", rate)


def wall(stores: Stores, interval: float, seconds: float, rate: float) -> dict:
    config = fs.SchedulerConfig(reactor_poll_interval=interval)
    rt = fs.Realtime(config, store=stores.new())
    setup(rt, rate)
    rt.start()
    cpu0, srv0, wall0, st0 = time.process_time(), server_cpu(stores.server_pid), time.monotonic(), rt.store.statements
    time.sleep(seconds)
    cpu, srv = time.process_time() - cpu0, server_cpu(stores.server_pid) - srv0
    took, statements = time.monotonic() - wall0, rt.store.statements - st0
    rt.stop()
    lat = latency_frame(rt)["fire_to_dispatch"].to_numpy() if rate else np.array([])
    rt.close()
    out = {"cpu_share": cpu / took, "server_share": srv / took, "statements_per_s": statements / took, "n": len(lat)}
    if len(lat):
        sim = fs.Simulation(config, seed=0)
        setup(sim, rate)
        sim.run(until=seconds)
        virtual = latency_frame(sim)["fire_to_dispatch"].to_numpy()
        out.update(
            p50=float(np.percentile(lat, 50)), overhead_p50=float(np.percentile(lat, 50) - np.percentile(virtual, 50))
        )
    return out


def virtual(stores: Stores, scenario: Path, until: float) -> dict:
    from fanoutsim.scenario import load_scenario

    sc = load_scenario(scenario)
    store = stores.new()
    t0 = time.monotonic()
    sc.run(seed=0, until=until, store=store)
    took = time.monotonic() - t0
    out = {"seconds": took, "statements": store.statements, "statements_per_s": store.statements / took}
    store.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="wall seconds per interval (busy)")
    ap.add_argument("--rate", type=float, default=20.0)
    ap.add_argument("--virtual", type=float, default=600.0, help="virtual seconds of the scenario run")
    ap.add_argument("--scenario", default=str(ROOT / "fanoutsim" / "examples" / "default.toml"))
    ap.add_argument("--dsn", default=None, help="a PostgreSQL of yours (default: a throwaway one)")
    args = ap.parse_args()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        kinds = {k: Stores(k, Path(tmp), args.dsn) for k in ("duckdb", "postgres")}
        try:
            print(
                f"{'store':>8} {'P (s)':>6} {'n':>5} {'p50 ms':>7} {'overhead p50 ms':>16} {'stmts/s':>8} "
                f"{'idle stmts/s':>13} {'idle CPU':>9} {'idle server CPU':>16}"
            )
            for interval in (0.05, 0.25, 1.0):
                for kind, stores in kinds.items():
                    busy = wall(stores, interval, args.seconds, args.rate)
                    idle = wall(stores, interval, min(args.seconds, 10.0), 0.0)
                    server = f"{idle['server_share']:>16.1%}" if kind == "postgres" else f"{'-':>16}"
                    print(
                        f"{kind:>8} {interval:>6} {busy['n']:>5} {busy['p50'] * 1e3:>7.1f} "
                        f"{busy['overhead_p50'] * 1e3:>16.1f} {busy['statements_per_s']:>8.0f} "
                        f"{idle['statements_per_s']:>13.0f} {idle['cpu_share']:>9.1%} {server}"
                    )
            print(f"\n{Path(args.scenario).name}, {args.virtual:g} virtual seconds, seed 0:")
            for kind, stores in kinds.items():
                v = virtual(stores, Path(args.scenario), args.virtual)
                print(
                    f"{kind:>8} {v['seconds']:>8.1f} s wall  {v['statements']:>8} statements  "
                    f"{v['statements_per_s']:>7.0f} statements/s"
                )
        finally:
            for stores in kinds.values():
                stores.close()
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("target: overhead at p50 < 10 ms on both stores")


if __name__ == "__main__":
    main()
