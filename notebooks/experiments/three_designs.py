"""The experiment of lesson 12: one workload, three designs.

The same stream of events — the same arrival times, drawn once — goes through
the reactor (Cloacina), the outbox (Subspace) and leased consumers (RiffDB),
each with the same two consumers and the same faults, on the virtual clock
and the memory store:

* two consumers: ``indexer`` (10 ms of work per event) and ``mailer`` (200 ms);
* the process crashes three times, each time at its design's riskiest moment
  — an effect done and the progress that records it not yet committed — and
  stays down 2 s; a write that falls in the downtime waits for the restart.

Each run counts the store's transactions (how many times the design went to
the database), and the readers turn the runs into one table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

import fanoutsim as fs
from fanoutsim.analysis import leases as la
from fanoutsim.analysis import outbox as oa
from fanoutsim.faults import CrashAtPoint, FaultPlan

DESIGNS = ("reactor", "outbox", "leases")
CONSUMERS = {"indexer": 0.01, "mailer": 0.2}  # name: seconds of work per event
# where each design does an effect and has not yet committed that it did
RISKY_POINT = {
    "reactor": "poll.after_dispatch_before_watermark",
    "outbox": "dispatch.after_handle_before_cursor",
    "leases": "worker.after_effect_before_ack",
}


@dataclass(frozen=True)
class Workload:
    """``rate`` events per second for ``seconds``, drawn once with ``seed``; the
    process crashes at the ``crashes``-th passes through its risky point."""

    rate: float = 2.0
    seconds: float = 300.0
    seed: int = 0
    crashes: tuple = (100, 300, 500)
    downtime: float = 2.0
    drain: float = 30.0

    def times(self) -> np.ndarray:
        """The arrival times, the same for every design."""
        rng = np.random.default_rng(self.seed)
        gaps = rng.exponential(1.0 / self.rate, int(self.rate * self.seconds * 2) + 10)
        t = np.cumsum(gaps)
        return t[t < self.seconds]

    def faults(self, design: str) -> FaultPlan:
        return FaultPlan(
            [CrashAtPoint(RISKY_POINT[design], nth=n, downtime=self.downtime) for n in self.crashes]
        )


def count_transactions(sim) -> dict:
    """Count the store's transactions from now on: ``counter["n"]``."""
    counter = {"n": 0}
    begin = sim.store.transaction

    def counted():
        counter["n"] += 1
        return begin()

    sim.store.transaction = counted
    return counter


def feed(sim, times, write) -> None:
    """Run the clock to each arrival and write the event; while the process is
    down, the write waits for the restart (its writer is in that process)."""
    for i, t in enumerate(times):
        sim.run(until=max(float(t), sim.now))
        while True:
            try:
                write(i)
                break
            except RuntimeError:  # the process is down: try again a little later
                sim.run(until=sim.now + 0.1)


def reactor_run(w: Workload):
    sim = fs.Simulation(seed=w.seed, faults=w.faults("reactor"))
    for name, work in CONSUMERS.items():
        sim.runner.register_workflow(name, duration=work)
        sim.runner.subscribe_workflow_to_reactor("events", name)
    counter = count_transactions(sim)
    feed(sim, w.times(), lambda i: sim.fire("events", {"n": i}))
    sim.run(until=w.seconds + w.drain)
    return sim, counter["n"]


def outbox_run(w: Workload):
    sim = fs.OutboxSimulation(seed=w.seed, faults=w.faults("outbox"))
    for name, work in CONSUMERS.items():
        sim.register_consumer(name, duration=work)
    counter = count_transactions(sim)
    feed(sim, w.times(), lambda i: sim.commit(f"page-{i % 10}"))
    sim.run(until=w.seconds + w.drain)
    return sim, counter["n"]


