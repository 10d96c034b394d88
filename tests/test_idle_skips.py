"""Idle virtual time is skipped, and the model says the same.

The reactor's executor sleeps while the store says nothing is pending and
wakes on the tick grid it would have kept; after a poll pass that found
nothing, the passes until a step writes count their queries without reading
the store. A run with both must give the same trace, tables and metrics as
one that ticks through every empty claim and pass, whatever the intervals,
durations (multiples of the tick included: their finishes land on a tick),
watermarks (a settle horizon lets a pass find what an earlier one did not,
with no write between), crashes, fault plans, pollers and API calls between
runs.
"""

from __future__ import annotations

import pandas.testing as pdt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fanoutsim as fs
from fanoutsim.designs.reactor.engine import ReactorEngine
from fanoutsim.faults import CrashAtPoint, CrashRandomly, FailInserts, FaultPlan, Pollers, Stall
from fanoutsim.kernel.runtime.virtual import delay_to

cases = st.fixed_dictionaries(
    {
        "executor_poll_interval": st.sampled_from([0.05, 0.1, 0.3, 1.0]),
        "reactor_poll_interval": st.sampled_from([0.1, 0.5, 1.0, 2.5]),
        "executor_workers": st.integers(1, 4),
        "batch": st.sampled_from([1, 3, 100]),
        "watermark_commit": st.sampled_from(["per_firing", "per_batch", "atomic"]),
        "watermark": st.sampled_from(["fired_at", "fired_at", "fired_at_id", "settled"]),
        "duration": st.sampled_from(["zero", "one_tick", "two_ticks", "0.05", "random"]),
        "rates": st.lists(st.sampled_from([0.02, 0.2, 1.0, 4.0]), min_size=1, max_size=3),
        "faults": st.sampled_from(["none", "crashes", "crash_at_claim", "inserts", "stall", "pollers"]),
        "fetch_latency": st.sampled_from([0.0, 0.0, 0.013]),
        "seed": st.integers(0, 2**16),
        "until": st.sampled_from([30.0, 90.0]),
    }
)


def build(case: dict, sleep: bool) -> fs.Simulation:
    tick = case["executor_poll_interval"]
    config = fs.SchedulerConfig(
        reactor_poll_interval=case["reactor_poll_interval"],
        reactor_poll_batch_limit=case["batch"],
        executor_poll_interval=tick,
        executor_workers=case["executor_workers"],
        watermark_commit=case["watermark_commit"],
        watermark=case["watermark"],
        watermark_settle=0.5,
    )
    faults = {
        "none": None,
        "crashes": FaultPlan([CrashRandomly(mean_gap=20.0, downtime=1.5)]),
        "crash_at_claim": FaultPlan([CrashAtPoint("executor.after_claim", nth=3, downtime=0.7)]),
        "inserts": FaultPlan([FailInserts(probability=0.2)]),
        "stall": FaultPlan([Stall(workflow="w1", window=(5.0, 25.0))]),
        "pollers": FaultPlan([Pollers(2, phase="random")]),
    }[case["faults"]]
    sim = fs.Simulation(config, seed=case["seed"], faults=faults, fetch_latency=case["fetch_latency"])
    sim.sleep_when_idle = sleep
    duration = {
        "zero": 0.0,
        "one_tick": tick,
        "two_ticks": 2 * tick,
        "0.05": 0.05,
        "random": lambda rng: rng.expovariate(5.0),
    }[case["duration"]]
    for i in range(max(2, len(case["rates"]))):
        sim.runner.register_workflow(f"w{i}", duration=duration)
    for i, rate in enumerate(case["rates"]):
        sim.runner.subscribe_workflow_to_reactor(f"r{i}", f"w{i}")
        sim.runner.subscribe_workflow_to_reactor(f"r{i}", "w0" if i else "w1", when="payload.quote.price > 100")
        sim.add_workload(f"r{i}", rate)
    return sim


def drive(sim: fs.Simulation, until: float) -> fs.Simulation:
    sim.run(until=until / 3)
    if sim.up:  # the API between runs: a firing, a poll pass that may dispatch it
        sim.fire("r0", {"quote": {"price": 150.0}})
        sim.runner.set_subscription_enabled("r0", "w0", enabled=False)
        sim.runner.set_subscription_enabled("r0", "w0", enabled=True)
    sim.run(until=until)
    return sim


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases)
def test_the_sleeping_executor_and_the_skipped_passes_change_nothing(case):
    ticking = drive(build(case, sleep=False), case["until"])
    sleeping = drive(build(case, sleep=True), case["until"])
    pdt.assert_frame_equal(ticking.trace(), sleeping.trace())
    pdt.assert_frame_equal(ticking.executions(), sleeping.executions())
    pdt.assert_frame_equal(ticking.subscriptions(), sleeping.subscriptions())
    assert ticking.metrics() == sleeping.metrics()


