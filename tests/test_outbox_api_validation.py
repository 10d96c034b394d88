"""The outbox's Python API refuses bad input up front, naming the argument, and
a refused call changes nothing; what a scenario file refuses, the API refuses too."""

from __future__ import annotations

import math

import pytest

import fanoutsim as fs
from fanoutsim.designs.outbox.realtime import OutboxRealtime
from fanoutsim.designs.outbox.scenario import parse_outbox_scenario
from fanoutsim.kernel.dist import Dist
from fanoutsim.kernel.scenario import ScenarioError

NAN, INF = math.nan, math.inf


def run_frames(sim, until=30.0):
    sim.run(until=until)
    return sim.trace().to_dict("list"), sim.cursors().to_dict("list"), sim.outbox().to_dict("list")


def scenario_problem(consumer: dict | None = None, workload: dict | None = None) -> tuple[str, str]:
    """The one (key path, message) a scenario file gets for these tables."""
    data = {"design": "outbox", "run": {"until": 10.0}, "consumers": [{"name": "c", **(consumer or {})}]}
    if workload is not None:
        data["workload"] = [workload]
    with pytest.raises(ScenarioError) as info:
        parse_outbox_scenario(data)
    [problem] = info.value.problems
    return problem


# -- 1. register_consumer is all or nothing ------------------------------------------
def test_a_refused_start_registers_nothing_and_the_run_goes_on():
    sim = fs.OutboxSimulation(seed=3)
    with pytest.raises(ValueError, match="cursor for 'c' must be 'beginning', 'end' or a seq"):
        sim.register_consumer("c", start="bogus")
    assert "c" not in sim.registry.consumers
    sim.commit("p", "x")
    sim.crash()
    sim.restart()  # the loops start for registered consumers: 'c' must not be one
    sim.run(until=5)
    assert sim.cursors().empty


def test_registering_while_down_registers_nothing():
    sim = fs.OutboxSimulation(seed=3)
    sim.crash()
    with pytest.raises(RuntimeError, match="dispatcher is down"):
        sim.register_consumer("c")
    assert "c" not in sim.registry.consumers
    sim.restart()
    sim.run(until=5)
    assert sim.register_consumer("c") == 0  # registers cleanly once up


def test_a_refused_re_registration_keeps_the_old_guardrails():
    sim = fs.OutboxSimulation(seed=3)
    sim.register_consumer("c", timeout=5.0)
    sim.crash()
    with pytest.raises(RuntimeError, match="dispatcher is down"):
        sim.register_consumer("c", timeout=1.0)
    assert sim.registry.spec("c").timeout == 5.0


def test_a_refused_registration_leaves_the_run_as_if_never_made():
    def build(refuse: bool):
        sim = fs.OutboxSimulation(seed=5)
        sim.register_consumer("a")
        if refuse:
            with pytest.raises(ValueError):
                sim.register_consumer("b", start=-1)
        sim.add_workload(2.0, stop=20.0)
        sim.crash(downtime=1.0)
        return run_frames(sim)

    assert build(True) == build(False)


def test_realtime_register_consumer_is_all_or_nothing_too():
    rt = OutboxRealtime(store="memory")
    try:
        with pytest.raises(ValueError, match="cursor for 'c' must be"):
            rt.register_consumer("c", start="bogus")
        assert "c" not in rt.registry.consumers
    finally:
        rt.close()


def test_a_bad_start_is_refused_even_when_the_cursor_is_kept():
    sim = fs.OutboxSimulation(seed=3)
    sim.register_consumer("c")
    with pytest.raises(ValueError, match="cursor for 'c' must be 'beginning', 'end' or a seq"):
        sim.register_consumer("c", start="bogus")
    assert scenario_problem({"start": "bogus"})[0] == "consumers[0].start"  # refused there too


def test_a_consumer_without_a_cursor_row_is_named_as_registered():
    sim = fs.OutboxSimulation(seed=3)
    sim.registry.register("ghost")  # its code, never its cursor row
    sim.crash()
    sim.restart()
    with pytest.raises(KeyError, match="consumer 'ghost' is registered but has no cursor row"):
        sim.run(until=1)
    with pytest.raises(KeyError, match="'nobody' has no cursor and is not registered; registered consumers: ghost"):
        sim.engine.fetch(sim.now_us(), "nobody")


