"""RiffDB's own tests of durable event consumers, restated against the model.

Each test names the RiffDB test it comes from: ``tests/durable_event_consumers.rs``
(real-redb restart and transaction-boundary evidence), the ``mod tests`` of
``crates/riffdb-storage-api/src/consumer.rs`` (the transition evaluator,
recovery and the lease coordinator) and the bounds of
``crates/riffdb-service/src/consumer_operations.rs``. RiffDB passes explicit
instants (``time(1)``, ``time(5)``...); so do these, calling the sans-IO
:class:`~fanoutsim.designs.leases.LeaseEngine` with ``now`` in seconds past ``T0``, over
a DuckDB file that is closed and reopened between steps where RiffDB reopens
its redb file. RiffDB's ``event(n)`` is the event of commit ``n``; its consumer
is bound to one partition, here ``p``.
"""

from __future__ import annotations

import pytest

from fanoutsim.designs.leases import MAX_ATTEMPTS, HistoryPruned, LeaseConfig, LeaseEngine
from fanoutsim.designs.leases.config import MAX_SPARSE_RESOLUTIONS, RESOLUTION_WINDOW
from fanoutsim.designs.leases.crashtest import MATRIX_OPS, PHASES, crash_matrix_case
from fanoutsim.designs.stores import open_store
from fanoutsim.faults import Crash, NoFaults
from fanoutsim.kernel.metrics import Metrics
from fanoutsim.kernel.trace import Trace

T0 = 1_767_225_600_000_000


def t(seconds: float) -> int:
    return T0 + round(seconds * 1_000_000)


class Db:
    """A DuckDB file that engines open and close, as RiffDB's ``ConsumerDatabase``."""

    def __init__(self, path, config=None, faults=None):
        self.path, self.config, self.faults = str(path), config or LeaseConfig(), faults
        self.store, self.engine = None, None

    def __enter__(self) -> LeaseEngine:
        self.store = open_store(self.path)
        self.engine = LeaseEngine(self.store, self.config, Metrics(), Trace(), self.faults, seed=0)
        return self.engine

    def __exit__(self, *exc):
        self.store.close()


def rows(e, table):
    return e.store.rows(table)


def leased(e, consumer="worker-a", n=None):
    return [r for r in rows(e, "leases") if r["consumer"] == consumer][:n]


@pytest.fixture
def db(tmp_path):
    return Db(tmp_path / "consumers.duckdb")


def test_ordered_delivery_retry_checkpoint_seek_and_retire_survive_reopen(db):
    """tests/durable_event_consumers.rs: ordered_delivery_retry_checkpoint_seek_and_retire_survive_reopen"""
    with db as e:
        e.add_consumer(t(0), "worker-a", batch_limit=2, in_flight_limit=2, lease_seconds=5)
        first, second = e.publish(t(0), [("p", "RowChanged", 1)]) + e.publish(t(0), [("p", "RowChanged", 2)])
        got = e.consume(t(1), "worker-a")  # one pull, batch 2, in-flight 2: both
        assert [x.event_id for x in got] == [first, second]
        tokens = {x.event_id: x.token for x in got}
    with db as e:
        st = e.status(t(1), "worker-a")
        assert st["live_leases"] == 2 and st["checkpoints"] == {}  # BeforeFirst
        assert e.ack(t(2), "worker-a", second, tokens[second], 1) == "acked"  # out of order
    with db as e:
        assert e.status(t(2), "worker-a")["checkpoints"] == {}  # still BeforeFirst
        assert [r["event_id"] for r in rows(e, "resolutions")] == [second]  # one sparse resolution
        assert e.nack(t(2), "worker-a", first, tokens[first], 1, delay=1.0) == "retry_scheduled"  # eligible at 3
    with db as e:
        (retry,) = e.consume(t(4), "worker-a")
        assert (retry.event_id, retry.attempt) == (first, 2)
        assert e.ack(t(5), "worker-a", first, retry.token, 1) == "acked"  # contiguous: past second
    with db as e:
        st = e.status(t(5), "worker-a")
        assert st["checkpoints"] == {"p": 2} and st["live_leases"] == 0 and st["retries"] == 0
        assert st["retention_frontier"] == 1  # low water Some(1)
        assert e.seek(t(5), "worker-a", 1) == "applied"  # After(first)
    with db as e:
        st = e.status(t(5), "worker-a")
        assert st["start_seq"] == 1 and st["checkpoints"] == {}
        assert e.retire(t(5), "worker-a") == "applied"
    with db as e:
        assert e.status(t(5), "worker-a") is None
        from fanoutsim.designs.leases.log import fence

        with e.store.transaction() as tx:
            assert fence(tx) is None  # low water None


