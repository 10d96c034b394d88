"""Leased durable consumers on the wall clock: threads, a DuckDB file, real
time, real crashes (seed 003). Every figure asserted is a bound the design
promises, never one copied from a run; lease lengths are the seed's (5 s at
least), so the tests that need one to run out take that long."""

from __future__ import annotations

import time
from contextlib import contextmanager

import pytest
from conftest import wait_for

import fanoutsim as fs
from fanoutsim.designs.leases import LeaseConfig
from fanoutsim.designs.leases.checker import check_leases
from fanoutsim.designs.leases.crashtest import LIMITS, kill9_campaign
from fanoutsim.designs.leases.realtime import LeaseRealtime
from fanoutsim.faults import CrashAtPoint, FaultPlan
from fanoutsim.kernel.timeutil import US

FAST = LeaseConfig(recovery_interval=0.2, retention_interval=0.5)
POLL = 0.05


@pytest.fixture
def make(tmp_path):
    """``make(name, config, faults)``: a LeaseRealtime on a DuckDB file in
    tmp_path, closed at teardown (reads work after ``stop()``, until ``close()``)."""
    made = []

    def _make(name, config=FAST, faults=None, **kw):
        rt = LeaseRealtime(config, store=str(tmp_path / f"{name}.duckdb"), faults=faults, **kw)
        made.append(rt)
        return rt

    yield _make
    for rt in made:
        rt.close()


@contextmanager
def running(rt):
    rt.start()
    try:
        yield rt
    finally:
        rt.stop()


def drained(rt, consumers):
    """Every consumer is past every event it requires and holds no lease."""
    return (
        len(rt.events()) > 0
        and len(rt.leases()) == 0
        and all(rt.status(c)["first_required"] is None for c in consumers)
    )


def events(rt, kind, consumer=None):
    t = rt.trace()
    t = t[t["kind"] == kind]
    return t if consumer is None else t[t["consumer"] == consumer]


@pytest.mark.parametrize("order", ["riffdb", "head_of_line"])
def test_a_run_on_a_duckdb_file_delivers_every_event_leased_in_partition_order(make, order):
    seen = []
    rt = make(f"run-{order}", LeaseConfig(recovery_interval=0.2, retention_interval=0.5, partition_order=order))
    rt.register_consumer("indexer", duration=0.005, poll_interval=POLL, fn=lambda lease: seen.append(lease))
    # the first attempt at every other event fails (however few events a loaded machine publishes)
    rt.register_consumer(
        "flaky",
        duration=lambda rng: rng.uniform(0, 0.03),
        nack_delay=0.05,
        poison=lambda lease: lease.attempt == 1 and lease.seq % 2 == 1,
        poll_interval=POLL,
        in_flight_limit=8,
    )
    with running(rt):
        # a fixed number of events over 0.6 s while both consume (a rate would publish too few on a
        # loaded machine)
        for i in range(12):
            rt.publish(f"p{i % 3}", payload={"i": i})
            time.sleep(0.05)
        assert wait_for(lambda: drained(rt, ["indexer", "flaky"]), timeout=10)
    published = rt.events()
    report = check_leases(rt)
    assert report.valid, report
    assert report.total["published"] == len(published) == 12
    # out of order: leases under RiffDB's rule, first deliveries under head-of-line
    assert report.total["lost"] == 0 and report.total["pending"] == 0 and report.total["out_of_order"] == 0
    assert report.total["duplicates"] == 0  # leases of 60 s: nobody outlived one
    assert report.total["delivered"] == 2 * len(published)
    # the effect ran once per event; under head-of-line within each partition in log order
    assert sorted(lease.event_id for lease in seen) == sorted(published["event_id"])
    if order == "head_of_line":
        for part, group in published.groupby("partition"):
            assert [lease.seq for lease in seen if lease.partition == part] == sorted(group["seq"])
    assert len(events(rt, "nacked", "flaky")) > 0  # failures retried, not lost
    assert [r["event"] for r in rt.store.rows("runner_log")] == ["start", "stop"]
    m = rt.metrics()
    assert m['fanoutsim_lease_delivered_total{consumer="indexer"}'] == len(published)
    assert m["fanoutsim_lease_in_flight"] == 0


def _first_then(first: float, rest: float = 0.02):
    """A duration: ``first`` seconds for the first lease, ``rest`` after."""
    calls = []

    def duration(rng):
        calls.append(1)
        return first if len(calls) == 1 else rest

    return duration


