"""The outbox loop's wake and poll rules, as real PostgreSQL job queues use them
(issue 28): ``poll_mode``, ``wake_mode`` (the lost wake-up and its fix),
``catch_up``, ``read_until_empty`` (and what ``batch_limit = 1`` gives),
``read_cost`` / ``empty_read_cost``, ``repoll`` and ``self_hint_every``. Each
default is the seed's loop (the golden results hold that); each test here runs
the option against its default on the virtual clock, where every time is exact.
``test_clock_differential.py`` runs them on the wall clock too."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fanoutsim.designs.outbox import OutboxConfig
from fanoutsim.designs.outbox.presets import preset
from fanoutsim.designs.outbox.simulation import OutboxSimulation
from fanoutsim.faults import FaultPlan, Notifications
from fanoutsim.kernel.dist import Dist
from fanoutsim.scenario import ScenarioError, parse_scenario

HINT = 0.001  # every hint's delay, seconds


def run(commits, config: OutboxConfig, *, lose=(), delay=HINT, silent=(), until=None):
    """One consumer ("worker") that takes no time; a commit at each time of ``commits``
    (seconds); the seqs in ``lose`` lose their hints. The finished simulation."""
    plan = FaultPlan([Notifications(delay=delay, silent=silent)])
    sim = OutboxSimulation(config, seed=0, faults=plan)
    sim.register_consumer("worker")
    sim.channel.lose_hints(set(lose))
    for t in commits:
        sim.run(until=t)
        sim.commit("p")
    sim.run(until=until if until is not None else max(commits) + 3 * config.safety_poll_interval)
    return sim


def handled_at(sim) -> dict[int, float]:
    """Each seq -> when the worker's function ran (seconds since the start)."""
    t = sim.trace()
    d = t[t["kind"] == "delivered"].drop_duplicates("seq")
    return {int(s): round((at - sim.start_us) / 1e6, 6) for s, at in zip(d["seq"], d["t"])}


def fetches(sim) -> int:
    return int(sim.metrics()['fanoutsim_outbox_fetches_total{consumer="worker"}'])


def test_the_defaults_are_the_seeds_loop():
    c = OutboxConfig()
    assert (c.poll_mode, c.wake_mode, c.catch_up, c.read_until_empty) == ("fixed", "before_fetch", False, False)
    assert c.read_cost == Dist("fixed", 0.0) and c.empty_read_cost is None
    assert c.repoll is None and c.self_hint_every is None


# -- poll_mode ------------------------------------------------------------------------
def test_the_fixed_poll_ticks_on_its_grid_and_the_idle_poll_after_the_last_round():
    # seq 1 at 1.0 (its hint wakes the worker: a round ends at 1.001); seq 2 at 1.5 loses its hint
    fixed = handled_at(run([1.0, 1.5], OutboxConfig(safety_poll_interval=2.0), lose={2}))
    idle = handled_at(run([1.0, 1.5], OutboxConfig(safety_poll_interval=2.0, poll_mode="idle"), lose={2}))
    assert fixed == {1: 1.001, 2: 2.0}  # the grid's tick at 2 s
    assert idle == {1: 1.001, 2: 3.001}  # 2 s after the round that ended at 1.001


def test_the_idle_poll_never_fires_while_hints_come_sooner():
    commits = [0.7 + 1.5 * k for k in range(10)]  # a hint every 1.5 s (off the grid), the poll at 2 s
    idle = run(commits, OutboxConfig(safety_poll_interval=2.0, poll_mode="idle"), until=15.0)
    fixed = run(commits, OutboxConfig(safety_poll_interval=2.0), until=15.0)
    assert fetches(idle) == 1 + 10  # the first read, then one per hint: no poll at all
    assert fetches(fixed) == 1 + 10 + 7  # and a read at each of the 7 ticks of the grid up to 15 s
    assert set(handled_at(idle).values()) == set(handled_at(fixed).values())