# -- 2. add_workload: what a [[workload]] table refuses --------------------------------
BAD_WORKLOADS = [
    ("rate", INF, "rate must be a finite number of commits per virtual second > 0, got inf"),
    ("rate", NAN, "rate must be a finite number of commits per virtual second > 0, got nan"),
    ("pages", 0, "pages must be an integer >= 1"),
    ("pages", -3, "pages must be an integer >= 1"),
    ("pages", "x", "pages must be an integer >= 1"),
    ("start", "5", "start must be a finite number of seconds >= 0, got '5'"),
    ("start", NAN, "start must be a finite number of seconds >= 0, got nan"),
    ("stop", NAN, "stop must be a finite number of virtual seconds, got nan"),
    ("topic", "", "topic must be a non-empty string"),
]


@pytest.mark.parametrize("arg, value, message", BAD_WORKLOADS)
def test_add_workload_refuses_what_a_scenario_refuses(arg, value, message):
    sim = fs.OutboxSimulation(seed=3)
    args = {"rate": 1.0, arg: value}
    with pytest.raises(ValueError) as info:
        sim.add_workload(args.pop("rate"), **args)
    assert str(info.value).startswith(message)
    path, scenario_message = scenario_problem(workload={"rate": 1.0, arg: value})
    assert (path, f"{arg} {scenario_message}") == (f"workload[0].{arg}", str(info.value))


def test_add_workload_refuses_a_stop_not_after_start():
    with pytest.raises(ValueError, match=r"stop must be after start \(5\), got 2"):
        fs.OutboxSimulation().add_workload(1.0, start=5.0, stop=2.0)


def test_a_refused_workload_leaves_the_run_as_if_never_made():
    def build(refuse: bool):
        sim = fs.OutboxSimulation(seed=5)
        sim.register_consumer("a")
        if refuse:  # would have taken a writer's seeded stream
            with pytest.raises(ValueError, match="pages"):
                sim.add_workload(1.0, pages=0)
        sim.add_workload(2.0, stop=20.0)
        return run_frames(sim)

    assert build(True) == build(False)


def test_realtime_add_workload_refuses_bad_start_stop_topic():
    rt = OutboxRealtime(store="memory")
    try:
        for kw, match in [
            ({"start": "5"}, "start must be a finite number of seconds"),
            ({"stop": NAN}, "stop must be a finite number of virtual seconds, got nan"),
            ({"start": 2.0, "stop": 1.0}, r"stop must be after start \(2\)"),
            ({"topic": ""}, "topic must be a non-empty string"),
        ]:
            with pytest.raises(ValueError, match=match):
                rt.add_workload(1.0, **kw)
        assert [name for _, name in rt._queued] == ["safety-poll"]  # no writer half-added
    finally:
        rt.close()


# -- 3. commit's due_at ---------------------------------------------------------------
@pytest.mark.parametrize("due_at", [NAN, INF])
def test_commit_refuses_a_non_finite_due_at_by_name(due_at):
    sim = fs.OutboxSimulation(seed=3)
    with pytest.raises(ValueError, match=f"due_at must be a finite number of seconds since start, got {due_at}"):
        sim.commit("p", "x", due_at=due_at)
    assert sim.outbox().empty and sim.commit("p", "x") == 1  # no seq was taken


# -- 4. a consumer's duration law -------------------------------------------------------
BAD_DURATIONS = [
    (Dist("exponential", NAN), {"dist": "exponential", "mean": NAN}, "duration.mean must be a finite number"),
    (Dist("fixed", -1.0), {"dist": "fixed", "value": -1.0}, "duration: parameters must be >= 0"),
    (Dist("uniform", 2.0, 1.0), {"dist": "uniform", "low": 2.0, "high": 1.0}, "duration: uniform needs low <= high"),
    (
        Dist("lognormal", 1.0, INF),
        {"dist": "lognormal", "median": 1.0, "sigma": INF},
        "duration.sigma must be a finite number",
    ),
]


@pytest.mark.parametrize("dist, table, message", BAD_DURATIONS)
def test_register_consumer_checks_a_duration_law_as_a_scenario_does(dist, table, message):
    sim = fs.OutboxSimulation(seed=3)
    with pytest.raises(ValueError, match=f"consumer 'c': {message}"):
        sim.register_consumer("c", duration=dist)
    assert "c" not in sim.registry.consumers
    assert scenario_problem({"duration": table})[0].startswith("consumers[0].duration")