def test_a_worker_slower_than_its_lease_sees_its_ack_fail_closed_and_the_event_comes_again(make):
    # leases of 5 s (the seed's least); recovery at 4 s and 8 s after the start.
    # "late" pulls every 10 s and acks at ~5.5 s: its lease has run out, and neither recovery nor a
    # pull of its own has seen it yet -> expired (recovery frees it at ~8 s, the pull at 10 s takes it;
    # 2.5 s between the ack and that recovery: a loaded machine wakes the worker late, not that late).
    # "gone" pulls every 0.1 s: its first pull past 5 s turns the expired lease into a retry and
    # leases the event again, acked at once; the slow worker acks at ~7.2 s -> no_lease.
    # Both events come twice: duplicates with cause lease_expired.
    rt = make("expiry", LeaseConfig(recovery_interval=4.0))
    rt.register_consumer("late", lease_seconds=5, duration=_first_then(5.5), poll_interval=10.0)
    rt.register_consumer("gone", lease_seconds=5, duration=_first_then(7.2), poll_interval=0.1)
    rt.publish("a", "ticket.changed", {"ticket": 7})
    with running(rt):
        assert wait_for(lambda: len(events(rt, "ack_refused")) == 2, timeout=12)
        assert wait_for(lambda: drained(rt, ["late", "gone"]), timeout=5)
    refused = events(rt, "ack_refused").set_index("consumer")["detail"].to_dict()
    assert refused == {"late": "expired", "gone": "no_lease"}
    assert events(rt, "delivered")["consumer"].value_counts().to_dict() == {"late": 2, "gone": 2}
    expired = events(rt, "expired").set_index("consumer")["t"]
    assert sorted(expired.index) == ["gone", "late"]
    assert expired["gone"] < expired["late"]  # gone's own pull at ~5 s, late's in the recovery pass at ~8 s
    report = check_leases(rt)
    assert report.valid and report.total["lost"] == 0 and report.total["out_of_order"] == 0
    assert report.total["duplicates_by_cause"] == {"lease_expired": 2}
    leased = events(rt, "leased")
    assert leased["detail"].tolist().count("attempt 2") == 2  # the expiry was a failed attempt
    # the late ack came after the lease's expiry on the wall clock
    first = leased[leased["detail"] == "attempt 1"].set_index("consumer")["t"]
    acks = events(rt, "ack_refused").set_index("consumer")["t"]
    assert acks["late"] - first["late"] >= 5 * US


def test_a_crash_at_a_lease_point_restarts_by_itself_and_loses_nothing(make):
    plan = FaultPlan([CrashAtPoint("worker.after_effect_before_ack", nth=2, downtime=0.3)])
    rt = make("crash", faults=plan)
    rt.register_consumer("c", lease_seconds=5, duration=0.01, poll_interval=POLL, in_flight_limit=3)
    for i in range(6):
        rt.publish(f"p{i % 3}", payload={"i": i})
    with running(rt):
        assert wait_for(lambda: not rt.up, timeout=5)
        with pytest.raises(RuntimeError, match=r"down \(crashed\)"):
            rt.publish("p0")
        assert wait_for(lambda: rt.up, timeout=5)  # restarted by itself
        # the dead worker's lease holds its event until it expires (5 s); the next pull or recovery frees it
        assert wait_for(lambda: drained(rt, ["c"]), timeout=10)
    crashed, restarted = events(rt, "crashed"), events(rt, "restarted")
    assert crashed["detail"].tolist() == ["worker.after_effect_before_ack"] and len(restarted) == 1
    assert restarted["t"].iloc[0] - crashed["t"].iloc[0] >= 0.3 * US  # the downtime passed on the wall clock
    assert [r["event"] for r in rt.store.rows("runner_log")] == ["start", "start", "stop"]
    report = check_leases(rt)
    assert report.valid and report.total["lost"] == 0 and report.total["delivered"] == 6
    second = events(rt, "delivered", "c")["event_id"].iloc[1]
    assert report.duplicates.to_dict("records") == [{"consumer": "c", "event_id": second, "cause": "crash"}]
    # its lease (and those of workers cut off before their effect) expired after 5 s
    assert second in events(rt, "expired")["event_id"].tolist()
    assert rt.metrics()["fanoutsim_runner_crashes_total"] == 1
    assert set(rt.trace()["process"]) == {0, 1}