# -- wake_mode: the lost wake-up ----------------------------------------------------------
def race(wake_mode: str):
    """procrastinate's race: seq 1's hint wakes the worker at 1.001; its fetch takes 10 ms, and
    the next, empty fetch reads at 1.011 and returns at 1.021. Seq 2 commits at 1.012, after
    that read's snapshot; its hint lands at 1.013, while the empty fetch is in flight. The
    hint of seq 3 (at 3.0) is lost, so nothing but the poll can rescue seq 2."""
    config = OutboxConfig(
        safety_poll_interval=5.0, poll_mode="idle", wake_mode=wake_mode, batch_limit=1, read_cost=0.01
    )
    return run([1.0, 1.012, 3.0], config, lose={3})


def test_a_hint_during_the_last_empty_fetch_is_lost_when_the_flag_is_cleared_after_the_fetch():
    sim = race("after_fetch")
    t = sim.trace()
    assert 2 in set(t.loc[t["kind"] == "hint", "seq"].astype(int))  # the hint arrived ...
    # ... and was erased by the clear after the empty fetch: seq 2 waits for the poll, 5 s after
    # the round that ended at 1.021, and seq 3 (whose hint was lost) rides along
    assert handled_at(sim) == {1: 1.011, 2: 6.031, 3: 6.041}


def test_the_fix_arming_the_wake_before_the_fetch_reads_again_at_once():
    # the same race with the wake armed before each read: the hint at 1.013 means "read again"
    # (seq 3, whose hint was lost, waits for the poll: 5 s after the round that ended at 1.041)
    assert handled_at(race("before_fetch")) == {1: 1.011, 2: 1.031, 3: 6.051}


@settings(max_examples=40, deadline=None)
@given(
    gaps=st.lists(st.floats(0.0005, 0.05), min_size=2, max_size=12),
    cost=st.floats(0.001, 0.02),
    delay=st.floats(0.0, 0.004),
)
def test_with_the_wake_armed_before_the_fetch_no_hint_is_ever_lost_in_the_worker(gaps, cost, delay):
    # whatever the commits' spacing, read cost and hint delay: every row is handled long before
    # the poll (100 s), since a hint that lands during a read makes the worker read again
    commits = np.cumsum([1.0, *gaps]).tolist()
    config = OutboxConfig(safety_poll_interval=100.0, poll_mode="idle", batch_limit=1, read_cost=cost)
    sim = run(commits, config, delay=delay, until=commits[-1] + 10.0)
    at = handled_at(sim)
    assert len(at) == len(commits) and max(at.values()) < commits[-1] + 1.0


def test_the_lost_wake_up_happens_about_as_often_as_a_commit_lands_in_an_empty_fetch():
    # Poisson commits at 5/s, every empty fetch 4 ms, hints 1 ms late: a commit lands in the
    # window (4 - 1 ms after an empty fetch begins) with chance about 5/s x 3 ms = 1.5%
    rng = np.random.default_rng(3)
    commits = np.cumsum(rng.exponential(0.2, 2000)).tolist()
    lost = {}
    for mode in ("after_fetch", "before_fetch"):
        config = OutboxConfig(
            safety_poll_interval=5.0,
            poll_mode="idle",
            wake_mode=mode,
            batch_limit=1,
            read_cost=0.002,
            empty_read_cost=0.004,
        )
        at = handled_at(run(commits, config))
        lat = np.array([at[k + 1] - t for k, t in enumerate(commits)])
        lost[mode] = int((lat > 0.05).sum())
    assert lost["before_fetch"] == 0
    assert 0.005 * 2000 < lost["after_fetch"] < 0.03 * 2000, lost


# -- catch_up -----------------------------------------------------------------------------
@pytest.mark.parametrize("catch_up,at", [(False, 5.0), (True, 2.0)])
def test_after_a_silent_window_the_consumers_catch_up_only_if_asked(catch_up, at):
    # the listener is away in [1, 2): seq 1's hint (1.5) is missed; the poll ticks at 5 s
    sim = run([1.5], OutboxConfig(safety_poll_interval=5.0, catch_up=catch_up), silent=[(1.0, 2.0)], until=6.0)
    assert handled_at(sim) == {1: at}
    t = sim.trace()
    assert int((t["kind"] == "catch_up").sum()) == int(catch_up)


