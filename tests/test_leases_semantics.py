"""Leased durable consumers (seed 003) under the virtual clock, driven by hand:
consume, ack, nack, expiry, dead letters, limits, seek, retire, status,
retention fence and restore. RiffDB's rule (several leases per partition) is
the default; tests whose point is the seed's head-of-line reading say so with
``order="head_of_line"`` (tests/test_leases_riffdb.py restates RiffDB's own
tests)."""

from __future__ import annotations

import re

import pytest

from fanoutsim.designs.leases import MAX_ATTEMPTS, HistoryPruned, LeaseConfig
from fanoutsim.designs.leases.simulation import LeaseSimulation
from fanoutsim.faults import CRASH_POINTS, LEASE_CRASH_POINTS

HOL = "head_of_line"


@pytest.fixture(params=["memory", "duckdb"])
def store(request):
    return request.param


def sim_with(store, n=0, partitions=("a",), config=None, order="riffdb", **limits):
    config = config or LeaseConfig(partition_order=order)
    sim = LeaseSimulation(config, seed=3, store=store)
    sim.register_consumer("c", client=False, **limits)
    for i in range(n):
        sim.publish(partitions[i % len(partitions)], "ticket.changed", {"i": i})
    return sim


def test_publish_ids_are_commit_sequence_and_ordinal(store):
    sim = LeaseSimulation(seed=0, store=store)
    assert sim.publish("a") == "1:0"
    assert sim.publish_many([("a", "k", None), ("b", "k", {"x": 1})]) == ["2:0", "2:1"]
    ev = sim.events()
    assert ev["seq"].tolist() == [1, 2, 3] and ev["commit_seq"].tolist() == [1, 2, 2]
    assert ev["payload"].tolist()[2] == '{"x":1}'


def test_consume_leases_with_token_incarnation_and_expiry(store):
    sim = sim_with(store, 1, lease_seconds=30)
    (lease,) = sim.consume("c")
    assert re.fullmatch(r"[0-9a-f]{64}", lease.token)
    assert lease.incarnation == 1 and lease.attempt == 1
    assert lease.expires_at == sim.now_us() + 30_000_000
    assert sim.leases()["token"].tolist() == [lease.token]


def test_head_of_line_one_lease_per_partition_in_partition_order_in_flight_across_partitions(store):
    # the seed's reading, kept as an option: one lease per partition, on its first unfinished event
    sim = sim_with(store, 6, partitions=("a", "b", "c"), order=HOL, batch_limit=8, in_flight_limit=2)
    got = sim.consume("c")
    assert [(x.partition, x.event_id) for x in got] == [("a", "1:0"), ("b", "2:0")]  # in-flight 2
    assert sim.consume("c") == []  # full
    assert sim.ack("c", got[0].event_id, got[0].token, got[0].incarnation) == "acked"
    assert [x.event_id for x in sim.consume("c")] == ["3:0"]  # oldest eligible head: c's 3, not a's 4
    sim2 = sim_with(store, 3, order=HOL, batch_limit=8, in_flight_limit=8)
    assert [x.event_id for x in sim2.consume("c")] == ["1:0"]  # one partition: one in flight


def test_riffdb_leases_several_per_partition_oldest_first_up_to_the_limits(store):
    sim = sim_with(store, 6, partitions=("a", "b", "c"), batch_limit=8, in_flight_limit=4)
    got = sim.consume("c")
    assert [(x.partition, x.event_id) for x in got] == [("a", "1:0"), ("b", "2:0"), ("c", "3:0"), ("a", "4:0")]
    assert sim.consume("c") == []  # in-flight 4: full
    assert sim.ack("c", "4:0", got[3].token, 1) == "acked"  # a later event of a
    assert [x.event_id for x in sim.consume("c")] == ["5:0"]
    sim2 = sim_with(store, 3, batch_limit=8, in_flight_limit=8)
    assert [x.event_id for x in sim2.consume("c")] == ["1:0", "2:0", "3:0"]  # one partition: all three


def test_batch_limit_per_call(store):
    sim = sim_with(store, 6, partitions=("a", "b", "c", "d", "e", "f"), batch_limit=2, in_flight_limit=8)
    assert len(sim.consume("c")) == 2 and len(sim.consume("c", batch_limit=3)) == 3