def test_an_idle_executor_schedules_almost_nothing():
    """The point of the sleep: an idle hour is a few events, not 36,000 ticks."""

    def events(sleep: bool) -> int:
        sim = fs.Simulation(seed=3)
        sim.sleep_when_idle = sleep
        sim.run(until=3600.0)
        return next(sim.env._eid)

    assert events(False) > 36_000
    assert events(True) < 5_000  # the poll loop's 3,600 passes and the prune loop remain


def test_an_idle_poll_loop_reads_the_store_again_only_after_a_write(monkeypatch):
    passes = []
    real = ReactorEngine.start_pass
    monkeypatch.setattr(ReactorEngine, "start_pass", lambda self, now: passes.append(now) or real(self, now))
    sim = fs.Simulation(fs.SchedulerConfig(reactor_poll_interval=1.0), seed=1)
    sim.runner.subscribe_workflow_to_reactor("r", "w")
    sim.run(until=100.5)
    assert len(passes) == 1  # the first pass found nothing; nothing was written since
    queries = sim.metrics()["fanoutsim_reactor_poll_queries_total"]
    assert queries == 101  # yet every pass at 0, 1, ..., 100 counts its query, as the real loop sends it
    sim.fire("r", {"quote": {"price": 1.0}})  # a write: the next pass reads, dispatches, and reads again
    sim.run(until=110.5)
    assert len(passes) == 3  # at 101, which finds it; at 102, after a pass that found something; then none
    assert sim.metrics()["fanoutsim_reactor_poll_queries_total"] == queries + 10
    assert sim.executions()["status"].tolist() == ["completed"]


def test_rows_written_straight_to_the_store_between_runs_are_claimed_on_the_tick():
    """A row written around the steps, between runs, is claimed at the tick
    a ticking executor would have claimed it at, not at the next poll pass."""

    def run(sleep: bool) -> fs.Simulation:
        sim = fs.Simulation(seed=0)
        sim.sleep_when_idle = sleep
        sim.run(until=5.05)
        assert bool(sim._sleepers) == sleep  # the executor is asleep by now, if it may be
        with sim.store.transaction() as tx:
            tx.insert_execution(
                {
                    "id": sim.ids.new(),
                    "workflow_name": "w",
                    "tenant_id": "public",
                    "context": "{}",
                    "status": "pending",
                    "dispatched_at": sim.now_us(),
                    "claimed_at": None,
                    "finished_at": None,
                }
            )
        sim.run(until=5.9)  # before the next poll pass, at 6.0
        return sim

    ticking, sleeping = run(False), run(True)
    assert sleeping.executions()["status"].tolist() == ["completed"]
    pdt.assert_frame_equal(ticking.executions(), sleeping.executions())


@pytest.mark.parametrize("now,at", [(0.0013, 0.1013), (3.7, 3.8), (86399.95, 86400.05), (1e-9, 0.1)])
def test_delay_to_lands_exactly(now, at):
    assert now + delay_to(now, at) == at


def test_a_body_ending_on_a_tick_frees_its_worker_after_that_tick():
    """SimPy runs the executor's tick before a body that ends at the same
    instant (the tick was scheduled first), so with one worker and bodies one
    tick long the second claim waits two ticks, not one."""
    tick = 0.1
    sim = fs.Simulation(fs.SchedulerConfig(executor_workers=1, executor_poll_interval=tick), seed=4)
    sim.runner.register_workflow("w", duration=tick)
    sim.runner.subscribe_workflow_to_reactor("r", "w")
    sim.runner.subscribe_workflow_to_reactor("r", "w", tenant="t2")
    sim.fire("r", {"x": 1})
    sim.fire("r", {"x": 2}, tenant="t2")
    sim.run(until=3.0)
    claimed = sorted(sim.store.rows("workflow_executions"), key=lambda r: r["claimed_at"])
    assert [r["status"] for r in claimed] == ["completed", "completed"]
    gap = claimed[1]["claimed_at"] - claimed[0]["claimed_at"]
    assert gap == pytest.approx(2 * tick * 1e6, abs=2)
