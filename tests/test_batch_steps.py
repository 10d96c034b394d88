"""Steps that do a batch's work: fewer calls and transactions per batch, the same model.

A claim's workflow bodies that end at one instant finish in one step and one
transaction (the virtual driver's ``_call_together``); bodies that end apart
finish apart. Whether a run batches or not, its trace is the one the golden
files hold (``tests/test_golden_*``); these tests hold the batching itself.
"""

from __future__ import annotations

import fanoutsim as fs
from fanoutsim.designs.reactor.engine import ReactorEngine


def _finishes(monkeypatch, duration) -> tuple[fs.Simulation, list[list[tuple[str, str]]]]:
    calls: list[list[tuple[str, str]]] = []
    real = ReactorEngine.finish

    def spy(self, now, done):
        calls.append(list(done))
        return real(self, now, done)

    monkeypatch.setattr(ReactorEngine, "finish", spy)
    sim = fs.Simulation(fs.SchedulerConfig(executor_workers=4), seed=0)
    sim.runner.register_workflow("w", duration=duration)
    for tenant in ("a", "b", "c"):
        sim.runner.subscribe_workflow_to_reactor("r", "w", tenant=tenant)
        sim.fire("r", {"n": 1}, tenant=tenant)
    sim.run(until=3.0)
    return sim, calls


def test_bodies_that_end_together_finish_in_one_step(monkeypatch):
    sim, calls = _finishes(monkeypatch, 0.05)
    trace = sim.trace()
    claimed = trace.loc[trace["kind"] == "claimed", "execution"].tolist()
    assert len(claimed) == 3 and len(set(trace.loc[trace["kind"] == "claimed", "t"])) == 1  # one claim
    assert calls == [[(eid, "completed") for eid in claimed]]  # one step, in claim order
    finished = trace[trace["kind"] == "finished"]
    assert finished["execution"].tolist() == claimed  # a finished event each, in the same order
    assert set(sim.executions()["status"]) == {"completed"}


def test_bodies_that_end_apart_finish_apart(monkeypatch):
    sim, calls = _finishes(monkeypatch, lambda rng: rng.uniform(0.01, 0.5))
    assert [len(done) for done in calls] == [1, 1, 1]
    ends = sim.executions()["finished_at"]
    assert ends.nunique() == 3
