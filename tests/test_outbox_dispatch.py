"""The outbox dispatcher under the virtual clock: commit, cursors, consumers,
guardrails, deferred work, retention and the topic bus (seed 002)."""

from __future__ import annotations

import pytest

from fanoutsim.designs.outbox import OutboxConfig
from fanoutsim.designs.outbox.checker import check_outbox
from fanoutsim.designs.outbox.simulation import OutboxSimulation


@pytest.fixture(params=["memory", "duckdb"])
def store(request):
    return request.param


def handled(sim, consumer):
    t = sim.trace()
    return t.loc[(t["kind"] == "handled") & (t["consumer"] == consumer), "seq"].tolist()


def test_commit_writes_the_change_and_its_row_in_one_transaction(store):
    sim = OutboxSimulation(seed=0, store=store)
    assert sim.commit("p1", "hello") == 1
    assert sim.commit("p1", "again", topic="run:7", kind="run.updated") == 2
    out = sim.outbox()
    assert out["seq"].tolist() == [1, 2] and out["topic"].tolist() == ["page:p1", "run:7"]
    assert sim.pages()["body"].tolist() == ["again"]


def test_a_crash_inside_the_commit_rolls_back_change_and_row(store):
    from conftest import CrashAt

    sim = OutboxSimulation(seed=0, store=store, faults=CrashAt("commit.after_change_before_outbox"))
    assert sim.commit("p1", "lost") is None
    assert not sim.up and len(sim.outbox()) == 0 and len(sim.pages()) == 0
    sim.restart()
    assert sim.commit("p1", "kept") == 2  # the seq the crashed writer took stays a gap


def test_every_wake_up_reads_all_rows_past_the_cursor_in_order(store):
    sim = OutboxSimulation(OutboxConfig(notify=False, safety_poll_interval=2.0), seed=0, store=store)
    sim.register_consumer("indexer")
    sim.run(until=0.5)  # the process has started and read the empty log
    for i in range(5):
        sim.commit(f"p{i}", "x")
    sim.run(until=1.5)
    assert handled(sim, "indexer") == []  # no hint, no poll yet
    sim.run(until=2.5)
    assert handled(sim, "indexer") == [1, 2, 3, 4, 5]  # one safety poll reads them all
    assert sim.cursors()["seq"].tolist() == [5]


def test_a_slow_consumer_never_holds_up_a_fast_one(store):
    sim = OutboxSimulation(seed=0, store=store)
    sim.register_consumer("fast", duration=0.01)
    sim.register_consumer("slow", duration=2.0, timeout=None)
    for i in range(5):
        sim.commit(f"p{i}")
    sim.run(until=1.0)
    assert handled(sim, "fast") == [1, 2, 3, 4, 5]
    assert handled(sim, "slow") == []
    sim.run(until=11.0)
    assert handled(sim, "slow") == [1, 2, 3, 4, 5]
    report = check_outbox(sim)
    lat = report.per_consumer.set_index("consumer")["latency_max_s"]
    assert lat["fast"] < 0.1 < 9 < lat["slow"]


def test_a_new_consumer_back_fills_from_where_its_cursor_points(store):
    sim = OutboxSimulation(seed=0, store=store)
    for i in range(4):
        sim.commit(f"p{i}")
    assert sim.register_consumer("late", start="beginning") == 0
    assert sim.register_consumer("mid", start=2) == 2
    assert sim.register_consumer("live", start="end") == 4
    sim.commit("p9")
    sim.run(until=1.0)
    assert handled(sim, "late") == [1, 2, 3, 4, 5]
    assert handled(sim, "mid") == [3, 4, 5]
    assert handled(sim, "live") == [5]


def test_a_rebuildable_consumer_resets_and_replays(store):
    rebuilt = []
    sim = OutboxSimulation(seed=0, store=store)
    sim.register_consumer("search", rebuild=lambda pages: rebuilt.append(len(pages)))
    sim.register_consumer("mailer")
    sim.commit("a")
    sim.commit("b")
    sim.run(until=1.0)
    assert sim.reset_consumer("search") == 0
    sim.run(until=2.0)
    assert rebuilt == [2]
    assert handled(sim, "search") == [1, 2, 1, 2]
    report = check_outbox(sim)
    assert set(report.duplicates["cause"]) == {"reset"} and report.valid
    with pytest.raises(ValueError, match="'mailer' is not rebuildable"):
        sim.reset_consumer("mailer")


