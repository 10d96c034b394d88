"""Same config and seed -> identical tables, ids included."""

from __future__ import annotations

import pandas.testing as pdt

import fanoutsim as fs


def run(seed, store="memory"):
    sim = fs.Simulation(
        config=fs.SchedulerConfig(reactor_poll_batch_limit=4, executor_workers=2), seed=seed, store=store
    )
    sim.runner.register_workflow("slow", duration=lambda rng: rng.expovariate(2.0))
    sim.runner.register_workflow("audit")  # once any workflow is declared, every subscribed one must be
    sim.runner.subscribe_workflow_to_reactor("pricing_reactor", "slow", tenant="acme", when="payload.quote.price > 100")
    sim.runner.subscribe_workflow_to_reactor("pricing_reactor", "audit", tenant="acme")
    sim.runner.subscribe_workflow_to_reactor("pricing_reactor", "audit", tenant="globex")
    sim.add_workload("pricing_reactor", 3.0, tenant="acme")
    sim.add_workload("pricing_reactor", 1.0, tenant="globex")
    sim.run(until=120)
    return sim


def test_same_seed_same_tables_and_trace():
    a, b = run(7), run(7)
    pdt.assert_frame_equal(a.firings(), b.firings())
    pdt.assert_frame_equal(a.executions(), b.executions())
    pdt.assert_frame_equal(a.subscriptions(), b.subscriptions())
    pdt.assert_frame_equal(a.trace(), b.trace())
    assert a.metrics() == b.metrics()


def test_different_seeds_differ():
    a, b = run(1), run(2)
    assert set(a.firings()["id"]).isdisjoint(set(b.firings()["id"]))
    assert len(a.firings()) != len(b.firings()) or not a.firings()["fired_at"].equals(b.firings()["fired_at"])
