"""Leased durable consumers (seed 003) under the virtual clock, driven by hand:
consume, ack, nack, expiry, dead letters, limits, seek, retire, status,
retention fence and restore."""
from __future__ import annotations

import re

import pytest

from fanoutsim.kernel.faults import LEASE_CRASH_POINTS, CRASH_POINTS
from fanoutsim.designs.leases import MAX_ATTEMPTS, LeaseConfig
from fanoutsim.designs.leases.simulation import LeaseSimulation


@pytest.fixture(params=["memory", "duckdb"])
def store(request):
    return request.param


def sim_with(store, n=0, partitions=("a",), config=None, **limits):
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


def test_one_lease_per_partition_in_partition_order_in_flight_across_partitions(store):
    sim = sim_with(store, 6, partitions=("a", "b", "c"), batch_limit=8, in_flight_limit=2)
    got = sim.consume("c")
    assert [(x.partition, x.event_id) for x in got] == [("a", "1:0"), ("b", "2:0")]  # in-flight 2
    assert sim.consume("c") == []                                                  # full
    assert sim.ack("c", got[0].event_id, got[0].token, got[0].incarnation) == "acked"
    assert [x.event_id for x in sim.consume("c")] == ["3:0"]     # oldest eligible head: c's 3, not a's 4
    sim2 = sim_with(store, 3, batch_limit=8, in_flight_limit=8)
    assert [x.event_id for x in sim2.consume("c")] == ["1:0"]   # one partition: one in flight


def test_batch_limit_per_call(store):
    sim = sim_with(store, 6, partitions=("a", "b", "c", "d", "e", "f"), batch_limit=2, in_flight_limit=8)
    assert len(sim.consume("c")) == 2 and len(sim.consume("c", batch_limit=3)) == 3


def test_only_an_exact_ack_advances(store):
    sim = sim_with(store, 2, lease_seconds=10)
    (x,) = sim.consume("c")
    assert sim.ack("c", x.event_id, "0" * 64, x.incarnation) == "wrong_token"
    assert sim.ack("c", x.event_id, x.token, x.incarnation + 1) == "stale_incarnation"
    assert sim.ack("c", "2:0", x.token, x.incarnation) == "no_lease"
    assert sim.checkpoints().empty
    sim.run(until=10.5)  # expired, recovery has run: the lease is gone
    assert sim.ack("c", x.event_id, x.token, x.incarnation) in ("expired", "no_lease")
    assert sim.checkpoints().empty
    (y,) = sim.consume("c")
    assert y.event_id == x.event_id and y.attempt == 2 and y.token != x.token
    assert sim.ack("c", y.event_id, y.token, y.incarnation) == "acked"
    assert sim.checkpoints()[["partition", "seq"]].values.tolist() == [["a", 1]]
    assert sim.ack("c", y.event_id, y.token, y.incarnation) == "no_lease"  # twice: fails closed


def test_an_expired_lease_fails_closed_before_recovery(store):
    sim = sim_with(store, 1, lease_seconds=5, config=LeaseConfig(recovery_interval=100))
    (x,) = sim.consume("c")
    sim.run(until=6)
    assert sim.ack("c", x.event_id, x.token, x.incarnation) == "expired"
    assert sim.consume("c") == []  # still held until recovery expires it
    assert sim.recover() == 1
    assert sim.consume("c")[0].attempt == 2


def test_nack_schedules_a_delayed_retry(store):
    sim = sim_with(store, 2)
    (x,) = sim.consume("c")
    assert sim.nack("c", x.event_id, x.token, x.incarnation, delay=3, error="boom") == "retry_scheduled"
    assert sim.consume("c") == []          # the head waits; its partition's next event too
    sim.run(until=3.0)
    (y,) = sim.consume("c")
    assert (y.event_id, y.attempt) == ("1:0", 2)
    assert sim.retries()["error"].tolist() == ["boom"]
    with pytest.raises(ValueError, match="delay must be 0 through 900 seconds"):
        sim.nack("c", y.event_id, y.token, y.incarnation, delay=901)


def test_the_tenth_failure_is_a_dead_letter_and_later_events_continue(store):
    sim = sim_with(store, 2)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        (x,) = sim.consume("c")
        assert (x.event_id, x.attempt) == ("1:0", attempt)
        out = sim.nack("c", x.event_id, x.token, x.incarnation, error="poison")
    assert out == "dead_lettered"
    dl = sim.dead_letters()
    assert dl[["event_id", "attempts", "error"]].values.tolist() == [["1:0", 10, "poison"]]
    assert dl["payload"].tolist() == ['{"i":0}']
    (y,) = sim.consume("c")
    assert y.event_id == "2:0"
    t = sim.trace()
    assert not ((t["kind"] == "acked") & (t["event_id"] == "1:0")).any()  # never pretended acked


def test_expiry_counts_as_a_failed_attempt_up_to_the_dead_letter(store):
    sim = sim_with(store, 2, lease_seconds=5)
    for i in range(MAX_ATTEMPTS):
        assert sim.consume("c")[0].attempt == i + 1
        sim.run(until=sim.now + 6)
    assert sim.dead_letters()["error"].tolist() == ["lease expired"]
    assert sim.consume("c")[0].event_id == "2:0"