def test_only_an_exact_ack_advances(store):
    sim = sim_with(store, 1, lease_seconds=10)
    (x,) = sim.consume("c")
    assert sim.ack("c", x.event_id, "0" * 64, x.incarnation) == "wrong_token"
    assert sim.ack("c", x.event_id, x.token, x.incarnation + 1) == "stale_incarnation"
    assert sim.ack("c", "2:0", x.token, x.incarnation) == "no_lease"
    assert sim.ack("nobody", x.event_id, x.token, x.incarnation) == "not_found"
    assert sim.checkpoints().empty
    sim.run(until=10.5)  # expired at 10 s, and recovery (every 1 s) made it a retry: no lease now
    assert sim.ack("c", x.event_id, x.token, x.incarnation) == "no_lease"
    assert sim.checkpoints().empty
    (y,) = sim.consume("c")
    assert y.event_id == x.event_id and y.attempt == 2 and y.token != x.token
    assert sim.ack("c", y.event_id, y.token, y.incarnation) == "acked"
    assert sim.checkpoints()[["partition", "seq", "commit_seq"]].values.tolist() == [["a", 1, 1]]
    assert sim.ack("c", y.event_id, y.token, y.incarnation) == "no_lease"  # twice: fails closed


def test_an_expired_lease_fails_closed_and_the_next_pull_redelivers_it(store):
    # the pull itself turns an expired lease into a retry, long before the recovery loop would
    sim = sim_with(store, 1, lease_seconds=5, config=LeaseConfig(recovery_interval=100))
    (x,) = sim.consume("c")
    sim.run(until=6)
    assert sim.ack("c", x.event_id, x.token, x.incarnation) == "expired"
    (y,) = sim.consume("c")
    assert (y.event_id, y.attempt) == (x.event_id, 2)
    t = sim.trace()
    assert t[t["kind"] == "expired"]["detail"].tolist() == ["attempt 1: lease expired"]
    assert sim.recover() == 0


def test_head_of_line_nack_schedules_a_delayed_retry_that_holds_the_partition(store):
    sim = sim_with(store, 2, order=HOL)
    (x,) = sim.consume("c")
    assert sim.nack("c", x.event_id, x.token, x.incarnation, delay=3, error="boom") == "retry_scheduled"
    assert sim.consume("c") == []  # the head waits; its partition's next event too
    sim.run(until=3.0)
    (y,) = sim.consume("c")
    assert (y.event_id, y.attempt) == ("1:0", 2)
    assert sim.retries().empty  # a retry leased again is a lease, no longer a retry
    assert sim.nack("c", y.event_id, y.token, y.incarnation, error="boom") == "retry_scheduled"
    assert sim.retries()[["error", "attempts"]].values.tolist() == [["boom", 2]]


def test_riffdb_nack_schedules_a_delayed_retry_and_later_events_go_on(store):
    sim = sim_with(store, 3, batch_limit=1, in_flight_limit=1)
    (x,) = sim.consume("c")
    assert sim.nack("c", x.event_id, x.token, x.incarnation, delay=3, error="boom") == "retry_scheduled"
    (y,) = sim.consume("c")  # the retry holds no lease: 2:0 takes the in-flight slot
    assert y.event_id == "2:0"
    assert sim.ack("c", y.event_id, y.token, y.incarnation) == "acked"
    assert sim.status("c")["sparse"] == ["2:0"] and sim.checkpoints().empty
    sim.run(until=3.0)
    (z,) = sim.consume("c")  # oldest first: the retry's time has come
    assert (z.event_id, z.attempt) == ("1:0", 2)
    assert sim.ack("c", z.event_id, z.token, z.incarnation) == "acked"
    assert sim.checkpoints()["seq"].tolist() == [2] and sim.status("c")["sparse"] == []


