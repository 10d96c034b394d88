"""Every design's checker returns one report protocol (fanoutsim.kernel.check):
``valid``, ``total``, ``summary`` under shared names, ``per_unit`` (one row
per subscription or consumer) and ``duplicates`` / ``lost`` frames with a
``cause`` column."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest

import fanoutsim as fs
from fanoutsim import designs
from fanoutsim.designs.outbox.simulation import OutboxSimulation
from fanoutsim.faults import CrashAt, FaultPlan, Stall
from fanoutsim.kernel.check import SUMMARY_KEYS, CheckResult, problems

SCENARIOS = Path(__file__).resolve().parents[1] / "fanoutsim" / "examples"


def reactor_with_losses():
    sim = fs.Simulation(
        config=fs.SchedulerConfig(
            prune_policy="ttl", reactor_firings_retention=20.0, reactor_firings_prune_interval=5.0
        ),
        faults=FaultPlan([Stall("wf", window=(0.0, 60.0), mode="pause")]),
    )
    sim.runner.subscribe_workflow_to_reactor("r", "wf")
    sim.add_workload("r", 1.0, payload="counter", stop=30.0)
    sim.run(until=90)
    return sim


def outbox_with_losses_and_duplicates():
    sim = OutboxSimulation(seed=0, faults=FaultPlan([CrashAt(at=1.0, downtime=0.5)]))
    sim.register_consumer("mailer", fn=lambda row: None, duration=3.0)
    sim.register_consumer("idle")
    sim.commit("p1")
    sim.run(until=10.0)
    for i in range(3):
        sim.commit(f"q{i}")
    sim.set_cursor("mailer", 3)
    sim.run(until=20.0)
    return sim


def scenario_run(stem, until=300.0):
    scenario = fs.load_scenario(SCENARIOS / f"{stem}.toml")
    return scenario.run(seed=1, until=until, store="memory")


RUNS = {
    "reactor-crashes": lambda: scenario_run("crashes"),
    "reactor-ttl-losses": reactor_with_losses,
    "outbox-crashes": lambda: scenario_run("outbox-crashes", 600.0),
    "outbox-seek-and-crash": outbox_with_losses_and_duplicates,
    "leases": lambda: scenario_run("leases", 600.0),
    "leases-crashes": lambda: scenario_run("leases-crashes"),
}


@pytest.fixture(scope="module", params=sorted(RUNS))
def checked(request):
    sim = RUNS[request.param]()
    return request.param, designs.design_of(sim).check(sim)


def test_every_design_is_covered():
    assert {name.split("-")[0] for name in RUNS} == set(designs.names())


def test_each_checker_meets_the_contract(checked):
    name, report = checked
    assert isinstance(report, CheckResult)
    assert problems(report) == []
    s = report.summary
    assert tuple(s) == SUMMARY_KEYS
    assert report.per_unit is getattr(report, f"per_{report.unit}")
    assert s["duplicates"] == len(report.duplicates) and s["lost"] == len(report.lost)


def test_the_runs_exercise_losses_and_duplicates(checked):
    name, report = checked
    # each run has what its name says, so the frames' causes were checked on real rows
    if "losses" in name or "seek" in name or name == "leases":
        assert report.summary["lost"] > 0
    if "crash" in name or name == "leases":
        assert report.summary["duplicates"] > 0


def test_the_summary_speaks_each_designs_own_totals(checked):
    name, report = checked
    s, t = report.summary, report.total
    if report.unit == "subscription":
        assert s["delivered"] == t["delivered_once"] + t["duplicated"]
        assert s["duplicates"] == t["extra_deliveries"] and s["lost_by_cause"] == t["lost_by_cause"]
        assert s["duplicates_by_cause"] == t["duplicates_by_cause"]
    else:
        assert s["delivered"] == t["delivered"]
        assert s["duplicates"] == t.get("duplicates", t.get("extra_deliveries"))
        assert s["lost_by_cause"] == t["lost_by_cause"] and s["duplicates_by_cause"] == t["duplicates_by_cause"]


def test_the_contract_check_finds_a_broken_report(checked):
    _, report = checked
    no_cause = dataclasses.replace(report, lost=report.lost.drop(columns="cause"))
    assert any("'cause'" in p for p in problems(no_cause))
    off_by_one = dataclasses.replace(report, total={**report.total, "lost": report.total["lost"] + 1})
    assert any("but the lost frame has" in p for p in problems(off_by_one))
    extra = pd.concat(
        [report.duplicates, report.duplicates.head(1).assign(cause="made_up")]
        if len(report.duplicates)
        else [pd.DataFrame({"cause": ["made_up"]})]
    )
    assert problems(dataclasses.replace(report, duplicates=extra))


def test_something_else_is_not_a_check_result():
    assert problems(object()) and "lacks" in problems(object())[0]
