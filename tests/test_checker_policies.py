"""The reactor checker names a documented drop as such whatever the watermark
commit mode: under ``dispatch_failure_policy = "advance"`` a firing whose
insert failed is passed on purpose, whether the watermark move that passes it
names it (per_firing, atomic) or the batch's last firing (per_batch)."""

from __future__ import annotations

import pytest

import fanoutsim as fs
from fanoutsim.faults import FailInserts, FaultPlan


def failing_inserts(mode: str) -> fs.Simulation:
    cfg = fs.SchedulerConfig(dispatch_failure_policy="advance", watermark_commit=mode)
    sim = fs.Simulation(cfg, seed=0, faults=FaultPlan([FailInserts(probability=0.3)]))
    sim.runner.subscribe_workflow_to_reactor("r1", "w1")
    sim.add_workload("r1", 5.0)
    sim.run(until=60)
    return sim


@pytest.mark.parametrize("mode", ["per_firing", "per_batch", "atomic"])
def test_advance_past_a_failed_insert_is_a_dispatch_failed_loss_in_every_commit_mode(mode):
    sim = failing_inserts(mode)
    report = fs.check(sim)
    failed = sim.trace().query("kind == 'dispatch_failed'")["firing"].nunique()
    assert failed > 10  # the plan did fail inserts
    assert report.total["lost_by_cause"] == {"dispatch_failed": report.total["lost"]}
    assert report.total["lost"] == failed
    assert report.total["lost_promised"] == 0 and report.valid


def test_the_compound_cursor_loses_no_firing_to_a_tie():
    """With watermark = "fired_at_id" ties cannot lose a firing: one visible in
    the very instant a move passed it was not seen by that move's fetch."""
    from fanoutsim.faults import CrashAt, Ties
    from fanoutsim.kernel.dist import Dist

    cfg = fs.SchedulerConfig(reactor_poll_interval=0.05, watermark="fired_at_id")
    plan = FaultPlan([CrashAt(65.0, downtime=Dist("exponential", 9.076)), Ties(resolution=0.1)])
    sim = fs.Simulation(cfg, seed=451035, faults=plan)
    sim.runner.subscribe_workflow_to_reactor("r1", "w1", tenant="acme")
    sim.add_workload("r1", 20.0, tenant="acme")
    sim.add_workload("r1", 2.0, payload="counter")
    sim.run(until=120)
    causes = fs.check(sim).total["lost_by_cause"]
    assert causes.get("late_visibility", 0) > 0  # ties at a 0.1 s resolution make firings late
    assert "tie" not in causes
