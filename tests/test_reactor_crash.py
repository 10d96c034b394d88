"""Crashes at named points: duplicates emerge from which writes committed."""

from __future__ import annotations

import pytest
from conftest import CrashAt


def fire_three(sim):
    sim.run(until=0.5)
    ids = []
    for k in range(3):
        sim.run(until=0.5 + k * 0.1)
        ids.append(sim.fire("r", {"n": k}))
    return ids


def per_firing_counts(sim):
    return sim.executions()["reactor_firing_id"].value_counts().to_dict()


def test_per_firing_crash_between_dispatch_and_watermark_duplicates_one(make_sim):
    sim = make_sim(faults=CrashAt("poll.after_dispatch_before_watermark"), watermark_commit="per_firing")
    sim.runner.subscribe_workflow_to_reactor("r", "wf")
    ids = fire_three(sim)
    sim.run(until=1.5)  # poll at t=1 dispatches the first firing, then the process dies
    assert not sim.up
    assert len(sim.executions()) == 1
    sim.restart()
    sim.run(until=3)
    counts = per_firing_counts(sim)
    assert counts == {ids[0]: 2, ids[1]: 1, ids[2]: 1}


def test_per_batch_crash_before_the_commit_duplicates_the_whole_batch(make_sim):
    sim = make_sim(faults=CrashAt("poll.before_batch_commit"), watermark_commit="per_batch")
    sim.runner.subscribe_workflow_to_reactor("r", "wf")
    ids = fire_three(sim)
    sim.run(until=1.5)
    assert not sim.up and len(sim.executions()) == 3
    sim.restart()
    sim.run(until=3)
    assert per_firing_counts(sim) == {i: 2 for i in ids}


def test_atomic_crash_rolls_the_insert_back_so_nothing_is_duplicated(make_sim):
    sim = make_sim(faults=CrashAt("poll.after_dispatch_before_watermark"), watermark_commit="atomic")
    sim.runner.subscribe_workflow_to_reactor("r", "wf")
    ids = fire_three(sim)
    sim.run(until=1.5)
    assert not sim.up
    assert sim.executions().empty  # the open transaction died with the process
    sim.restart()
    sim.run(until=3)
    assert per_firing_counts(sim) == {i: 1 for i in ids}


def test_crash_after_graphs_before_log_loses_the_firing_for_workflows(make_sim):
    seen = []
    sim = make_sim(faults=CrashAt("reactor.after_graphs_before_log"))
    sim.runner.register_computation_graph("r", lambda sources: seen.append(sources))
    sim.runner.subscribe_workflow_to_reactor("r", "wf")
    assert sim.fire("r", {"n": 1}) is None
    assert seen == [{"n": 1}]  # the in-process graph saw it ...
    assert sim.firings().empty  # ... the durable log never did
    assert not sim.up
    sim.restart()
    sim.run(until=2)
    assert sim.executions().empty
    assert not any(k.startswith("fanoutsim_reactor_firings_total") for k in sim.metrics())


def test_restart_builds_a_new_engine_and_keeps_the_tables(make_sim):
    sim = make_sim()
    sim.runner.subscribe_workflow_to_reactor("r", "wf", when="payload.n > 0")
    sim.fire("r", {"n": 1})
    sim.run(until=1)
    first = sim.engine
    sim.crash()
    assert not sim.up
    with pytest.raises(RuntimeError, match="down"):
        sim.fire("r", {"n": 2})
    sim.run(until=5)  # nothing runs while down
    sim.restart()
    assert sim.engine is not first and sim.incarnation == 1
    sim.fire("r", {"n": 3})
    sim.run(until=7)
    assert sorted(c["n"] for c in sim.executions()["context"]) == [1, 3]
    kinds = list(sim.trace()["kind"])
    assert "crashed" in kinds and "restarted" in kinds