@pytest.mark.parametrize("field,value,rng", [
    ("batch_limit", 0, "1 through 8"), ("batch_limit", 9, "1 through 8"), ("in_flight_limit", 9, "1 through 8"),
    ("in_flight_limit", 1.5, "1 through 8"), ("lease_seconds", 4.9, "5 through 900 seconds"),
    ("lease_seconds", 901, "5 through 900 seconds"), ("batch_limit", True, "1 through 8")])
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
    with pytest.raises(KeyError, match="unknown consumer 'nobody'"):
        sim.consume("nobody")
    with pytest.raises(ValueError, match="partition must be a non-empty string"):
        sim.publish("")
    with pytest.raises(ValueError, match="past the end of the log"):
        sim.register_consumer("c", start=5, client=False)
    with pytest.raises(TypeError, match="config must be a LeaseConfig"):
        LeaseSimulation(config=object())
    with pytest.raises(ValueError, match="retention must be"):
        LeaseConfig(retention=0)


def test_seek_moves_the_checkpoint_and_voids_leases(store):
    sim = sim_with(store, 3)
    (x,) = sim.consume("c")
    sim.ack("c", x.event_id, x.token, x.incarnation)
    (y,) = sim.consume("c")
    assert sim.seek("c", 0) == 0                       # back: 1:0 again
    assert sim.ack("c", y.event_id, y.token, y.incarnation) == "no_lease"
    assert sim.consume("c")[0].event_id == "1:0"
    assert sim.seek("c", "end") == 3 and sim.consume("c") == []
    with pytest.raises(ValueError, match="past the end"):
        sim.seek("c", 4)


def test_retire_is_permanent_and_releases_the_fence(store):
    cfg = LeaseConfig(retention=10, retention_interval=1)
    sim = sim_with(store, 3, config=cfg)
    sim.register_consumer("d", client=False)
    (x,) = sim.consume("c")
    sim.run(until=20)
    assert len(sim.events()) == 3                       # both consumers fence commit 1
    sim.retire("c")
    assert sim.ack("c", x.event_id, x.token, x.incarnation) == "retired"
    with pytest.raises(ValueError, match="retired"):
        sim.consume("c")
    with pytest.raises(ValueError, match="permanently retired"):
        sim.register_consumer("c", client=False)
    assert len(sim.events()) == 3                       # d still holds it
    sim.retire("d")
    sim.run(until=22)
    assert sim.events().empty
    assert sim.status("c")["retired"]


def test_retention_never_prunes_past_the_commit_of_the_first_required_event(store):
    sim = LeaseSimulation(LeaseConfig(retention=10, retention_interval=1), seed=0, store=store)
    sim.register_consumer("c", client=False)
    sim.publish_many([("a", "k", 1), ("b", "k", 2)])   # commit 1
    sim.publish("b")                                   # commit 2
    sim.publish("a")                                   # commit 3
    leases = sim.consume("c")
    b = next(x for x in leases if x.partition == "b")
    sim.ack("c", b.event_id, b.token, b.incarnation)   # 1:1 done, 1:0 (a) still required
    sim.run(until=30)
    assert sim.events()["event_id"].tolist() == ["1:0", "1:1", "2:0", "3:0"]
    st = sim.status("c")
    assert st["first_required"] == "1:0" and st["fence_commit"] == 1
    a = next(x for x in leases if x.partition == "a")
    assert sim.ack("c", a.event_id, a.token, a.incarnation) == "acked"   # its 60 s lease still holds
    sim.run(until=32)
    assert sim.events()["event_id"].tolist() == ["2:0", "3:0"]           # now commit 2 is the fence
    assert sim.status("c")["fence_commit"] == 2


def test_status_reports_the_consumer(store):
    sim = sim_with(store, 2, partitions=("a", "b"))
    x, y = sim.consume("c")
    sim.nack("c", y.event_id, y.token, y.incarnation, delay=100)
    st = sim.status("c")
    assert st["in_flight"] == [x.event_id] and st["retrying"] == {y.event_id: 1}
    assert st["incarnation"] == 1 and st["batch_limit"] == 4 and st["checkpoints"] == {}


def test_restore_publishes_a_new_incarnation_and_old_tokens_fail_closed(store):
    sim = sim_with(store, 2)
    (x,) = sim.consume("c")
    assert sim.restore() == 2
    assert sim.ack("c", x.event_id, x.token, x.incarnation) == "stale_incarnation"
    (y,) = sim.consume("c")                             # resumes from its checkpoint
    assert (y.event_id, y.incarnation) == ("1:0", 2)
    assert sim.ack("c", y.event_id, y.token, y.incarnation) == "acked"
    assert sim.history()["incarnation"].tolist() == [2]


def test_lease_crash_points_are_crash_points():
    assert set(LEASE_CRASH_POINTS) <= set(CRASH_POINTS) and len(set(CRASH_POINTS)) == len(CRASH_POINTS)
