"""A sweep's recommendation: from a grid that varies one of the design's
settings as from one that varies several, judged at its worst over the other
grid keys, held to a budget (``--budget``) each design states, and a line
saying why when there is none — for every design."""

from __future__ import annotations

import importlib
import math

import pandas as pd
import pytest
from clitools import cli, one_error_line

import fanoutsim as fs
from fanoutsim import designs, examples
from fanoutsim.cli import main
from fanoutsim.kernel.design import SweepBudget
from fanoutsim.kernel.sweeppick import grid_keys, worst_by_setting

SW = importlib.import_module("fanoutsim.sweep")  # the module: fanoutsim.sweep is also the function
REACTOR = examples.path("sweep")
P, B = "reactor_poll_interval", "reactor_poll_batch_limit"


def quick(path, grid, seeds=(0,), until=60.0):
    return fs.sweep(path, grid=grid, seeds=seeds, until=until, cache=None, progress=False)


# -- the design-free part ------------------------------------------------------------
def test_a_setting_is_judged_at_its_worst_over_the_other_keys():
    df = pd.DataFrame(
        {
            "p": [1, 1, 1, 1, 2, 2, 2, 2],
            "rate": [1, 1, 4, 4, 1, 1, 4, 4],
            "seed": [0, 1] * 4,
            "lat": [1.0, 3.0, 5.0, 7.0, 2.0, 2.0, 2.0, 4.0],
            "valid": [True, True, True, False, True, True, True, True],
        }
    )
    table, conditions = worst_by_setting(df, ["p"], {"lat": ("mean", "max"), "valid": ("min", "min")})
    assert conditions == ["rate"]
    assert table["lat"].tolist() == [6.0, 3.0]  # the mean over seeds at rate 4, the worse rate
    assert table["valid"].tolist() == [0.0, 1.0] and table["conditions"].tolist() == [2, 2]
    with pytest.raises(KeyError, match="'nope'"):
        worst_by_setting(df, ["p"], {"nope": ("mean", "max")})


def test_the_grid_keys_are_the_columns_before_the_seed_also_read_back(tmp_path):
    df = quick(REACTOR, {P: [1.0], "rate": [1.0, 2.0]})
    assert grid_keys(df) == [P, "rate"]
    df.to_csv(tmp_path / "t.csv", index=False)
    assert grid_keys(pd.read_csv(tmp_path / "t.csv")) == [P, "rate"]  # the columns before seed


@pytest.mark.parametrize(
    "budget, words",
    [
        (SweepBudget("the p99", default=1.5), "a number of seconds > 0"),
        (SweepBudget("the rate", default=0.01, unit="", low_included=True, high=1.0), "a number >= 0 and <= 1"),
    ],
)
@pytest.mark.parametrize("value", [0, -1, math.nan, math.inf, "1", True, None, 2.5])
def test_a_budget_out_of_range_is_refused_naming_what_is_allowed(budget, words, value):
    allowed = value == 2.5 and budget.high is None
    if allowed:
        assert budget.check(value) == 2.5
        return
    if value == 0 and budget.low_included:
        assert budget.check(0) == 0.0
        return
    with pytest.raises(ValueError, match=rf"budget {value!r}: give {words} \({budget.meaning}"):
        budget.check(value)


# -- the reactor: one key as several ------------------------------------------------
@pytest.fixture(scope="module")
def intervals():
    return quick(REACTOR, {P: [0.5, 1.0, 2.0]}, seeds=(0, 1), until=90.0)


def test_the_reactor_recommends_from_the_poll_interval_alone(intervals):
    line = SW.recommend(intervals, REACTOR)
    # the batch limit was not swept: the scenario's value, named as such
    assert line.startswith(
        f"recommendation (p99 fire -> dispatch <= 1.5 s, backlog <= 100): {P} = 1 ({B} 100, as the scenario has it)"
    )
    assert "2 of 3 settings meet the bar" in line and "then the largest batch limit" not in line


def test_a_budget_moves_the_recommendation_and_a_bad_one_is_refused(intervals):
    assert f"{P} = 2 " in SW.recommend(intervals, REACTOR, budget=3)
    assert SW.recommend(intervals, REACTOR, budget=0.01).startswith(
        "recommendation: none: no setting keeps fire_to_dispatch_p99_s <= 0.01 s"
    )
    with pytest.raises(ValueError, match=r"budget -1: give a number of seconds > 0 \(the p99 fire -> dispatch"):
        SW.recommend(intervals, REACTOR, budget=-1)


def test_the_reactor_recommends_from_the_batch_limit_alone_at_every_rate():
    df = quick(REACTOR, {B: [1, 100], "rate": [1.0, 4.0]})
    line = SW.recommend(df, REACTOR)
    # batch 1 keeps up at 1 firing/s but not at 4: only 100 holds at every rate
    assert f"{B} = 100 ({P} 1.0, as the scenario has it)" in line
    assert "1 of 2 settings meet the bar at every rate of the grid (its worst)" in line


def test_without_a_setting_in_the_grid_each_design_says_why_it_recommends_nothing():
    cases = {
        "sweep": ({"rate": [1.0]}, f"the sweep varies neither {P} nor {B}"),
        "safety-poll": ({"rate": [0.5]}, "the sweep does not vary safety_poll_interval"),
        "lease-length": ({"rate": [0.5]}, "the sweep varies no lease length"),
    }
    for name, (grid, why) in cases.items():
        line = SW.recommend(quick(examples.path(name), grid, until=30.0), examples.path(name))
        assert line.startswith(f"recommendation: none: {why}"), line


