"""The fault mechanism the kernel keeps, with each design's points, kinds and
hooks declared in its own package: hooks looked up by name, a hand-written plan
answering what it defines (and healthily the rest), the registries refusing a
name two designs claim, and a scenario naming another design's point by the
design that declared it."""

from __future__ import annotations

import pytest

import fanoutsim as fs
from fanoutsim.designs.leases import faults as lease_faults
from fanoutsim.designs.outbox import faults as outbox_faults
from fanoutsim.designs.reactor import faults as reactor_faults
from fanoutsim.faults import (
    HOOKS,
    KINDS,
    POINTS,
    CrashAt,
    FaultPlan,
    Injector,
    NoFaults,
    SlowWorkflow,
    Stall,
    declare,
)
from fanoutsim.kernel.faults import register_kinds, register_points
from fanoutsim.kernel.trace import NullTrace


def test_each_design_declares_its_points_kinds_and_hooks_and_the_kernel_registers_them_by_design():
    for design, module in (("reactor", reactor_faults), ("outbox", outbox_faults), ("leases", lease_faults)):
        assert module.FAULTS.design == design
        assert all(POINTS[p] == design for p in module.FAULTS.points)
        assert all(KINDS[k] is kind for k, kind in zip(module.FAULTS.kind_names, module.FAULTS.kinds))
        assert all(HOOKS[h.name] is h for h in module.FAULTS.hooks)
        assert fs.designs.get(design).crash_points == module.FAULTS.points
    assert reactor_faults.FAULTS.hook_names == ("point", "before_insert", "after_insert", "poll_limit", "run_duration")
    assert outbox_faults.FAULTS.hook_names == lease_faults.FAULTS.hook_names == ("point", "run_duration")


def test_a_point_or_a_kind_another_design_declared_is_refused_by_name():
    with pytest.raises(
        ValueError, match="crash point 'poll.after_fetch' of the toy design is already one of the reactor design"
    ):
        register_points("toy", ["poll.after_fetch"])
    with pytest.raises(ValueError, match="fault kind 'stall' is already"):
        register_kinds([type("OtherStall", (Stall,), {"kind": "stall"})])
    with pytest.raises(ValueError, match="a hook named 'poll_limit' is already declared"):
        declare("toy", points=(), kinds=(), hooks=(fs.faults.Hook("poll_limit", healthy=lambda *a: None),))


def test_an_undeclared_hook_is_an_attribute_error_not_a_healthy_answer():
    with pytest.raises(AttributeError, match="no attribute 'pol_limit'"):
        _ = NoFaults().pol_limit  # the misspelt hook: reading it must raise
    assert getattr(NoFaults(), "limits_polls", "absent") == "absent"


def test_a_bound_plan_answers_a_hook_with_the_kinds_that_act_at_it_and_healthily_otherwise():
    plan = FaultPlan(
        [Stall("wf", window=(0, 10), mode="throttle", batch_limit=2), SlowWorkflow("wf", duration=3.0, window=(0, 10))]
    )
    run = Injector(plan, seed=0, start_us=0, trace=NullTrace())
    sub = {"reactor_name": "r", "workflow_name": "wf", "tenant_id": "public"}
    assert run.poll_limit(sub, 1_000_000, 50) == 2
    assert run.poll_limit(sub, 11_000_000, 50) == 50  # after the window
    assert run.run_duration("wf", 1_000_000, 0.1) == 3.0
    assert run.run_duration("other", 1_000_000, 0.1) == 0.1
    assert run.before_insert("wf", 1_000_000) is None  # no kind acts there: the healthy hook
    assert run.before_insert is HOOKS["before_insert"].healthy
    assert reactor_faults.limits_polls(run)
    assert not reactor_faults.limits_polls(Injector(FaultPlan([CrashAt(5)]), seed=0, start_us=0, trace=NullTrace()))


def test_a_hand_written_plan_that_defines_poll_limit_is_asked_by_the_poll_loop():
    """A hand-written plan (a NoFaults subclass) defining poll_limit used to be
    ignored unless it also set ``limits_polls = True``: the poll loop asked
    only plans that said so. The hook is now asked of any plan that defines it."""

    class PauseEverything(NoFaults):
        def poll_limit(self, sub: dict, now: int, limit: int) -> int:
            return 0

    assert reactor_faults.limits_polls(PauseEverything()) and not reactor_faults.limits_polls(NoFaults())
    sim = fs.Simulation(seed=0, faults=PauseEverything())
    sim.runner.subscribe_workflow_to_reactor("r", "wf")
    sim.add_workload("r", 2.0, payload="counter")
    sim.run(until=20)
    assert sim.executions().empty
    assert not sim.firings().empty


def test_a_hand_written_plan_must_answer_its_own_designs_hooks_only():
    class OnlyPoints:
        def point(self, name, now, **where):
            pass

        def run_duration(self, worker, now, base):
            return base

    fs.OutboxSimulation(seed=0, faults=OnlyPoints())  # the outbox asks point and run_duration
    with pytest.raises(TypeError, match="without before_insert, after_insert, poll_limit"):
        fs.Simulation(seed=0, faults=OnlyPoints())


def test_a_step_skips_only_the_points_and_hooks_where_nothing_can_act():
    """An engine asks once whether passing a point (or asking a hook) may do
    anything; it skips the call only where a healthy system's answer is sure."""
    from fanoutsim.faults import CrashAtPoint, FailInserts
    from fanoutsim.kernel.faults.plan import PointsOf, point_of

    point, other = "poll.after_dispatch_before_watermark", "poll.after_fetch"
    assert point_of(NoFaults(), point) is None
    bound = Injector(FaultPlan([CrashAtPoint(point, nth=2)]), seed=0, start_us=0, trace=NullTrace())
    assert point_of(bound, other) is None
    points = PointsOf(bound)
    assert points[point] is not None and points[other] is None and set(points) == {point, other}
    points[point](point, 0)  # the first pass lives; the second crashes, as the plan says
    with pytest.raises(fs.faults.Crash):
        points[point](point, 0)

    class HandWritten(NoFaults):
        def point(self, name, now, **where):
            raise fs.faults.Crash(name)

    assert point_of(HandWritten(), other) is not None  # a plan written by hand is always asked

    inserts = reactor_faults.BEFORE_INSERT
    assert inserts.active(NoFaults()) is None
    assert inserts.active(Injector(FaultPlan([CrashAtPoint(point)]), seed=0, start_us=0, trace=NullTrace())) is None
    failing = Injector(FaultPlan([FailInserts(probability=1.0)]), seed=0, start_us=0, trace=NullTrace())
    assert inserts.active(failing) is not None