def test_nack_delay_is_bounded_by_3600_seconds(store):
    sim = sim_with(store, 1)
    (x,) = sim.consume("c")
    for bad in (3601, -1, float("nan"), True):
        with pytest.raises(ValueError, match="delay must be 0 through 3600 seconds"):
            sim.nack("c", x.event_id, x.token, x.incarnation, delay=bad)
    assert sim.nack("c", x.event_id, x.token, x.incarnation, delay=3600) == "retry_scheduled"
    assert sim.store.rows("retries")[0]["not_before"] == sim.now_us() + 3600 * 1_000_000
    with pytest.raises(ValueError, match="max_retry_delay must be at most 3600 seconds"):
        LeaseConfig(max_retry_delay=3601)
    with pytest.raises(ValueError, match="delay must be 0 through 10 seconds"):
        sim_with(store, config=LeaseConfig(max_retry_delay=10)).nack("c", "1:0", "t", 1, delay=11)


@pytest.mark.parametrize("order", ["riffdb", HOL])
def test_the_tenth_failure_is_a_dead_letter_and_later_events_continue(store, order):
    sim = sim_with(store, 2, order=order, batch_limit=1, in_flight_limit=1)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        (x,) = sim.consume("c")
        assert (x.event_id, x.attempt) == ("1:0", attempt)
        out = sim.nack("c", x.event_id, x.token, x.incarnation, error="poison")
    assert out == "dead_lettered"
    dl = sim.dead_letters()
    assert dl[["event_id", "attempts", "error"]].values.tolist() == [["1:0", 10, "poison"]]
    assert dl["payload"].tolist() == ['{"i":0}']
    assert sim.checkpoints()["seq"].tolist() == [1]  # the nack's dead letter moved it past
    (y,) = sim.consume("c")
    assert y.event_id == "2:0"
    t = sim.trace()
    assert not ((t["kind"] == "acked") & (t["event_id"] == "1:0")).any()  # never pretended acked


@pytest.mark.parametrize("order", ["riffdb", HOL])
def test_expiry_counts_as_a_failed_attempt_up_to_the_dead_letter(store, order):
    sim = sim_with(store, 2, order=order, lease_seconds=5, batch_limit=1, in_flight_limit=1)
    for i in range(MAX_ATTEMPTS):
        assert sim.consume("c")[0].attempt == i + 1
        sim.run(until=sim.now + 6)
    assert sim.dead_letters()["error"].tolist() == ["lease expired"]
    # a dead letter is terminal however it was made: the checkpoint passes it at once
    assert sim.checkpoints()["seq"].tolist() == [1] and sim.status("c")["sparse"] == []
    (y,) = sim.consume("c")
    assert y.event_id == "2:0"
    assert sim.ack("c", y.event_id, y.token, y.incarnation) == "acked"
    assert sim.checkpoints()["seq"].tolist() == [2] and sim.resolutions().empty


def _fail_once(sim, how, x):
    """One failed attempt at lease ``x``, made by ``how``."""
    if how == "nack":
        assert sim.nack("c", x.event_id, x.token, x.incarnation) in ("retry_scheduled", "dead_lettered")
    elif how == "expiry":
        sim.run(until=sim.now + 6)  # past the 5 s lease: the recovery loop expires it
    else:
        sim.restore()  # a new incarnation voids the live lease


@pytest.mark.parametrize("order", ["riffdb", HOL])
@pytest.mark.parametrize("how", ["nack", "expiry", "restore"])
@pytest.mark.parametrize("events", [1, 2])  # 1: the dead letter is the partition's last event
def test_a_dead_letter_moves_the_checkpoint_whichever_way_it_was_made(store, order, how, events):
    sim = sim_with(store, events, order=order, lease_seconds=5, batch_limit=1, in_flight_limit=1)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        (x,) = sim.consume("c")
        assert (x.event_id, x.attempt) == ("1:0", attempt)
        _fail_once(sim, how, x)
    st = sim.status("c")
    assert (st["dead_lettered"], st["checkpoints"], st["sparse"]) == (["1:0"], {"a": 1}, [])
    assert st["first_required"] == (None if events == 1 else "2:0")
    t = sim.trace()
    moved = t[(t["kind"] == "checkpoint") & (t["event_id"] == "1:0")]
    assert len(moved) == 1  # traced as every checkpoint move is