def test_restart_restore_and_sibling_identity_recovery_are_exact(db):
    """tests/durable_event_consumers.rs: restart_restore_and_sibling_identity_recovery_are_exact"""
    with db as e:
        e.add_consumer(t(0), "worker-a", lease_seconds=5)
        e.add_consumer(t(0), "worker-b", lease_seconds=20)
        e.publish(t(0), [("p", "RowChanged", 1)])
        e.consume(t(0), "worker-a")  # expires at 5
        e.consume(t(0), "worker-b")  # expires at 20
    with db as e:
        assert e.recover(t(10)) == 1  # ordinary restart recovery
        assert [r["consumer"] for r in rows(e, "retries")] == ["worker-a"]
        assert [r["consumer"] for r in rows(e, "leases")] == ["worker-b"]
    with db as e:
        assert e.restore(t(11)) == 2  # restore recovery
    with db as e:
        assert rows(e, "history")[0]["incarnation"] == 2
        assert rows(e, "leases") == []  # no delivery is leased any more
        assert [(r["consumer"], r["attempts"]) for r in rows(e, "retries")] == [("worker-a", 1), ("worker-b", 1)]


class _Raise(NoFaults):
    def __init__(self, point):
        self.at = point

    def point(self, name, now, **where):
        if name == self.at:
            raise Crash(name)


@pytest.mark.parametrize("phase", PHASES)
def test_transaction_failpoints_distinguish_absence_from_committed_uncertainty(tmp_path, phase):
    """tests/durable_event_consumers.rs: transaction_failpoints_distinguish_absence_from_committed_uncertainty"""
    db = Db(tmp_path / f"{phase}.duckdb")
    with db as e:
        e.add_consumer(t(0), "worker-a", lease_seconds=5)
        e.publish(t(0), [("p", "RowChanged", 1)])
    db.faults = _Raise(f"lease.{phase}_commit")
    with db as e:
        with pytest.raises(Crash):
            e.consume(t(1), "worker-a")
    db.faults = None
    with db as e:
        assert e.status(t(1), "worker-a")["live_leases"] == (1 if phase == "after" else 0)


# what RiffDB's matrix asserts of each (transition, phase), as status fields of worker-a
MATRIX = {
    ("lease", "before"): {"live_leases": 0},
    ("lease", "after"): {"live_leases": 1},
    ("ack", "before"): {"checkpoints": {}, "live_leases": 1},
    ("ack", "after"): {"checkpoints": {"p": 1}, "live_leases": 0},
    ("nack", "before"): {"live_leases": 1, "retries": 0},
    ("nack", "after"): {"live_leases": 0, "retries": 1},
    ("seek", "before"): {"checkpoints": {"p": 1}},
    ("seek", "after"): {"checkpoints": {}, "start_seq": 0},
    ("retire", "before"): {"checkpoints": {"p": 1}},
    ("retire", "after"): None,
    ("recover", "before"): {"live_leases": 1, "retries": 0},
    ("recover", "after"): {"live_leases": 0, "retries": 1},
}


@pytest.mark.parametrize("op,phase", [(op, phase) for op in MATRIX_OPS for phase in PHASES])
def test_process_crash_matrix_preserves_every_consumer_transition(tmp_path, op, phase):
    """tests/durable_event_consumers.rs: process_crash_matrix_preserves_every_consumer_transition —
    a child process SIGKILLed before or after the transition's commit; the file
    holds the transition exactly when it committed."""
    st = crash_matrix_case(str(tmp_path / "matrix.duckdb"), op, phase)
    want = MATRIX[(op, phase)]
    if want is None:
        assert st is None
    else:
        assert st is not None and {k: st[k] for k in want} == want