def test_a_new_process_over_the_same_file_resumes_from_the_checkpoints(tmp_path):
    db = str(tmp_path / "resume.duckdb")
    seen = []
    first = LeaseRealtime(FAST, store=db)
    first.register_consumer("indexer", duration=0.005, poll_interval=POLL, fn=lambda lease: seen.append(lease.event_id))
    first.publish_many([("a", "k", 1), ("b", "k", 2), ("a", "k", 3)])
    first.start()
    first.publish("b", payload=4)
    assert wait_for(lambda: drained(first, ["indexer"]))
    first.close()
    assert sorted(seen) == ["1:0", "1:1", "1:2", "2:0"]

    second = LeaseRealtime(FAST, store=db)
    try:
        # the code registers again with the same limits: a no-op on the table's consumer, whose
        # checkpoints it resumes from; other limits are refused, as on the virtual clock
        with pytest.raises(ValueError, match=r"consumer 'indexer' exists with other settings: in_flight_limit=8"):
            second.register_consumer("indexer", duration=0.005, poll_interval=POLL, in_flight_limit=8)
        row = second.register_consumer(
            "indexer", duration=0.005, poll_interval=POLL, fn=lambda lease: seen.append(lease.event_id)
        )
        assert row["in_flight_limit"] == 4
        assert second.status("indexer")["checkpoints"] == {"a": 3, "b": 4}
        second.start()
        assert second.publish("a", payload=5) == "3:0"
        assert wait_for(lambda: "3:0" in seen and drained(second, ["indexer"]), timeout=5)
        assert [r["event"] for r in second.store.rows("runner_log")] == ["start", "stop", "start"]
        second.stop()
        report = check_leases(second)  # this process's trace: one event published, delivered once
        assert report.valid and report.total["delivered"] == 1 and report.total["duplicates"] == 0
        assert len(events(second, "consumer_start")) == 0
    finally:
        second.close()
    assert sorted(seen) == ["1:0", "1:1", "1:2", "2:0", "3:0"]  # nothing twice


def test_restore_fails_old_tokens_closed_with_stale_incarnation(make):
    rt = make("restore")
    rt.register_consumer("hand", client=False)
    rt.register_consumer("worker", lease_seconds=5, duration=_first_then(0.4), poll_interval=POLL)
    rt.publish("a")
    [lease] = rt.consume("hand")
    assert lease.incarnation == 1 and len(lease.token) == 64
    with running(rt):
        assert wait_for(lambda: len(events(rt, "leased", "worker")) == 1)
        assert rt.restore() == 2
        assert rt.ack("hand", lease.event_id, lease.token, lease.incarnation) == "stale_incarnation"
        [again] = rt.consume("hand")  # the restore counted the lease as a failed attempt
        assert again.incarnation == 2 and again.attempt == 2 and again.token != lease.token
        assert rt.ack("hand", again.event_id, again.token, again.incarnation) == "acked"
        # the worker's lease was voided under it: its ack fails closed, the event comes again
        assert wait_for(lambda: len(events(rt, "ack_refused", "worker")) == 1, timeout=5)
        assert wait_for(lambda: drained(rt, ["hand", "worker"]), timeout=5)
    assert events(rt, "ack_refused")["detail"].tolist() == ["stale_incarnation", "stale_incarnation"]
    report = check_leases(rt)  # (the checker sees workers' effects; "hand" had none traced)
    worker = report.per_consumer.set_index("consumer").loc["worker"]
    assert worker["delivered"] == 1 and worker["lost"] == 0 and worker["pending"] == 0
    assert report.duplicates.to_dict("records") == [{"consumer": "worker", "event_id": "1:0", "cause": "restore"}]
    assert rt.status("worker")["incarnation"] == 2


def test_bad_input_and_life_cycle_errors(tmp_path):
    with pytest.raises(TypeError, match="config must be a LeaseConfig, not SchedulerConfig"):
        LeaseRealtime(fs.SchedulerConfig(), store="memory")
    with pytest.raises(TypeError, match="seed must be an int"):
        LeaseRealtime(store="memory", seed="1")
    with pytest.raises(ValueError, match="stop_timeout must be seconds >= 0"):
        LeaseRealtime(store="memory", stop_timeout=-1)
    bad = tmp_path / "not.duckdb"
    bad.write_text("hello")
    with pytest.raises(Exception, match="not.duckdb"):
        LeaseRealtime(store=str(bad))
    assert bad.read_text() == "hello"  # untouched
    rt = LeaseRealtime(FAST, store=str(tmp_path / "bad.duckdb"), stop_timeout=0.3)
    with pytest.raises(ValueError, match="lease_seconds must be 5 through 900 seconds, got 1"):
        rt.register_consumer("c", lease_seconds=1)
    with pytest.raises(ValueError, match="in_flight_limit must be an integer from 1 through 8"):
        rt.register_consumer("c", in_flight_limit=9)
    with pytest.raises(ValueError, match="fail must be a probability"):
        rt.register_consumer("c", fail=2)
    with pytest.raises(ValueError, match="duration must be a finite number of seconds"):
        rt.register_consumer("c", duration=-1)
    with pytest.raises(TypeError, match="fn must be callable"):
        rt.register_consumer("c", fn="print")
    with pytest.raises(ValueError, match="rate must be events per second > 0"):
        rt.add_workload(0)
    with pytest.raises(ValueError, match="partitions must be >= 1"):
        rt.add_workload(1.0, partitions=0)
    assert rt.consumers().empty  # nothing half made
    assert rt.consume("nobody").result == "not_found"
    rt.register_consumer("c", lease_seconds=5, duration=3.0, poll_interval=POLL)
    rt.publish("a")
    rt.start()
    with pytest.raises(RuntimeError, match="already running"):
        rt.start()
    with pytest.raises(ValueError, match="delay must be 0 through 3600 seconds"):
        rt.nack("c", "1:0", "x" * 64, 1, delay=4000)
    assert rt.ack("c", "1:0", "0" * 64, 1) in ("no_lease", "wrong_token")  # a made-up token fails closed
    assert wait_for(lambda: len(rt.leases()) == 1)
    t0 = time.monotonic()
    rt.stop()  # the worker has 3 s to go; stop_timeout 0.3 s abandons it
    assert time.monotonic() - t0 < 1.5  # bounded
    rt.stop()  # a no-op
    with pytest.raises(RuntimeError, match="stopped"):
        rt.publish("a")
    with pytest.raises(RuntimeError, match="make a new LeaseRealtime"):
        rt.start()
    with pytest.raises(RuntimeError, match="stopped"):
        rt.add_workload(1.0)
    assert len(rt.leases()) == 1 and len(rt.events()) == 1  # reads work until close; the lease awaits expiry
    assert len(events(rt, "delivered")) == 0  # the abandoned worker never applied its effect
    assert [r["event"] for r in rt.store.rows("runner_log")] == ["start", "stop"]
    rt.close()
    rt.close()  # a no-op