@pytest.mark.parametrize(
    "field,value,rng",
    [
        ("batch_limit", 0, "1 through 8"),
        ("batch_limit", 9, "1 through 8"),
        ("in_flight_limit", 9, "1 through 8"),
        ("in_flight_limit", 1.5, "1 through 8"),
        ("lease_seconds", 4.9, "5 through 900 seconds"),
        ("lease_seconds", 901, "5 through 900 seconds"),
        ("batch_limit", True, "1 through 8"),
    ],
)
def test_limits_are_validated_naming_field_and_range(store, field, value, rng):
    sim = LeaseSimulation(seed=0, store=store)
    with pytest.raises(ValueError, match=f"{field} must be .*{rng}"):
        sim.register_consumer("c", client=False, **{field: value})
    assert sim.consumers().empty
    sim.register_consumer("c", client=False, batch_limit=8, in_flight_limit=1, lease_seconds=900)
    with pytest.raises(ValueError, match="batch_limit must be an integer from 1 through 8"):
        sim.consume("c", batch_limit=0)


def test_bad_input_errors(store):
    sim = LeaseSimulation(seed=0, store=store)
    assert sim.consume("nobody").result == "not_found"
    with pytest.raises(ValueError, match="partition must be a non-empty string"):
        sim.publish("")
    with pytest.raises(ValueError, match="past the end of the log"):
        sim.register_consumer("c", start=5, client=False)
    with pytest.raises(TypeError, match="config must be a LeaseConfig"):
        LeaseSimulation(config=object())
    with pytest.raises(ValueError, match="retention must be"):
        LeaseConfig(retention=0)
    with pytest.raises(ValueError, match="partition_order must be one of 'riffdb', 'head_of_line', got 'fifo'"):
        LeaseConfig(partition_order="fifo")
    with pytest.raises(ValueError, match="consumer must be a non-empty string"):
        sim.seek("", 0)


def test_seek_is_refused_while_a_lease_is_live_then_moves_and_clears(store):
    sim = sim_with(store, 3, batch_limit=1, in_flight_limit=1)
    (x,) = sim.consume("c")
    sim.ack("c", x.event_id, x.token, x.incarnation)
    (y,) = sim.consume("c")
    assert sim.nack("c", y.event_id, y.token, y.incarnation, delay=100) == "retry_scheduled"
    (z,) = sim.consume("c")
    revision = sim.status("c")["revision"]
    assert sim.seek("c", 0) == "outstanding_lease"  # z's lease is live: nothing changes
    assert sim.status("c")["revision"] == revision and sim.checkpoints()["seq"].tolist() == [1]
    assert sim.trace()["kind"].tolist()[-1] == "seek_refused"
    assert sim.ack("c", z.event_id, z.token, z.incarnation) == "acked"
    assert sim.seek("c", 0) == "applied"  # back: 1:0 again; checkpoints, retries, sparse gone
    assert sim.checkpoints().empty and sim.retries().empty and sim.resolutions().empty
    assert [x.event_id for x in sim.consume("c", batch_limit=1)] == ["1:0"]
    with pytest.raises(ValueError, match="past the end"):
        sim.seek("c", 4)
    assert sim.seek("nobody", 0) == "not_found"


def test_retire_is_refused_while_leased_then_deletes_the_consumer_which_may_start_afresh(store):
    cfg = LeaseConfig(retention=10, retention_interval=1)
    sim = sim_with(store, 3, config=cfg, batch_limit=1, in_flight_limit=1, lease_seconds=5)
    sim.register_consumer("d", client=False)
    (x,) = sim.consume("c")
    assert sim.retire("c") == "outstanding_lease"
    sim.run(until=20)
    assert len(sim.events()) == 3  # both consumers resolved nothing: no pruning
    assert sim.retire("c") == "applied"  # recovery made the expired lease a retry: none live
    assert sim.status("c") is None and sim.retire("c") == "not_found"
    assert sim.ack("c", x.event_id, x.token, x.incarnation) == "not_found"
    assert sim.retries()["consumer"].tolist() == []  # its rows went with it
    assert sim.consume("c").result == "not_found"
    assert len(sim.events()) == 3  # d still holds the fence
    assert sim.retire("d") == "applied"
    sim.run(until=22)
    assert sim.events().empty  # no consumer: age alone
    row = sim.register_consumer("c", client=False)  # the same identity, afresh
    assert (row["start_seq"], row["revision"]) == (3, 1)


