"""The outbox checker counts deliveries where the consumer's effect lands (its
``fn`` runs when a step begins), and names a deliberate cursor move."""

from __future__ import annotations

from fanoutsim.designs.outbox.checker import check_outbox
from fanoutsim.designs.outbox.simulation import OutboxSimulation
from fanoutsim.faults import CrashAt, FaultPlan


def test_fn_that_ran_twice_across_a_mid_step_crash_is_a_duplicate():
    # the step takes 3 s; the process dies 1 s in, after fn ran; the restart runs fn again
    effects = []
    sim = OutboxSimulation(seed=0, faults=FaultPlan([CrashAt(at=1.0, downtime=0.5)]))
    sim.register_consumer("mailer", fn=lambda row: effects.append(row["seq"]), duration=3.0)
    seq = sim.commit("p1", "hello")
    sim.run(until=20.0)
    assert effects == [seq, seq]  # the user's effect happened twice
    report = check_outbox(sim)
    assert report.total["extra_deliveries"] == 1
    assert report.duplicates.to_dict("records") == [{"consumer": "mailer", "seq": seq, "cause": "crash"}]
    assert report.total["duplicates_by_cause"] == {"crash": 1}
    assert report.total["delivered"] == 1 and report.total["lost"] == 0 and report.valid


def test_fn_without_a_crash_is_one_delivery():
    effects = []
    sim = OutboxSimulation(seed=0)
    sim.register_consumer("mailer", fn=lambda row: effects.append(row["seq"]), duration=3.0)
    sim.commit("p1")
    sim.commit("p2")
    sim.run(until=20.0)
    report = check_outbox(sim)
    assert effects == [1, 2]
    assert report.total["delivered"] == 2 and report.total["extra_deliveries"] == 0 and report.valid


def test_an_effect_that_landed_before_the_run_ended_is_delivered_not_pending():
    effects = []
    sim = OutboxSimulation(seed=0)
    sim.register_consumer("mailer", fn=lambda row: effects.append(row["seq"]), duration=3.0)
    sim.commit("p1")
    sim.run(until=1.0)  # fn ran at 0 s; the step ends at 3 s
    report = check_outbox(sim)
    assert effects == [1]
    assert report.total["delivered"] == 1 and report.total["pending"] == 0


def test_a_failing_fn_is_no_delivery():
    sim = OutboxSimulation(seed=0)

    def fn(row):
        raise RuntimeError("down")

    sim.register_consumer("mailer", fn=fn, retry_budget=2, backoff=0.1)
    sim.commit("p1")
    sim.run(until=10.0)
    report = check_outbox(sim)
    assert report.total["delivered"] == 0 and report.total["parked"] == 1 and report.valid


def test_set_cursor_forward_past_unread_rows_is_a_named_deliberate_move():
    sim = OutboxSimulation(seed=0)
    sim.register_consumer("indexer", duration=1.0)
    sim.commit("p1")
    sim.commit("p2")
    sim.run(until=5.0)  # 1 and 2 handled
    for i in range(3):
        sim.commit(f"q{i}")  # 3, 4, 5: committed, not read yet
    sim.set_cursor("indexer", 4)  # skip 3 and 4 on purpose
    sim.run(until=20.0)
    report = check_outbox(sim)
    lost = report.lost.to_dict("records")
    assert lost == [
        {"consumer": "indexer", "seq": 3, "cause": "seek"},
        {"consumer": "indexer", "seq": 4, "cause": "seek"},
    ]
    assert report.total["lost_by_cause"] == {"seek": 2}
    assert report.total["delivered"] == 3 and report.valid


def test_rows_committed_after_a_forward_move_are_still_owed():
    sim = OutboxSimulation(seed=0)
    sim.register_consumer("indexer")
    for i in range(3):
        sim.commit(f"p{i}")
    sim.set_cursor("indexer", 3)  # before anything was read
    sim.commit("late")
    sim.run(until=20.0)
    report = check_outbox(sim)
    assert report.total["lost_by_cause"] == {"seek": 3}
    assert report.per_consumer.set_index("consumer").loc["indexer", "delivered"] == 1 and report.valid
