"""The holes of seed 000's timestamp watermark, and the strategies that close them.

Each hole is reproduced with a minimal plan; the checker must report the loss
with its cause, found in the trace. Then each strategy of
``SchedulerConfig(watermark=...)`` is shown closing (or not closing) it.
"""

from __future__ import annotations

import pytest

import fanoutsim as fs
from fanoutsim.analysis import latency_frame
from fanoutsim.faults import ClockSkew, FailInserts, FaultPlan, LateCommit, Pollers, Ties


def run(*faults, watermark="fired_at", rate=2.0, until=300, seed=0, store="memory", **config):
    sim = fs.Simulation(
        config=fs.SchedulerConfig(watermark=watermark, **config), seed=seed, store=store, faults=FaultPlan(list(faults))
    )
    sim.runner.subscribe_workflow_to_reactor("r", "wf")
    sim.add_workload("r", rate, payload="counter")
    sim.run(until=until)
    return sim, fs.check(sim)


# (a) two firings with the same fired_at split by the batch limit
def test_a_tie_split_by_the_batch_limit_is_lost_with_cause_tie(store):
    sim, report = run(Ties(probability=1.0, burst=2), reactor_poll_batch_limit=1, rate=0.5, until=60, store=store)
    assert report.total["lost"] > 0 and not report.valid
    assert set(report.lost["cause"]) == {"tie"}
    # the checker's story matches the tables: every lost firing shares its fired_at with a delivered one
    f = sim.trace().history.set_index("firing")
    delivered = set(sim.executions()["reactor_firing_id"])
    for fid in report.lost["firing"]:
        siblings = f[f["fired_at"] == f.loc[fid, "fired_at"]].index
        assert any(s in delivered for s in siblings if s != fid)


# (b) a tie inside one batch when the second's dispatch fails under the hold policy
def test_b_a_tie_whose_second_dispatch_fails_is_lost_under_hold():
    sim, report = run(
        Ties(probability=1.0, burst=2), FailInserts(probability=0.3), dispatch_failure_policy="hold", seed=3
    )
    assert report.total["lost"] > 0
    assert set(report.lost["cause"]) == {"tie"}
    failed = set(sim.trace().query("kind == 'dispatch_failed'")["firing"])
    assert set(report.lost["firing"]) <= failed  # each loss is a firing whose insert failed once


# (c) a late commit, or a writer whose clock lags, lands below an advanced watermark
@pytest.mark.parametrize(
    "fault",
    [
        LateCommit(probability=0.3, delay={"dist": "uniform", "low": 0.5, "high": 3.0}),
        ClockSkew(hosts=[(-2.0, 0.0), (0.0, 0.0)]),
    ],
    ids=["late-commit", "lagging-clock"],
)
def test_c_late_visibility_is_lost_with_its_cause(fault):
    sim, report = run(fault, rate=4.0)
    assert report.total["lost"] > 0 and not report.valid
    assert set(report.lost["cause"]) == {"late_visibility"}
    assert report.total["out_of_order"] == 0  # what arrives late is lost, not reordered, under fired_at


# (d) several pollers dispatch everything twice and move watermarks backwards
def test_d_several_pollers_duplicate_and_rewind_the_watermark():
    sim, report = run(Pollers(2), rate=3.0, until=60)
    assert report.total["lost"] == 0
    assert report.total["extra_deliveries"] >= report.total["expected"] * 0.9
    assert set(report.duplicates["cause"]) == {"several_pollers"}
    wm = sim.trace().query("kind == 'watermark'")["detail"].astype("int64")
    assert (wm.diff() < 0).any()  # the second replica's drain drags it back


# -- the fixes ---------------------------------------------------------------------------

HOLES = {
    "tie-batch": dict(faults=[Ties(probability=1.0, burst=2)], reactor_poll_batch_limit=1, rate=0.5),
    "tie-hold": dict(faults=[Ties(probability=1.0, burst=2), FailInserts(probability=0.3)], seed=3),
    "late-commit": dict(
        faults=[LateCommit(probability=0.3, delay={"dist": "uniform", "low": 0.5, "high": 3.0})], rate=4.0
    ),
    "lagging-clock": dict(faults=[ClockSkew(hosts=[(-2.0, 0.0), (0.0, 0.0)])], rate=4.0),
}
# which strategy closes which hole (True: nothing lost)
CLOSES = {
    "fired_at": {"tie-batch": False, "tie-hold": False, "late-commit": False, "lagging-clock": False},
    "fired_at_id": {"tie-batch": True, "tie-hold": True, "late-commit": False, "lagging-clock": False},
    "settled": {"tie-batch": True, "tie-hold": True, "late-commit": True, "lagging-clock": True},
}


@pytest.mark.parametrize("watermark", list(CLOSES))
@pytest.mark.parametrize("hole", list(HOLES))
def test_which_strategy_closes_which_hole(watermark, hole):
    spec = dict(HOLES[hole])
    faults = spec.pop("faults")
    _, report = run(*faults, watermark=watermark, watermark_settle=5.0, **spec)
    assert (report.total["lost"] == 0) is CLOSES[watermark][hole], report.total
    assert report.valid is CLOSES[watermark][hole]


def test_settled_closes_late_visibility_only_up_to_its_horizon():
    late = LateCommit(probability=0.3, delay={"dist": "uniform", "low": 2.0, "high": 6.0})
    _, short = run(late, watermark="settled", watermark_settle=1.0, rate=4.0)
    _, long = run(late, watermark="settled", watermark_settle=6.0, rate=4.0)
    assert short.total["lost"] > 0 and long.total["lost"] == 0


def test_what_each_strategy_costs_in_latency():
    means = {}
    for watermark in CLOSES:
        sim, report = run(watermark=watermark, watermark_settle=5.0, rate=2.0, until=600)
        assert report.valid and report.total["lost"] == 0
        means[watermark] = latency_frame(sim)["fire_to_dispatch"].mean()
    assert means["fired_at"] == pytest.approx(0.5, abs=0.05)  # half a poll interval
    assert means["fired_at_id"] == pytest.approx(means["fired_at"], abs=0.01)  # free
    assert means["settled"] - means["fired_at"] == pytest.approx(5.0, abs=0.05)  # the horizon


def test_several_pollers_are_not_fixed_by_any_watermark():
    for watermark in CLOSES:
        _, report = run(Pollers(2), watermark=watermark, rate=2.0, until=60)
        assert report.total["extra_deliveries"] > 0 and report.total["lost"] == 0