# -- crates/riffdb-storage-api/src/consumer.rs, mod tests --------------------------------


def test_sparse_resolutions_are_bounded_ordered_and_after_checkpoint(db):
    """consumer.rs: sparse_resolutions_are_bounded_ordered_and_after_checkpoint — and
    the window that keeps them within the bound (MAX_CONSUMER_EVENT_WINDOW_ITEMS)."""
    assert (RESOLUTION_WINDOW, MAX_SPARSE_RESOLUTIONS) == (65, 64)
    with db as e:
        e.add_consumer(t(0), "worker-a", batch_limit=8, in_flight_limit=8, lease_seconds=900)
        ids = [e.publish(t(0), [("p", "RowChanged", i)])[0] for i in range(70)]
        head = None
        while True:  # ack everything but the first event
            got = e.consume(t(1), "worker-a")
            head = head or got[0]
            todo = [x for x in got if x.event_id != ids[0]]
            if not todo:
                break
            for x in todo:
                assert e.ack(t(1), "worker-a", x.event_id, x.token, 1) == "acked"
        sparse = [r["seq"] for r in rows(e, "resolutions")]
        assert sparse == list(range(2, 66))  # 64 held, ordered, all past the checkpoint
        assert [r["event_id"] for r in rows(e, "leases")] == [ids[0]]  # nothing past the window leased
        assert e.status(t(1), "worker-a")["checkpoints"] == {}
        assert e.ack(t(2), "worker-a", ids[0], head.token, 1) == "acked"
        assert e.status(t(2), "worker-a")["checkpoints"] == {"p": 65} and rows(e, "resolutions") == []
        assert [x.event_id for x in e.consume(t(3), "worker-a")] == ids[65:70]  # the window moved on


def test_retention_frontier_keeps_the_complete_checkpoint_commit(db):
    """consumer.rs: retention_frontier_keeps_the_complete_checkpoint_commit —
    BeforeFirst allows 0; After(event(7, 3)) allows 6; After(event(1, 0)) allows 0."""
    with db as e:
        for name in ("before-first", "after-7-3", "after-1-0"):
            e.add_consumer(t(0), name)
        e.publish(t(0), [("p", "k", 0)])  # commit 1 (seq 1)
        for c in range(2, 8):
            e.publish(t(0), [("p", "k", c)] + [("q", "k", c)] * 3)  # commit 7: 7:0 .. 7:3
        assert e.seek(t(0), "after-1-0", 1) == "applied"
        assert e.seek(t(0), "after-7-3", 25) == "applied"  # seq 25 is 7:3
        assert [e.status(t(0), n)["retention_frontier"] for n in ("before-first", "after-7-3", "after-1-0")] == [
            0,
            6,
            0,
        ]


def test_acknowledgement_at_the_expiry_deadline_is_expired(db):
    """consumer.rs: acknowledgement_at_the_expiry_deadline_is_expired"""
    with db as e:
        e.add_consumer(t(0), "worker-a", lease_seconds=10)
        e.publish(t(0), [("p", "k", 1)])
        (x,) = e.consume(t(0), "worker-a")
        assert x.expires_at == t(10)
        assert e.ack(t(10), "worker-a", x.event_id, x.token, 1) == "expired"
        assert e.ack(t(10) - 1, "worker-a", x.event_id, x.token, 1) == "acked"


def test_negative_acknowledgement_cannot_move_eligibility_backward_nor_past_an_hour(db):
    """consumer.rs: acknowledgement_can_be_prepared_inside_an_authoritative_storage_fence
    (eligible_at < observed_at is refused); consumer_operations.rs:
    MAX_CONSUMER_RETRY_DELAY = 3600 s."""
    with db as e:
        e.add_consumer(t(0), "worker-a")
        e.publish(t(0), [("p", "k", 1)])
        (x,) = e.consume(t(0), "worker-a")
        for bad in (-0.5, 3600.5):
            with pytest.raises(ValueError, match="delay must be 0 through 3600 seconds"):
                e.nack(t(1), "worker-a", x.event_id, x.token, 1, delay=bad)
        assert leased(e)[0]["token"] == x.token  # nothing changed


