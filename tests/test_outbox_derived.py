"""Derived state under at-least-once (seed 002): "each consumer is either
idempotent or fully rebuildable from base tables". A rebuildable, idempotent
consumer resets and replays to the same derived state; a counter that is
neither counts a re-delivered row twice, and the analysis reports that drift —
not only the duplicate count."""

from __future__ import annotations

import pytest
from experiments import outbox as ox  # notebooks/experiments: the lessons' experiments

from fanoutsim.designs.outbox import analysis as oa
from fanoutsim.designs.outbox.checker import check_outbox
from fanoutsim.designs.outbox.derived import ChangeCounter, PageIndex, drift, page_reader
from fanoutsim.designs.outbox.simulation import OutboxSimulation
from fanoutsim.faults import CrashAtPoint, FaultPlan


@pytest.fixture(scope="module")
def run():
    return ox.derived_run(crash_every=7, crashes=4, seconds=60.0)


def test_a_crash_after_the_effect_double_counts_the_counter_but_not_the_index(run):
    s = oa.derived_summary(run).set_index("consumer")
    r = check_outbox(run)
    assert set(r.duplicates["cause"]) == {"crash"}
    # the counter's drift is exactly its re-deliveries: each one counted a change twice
    assert s.loc["counter", "duplicates"] > 0
    assert s.loc["counter", "drift"] == s.loc["counter", "duplicates"]
    d = oa.derived_drift(run, "counter")
    dup_pages = (
        r.duplicates[r.duplicates["consumer"] == "counter"]["seq"]
        .map({row["seq"]: row["ref"] for row in run.store.rows("outbox")})
        .value_counts()
        .to_dict()
    )
    assert dict(zip(d["key"], d["drift"])) == dup_pages
    # the index took duplicates too (or not: the crashes fall where they fall), and drifts by nothing
    assert s.loc["index", "drift"] == 0 and s.loc["index", "keys_off"] == 0
    assert s.loc["index", "duplicates"] + s.loc["counter", "duplicates"] > 0


def test_a_rebuildable_consumer_resets_and_replays_to_the_same_state():
    sim = OutboxSimulation(seed=4)
    index = PageIndex(page_reader(sim.store))
    sim.register_consumer("index", index, rebuild=index.rebuild)
    for k in range(12):
        sim.commit(f"p{k % 3}", f"v{k}")
    sim.run(until=5.0)
    before = dict(index.state)
    assert before == {"p0": "v9", "p1": "v10", "p2": "v11"}
    index.state["p0"] = "corrupted"  # the view went wrong somehow
    assert len(drift(index, sim.store.rows("pages"), sim.store.rows("outbox"))) == 1
    sim.reset_consumer("index")
    sim.run(until=10.0)
    assert index.state == before and index.rebuilds == 1
    assert (sim.trace()["kind"] == "delivered").sum() == 24  # the whole retained log replayed


def test_a_counter_cannot_be_rebuilt_and_a_replay_counts_everything_again():
    sim = OutboxSimulation(seed=4)
    counter = ChangeCounter()
    sim.register_consumer("counter", counter)
    for k in range(6):
        sim.commit(f"p{k % 2}", f"v{k}")
    sim.run(until=5.0)
    pages, outbox = sim.store.rows("pages"), sim.store.rows("outbox")
    assert drift(counter, pages, outbox).empty and dict(counter.state) == {"p0": 3, "p1": 3}
    with pytest.raises(ValueError, match="'counter' is not rebuildable"):
        sim.reset_consumer("counter")
    sim.set_cursor("counter", "beginning")  # the only way back: replay, and count again
    sim.run(until=10.0)
    d = drift(counter, sim.store.rows("pages"), sim.store.rows("outbox"))
    assert dict(zip(d["key"], d["drift"])) == {"p0": 3, "p1": 3}
    assert set(check_outbox(sim).duplicates["cause"]) == {"reset"}


def test_one_crash_at_the_handle_to_cursor_gap_is_one_extra_count():
    sim = OutboxSimulation(
        seed=1, faults=FaultPlan([CrashAtPoint("dispatch.after_handle_before_cursor", nth=3, downtime=1.0)])
    )
    counter = ChangeCounter()
    sim.register_consumer("counter", counter)
    for k in range(5):
        sim.commit("p", f"v{k}")
    sim.run(until=20.0)
    assert counter.state["p"] == 6  # 5 changes, the third handed over twice
    d = drift(counter, sim.store.rows("pages"), sim.store.rows("outbox"))
    assert d.to_dict("records") == [{"key": "p", "expected": 5, "actual": 6, "drift": 1}]


def test_page_index_needs_a_reader():
    with pytest.raises(TypeError, match="read_page must be callable"):
        PageIndex("pages")