def leases_run(w: Workload):
    sim = fs.LeaseSimulation(seed=w.seed, faults=w.faults("leases"))
    for name, work in CONSUMERS.items():
        sim.register_consumer(name, duration=work, lease_seconds=30.0)
    counter = count_transactions(sim)
    feed(sim, w.times(), lambda i: sim.publish(f"p{i % 4}", "changed", {"n": i}))
    sim.run(until=w.seconds + w.drain)
    return sim, counter["n"]


RUNS = {"reactor": reactor_run, "outbox": outbox_run, "leases": leases_run}


def idle_queries(design: str, seconds: float = 300.0) -> int:
    """The reads a design sends in ``seconds`` with the two consumers and no
    event at all — what it costs the database while nothing happens: the
    reactor's poll queries (one per subscription per poll; the model counts
    them even where it skips a read that would find nothing), the outbox's
    fetches (a safety poll per consumer), and the leases' pulls and recovery
    passes (each a transaction)."""
    idle = Workload(rate=1e-9, seconds=seconds, crashes=(), drain=0.0)
    sim, transactions = RUNS[design](idle)
    metric = {
        "reactor": "fanoutsim_reactor_poll_queries_total",
        "outbox": "fanoutsim_outbox_fetches_total",
    }.get(design)
    if metric is None:
        return transactions
    return int(sum(v for k, v in sim.metrics().items() if k.startswith(metric)))


def latencies(design: str, sim) -> pd.DataFrame:
    """Publish → handled, in seconds, per consumer and event (first handling)."""
    if design == "reactor":
        ex = sim.executions().sort_values("finished_at")
        ex = ex.drop_duplicates(["reactor_firing_id", "workflow_name"], keep="first")
        fired = pd.to_datetime(ex["context"].map(lambda c: c["reactor_fired_at"]), utc=True)
        done = (ex["finished_at"] - fired).dt.total_seconds()
        return pd.DataFrame(
            {"consumer": ex["workflow_name"].to_numpy(), "latency_s": done.to_numpy()}
        )
    if design == "outbox":
        lat = oa.handled_latency(sim)
        return pd.DataFrame({"consumer": lat["consumer"], "latency_s": lat["latency_s"]})
    ev = la.event_outcomes(sim).dropna(subset=["latency_s"])
    return pd.DataFrame({"consumer": ev["consumer"], "latency_s": ev["latency_s"]})


def verdict(design: str, sim) -> dict:
    """The checker's counts, in the same words for every design."""
    if design == "reactor":
        t = fs.check(sim).total
        return {
            "events": len(sim.firings()),
            "duplicates": t["extra_deliveries"],
            "lost": t["lost"],
            "causes": t["duplicates_by_cause"],
        }
    if design == "outbox":
        t = fs.check_outbox(sim).total
        return {
            "events": t["committed"],
            "duplicates": t["extra_deliveries"],
            "lost": t["lost"],
            "causes": t["duplicates_by_cause"],
        }
    t = fs.check_leases(sim).total
    return {
        "events": t["published"],
        "duplicates": t["duplicates"],
        "lost": t["lost"],
        "causes": t["duplicates_by_cause"],
    }


def compare(w: Workload = Workload()) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Run every design on ``w``: a summary per design, every latency (with a
    ``design`` column) and the runs themselves."""
    rows, frames, runs = [], [], {}
    for design, run in RUNS.items():
        sim, transactions = run(w)
        runs[design] = sim
        lat = latencies(design, sim).assign(design=design)
        frames.append(lat)
        v = verdict(design, sim)
        row = {
            "design": design,
            **v,
            "transactions": transactions,
            "transactions per event": transactions / max(v["events"], 1),
        }
        for name in CONSUMERS:
            x = lat.loc[lat["consumer"] == name, "latency_s"]
            row[f"{name} p50 (s)"] = float(x.median())
            row[f"{name} p99 (s)"] = float(x.quantile(0.99))
        rows.append(row)
    return pd.DataFrame(rows).set_index("design"), pd.concat(frames, ignore_index=True), runs