def test_a_hung_step_is_cut_off_by_its_timeout_and_retried_with_backoff(store):
    calls = []
    durations = iter([100.0, 0.01])
    sim = OutboxSimulation(seed=0, store=store)
    sim.register_consumer(
        "hook",
        lambda row: calls.append(row["seq"]),
        duration=lambda rng: next(durations),
        timeout=2.0,
        backoff=1.0,
        jitter=0.0,
    )
    sim.commit("p")
    sim.run(until=10.0)
    t = sim.trace()
    failed = t[t["kind"] == "failed"]
    assert failed["detail"].tolist() == ["attempt 1: timed out after 2s"]
    h = t[t["kind"] == "handled"]
    assert h["t"].iloc[0] - failed["t"].iloc[0] == pytest.approx(1.01e6)  # backoff 1 s, then 0.01 s
    assert calls == [1]  # the hung call never ran to its effect


def test_backoff_is_exponential_with_jitter_and_capped():
    import random

    from fanoutsim.designs.outbox import ConsumerSpec

    spec = ConsumerSpec("c", backoff=1.0, backoff_cap=5.0, jitter=0.5)
    rng = random.Random(0)
    for attempt, base in ((1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (9, 5.0)):
        d = spec.backoff_for(attempt, rng)
        assert base * 0.5 <= d <= base


def test_a_poison_row_is_parked_after_its_budget_while_later_rows_flow(store):
    def fn(row):
        if row["ref"] == "poison":
            raise ValueError("cannot parse")

    sim = OutboxSimulation(seed=0, store=store)
    sim.register_consumer("triage", fn, retry_budget=3, backoff=0.1)
    sim.commit("ok1")
    sim.commit("poison")
    sim.commit("ok2")
    sim.run(until=5.0)
    parked = sim.parked()
    assert parked[["consumer", "seq", "error", "attempts"]].values.tolist() == [
        ["triage", 2, "ValueError: cannot parse", 3]
    ]
    assert handled(sim, "triage") == [1, 3]
    assert sim.cursors()["seq"].tolist() == [3]
    report = check_outbox(sim)
    assert report.total["parked"] == 1 and report.total["lost"] == 0 and report.valid


def test_deferred_work_is_handled_when_due_also_after_a_restart(store):
    sim = OutboxSimulation(OutboxConfig(safety_poll_interval=3600.0), seed=0, store=store)
    sim.register_consumer("nudger")
    seq = sim.commit("follow-up", kind="nudge", due_at=3 * 86400.0)
    sim.commit("now")
    sim.run(until=10.0)
    assert handled(sim, "nudger") == [2]  # the nudge does not block the feed
    assert sim.deferred()["seq"].tolist() == [seq]
    sim.crash()
    sim.run(until=100.0)
    sim.restart()
    sim.run(until=3 * 86400.0 + 1)
    t = sim.trace()
    h = t[(t["kind"] == "handled") & (t["seq"] == seq)]
    assert len(h) == 1 and h["t"].iloc[0] == sim.start_us + 3 * 86400 * 1_000_000
    assert len(sim.deferred()) == 0


def test_retention_prunes_under_a_consumer_that_fell_behind(store):
    cfg = OutboxConfig(retention=60.0, retention_interval=10.0)
    sim = OutboxSimulation(cfg, seed=0, store=store)
    sim.register_consumer("fast")
    sim.register_consumer("stuck", duration=150.0, timeout=None)
    sim.add_workload(1.0, stop=100.0)
    sim.run(until=200.0)
    report = check_outbox(sim)
    pc = report.per_consumer.set_index("consumer")
    assert pc.loc["fast", "lost"] == 0
    assert pc.loc["stuck", "lost"] > 0
    assert set(report.lost["cause"]) == {"pruned"}
    assert report.valid  # retention is a documented way to drop rows
    assert (sim.trace()["kind"] == "fell_behind").any()


def test_the_topic_bus_is_best_effort_and_not_durable(store):
    got = []
    sim = OutboxSimulation(seed=0, store=store)
    sim.subscribe("page:a", got.append)
    sim.commit("a")
    sim.commit("b")
    sim.run(until=1.0)
    assert [r["seq"] for r in got] == [1]
    sim.crash()
    sim.restart()
    sim.commit("a")
    sim.run(until=2.0)
    assert [r["seq"] for r in got] == [1]  # the subscriber died with the process


def test_same_seed_same_run():
    def run():
        sim = OutboxSimulation(seed=5)
        sim.register_consumer("a", duration=lambda rng: rng.expovariate(10))
        sim.add_workload(3.0)
        sim.run(until=30.0)
        return sim.trace()[["t", "kind", "consumer", "seq"]].values.tolist()

    assert run() == run()


def test_a_full_batch_drains_without_a_hint_and_a_hint_during_a_batch_reads_again():
    sim = OutboxSimulation(OutboxConfig(notify=False, batch_limit=2, safety_poll_interval=10.0), seed=0)
    sim.register_consumer("indexer", duration=0.1)
    for i in range(5):
        sim.commit(f"p{i}")
    sim.run(until=10.9)  # one poll: batches of 2, 2, 1 back to back
    assert handled(sim, "indexer") == [1, 2, 3, 4, 5]
    sim = OutboxSimulation(seed=0)
    sim.register_consumer("indexer", duration=1.0)
    sim.commit("a")
    sim.run(until=0.5)
    sim.commit("b")  # its hint arrives while row 1 is being handled
    sim.run(until=2.5)
    assert handled(sim, "indexer") == [1, 2]


def test_the_checker_reports_the_bus_apart_from_delivery(store):
    got = []
    sim = OutboxSimulation(OutboxConfig(safety_poll_interval=0.5), seed=0, store=store)
    sim.register_consumer("indexer")
    sim.subscribe("page:a", got.append)
    sim.commit("a")
    sim.commit("b")
    sim.run(until=1.0)
    sim.crash()
    sim.restart()
    sim.subscribe("page:a", got.append)
    sim.run(until=2.0)
    seq = sim.commit("a")
    sim.run(until=3.0)
    report = check_outbox(sim)
    bus = report.bus.set_index("seq")
    assert bus.loc[1, "published"] and bus.loc[1, "receivers"] == 1  # a live subscriber got it
    assert bus.loc[2, "published"] and bus.loc[2, "receivers"] == 0  # nobody listened to page:b
    assert bus.loc[seq, "receivers"] == 1 and [r["seq"] for r in got] == [1, seq]
    assert report.total["bus_receipts"] == 2 and report.total["bus_unpublished"] == 0
    assert report.valid and report.total["lost"] == 0


def test_rows_committed_just_before_a_crash_are_unpublished_not_lost(store):
    # no hints: the bus publishes at the safety poll, so a row committed between
    # two polls and then a crash never reaches it; a new process goes live at the end
    sim = OutboxSimulation(OutboxConfig(notify=False, safety_poll_interval=0.5), seed=0, store=store)
    sim.register_consumer("indexer")
    sim.commit("a")
    sim.run(until=0.6)
    seq = sim.commit("x")
    sim.crash()
    sim.restart()
    sim.run(until=2.0)
    report = check_outbox(sim)
    bus = report.bus.set_index("seq")
    assert bus.loc[1, "published"]
    assert not bus.loc[seq, "published"] and bus.loc[seq, "topic"] == "page:x"
    assert report.total["bus_unpublished"] == 1 and report.total["lost"] == 0 and report.valid
    assert report.per_consumer.set_index("consumer").loc["indexer", "delivered"] == 2
    assert "1 never" in str(report)


def test_a_late_commit_is_never_published_on_the_bus_but_reaches_the_consumers():
    got = []
    sim = OutboxSimulation(OutboxConfig(read_mode="gap", gap_timeout=10.0), seed=0)
    sim.register_consumer("indexer")
    sim.subscribe("page:a", got.append)
    sim.run(until=0.1)
    late = sim._call(sim.engine.reserve)  # a slow writer holds seq 1
    sim.commit("a")  # seq 2 is published at once
    sim.run(until=0.5)
    sim._call(sim.engine.commit, "a", "late", seq=late)
    sim.run(until=2.0)
    report = check_outbox(sim)
    assert [r["seq"] for r in got] == [2]  # the bus had moved past seq 1
    assert report.bus.set_index("seq").loc[late, "published"] == False  # noqa: E712
    assert report.per_consumer["delivered"].tolist() == [2] and report.valid