# -- the outbox's safety poll ---------------------------------------------------------
def outbox_table(rows):
    keys = ("safety_poll_interval", "faults.0.drop", "seed", "commit_to_handled_p99_s", "lost", "valid")
    return pd.DataFrame([dict(zip(keys, r)) for r in rows])


def test_the_outbox_takes_the_longest_safety_poll_within_budget_at_every_drop():
    df = outbox_table(
        [
            (1.0, 0.1, 0, 0.8, 0, True),
            (1.0, 0.9, 0, 1.0, 0, True),
            (2.0, 0.1, 0, 1.5, 0, True),
            (2.0, 0.9, 0, 1.9, 0, True),
            (4.0, 0.1, 0, 1.0, 0, True),  # within budget at 10% lost hints ...
            (4.0, 0.9, 0, 3.9, 0, True),  # ... but not at 90%
            (3.0, 0.1, 0, 1.0, 1, True),  # a lost row: never recommended
            (3.0, 0.9, 0, 1.0, 0, True),
        ]
    )
    sc = examples.path("safety-poll")
    line = SW.recommend(df, sc)
    assert line.startswith("recommendation (p99 commit -> handled <= 2 s, nothing lost): safety_poll_interval = 2:")
    assert "2 of 4 settings meet the bar at every faults.0.drop of the grid (its worst)" in line
    assert "safety_poll_interval = 4:" in SW.recommend(df, sc, budget=4)
    assert SW.recommend(df, sc, budget=0.5).startswith("recommendation: none: no safety_poll_interval keeps")


def test_a_real_safety_poll_sweep_recommends_one_whose_p99_is_within_budget():
    sc = examples.path("safety-poll")
    df = quick(sc, {"safety_poll_interval": [0.5, 4.0], "faults.0.drop": [0.5]}, until=600.0)
    line = SW.recommend(df, sc, budget=1.0)
    assert "safety_poll_interval = 0.5:" in line
    p99 = float(line.split(": p99 ")[1].split(" s")[0])
    assert p99 <= 1.0 and p99 == pytest.approx(df["commit_to_handled_p99_s"].iloc[0], abs=5e-4)


# -- the leases' lease length ----------------------------------------------------------
def test_a_lease_length_is_chosen_by_its_consumers_own_duplicate_rate():
    key = "consumers.worker.lease_seconds"
    rows = []
    for lease, dup in ((5.0, 30), (10.0, 5), (20.0, 0)):
        rows.append(
            {
                key: lease,
                "seed": 0,
                "publish_to_ack_p99_s": 2.0,
                "delivered": 4000,  # another consumer's deliveries: they must not dilute worker's rate
                "duplicates": dup,
                "valid": True,
                "delivered[worker]": 1000,
                "duplicates[worker]": dup,
            }
        )
    df = pd.DataFrame(rows)
    sc = examples.path("lease-length")
    line = SW.recommend(df, sc)  # target 0.01: 30/1000 fails, 5/1000 passes
    assert line.startswith(
        f"recommendation (duplicates per event delivered to worker <= 0.01): {key} = 10: 0.0050 duplicates"
    )
    assert f"{key} = 20:" in SW.recommend(df, sc, budget=0)
    assert f"{key} = 5:" in SW.recommend(df, sc, budget=0.05)
    with pytest.raises(ValueError, match=r"budget 2: give a number >= 0 and <= 1"):
        SW.recommend(df, sc, budget=2)


def test_a_real_lease_sweep_counts_the_expired_leases_duplicates_per_consumer():
    sc = examples.path("lease-length")
    key = "consumers.worker.lease_seconds"
    df = quick(sc, {key: [5.0, 40.0], "consumers.worker.duration.sigma": [1.0]}, until=300.0)
    assert (df["duplicates[worker]"] == df["duplicates"]).all()  # one consumer: its own count is the total
    short, long = df["duplicates[worker]"].tolist()
    assert short > long  # runs outlive a 5 s lease far more often than a 40 s one
    line = SW.recommend(df, sc, budget=1.0)  # any rate meets it: the shortest lease
    assert f"{key} = 5:" in line and f"{short / df['delivered[worker]'].iloc[0]:.4f}" in line


# -- the command -----------------------------------------------------------------------
def test_the_command_takes_a_budget_and_prints_the_recommendation_held_to_it(tmp_path, capsys):
    out = tmp_path / "out"
    args = ["sweep", str(REACTOR), "--grid", f"{P}=0.5,2", "--until", "60", "--no-cache", "--out", str(out)]
    assert main([*args, "--budget", "3"]) == 0
    text = capsys.readouterr().out
    assert f"recommendation (p99 fire -> dispatch <= 3 s, backlog <= 100): {P} = 2 " in text
    assert (out / "sweep_recommendation.png").exists()  # one key is enough for the chart too


@pytest.mark.parametrize(
    "scenario, budget, fragment",
    [
        ("sweep", "0", "--budget 0.0: give a number of seconds > 0 (the p99 fire -> dispatch"),
        ("lease-length", "1.5", "--budget 1.5: give a number >= 0 and <= 1 (the duplicates per event delivered"),
        ("sweep", "abc", "'abc' is not a number"),
        ("sweep", "nan", "'nan' must be a finite number"),
    ],
)
def test_a_bad_budget_is_one_error_line_and_nothing_is_written(tmp_path, scenario, budget, fragment):
    out = tmp_path / "never"
    done = cli("sweep", str(examples.path(scenario)), "--grid", "rate=1", "--budget", budget, "--out", str(out))
    one_error_line(done, fragment)
    assert not out.exists()


def test_every_design_states_its_budget():
    got = {n: (designs.get(n).sweep_budget.default, designs.get(n).sweep_budget.unit) for n in designs.names()}
    assert got == {"reactor": (1.5, "s"), "outbox": (2.0, "s"), "leases": (0.01, "")}
