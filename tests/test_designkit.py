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