def test_restart_retains_unexpired_leases_without_a_transition(db):
    """consumer.rs: restart_retains_unexpired_leases_without_a_transition"""
    with db as e:
        e.add_consumer(t(0), "worker-a", lease_seconds=10)
        e.publish(t(0), [("p", "k", 1)])
        e.consume(t(0), "worker-a")
        before = {name: rows(e, name) for name in ("leases", "lease_consumers")}
        assert e.recover(t(10) - 1) == 0
        assert {name: rows(e, name) for name in ("leases", "lease_consumers")} == before  # revision too


def test_restart_releases_an_expired_lease_as_an_immediate_retry(db):
    """consumer.rs: restart_releases_an_expired_lease_as_an_immediate_retry"""
    with db as e:
        e.add_consumer(t(0), "worker-a", lease_seconds=10)
        e.publish(t(0), [("p", "k", 1)])
        e.consume(t(0), "worker-a")
        revision = e.status(t(0), "worker-a")["revision"]
        assert e.recover(t(10)) == 1
        assert e.status(t(10), "worker-a")["revision"] == revision + 1
        (r,) = rows(e, "retries")
        assert (r["attempts"], r["not_before"]) == (1, t(10))


def test_startup_recovery_runs_before_anything_is_served(tmp_path):
    """consumer.rs: recover_event_consumers "normalizes every consumer lease before
    public operations become available" — the runtime's start-up pass."""
    from fanoutsim.designs.leases.simulation import LeaseSimulation

    path = str(tmp_path / "s.duckdb")
    first = LeaseSimulation(seed=0, store=path)
    first.register_consumer("c", client=False, lease_seconds=5)
    first.publish("p")
    first.consume("c")
    first.store.close()
    # a new process over the file, 10 s later on the wall clock: its first act expires the lease
    later = LeaseSimulation(seed=0, store=path, start="2026-01-01T00:00:10Z")
    assert later.trace()["kind"].tolist() == ["expired"]
    assert later.leases().empty and later.retries()["attempts"].tolist() == [1]
    later.store.close()


def test_normal_lease_coordination_releases_expired_work_before_redelivery(db):
    """consumer.rs: normal_lease_coordination_releases_expired_work_before_redelivery —
    the service retries the pull after the normalising transition, so one call
    redelivers the event as attempt 2."""
    with db as e:
        e.add_consumer(t(0), "worker-a", batch_limit=1, in_flight_limit=1, lease_seconds=10)
        e.publish(t(0), [("p", "k", 1)])
        (x,) = e.consume(t(0), "worker-a")
        (y,) = e.consume(t(11), "worker-a")
        assert (y.event_id, y.attempt) == (x.event_id, 2)
        kinds = e.trace.frame()["kind"].tolist()
        assert kinds[-2:] == ["expired", "leased"]


def test_tenth_expired_attempt_is_dead_lettered_and_terminally_sparse(db):
    """consumer.rs: tenth_expired_attempt_is_dead_lettered_and_terminally_sparse"""
    with db as e:
        e.add_consumer(t(0), "worker-a", batch_limit=1, in_flight_limit=1, lease_seconds=5)
        (eid,) = e.publish(t(0), [("p", "k", 1)])
        now = 0
        for attempt in range(1, MAX_ATTEMPTS + 1):
            (x,) = e.consume(t(now), "worker-a")
            assert x.attempt == attempt
            now += 5
            if attempt < MAX_ATTEMPTS:
                e.recover(t(now))
        assert e.recover(t(now)) == 1
        (dead,) = rows(e, "dead_letters")
        assert (dead["attempts"], dead["error"], dead["dead_at"]) == (10, "lease expired", t(now))
        # RiffDB's recovery transition holds it as a sparse resolution; the model resolves it as
        # every dead letter is resolved: terminal, and the contiguous checkpoint passes it at once
        st = e.status(t(now), "worker-a")
        assert (st["dead_lettered"], st["checkpoints"], st["sparse"]) == ([eid], {"p": 1}, [])


