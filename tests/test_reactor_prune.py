"""The prune loop: TTL as shipped, conservative as seed 000 words it."""

from __future__ import annotations

from conftest import FailInserts


def test_prune_runs_at_start_and_every_interval(make_sim):
    sim = make_sim(reactor_firings_retention=10.0, reactor_firings_prune_interval=5.0)
    sim.run(until=1)
    sim.fire("r", {"n": 1})
    sim.run(until=10.5)  # prune at 0, 5, 10: cutoff 0 at t=10 keeps a firing at 1
    assert len(sim.firings()) == 1
    sim.run(until=15.5)  # prune at 15: cutoff 5
    assert sim.firings().empty
    assert sim.metrics()["fanoutsim_reactor_firings_pruned_total"] == 1
    pruned = sim.trace().query("kind == 'pruned' and firing.isna()", engine="python")  # one summary row a pass
    assert list(pruned["t"] - sim.start_us) == [0, 5_000_000, 10_000_000, 15_000_000]


def test_ttl_prunes_under_a_wedged_subscription_and_conservative_does_not(store):
    import fanoutsim as fs

    out = {}
    for policy in ("ttl", "conservative"):
        faults = FailInserts("wedged")
        sim = fs.Simulation(
            config=fs.SchedulerConfig(
                reactor_firings_retention=30.0, reactor_firings_prune_interval=10.0, prune_policy=policy
            ),
            store=store,
            faults=faults,
        )
        sim.runner.subscribe_workflow_to_reactor("r", "wedged")
        sim.runner.subscribe_workflow_to_reactor("r", "healthy")
        sim.run(until=0.5)
        fid = sim.fire("r", {"n": 1})
        sim.run(until=100)  # wedged for longer than the retention
        faults.failing = False
        sim.run(until=102)
        ex = sim.executions()
        out[policy] = list(ex.query("workflow_name == 'wedged'")["reactor_firing_id"])
        assert list(ex.query("workflow_name == 'healthy'")["reactor_firing_id"]) == [fid]
    assert out["ttl"] == []  # the TTL gotcha: silently dropped
    assert len(out["conservative"]) == 1


def test_conservative_null_watermark_holds_only_its_own_stream(make_sim):
    faults = FailInserts("never")
    sim = make_sim(
        faults=faults, reactor_firings_retention=10.0, reactor_firings_prune_interval=5.0, prune_policy="conservative"
    )
    sim.runner.subscribe_workflow_to_reactor("held", "never")  # never advances: NULL watermark
    sim.runner.subscribe_workflow_to_reactor("free", "wf")
    sim.run(until=1)
    sim.fire("held", {"n": 1})
    sim.fire("free", {"n": 2})
    sim.fire("nobody", {"n": 3})  # no subscription at all: plain TTL
    sim.run(until=60)
    left = sim.firings()
    assert list(left["reactor_name"]) == ["held"]
    assert sim.subscriptions().set_index("workflow_name").isna().loc["never", "last_seen_fired_at"]
    # removing the subscription lets the next prune clean its tail
    sim.runner.unsubscribe_workflow_from_reactor("held", "never")
    sim.run(until=66)
    assert sim.firings().empty


def test_a_disabled_subscription_does_not_hold_the_log(make_sim):
    sim = make_sim(reactor_firings_retention=10.0, reactor_firings_prune_interval=5.0, prune_policy="conservative")
    sim.runner.subscribe_workflow_to_reactor("r", "wf")
    sim.runner.set_subscription_enabled("r", "wf", enabled=False)
    sim.fire("r", {"n": 1})
    sim.run(until=20)
    assert sim.firings().empty
