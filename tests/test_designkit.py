"""The helpers several designs' records share (fanoutsim.kernel.designkit) and
the scenario base (fanoutsim.kernel.scenariorun)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fanoutsim.kernel.designkit import (
    checked_columns,
    latency_columns,
    latency_stats,
    merged_with_untraced,
    unit_latency_columns,
    wall_workloads,
)
from fanoutsim.kernel.scenario import ScenarioError
from fanoutsim.kernel.scenariorun import ScenarioRun

STATS = ("p50", "p99", "mean", "max")


@given(st.lists(st.one_of(st.floats(0, 1e6), st.just(math.nan)), max_size=40))
def test_latency_stats_leave_out_nan(values):
    got = latency_stats(values, STATS)
    finite = [v for v in values if not math.isnan(v)]
    if not finite:
        assert all(math.isnan(got[s]) for s in STATS)
        return
    assert got["max"] == max(finite)
    assert got["p50"] == pytest.approx(float(np.percentile(finite, 50)))
    assert got["p99"] == pytest.approx(float(np.percentile(finite, 99)))
    assert got["mean"] == pytest.approx(float(np.mean(finite)))


def test_latency_stats_give_only_the_stats_asked():
    assert list(latency_stats([1.0, 2.0], ("p99", "p50"))) == ["p99", "p50"]


def test_latency_columns_overall_and_per_unit():
    frame = pd.DataFrame({"unit": ["b", "a", "b"], "latency_s": [1.0, 3.0, 2.0]})
    assert latency_columns("x", frame["latency_s"], ("max",)) == {"x_max_s": 3.0}
    per = unit_latency_columns("x", frame, "unit", ("p50",))
    assert per == {"x_p50_s[a]": 3.0, "x_p50_s[b]": 1.5}
    assert list(per) == ["x_p50_s[a]", "x_p50_s[b]"]  # sorted by unit


def test_checked_columns():
    @dataclass
    class Checked:
        total: dict
        valid: bool

    assert checked_columns(Checked({"lost": 2.0, "other": 1}, False), ("lost",)) == {"lost": 2, "valid": False}


@dataclass(frozen=True)
class _W:
    rate: float


@dataclass(frozen=True)
class _S:
    workloads: tuple = ()


def test_wall_workloads_as_written_none_or_scaled():
    s = _S((_W(1.0), _W(3.0)))
    added: list[float] = []
    assert wall_workloads(s, None, added.append) == s.workloads
    assert wall_workloads(s, 0, added.append) == ()
    assert [w.rate for w in wall_workloads(s, 8.0, added.append)] == [2.0, 6.0]
    assert added == []


def test_wall_workloads_add_one_when_none_to_scale():
    added: list[float] = []
    assert wall_workloads(_S(), 5.0, added.append) == ()
    assert added == [5.0]
    assert wall_workloads(_S(), 5.0, None) == ()  # a role that runs no workloads


def test_merged_with_untraced_adds_only_the_untraced_rows():
    t0 = pd.Timestamp("2026-01-01", tz="UTC")
    trace = pd.DataFrame({"t": [t0], "kind": ["wrote"], "key": [1.0]})
    rows = [{"at": t0 + pd.Timedelta(i, "s"), "key": i} for i in (1, 2)]
    merged = merged_with_untraced(
        [trace], "wrote", "key", rows, lambda r: {"t": r["at"], "kind": "wrote", "key": r["key"]}
    )
    assert list(merged["key"]) == [1, 2]
    assert merged_with_untraced([trace], "wrote", "key", rows[:1], lambda r: {}).equals(trace)


def test_scenario_run_needs_a_build():
    with pytest.raises(NotImplementedError):
        ScenarioRun(name="n", source="s", until=1.0).build()


class _Node:
    """A face as when_up sees it: a SimPy env, a clock and whether it is up."""

    def __init__(self, down: tuple[float, float]) -> None:
        import simpy

        self.env = simpy.Environment()
        self.down = down
        self.ran: list[tuple[float, str]] = []
        self.ready_from = 0.0

    @property
    def now(self) -> float:
        return self.env.now

    @property
    def up(self) -> bool:
        return not (self.down[0] <= self.now < self.down[1])


@pytest.mark.parametrize(
    ("at", "down", "ready_from", "ran_at"),
    [
        (2.0, (0.0, 0.0), 0.0, 2.0),  # up and ready: on time
        (0.0, (0.0, 0.0), 0.0, 0.0),  # now: without a wait
        (2.0, (1.0, 3.05), 0.0, 3.1),  # down then: the first retry once it is up
        (2.0, (0.0, 0.0), 2.5, 2.5),  # not ready then: once ready holds
        (2.0, (5.0, 6.0), 0.0, 2.0),  # down only later: on time
    ],
)
def test_when_up_runs_a_step_at_its_time_once_the_node_is_up_and_ready(at, down, ready_from, ran_at):
    node = _Node(down)
    node.env.process(
        ScenarioRun.when_up(
            node, at, lambda sim, what: sim.ran.append((sim.now, what)), "step", ready=lambda sim: sim.now >= ready_from
        )
    )
    node.env.run(until=10.0)
    assert len(node.ran) == 1
    assert node.ran[0][0] == pytest.approx(ran_at)
    assert node.ran[0][1] == "step"


def test_new_simulation_checks_the_overrides_and_builds_from_the_scenario():
    built = {}

    def face(config, **kw):
        built.update(kw, config=config)
        return "sim"

    run = ScenarioRun(name="n", source="s", until=1.0, seed=4, config="cfg", start="2026-01-01T00:00:00Z")
    assert run.new_simulation(face, None, None, None) == ("sim", 4)
    assert built == {"config": "cfg", "seed": 4, "store": "memory", "start": "2026-01-01T00:00:00Z", "faults": None}
    assert run.new_simulation(face, 9, None, None)[1] == 9
    built.clear()
    with pytest.raises(ScenarioError, match="run.until"):
        run.new_simulation(face, None, None, -1.0)
    assert built == {}  # refused before anything is built
