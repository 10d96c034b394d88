"""One engine, two clocks: the same scenario on the wall clock and under SimPy.

Each design's loops are written once; the virtual driver answers them with
SimPy events, the wall driver with real waits. So a short wall-clock run and a
virtual run of the same scenario and seed must agree: the same workload (a
fresh file's streams are the seed's, as under SimPy), the same delivered set,
no loss, no duplicate without a named cause, and latency distributions that a
two-sample Kolmogorov-Smirnov test cannot tell apart at 5%. The latencies are
poll-bound (a poll interval of 0.5 s, hints off), and the wall runs keep their
tables in memory: what is compared is the loops and the two drivers, not a
database's statement costs (the DuckDB and PostgreSQL wall-clock runs have
tests of their own). Each wall run counts its events: it runs
until every event its workload made is delivered, not for a fixed time.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest
from conftest import wait_for

import fanoutsim as fs
from fanoutsim.designs.leases.analysis import event_outcomes
from fanoutsim.designs.leases.checker import check_leases
from fanoutsim.designs.outbox import OutboxConfig
from fanoutsim.designs.outbox.analysis import latency_frame as outbox_latency
from fanoutsim.designs.outbox.checker import check_outbox
from fanoutsim.designs.reactor.analysis.clocks import ks_critical, ks_statistic
from fanoutsim.designs.reactor.analysis.delivery import latency_frame as reactor_latency
from fanoutsim.faults import FaultPlan, Notifications

SEED, RATE, STOP = 7, 12.0, 15.0  # about 180 events at 12/s, poll-bound latencies
POLL = 0.5
DRAIN = 60.0  # seconds a wall run may take to deliver everything after its workload stops


def agree(virtual: np.ndarray, wall: np.ndarray) -> None:
    virtual, wall = np.asarray(virtual, float), np.asarray(wall, float)
    assert len(virtual) > 100 and len(wall) > 100
    ks, critical = ks_statistic(virtual, wall), ks_critical(len(virtual), len(wall))
    print(f"KS {ks:.3f} (critical {critical:.3f}); means {virtual.mean():.3f} / {wall.mean():.3f} s")
    assert ks < critical, (ks, critical)


def run_wall(rt, done) -> None:
    """Start, wait until ``done()`` (every event of the workload written and
    delivered), stop. ``done`` counts the events the virtual run wrote: on a
    loaded machine the writer's thread may wake after ``STOP`` wall seconds,
    and a reader that has caught up with all *but* the last arrivals is not done."""
    rt.start()
    try:
        time.sleep(STOP)
        assert wait_for(done, timeout=DRAIN)
    finally:
        rt.stop()


def no_unexplained(report) -> None:
    assert report.valid and report.total["lost"] == 0
    if len(report.duplicates):
        assert report.duplicates["cause"].notna().all() and "unknown" not in set(report.duplicates["cause"])


def test_reactor_on_both_clocks():
    config = fs.SchedulerConfig(reactor_poll_interval=POLL, executor_poll_interval=0.05)

    def setup(run):
        run.runner.register_workflow("wf", duration=0.002)
        run.runner.subscribe_workflow_to_reactor("r", "wf")
        run.add_workload("r", RATE, payload="counter", stop=STOP)

    def delivered(run) -> list:
        """The payloads delivered, sorted: one per execution (a duplicate shows twice)."""
        f = run.firings()
        n_of = dict(zip(f["id"], f["sources"].map(lambda s: s["n"])))
        return sorted(n_of[fid] for fid in reactor_latency(run)["reactor_firing_id"])

    sim = fs.Simulation(config, seed=SEED)
    setup(sim)
    sim.run(until=STOP + 5 * POLL)
    rt = fs.Realtime(config, store="memory", seed=SEED)
    setup(rt)
    run_wall(
        rt,
        lambda: (
            len(rt.firings()) >= len(sim.firings())
            and set(rt.executions()["status"]) == {"completed"}
            and len(rt.executions()) == len(rt.firings())
        ),
    )
    try:
        assert delivered(sim) == delivered(rt)  # the same workload, every firing delivered once
        for run in (sim, rt):
            no_unexplained(fs.check(run))
        agree(reactor_latency(sim)["fire_to_dispatch"], reactor_latency(rt)["fire_to_dispatch"])
    finally:
        rt.close()


# the seed's loop, and the rules of a real job queue's worker (issue 28): an idle-timeout
# poll, one row per read, reads that take time, a quick re-poll for a row a read missed
OUTBOX_LOOPS = {
    "seed": OutboxConfig(safety_poll_interval=POLL),
    "job-queue": OutboxConfig(
        safety_poll_interval=POLL,
        poll_mode="idle",
        wake_mode="after_fetch",
        batch_limit=1,
        read_until_empty=True,
        repoll=0.1,
        read_cost={"dist": "uniform", "low": 0.004, "high": 0.008},
        empty_read_cost=0.002,
    ),
}


@pytest.mark.parametrize("loop", OUTBOX_LOOPS)
def test_outbox_on_both_clocks(loop):
    config = OUTBOX_LOOPS[loop]
    plan = FaultPlan([Notifications(drop=1.0)])  # every hint lost: the poll bounds the latency

    def setup(run):
        run.register_consumer("indexer", duration=0.002)
        run.add_workload(RATE, stop=STOP)

    sim = fs.OutboxSimulation(config, seed=SEED, faults=plan)
    setup(sim)
    sim.run(until=STOP + 5 * POLL)
    rt = fs.OutboxRealtime(config, store="memory", faults=plan, seed=SEED)
    setup(rt)
    committed = lambda run: run.outbox()["seq"].tolist()  # noqa: E731
    run_wall(
        rt,
        lambda: len(committed(rt)) >= len(committed(sim)) and rt.cursors()["seq"].tolist() == [max(committed(rt))],
    )
    try:
        assert committed(sim) == committed(rt) and list(sim.outbox()["ref"]) == list(rt.outbox()["ref"])
        for run in (sim, rt):
            no_unexplained(check_outbox(run))
            assert set(outbox_latency(run)["seq"]) == set(committed(run))
        agree(outbox_latency(sim)["latency_s"], outbox_latency(rt)["latency_s"])
    finally:
        rt.close()


def test_leases_on_both_clocks():
    def setup(run):
        run.register_consumer("indexer", duration=0.002, poll_interval=POLL, in_flight_limit=8, batch_limit=8)
        run.add_workload(RATE, partitions=4, stop=STOP)

    def latencies(run) -> pd.Series:
        out = event_outcomes(run, "indexer")
        return out["first_delivered_s"] - out["published_s"]

    sim = fs.LeaseSimulation(seed=SEED)
    setup(sim)
    sim.run(until=STOP + 10 * POLL)
    rt = fs.LeaseRealtime(store="memory", seed=SEED)
    setup(rt)
    acked = lambda run: set(run.trace().query("kind == 'acked'")["event_id"])  # noqa: E731
    published = lambda run: set(run.events()["event_id"])  # noqa: E731
    run_wall(rt, lambda: len(published(rt)) >= len(published(sim)) and acked(rt) == published(rt))
    try:
        assert published(sim) == published(rt) and acked(sim) == acked(rt) == published(rt)
        for run in (sim, rt):
            no_unexplained(check_leases(run))
        agree(latencies(sim), latencies(rt))
    finally:
        rt.close()
