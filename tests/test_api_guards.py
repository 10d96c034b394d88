"""The Python API refuses what it cannot do, by name, before anything changes:
a checker given a run it cannot read, a run without an end, a fault plan of
another design, a crash's downtime, a missing store file. And a run that an
error ended goes on to where the next call asks."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import fanoutsim as fs
from fanoutsim.designs.reactor.checker import check as reactor_check
from fanoutsim.designs.reactor.payload import decode_sources
from fanoutsim.faults import CrashAt, CrashAtPoint, FaultPlan, NoFaults, Ties
from fanoutsim.scenario import ScenarioError

SCENARIOS = Path(__file__).resolve().parents[1] / "fanoutsim" / "examples"


def small_run(**kw) -> fs.Simulation:
    sim = fs.Simulation(seed=0, **kw)
    sim.runner.register_workflow("w", duration=0.05)
    sim.runner.subscribe_workflow_to_reactor("r", "w")
    sim.add_workload("r", 2.0)
    return sim


# -- checkers -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "make, checker",
    [
        (lambda: small_run(trace=False), fs.check),
        (lambda: fs.OutboxSimulation(seed=0, trace=False), fs.check_outbox),
        (lambda: fs.LeaseSimulation(seed=0, trace=False), fs.check_leases),
    ],
)
def test_a_checker_refuses_a_run_that_recorded_no_trace(make, checker):
    sim = make()
    sim.run(until=30)
    with pytest.raises(ValueError, match=r"recorded none \(trace=False\)"):
        checker(sim)


def test_a_run_without_its_trace_would_have_been_called_valid_with_nothing_checked():
    # why the refusal matters: the same run traced has deliveries to check
    traced = small_run()
    traced.run(until=30)
    assert fs.check(traced).summary["delivered"] > 0
    assert traced.traced and not small_run(trace=False).traced


@pytest.mark.parametrize(
    "checker, sim, design",
    [
        (reactor_check, lambda: fs.OutboxSimulation(seed=0), "outbox"),
        (fs.check_outbox, lambda: fs.Simulation(seed=0), "reactor"),
        (fs.check_leases, lambda: fs.OutboxSimulation(seed=0), "outbox"),
        (fs.check_outbox, lambda: fs.LeaseSimulation(seed=0), "leases"),
    ],
)
def test_a_checker_refuses_another_designs_run_naming_it(checker, sim, design):
    with pytest.raises(TypeError, match=f"a run of the '{design}' design"):
        checker(sim())


def test_fs_check_checks_a_run_with_its_designs_checker():
    """One name for the idea: fs.check finds the run's design's checker."""
    from fanoutsim.designs.leases.checker import LeaseReport
    from fanoutsim.designs.outbox.checker import OutboxReport

    for make, report in ((fs.OutboxSimulation, OutboxReport), (fs.LeaseSimulation, LeaseReport)):
        sim = make(seed=0)
        sim.run(until=1)
        assert isinstance(fs.check(sim), report)


def test_a_checker_refuses_what_is_not_a_run():
    with pytest.raises(TypeError, match="got int"):
        fs.check(5)


def test_the_design_of_a_run_checks_it():
    sim = fs.OutboxSimulation(seed=0)
    sim.register_consumer("c")
    sim.commit("p", "x")
    sim.run(until=3)
    assert fs.designs.design_of(sim).check(sim).total["delivered"] == 1


def test_check_store_refuses_a_missing_file_and_creates_none(tmp_path):
    path = tmp_path / "typo.duckdb"
    with pytest.raises(FileNotFoundError, match="typo.duckdb: no such file"):
        fs.check_store(str(path))
    assert not path.exists()
    with pytest.raises(ValueError, match="not 'memory'"):
        fs.check_store("memory")


def test_check_store_closes_the_file_it_opened(tmp_path):
    path = str(tmp_path / "run.duckdb")
    sim = small_run(store=path)
    sim.run(until=10)
    sim.store.close()
    assert fs.check_store(path).valid
    # closed again: the file opens read-write in this process as before
    again = fs.check_store(path)
    assert again.total == fs.check_store(path).total


# -- run(until=...) ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "make", [lambda: small_run(), lambda: fs.OutboxSimulation(seed=0), lambda: fs.LeaseSimulation(seed=0)]
)
@pytest.mark.parametrize(
    "until, error, words",
    [
        (None, ValueError, "until is required"),
        (math.nan, ValueError, "finite"),
        (math.inf, ValueError, "finite"),
        ("5", TypeError, "number of virtual seconds"),
    ],
)
def test_run_refuses_an_end_it_would_never_reach(make, until, error, words):
    sim = make()
    sim.run(until=1)
    with pytest.raises(error, match=words):
        sim.run(until=until)
    assert sim.now == 1  # the clock is where it was
    sim.run(until=2)
    assert sim.now == 2


def test_run_takes_any_real_number():
    sim = small_run()
    sim.run(until=np.int64(3))
    assert sim.now == 3


def test_a_run_an_error_ended_goes_on_to_the_next_end():
    """SimPy leaves the failed call's stop in its queue; the next run must not stop there."""

    def boom(env):
        yield env.timeout(1.0)
        raise RuntimeError("boom")

    sim = small_run()
    sim.env.process(boom(sim.env))
    with pytest.raises(RuntimeError, match="boom"):
        sim.run(until=5)
    assert sim.now == 1
    sim.run(until=10)
    assert sim.now == 10
    sim.run(until=20)
    assert sim.now == 20
    # and nothing else changed: the same run without the error has the same executions
    clean = small_run()
    clean.run(until=20)
    assert clean.executions()["id"].tolist() == sim.executions()["id"].tolist()