# -- read_until_empty, and batch_limit = 1 -------------------------------------------------
@pytest.mark.parametrize(
    "batch_limit,until_empty,seq3_at",
    [
        (10, False, 5.01),  # a short batch ends the round: seq 3 (hint lost) waits for the poll (and a read)
        (10, True, 1.021),  # the round reads again until a read finds nothing: at 1.011
        (1, False, 1.031),  # one at a time: a full batch always reads again, so seq 3 is read ...
        (1, True, 1.031),  # ... after seqs 1 and 2, with or without read_until_empty
    ],
)
def test_a_row_that_commits_mid_drain_without_a_hint(batch_limit, until_empty, seq3_at):
    # seqs 1 and 2 commit at 1.0 (hints at 1.001), seq 3 at 1.005 while their read (10 ms) is in flight
    config = OutboxConfig(
        safety_poll_interval=5.0, batch_limit=batch_limit, read_until_empty=until_empty, read_cost=0.01
    )
    assert handled_at(run([1.0, 1.0, 1.005], config, lose={3}, until=6.0))[3] == seq3_at


# -- read costs ----------------------------------------------------------------------------
def test_a_hinted_row_waits_its_hint_and_one_read():
    config = OutboxConfig(safety_poll_interval=5.0, read_cost=0.003, empty_read_cost=0.5)
    sim = run([1.0, 2.0], config)
    assert handled_at(sim) == {1: 1.004, 2: 2.004}  # the empty reads (0.5 s) do not delay a hinted one
    assert fetches(sim) > 2


def test_a_measured_read_cost_is_drawn_from_its_samples():
    p = preset("procrastinate-3.10")
    config = OutboxConfig(safety_poll_interval=50.0, read_cost=p.read_cost())
    commits = [1.0 + k for k in range(30)]
    at = handled_at(run(commits, config))
    waited = {round(at[k + 1] - t - HINT, 6) for k, t in enumerate(commits)}
    assert waited <= {round(x, 6) for x in p.read_cost().samples} and len(waited) > 10


# -- repoll --------------------------------------------------------------------------------
@pytest.mark.parametrize("repoll,at", [(None, 5.01), (0.1, 1.141)])
def test_a_row_the_last_read_missed_is_read_soon_with_repoll(repoll, at):
    # seq 1's round: its read (10 ms, from 1.001) and the empty one (1.011-1.031); seq 2 commits
    # at 1.015, after that read began, and loses its hint: the probe after the round sees it
    config = OutboxConfig(
        safety_poll_interval=5.0, read_until_empty=True, read_cost=0.01, empty_read_cost=0.02, repoll=repoll
    )
    assert handled_at(run([1.0, 1.015], config, lose={2}, until=6.0))[2] == at


# -- self_hint_every -----------------------------------------------------------------------
def test_a_consumers_status_write_wakes_it_for_a_row_whose_hint_was_lost():
    commits, lost = [1.0, 1.02], {2}
    without = handled_at(run(commits, OutboxConfig(safety_poll_interval=5.0), lose=lost, until=6.0))
    config = OutboxConfig(safety_poll_interval=5.0, self_hint_every=0.1)
    sim = run(commits, config, lose=lost, until=6.0)
    assert without[2] == 5.0
    assert handled_at(sim)[2] == pytest.approx(1.101)  # the status write at 1.1 (of seq 1), its hint 1 ms on
    t = sim.trace()
    # a status write's hint carries the last seq it records, and lose_hints goes by that seq: the
    # write at 1.2 (of seq 2) is lost as seq 2's own hint was; the writes after it had no news
    assert t.loc[t["kind"] == "hint", "seq"].astype(int).tolist() == [1, 1]
    assert t.loc[t["kind"] == "hint_dropped", "seq"].astype(int).tolist() == [2, 2]


def test_a_status_writes_hint_goes_through_the_channel():
    plan = FaultPlan([Notifications(drop=1.0)])
    sim = OutboxSimulation(OutboxConfig(safety_poll_interval=5.0, self_hint_every=0.1), seed=0, faults=plan)
    sim.register_consumer("worker")
    sim.run(until=1.0)
    sim.commit("p")
    sim.run(until=6.0)
    assert sim.channel.sent == 2 and sim.channel.dropped == 2  # the commit's and the status write's