def test_a_graceful_stop_lets_the_workers_in_hand_finish(make):
    rt = make("graceful")
    rt.register_consumer("c", lease_seconds=5, duration=0.25, poll_interval=POLL, in_flight_limit=2)
    rt.publish_many([("a", "k", None), ("b", "k", None), ("a", "k", None)])
    rt.start()
    assert wait_for(lambda: len(rt.leases()) == 2)
    rt.stop()
    # both workers finished and acked; the third event was not leased after the stop
    assert sorted(events(rt, "acked")["event_id"]) == ["1:0", "1:1"]
    assert len(rt.leases()) == 0 and rt.store.rows("runner_log")[-1]["event"] == "stop"
    report = check_leases(rt)
    assert report.valid and report.total["pending"] == 1 and report.total["delivered"] == 2


@pytest.mark.parametrize("order", ["riffdb", "head_of_line"])
def test_kill_9_loses_no_event(tmp_path, order):
    out = kill9_campaign(
        str(tmp_path / "k.duckdb"),
        str(tmp_path / "sink.txt"),
        kills=1,
        seed=1,
        up=(0.3, 0.6),
        backlog=24,
        partition_order=order,
    )
    print(out)
    assert out["clean_exit"] and out["starts"] == 2 and out["clean_stops"] == 1
    assert out["published"] > 24 and out["lost"] == []
    if order == "riffdb":  # the backlog's first pull took two events of a partition: their effects overlapped
        assert out["max_concurrent_in_partition"] > 1
    else:  # one lease per partition: effects one at a time, first deliveries in order
        assert out["max_concurrent_in_partition"] == 1 and out["out_of_order"] == []
    assert out["leases_left"] == 0  # the killed children's leases expired, their events came again
    # only leases in hand are re-delivered: at most in_flight_limit per kill
    assert out["extra_deliveries"] <= out["kills"] * LIMITS["in_flight_limit"]


@pytest.mark.parametrize("clock", ["virtual", "wall"])
def test_fn_is_the_effect_and_its_exception_a_failed_attempt_on_either_clock(tmp_path, clock):
    calls = []

    def fn(lease):
        calls.append((lease.event_id, lease.attempt))
        if lease.event_id == "1:0" and lease.attempt == 1:
            raise ConnectionError("downstream refused")

    if clock == "virtual":
        rt = fs.LeaseSimulation(seed=0)
    else:
        rt = fs.LeaseRealtime(FAST, store=str(tmp_path / "fn.duckdb"))
    rt.register_consumer("c", fn=fn, duration=0.01, nack_delay=0.05, poll_interval=POLL)
    rt.publish_many([("a", "k", None), ("a", "k", None)])
    if clock == "virtual":
        rt.run(until=2)
    else:
        with running(rt):
            assert wait_for(lambda: drained(rt, ["c"]), timeout=5)
    try:
        # one pull leased both; 1:1 did not wait behind the failed 1:0, whose retry came 0.05 s later
        assert sorted(calls[:2]) == [("1:0", 1), ("1:1", 1)] and calls[2:] == [("1:0", 2)]
        assert events(rt, "nacked")["detail"].tolist() == ["attempt 1: ConnectionError: downstream refused"]
        report = check_leases(rt)
        assert report.valid and report.total["delivered"] == 2 and report.total["duplicates"] == 0
    finally:
        if clock == "wall":
            rt.close()