# -- crashes ----------------------------------------------------------------------------
@pytest.mark.parametrize("downtime", [-1, math.nan, math.inf, "1", True])
def test_crash_refuses_a_bad_downtime_and_stays_up(downtime):
    sim = small_run()
    sim.run(until=1)
    with pytest.raises(ValueError, match="downtime must be None"):
        sim.crash(downtime=downtime)
    assert sim.up


def test_a_restart_timer_does_not_revive_a_process_restarted_and_crashed_since():
    sim = small_run()
    sim.crash(downtime=10)  # would restart at t=10
    sim.run(until=1)
    sim.restart()  # by hand, earlier
    sim.run(until=2)
    sim.crash()  # down until restart() is called
    sim.run(until=20)
    assert not sim.up
    sim.restart()
    assert sim.up


def test_a_restart_timer_still_restarts_the_process_it_was_set_for():
    sim = small_run()
    sim.run(until=1)
    sim.crash(downtime=2)
    sim.run(until=2.5)
    assert not sim.up
    sim.run(until=3.5)
    assert sim.up


# -- fault plans ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "faults, hint", [([CrashAt(5)], r"FaultPlan\(\[\.\.\.\]\)"), (5, "got int"), ({"crash": 1}, "got dict")]
)
def test_faults_must_be_a_plan_or_hooks(faults, hint):
    with pytest.raises(TypeError, match=hint):
        fs.Simulation(faults=faults)


def test_hooks_of_ones_own_are_taken():
    class Healthy(NoFaults):
        pass

    sim = small_run(faults=Healthy())
    sim.run(until=5)
    assert len(sim.executions()) > 0


def test_a_crash_point_of_another_design_is_refused_before_a_file_is_made(tmp_path):
    path = tmp_path / "run.duckdb"
    with pytest.raises(
        ValueError,
        match=r"'dispatch.after_fetch' is not a crash point of the reactor design "
        r"\(a crash point of another design\)",
    ):
        fs.Simulation(store=str(path), faults=FaultPlan([CrashAtPoint("dispatch.after_fetch")]))
    assert not path.exists()


@pytest.mark.parametrize(
    "runtime, fault, words",
    [
        (fs.OutboxSimulation, "stall", r"Stall \('stall'\) is not a fault of the outbox design"),
        (fs.LeaseSimulation, "notifications", r"Notifications \('notifications'\) is not a fault of the leases design"),
        (fs.LeaseSimulation, "point", r"'poll.after_fetch' is not a crash point of the leases design"),
    ],
)
def test_a_fault_another_design_acts_on_is_refused_by_name(runtime, fault, words):
    from fanoutsim.faults import Notifications, Stall

    plan = {
        "stall": FaultPlan([Stall("w", window=(0, 10))]),
        "notifications": FaultPlan([Notifications(drop=1.0)]),
        "point": FaultPlan([CrashAtPoint("poll.after_fetch")]),
    }[fault]
    with pytest.raises(ValueError, match=words):
        runtime(faults=plan)


