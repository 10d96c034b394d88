"""The in-process graph path, trigger-name fan-out, and the executor."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from conftest import FailInserts

import fanoutsim as fs


def test_graphs_run_in_declaration_order_before_the_row_is_written(make_sim):
    sim = make_sim()
    calls = []

    def first(sources):
        calls.append(("first", sources, len(sim.store.rows("reactor_firings"))))

    def second(sources):
        calls.append(("second", sources, len(sim.store.rows("reactor_firings"))))

    sim.runner.register_computation_graph("r", first)
    sim.runner.register_computation_graph("r", second)
    sim.fire("r", {"quote": {"price": 1}})
    assert [c[0] for c in calls] == ["first", "second"]
    assert all(c[1] == {"quote": {"price": 1}} and c[2] == 0 for c in calls)
    assert len(sim.firings()) == 1
    trace = sim.trace()
    assert list(trace["kind"][:4]) == ["fired", "graph_called", "graph_called", "logged"]


def test_a_failing_graph_does_not_stop_the_durable_path(make_sim):
    sim = make_sim()

    def boom(sources):
        raise RuntimeError("graph bug")

    sim.runner.register_computation_graph("r", boom, name="boom")
    sim.runner.subscribe_workflow_to_reactor("r", "wf")
    sim.fire("r", {"n": 1})
    sim.run(until=1)
    assert len(sim.executions()) == 1
    assert sim.metrics()['fanoutsim_reactor_graph_errors_total{graph="boom",reactor="r"}'] == 1


def test_firings_total_is_labelled_by_graph_and_reactor(make_sim):
    sim = make_sim()
    sim.fire("pricing_reactor", {"n": 1})
    sim.fire("pricing_reactor", {"n": 2}, graph="pricing_graph")
    m = sim.metrics()
    assert m['fanoutsim_reactor_firings_total{graph="pricing_reactor",reactor="pricing_reactor"}'] == 1
    assert m['fanoutsim_reactor_firings_total{graph="pricing_graph",reactor="pricing_reactor"}'] == 1
    assert m["fanoutsim_reactor_firings_pruned_total"] == 0


def test_trigger_fan_out_gives_each_subscriber_a_fresh_context(make_sim):
    sim = make_sim()
    seen = {}

    def mutate(ctx):
        ctx["order"]["qty"] = -1
        seen["secondary"] = ctx

    sim.runner.register_workflow("primary", lambda ctx: seen.setdefault("primary", ctx), duration=0.5)
    sim.runner.register_workflow("secondary", mutate, triggers=["orders"])
    sim.runner.register_trigger("orders", on="primary")
    started = sim.fire_trigger("orders", {"order": {"qty": 3}})
    assert list(started) == ["primary", "secondary"] and all(started.values())
    sim.run(until=2)
    assert seen["primary"] == {"order": {"qty": 3}, "trigger_name": "orders"}
    assert seen["secondary"]["order"]["qty"] == -1
    assert sim.firings().empty  # no log, no watermark
    assert set(sim.executions()["status"]) == {"completed"}


def test_trigger_primary_failure_fails_the_fire_secondary_failure_is_logged(store):
    for failing, raises in (("primary", True), ("secondary", False)):
        faults = FailInserts(failing)
        sim = fs.Simulation(store=store, faults=faults)
        sim.runner.register_workflow("primary")
        sim.runner.register_workflow("secondary", triggers="t")
        sim.runner.register_trigger("t", on="primary")
        if raises:
            with pytest.raises(fs.TriggerFireFailed, match="primary"):
                sim.fire_trigger("t")
        else:
            assert sim.fire_trigger("t")["secondary"] is None
        survivors = set(sim.executions()["workflow_name"])
        assert survivors == ({"primary", "secondary"} - {failing})
        role = "primary" if raises else "secondary"
        assert sim.metrics()[f'fanoutsim_trigger_subscriber_failures_total{{role="{role}",trigger="t"}}'] == 1


def test_unknown_trigger_is_named(make_sim):
    with pytest.raises(KeyError, match="unknown trigger 'nope'"):
        make_sim().fire_trigger("nope")


def test_executor_claims_oldest_first_within_its_workers(make_sim):
    sim = make_sim(executor_workers=2, executor_poll_interval=0.1)
    sim.runner.register_workflow("wf", duration=1.0)
    sim.runner.subscribe_workflow_to_reactor("r", "wf")
    sim.run(until=0.5)
    for k in range(5):
        sim.fire("r", {"n": k})
    sim.run(until=10)
    ex = sim.executions()
    assert (ex["status"] == "completed").all()
    assert ((ex["finished_at"] - ex["claimed_at"]) == pd.Timedelta(seconds=1)).all()
    # never more than two running at once
    events = sorted(
        [(t, 1) for t in ex["claimed_at"]] + [(t, -1) for t in ex["finished_at"]], key=lambda e: (e[0], e[1])
    )
    running, peak = 0, 0
    for _, delta in events:
        running += delta
        peak = max(peak, running)
    assert peak == 2
    # claim order follows dispatch order (ties broken by id)
    assert list(ex.sort_values("claimed_at", kind="stable")["id"]) == list(ex["id"])


def test_latency_budget_fire_dispatch_claim_finish(make_sim):
    sim = make_sim(reactor_poll_interval=1.0, executor_poll_interval=0.25)
    sim.runner.register_workflow("wf", duration=0.5)
    sim.runner.subscribe_workflow_to_reactor("r", "wf")
    sim.run(until=0.3)
    sim.fire("r", {"n": 1})
    sim.run(until=5)
    row = sim.executions().iloc[0]
    fired = sim.firings().iloc[0]["fired_at"]
    assert row["dispatched_at"] - fired == pd.Timedelta(seconds=0.7)  # waits for the poll at t=1
    # the next claim tick: the executor loop runs at phase + k * 0.25
    phase = sim.executor_phase
    next_tick = phase + math.ceil((1.0 - phase) / 0.25) * 0.25
    wait = (row["claimed_at"] - row["dispatched_at"]).total_seconds()
    assert wait == pytest.approx(next_tick - 1.0, abs=2e-6) and 0 <= wait < 0.25
    assert row["finished_at"] - row["claimed_at"] == pd.Timedelta(seconds=0.5)


def test_a_failing_workflow_body_marks_the_execution_failed(make_sim):
    sim = make_sim()

    def body(ctx):
        raise ValueError("nope")

    sim.runner.register_workflow("wf", body)
    sim.runner.subscribe_workflow_to_reactor("r", "wf")
    sim.fire("r", {"n": 1})
    sim.run(until=2)
    assert list(sim.executions()["status"]) == ["failed"]


class _FinishCounter:
    """A transaction as the executor sees it, counting the executions it finishes."""

    def __init__(self, tx, finished: list[int]) -> None:
        self._tx, self._finished = tx, finished

    def __getattr__(self, name):
        attr = getattr(self._tx, name)
        if not name.startswith("finish_execution"):
            return attr

        def counted(ids, *args, **kwargs):
            self._finished[-1] += len(ids) if isinstance(ids, (list, tuple)) else 1
            return attr(ids, *args, **kwargs)

        return counted


def test_bodies_that_end_at_one_instant_still_finish_in_a_transaction_each(make_sim):
    # Cloacina's workers each commit their own execution: four bodies that end
    # together are four commits, the load a real database sees (lesson 12 counts it)
    from contextlib import contextmanager

    sim = make_sim(executor_workers=4)
    for wf in ("a", "b", "c", "d"):
        sim.runner.register_workflow(wf, duration=0.5)
        sim.runner.subscribe_workflow_to_reactor("r", wf)
    finished: list[int] = []
    begin = sim.store.transaction

    @contextmanager
    def counted():
        finished.append(0)
        with begin() as tx:
            yield _FinishCounter(tx, finished)

    sim.store.transaction = counted
    sim.fire("r", {"n": 1})
    sim.run(until=5)
    done = sim.executions()
    assert len(done) == 4 and set(done["status"]) == {"completed"}
    assert done["finished_at"].nunique() == 1  # the four ended at one instant
    assert sum(finished) == 4 and max(finished) == 1  # in four transactions, one each
