"""The public API exactly as the engine-core issue writes it (an outside
conformance suite calls these names)."""

from __future__ import annotations

import fanoutsim as fs


def test_the_documented_snippet_runs_as_written():
    cfg = fs.SchedulerConfig(
        reactor_poll_interval=1.0,
        reactor_poll_batch_limit=100,
        reactor_firings_prune_interval=3600.0,
        reactor_firings_retention=604800.0,
        prune_policy="ttl",
        predicate_error_policy="skip",
        predicate_error_limit=5,
        dispatch_failure_policy="hold",
        watermark_commit="per_firing",
    )
    assert cfg == fs.SchedulerConfig()  # those are the defaults
    sim = fs.Simulation(config=cfg, seed=0, store="memory")
    r = sim.runner
    sid = r.subscribe_workflow_to_reactor(
        "pricing_reactor", "incident_response", tenant="acme", when="payload.quote.price > 100"
    )
    listed = r.list_reactor_subscriptions(tenant="acme")
    assert [s["id"] for s in listed] == [sid]
    r.register_workflow("incident_response", fn=None, duration=0.0)
    graph_seen = []
    r.register_computation_graph("pricing_reactor", graph_seen.append)
    fid = sim.fire("pricing_reactor", {"quote": {"price": 150, "region": "us-east"}}, tenant="acme")
    sim.run(until=3600.0)
    assert sim.poll_once() is not None and sim.prune_once() == 0
    assert sim.now == 3600.0
    assert graph_seen == [{"quote": {"price": 150, "region": "us-east"}}]
    ex = sim.executions()
    assert {"workflow_name", "tenant_id", "reactor_firing_id", "dispatched_at", "context"} <= set(ex.columns)
    assert list(ex["reactor_firing_id"]) == [fid] and isinstance(ex.loc[0, "context"], dict)
    assert len(sim.firings()) == 1 and len(sim.subscriptions()) == 1
    m = sim.metrics()
    assert m['fanoutsim_reactor_firings_total{graph="pricing_reactor",reactor="pricing_reactor"}'] == 1
    assert m["fanoutsim_reactor_firings_pruned_total"] == 0
    assert r.unsubscribe_workflow_from_reactor("pricing_reactor", "incident_response", tenant="acme") is True
    assert issubclass(fs.InvalidPredicate, ValueError)