# -- arguments -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kw, words",
    [
        (dict(rate=math.inf), "rate must be a finite number"),
        (dict(rate=math.nan), "rate must be a finite number"),
        (dict(rate=1.0, start=math.nan), "start must be a finite number"),
        (dict(rate=1.0, start=True), "start must be a finite number"),
        (dict(rate=1.0, stop=math.nan), "stop must be a finite number"),
    ],
)
def test_a_reactor_workload_refuses_what_would_hang_or_never_fire(kw, words):
    sim = fs.Simulation(seed=0)
    with pytest.raises(ValueError, match=words):
        sim.add_workload("r", **kw)


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_fetch_latency_and_a_duration_must_be_finite(value):
    with pytest.raises(ValueError, match="fetch_latency must be a finite number"):
        fs.Simulation(fetch_latency=value)
    sim = fs.Simulation(seed=0)
    with pytest.raises(ValueError, match="duration must be a finite number"):
        sim.runner.register_workflow("w", duration=value)
    assert "w" not in sim.registry.workflows


def test_a_blob_that_is_no_payload_is_a_value_error():
    with pytest.raises(ValueError, match="not a payload"):
        decode_sources(b"xx")


def test_sweep_seeds_must_be_an_iterable():
    with pytest.raises(ValueError, match=r"seeds must be an iterable of integer seeds, e\.g\. range\(3\)"):
        fs.sweep(SCENARIOS / "sweep.toml", seeds=3, cache=None, progress=False)


def test_minimize_needs_at_least_one_run():
    sc = fs.load_scenario(SCENARIOS / "crashes.toml")
    with pytest.raises(ValueError, match="max_runs must be an integer >= 1"):
        fs.minimize(sc, lambda report: True, max_runs=0)


# -- fault parameters a run could not use --------------------------------------------------
def test_a_ties_resolution_below_a_microsecond_is_refused_by_name():
    with pytest.raises(ValueError, match=r"ties.resolution must be 0 \(off\) or at least a microsecond"):
        Ties(resolution=1e-7)
    Ties(resolution=1e-6)  # the clock's unit is allowed


def test_a_lognormal_too_wide_to_draw_from_is_refused_by_name():
    from fanoutsim.kernel.dist import parse_dist

    with pytest.raises(ValueError, match=r"downtime.sigma must be at most 50"):
        parse_dist({"dist": "lognormal", "median": 1, "sigma": 1e6}, where="downtime")
    law = parse_dist({"dist": "lognormal", "median": 1, "sigma": 50}, where="downtime")
    import random

    rng = random.Random(0)
    assert all(law.sample(rng) >= 0 for _ in range(10_000))  # draws at the bound do not overflow


# -- the clock's range ----------------------------------------------------------------------------
def test_a_run_past_the_last_time_the_frames_hold_is_refused_before_it_starts():
    sim = small_run(start="2262-04-11T23:47:00Z")
    with pytest.raises(ValueError, match=r"until=20 runs past the last time a run can hold.*until at most 16 "):
        sim.run(until=20)
    assert sim.now == 0
    sim.run(until=5)  # within the range the same run goes on
    assert len(fs.check(sim).lost) == 0


def test_a_start_outside_the_frames_range_is_refused_by_name(tmp_path):
    with pytest.raises(
        ValueError, match="outside the times a run can hold, 1677-09-21T00:12:43Z through 2262-04-11T23:47:16Z"
    ):
        fs.Simulation(start="9999-12-31T23:59:50Z")
    text = (
        (SCENARIOS / "default.toml")
        .read_text()
        .replace('start = "2026-01-01T00:00:00Z"', 'start = "2262-04-11T23:47:00Z"')
    )
    assert 'start = "2262-04-11T23:47:00Z"' in text
    path = tmp_path / "late.toml"
    path.write_text(text)
    with pytest.raises(ScenarioError, match=r"run.until: until=3600 runs past the last time"):
        fs.load_scenario(path).run(until=3600)