def test_retention_keeps_the_commit_of_each_checkpoint_event_and_needs_a_resolution(store):
    sim = LeaseSimulation(LeaseConfig(retention=10, retention_interval=1), seed=0, store=store)
    sim.register_consumer("c", client=False)
    sim.publish_many([("a", "k", 1), ("b", "k", 2)])  # commit 1
    sim.publish("b")  # commit 2
    sim.publish("a")  # commit 3
    leases = {x.event_id: x for x in sim.consume("c")}
    sim.run(until=30)
    assert len(sim.events()) == 4 and sim.status("c")["retention_frontier"] == 0  # resolved nothing: none
    for eid in ("1:1", "2:0"):  # b done through commit 2; a (1:0) still required
        sim.ack("c", eid, leases[eid].token, 1)
    sim.run(until=32)
    assert sim.events()["event_id"].tolist() == ["1:0", "1:1", "2:0", "3:0"]
    st = sim.status("c")
    assert st["first_required"] == "1:0" and st["retention_frontier"] == 0
    for eid in ("1:0", "3:0"):
        sim.ack("c", eid, leases[eid].token, 1)
    st = sim.status("c")
    assert st["checkpoints"] == {"a": 4, "b": 3} and st["first_required"] is None
    assert st["retention_frontier"] == 1  # b's checkpoint is 2:0: commit 2 stays
    sim.run(until=34)
    assert sim.events()["event_id"].tolist() == ["2:0", "3:0"]  # caught up, yet its checkpoint's commit stays


def test_status_reports_revision_and_counts_of_live_leases_retries_and_dead_letters(store):
    sim = sim_with(store, 3, partitions=("a", "b"), batch_limit=2, in_flight_limit=2)
    x, y = sim.consume("c")
    sim.nack("c", y.event_id, y.token, y.incarnation, delay=100)
    st = sim.status("c")
    assert (st["revision"], st["live_leases"], st["retries"], st["dead_letters"]) == (3, 1, 1, 0)
    assert st["in_flight"] == [x.event_id] and st["retrying"] == {y.event_id: 1}
    assert st["incarnation"] == 1 and st["batch_limit"] == 2 and st["checkpoints"] == {}
    assert st["first_required"] == "1:0" and st["sparse"] == [] and st["dead_lettered"] == []
    assert sim.status("nobody") is None


@pytest.mark.parametrize("order", ["riffdb", HOL])
def test_restore_fails_old_tokens_closed_and_counts_the_lease_as_a_failed_attempt(store, order):
    sim = sim_with(store, 2, order=order, batch_limit=1, in_flight_limit=1)
    (x,) = sim.consume("c")
    assert sim.restore() == 2
    assert sim.ack("c", x.event_id, x.token, x.incarnation) == "stale_incarnation"
    assert sim.retries()[["event_id", "attempts", "error"]].values.tolist() == [["1:0", 1, "restore"]]
    (y,) = sim.consume("c")  # resumes from its checkpoint: the same event
    assert (y.event_id, y.incarnation, y.attempt) == ("1:0", 2, 2)
    assert sim.ack("c", y.event_id, y.token, y.incarnation) == "acked"
    assert sim.history()["incarnation"].tolist() == [2]


def test_lease_crash_points_are_crash_points_with_before_and_after_commit_for_each_transition():
    assert set(LEASE_CRASH_POINTS) <= set(CRASH_POINTS) and len(set(CRASH_POINTS)) == len(CRASH_POINTS)
    for op in ("lease", "ack", "nack", "seek", "retire", "recover"):
        assert {f"{op}.before_commit", f"{op}.after_commit"} <= set(LEASE_CRASH_POINTS)


def test_a_position_inside_pruned_history_is_refused_as_history_pruned(store):
    sim = LeaseSimulation(LeaseConfig(retention=5, retention_interval=1), seed=0, store=store)
    for _ in range(3):
        sim.publish("a")
    sim.run(until=10)
    assert sim.events().empty  # no consumer held them
    with pytest.raises(HistoryPruned, match="position 1 for 'c' is before the retention horizon"):
        sim.register_consumer("c", start=1, client=False)
    row = sim.register_consumer("c", client=False)  # "beginning": the horizon
    assert (row["start_seq"], row["start_commit"]) == (3, 3)
    assert sim.status("c")["retention_frontier"] == 2
    with pytest.raises(HistoryPruned):
        sim.seek("c", 2)