# -- checked as a scenario's keys are -------------------------------------------------------
@pytest.mark.parametrize(
    "field,value,match",
    [
        ("poll_mode", "adaptive", "poll_mode must be one of 'fixed', 'idle', got 'adaptive'"),
        ("wake_mode", "never", "wake_mode must be one of 'before_fetch', 'after_fetch', got 'never'"),
        ("catch_up", "yes", "catch_up must be True or False, got 'yes'"),
        ("read_until_empty", 1, "read_until_empty must be True or False, got 1"),
        ("read_cost", -0.1, "read_cost must be >= 0 seconds, got -0.1"),
        ("read_cost", {"dist": "gamma"}, "read_cost.dist must be one of"),
        ("empty_read_cost", {"dist": "empirical", "samples": []}, "empty_read_cost.samples must hold at least one"),
        ("repoll", 0.0, "repoll must be a finite number of seconds >= 1e-06 (1 µs, the clock's unit), got 0.0"),
        ("self_hint_every", 0.0, "self_hint_every must be > 0 seconds on average"),
    ],
)
def test_bad_options_are_refused_naming_the_field(field, value, match):
    with pytest.raises(ValueError, match=match.replace("(", r"\(").replace(")", r"\)")):
        OutboxConfig(**{field: value})


def test_a_scenario_file_sets_the_options_and_names_a_bad_one():
    doc = {
        "design": "outbox",
        "run": {"until": 10.0},
        "outbox": {
            "poll_mode": "idle",
            "wake_mode": "after_fetch",
            "read_cost": {"dist": "uniform", "low": 0.001, "high": 0.002},
            "self_hint_every": 0.1,
            "repoll": 0.1,
        },
        "consumers": [{"name": "w"}],
    }
    sc = parse_scenario(doc)
    assert (sc.config.poll_mode, sc.config.wake_mode, sc.config.repoll) == ("idle", "after_fetch", 0.1)
    assert sc.config.read_cost == Dist("uniform", 0.001, 0.002) and sc.config.self_hint_every == Dist("fixed", 0.1)
    with pytest.raises(ScenarioError, match=r"outbox\.wake_mode: must be one of 'before_fetch', 'after_fetch'"):
        parse_scenario({**doc, "outbox": {"wake_mode": "late"}})


# -- the writer's stop, on a clock that reads late --------------------------------------
def test_a_writer_stops_by_its_arrivals_times_not_by_when_it_woke():
    # on the wall clock a writer wakes a little after its arrival's time: an arrival due before
    # ``stop`` that woke after it was dropped there (and committed under SimPy, whose clock reads
    # the due time exactly): the two clocks' runs differed by that commit
    import random

    sim = OutboxSimulation(seed=0)
    first_due = random.Random(1).expovariate(1.0)
    loop = sim._workload(1.0, 1, 0.0, first_due + 1e-6, None, random.Random(1))
    assert next(loop).at == first_due
    sim.run(until=first_due + 0.01)  # the writer wakes 10 ms late
    next(loop)  # it commits, then waits for its next arrival (past stop: it will stop then)
    assert sim.outbox()["seq"].tolist() == [1]


def test_the_report_writes_the_options_as_a_scenario_file_does():
    import json

    from fanoutsim.designs.outbox.analysis import outbox_report

    law = {"dist": "uniform", "low": 0.001, "high": 0.002}
    sim = run([1.0], OutboxConfig(poll_mode="idle", read_cost=law, self_hint_every=0.1), until=2.0)
    config = json.loads(json.dumps(outbox_report(sim)["config"]))
    assert config["read_cost"] == law and config["self_hint_every"] == 0.1 and config["poll_mode"] == "idle"
    assert (
        parse_scenario(
            {
                "design": "outbox",
                "run": {"until": 1.0},
                "consumers": [{"name": "w"}],
                "outbox": {k: v for k, v in config.items() if v is not None},
            }
        ).config
        == sim.config
    )