def test_restore_rebinds_rows_and_invalidates_even_unexpired_leases(db):
    """consumer.rs: restore_rebinds_rows_and_invalidates_even_unexpired_leases"""
    with db as e:
        e.add_consumer(t(0), "worker-a", lease_seconds=10)
        e.publish(t(0), [("p", "k", 1)])
        (x,) = e.consume(t(0), "worker-a")
        assert e.restore(t(5)) == 2
        assert rows(e, "leases") == []
        (r,) = rows(e, "retries")
        assert (r["attempts"], r["not_before"]) == (1, t(5))
        assert e.ack(t(6), "worker-a", x.event_id, x.token, 1) == "stale_incarnation"
        (y,) = e.consume(t(6), "worker-a")
        assert (y.attempt, y.incarnation) == (2, 2)  # counts toward the ten


@pytest.mark.parametrize("order", ["riffdb", "head_of_line"])
def test_retry_history_does_not_consume_the_live_lease_budget(tmp_path, order):
    """consumer.rs: retry_history_does_not_consume_the_live_lease_budget — under
    RiffDB's rule a waiting retry leaves its in-flight slot to the next event;
    under head-of-line it holds its partition instead."""
    db = Db(tmp_path / "budget.duckdb", LeaseConfig(partition_order=order))
    with db as e:
        e.add_consumer(t(0), "worker-a", batch_limit=1, in_flight_limit=1)
        for i in range(3):
            e.publish(t(0), [("p", "k", i)])
        for _ in range(2):
            for x in e.consume(t(0), "worker-a"):
                e.nack(t(0), "worker-a", x.event_id, x.token, 1, delay=100)
        got = [x.event_id for x in e.consume(t(0), "worker-a")]
        if order == "riffdb":
            assert [r["event_id"] for r in rows(e, "retries")] == ["1:0", "2:0"] and got == ["3:0"]
        else:
            assert [r["event_id"] for r in rows(e, "retries")] == ["1:0"] and got == []


# -- crates/riffdb-service/src/consumer_operations.rs and the transition evaluator ----------


def test_a_wrong_incarnation_is_refused_before_the_lease_is_looked_at(db):
    """consumer_operations.rs, acknowledge(): a lease selection whose incarnation is
    not the service's is refused on entry (history_incarnation_mismatch)."""
    with db as e:
        e.add_consumer(t(0), "worker-a")
        e.publish(t(0), [("p", "k", 1)])
        (x,) = e.consume(t(0), "worker-a")
        assert e.ack(t(1), "nobody", x.event_id, x.token, 2) == "stale_incarnation"  # not not_found
        assert e.nack(t(1), "worker-a", "9:9", "0" * 64, 2) == "stale_incarnation"  # not no_lease
        assert e.ack(t(1), "nobody", x.event_id, x.token, 1) == "not_found"


def test_seek_and_retire_with_a_live_lease_are_refused_as_outstanding_lease(db):
    """consumer.rs, evaluate_event_consumer_transition: Seek and Retire return
    OutstandingLease while any delivery row is Leased — even one past its expiry
    that no recovery has released yet."""
    with db as e:
        e.add_consumer(t(0), "worker-a", lease_seconds=5)
        e.publish(t(0), [("p", "k", 1)])
        e.consume(t(0), "worker-a")
        revision = e.status(t(0), "worker-a")["revision"]
        assert e.seek(t(60), "worker-a", "end") == "outstanding_lease"
        assert e.retire(t(60), "worker-a") == "outstanding_lease"
        st = e.status(t(60), "worker-a")
        assert (st["revision"], st["live_leases"], st["start_seq"]) == (revision, 1, 0)
        e.recover(t(60))
        assert e.retire(t(60), "worker-a") == "applied"


def test_seek_clears_retries_dead_letters_and_sparse_resolutions(db):
    """consumer.rs: Seek replaces the consumer's delivery rows with none and its
    sparse resolutions with none (StoredEventConsumerV1::seek)."""
    with db as e:
        e.add_consumer(t(0), "worker-a", batch_limit=3, in_flight_limit=3)
        for i in range(4):
            e.publish(t(0), [("p", "k", i)])
        a, b, c = e.consume(t(0), "worker-a")
        e.nack(t(0), "worker-a", a.event_id, a.token, 1, delay=100)  # a retry
        e.ack(t(0), "worker-a", c.event_id, c.token, 1)  # a sparse resolution
        for attempt in range(1, MAX_ATTEMPTS + 1):  # b: a dead letter
            if attempt > 1:
                (b,) = e.consume(t(attempt), "worker-a", batch_limit=1)
            e.nack(t(attempt), "worker-a", b.event_id, b.token, 1)
        (d,) = e.consume(t(20), "worker-a")
        e.ack(t(20), "worker-a", d.event_id, d.token, 1)
        st = e.status(t(20), "worker-a")
        assert (st["retries"], st["dead_letters"], st["sparse"]) == (1, 1, ["2:0", "3:0", "4:0"])
        assert e.seek(t(20), "worker-a", "beginning") == "applied"
        st = e.status(t(20), "worker-a")
        assert (st["retries"], st["dead_letters"], st["sparse"], st["checkpoints"]) == (0, 0, [], {})
        assert [x.attempt for x in e.consume(t(21), "worker-a")] == [1, 1, 1]  # attempts start again


def test_retire_deletes_the_consumer_with_its_rows_and_the_identity_starts_afresh(db):
    """consumer.rs: Retire removes the consumer and every delivery row; the
    retention low water no longer counts it."""
    with db as e:
        e.add_consumer(t(0), "worker-a", batch_limit=1, in_flight_limit=1)
        e.publish(t(0), [("p", "k", 0)])
        e.publish(t(0), [("p", "k", 1)])
        (x,) = e.consume(t(0), "worker-a")
        e.ack(t(0), "worker-a", x.event_id, x.token, 1)
        (y,) = e.consume(t(0), "worker-a")
        e.nack(t(0), "worker-a", y.event_id, y.token, 1, delay=100)
        assert e.retire(t(1), "worker-a") == "applied"
        for table in ("lease_consumers", "checkpoints", "retries", "resolutions", "dead_letters"):
            assert [r for r in rows(e, table) if r["consumer"] == "worker-a"] == [], table
        row = e.add_consumer(t(2), "worker-a", start="beginning")
        assert (row["start_seq"], row["revision"]) == (0, 1)
        assert [(x.event_id, x.attempt) for x in e.consume(t(2), "worker-a")] == [("1:0", 1), ("2:0", 1)]


def test_status_reports_revision_live_leases_retries_and_dead_letters(db):
    """consumer.rs: CoordinatedConsumerStatusV1 — revision, checkpoint, history
    incarnation, live_leases, retries, dead_letters."""
    with db as e:
        e.add_consumer(t(0), "worker-a", batch_limit=3, in_flight_limit=3)
        for i in range(3):
            e.publish(t(0), [("p", "k", i)])
        a, b, c = e.consume(t(0), "worker-a")
        e.nack(t(0), "worker-a", b.event_id, b.token, 1, delay=50)
        st = e.status(t(0), "worker-a")
        assert {k: st[k] for k in ("revision", "incarnation", "live_leases", "retries", "dead_letters")} == {
            "revision": 3,
            "incarnation": 1,
            "live_leases": 2,
            "retries": 1,
            "dead_letters": 0,
        }


def test_pulling_pruned_history_is_an_error(db):
    """consumer_operations.rs, read_window: a window whose position is below the
    retention watermark is HistoryPruned. The fence keeps a consumer's history,
    so it takes retention run without the fence (by hand, through the store) to
    leave a checkpoint inside pruned history."""
    with db as e:
        e.add_consumer(t(0), "worker-a", batch_limit=1, in_flight_limit=1)
        for i in range(3):
            e.publish(t(0), [("p", "k", i)])
        (x,) = e.consume(t(0), "worker-a")
        e.ack(t(0), "worker-a", x.event_id, x.token, 1)  # checkpoint at seq 1
        with e.store.transaction() as tx:
            assert tx.prune_events(t(100), None) == ["1:0", "2:0", "3:0"]
        with pytest.raises(HistoryPruned, match="pulling pruned history"):
            e.consume(t(1), "worker-a")
        with pytest.raises(HistoryPruned, match="before the retention horizon"):
            e.add_consumer(t(1), "worker-b", start=2)
