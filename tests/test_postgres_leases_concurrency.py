"""Competing leases transitions over one PostgreSQL, interleaved on purpose.

Two stores on one schema are two connections, as two processes have. One
step is held inside its transaction (at its ``*.before_commit`` fault point,
or behind a lock a third connection holds) while the other runs; then it is
let go. At READ COMMITTED, a step that read before the other committed must
not act on what it read: every transition of a consumer locks the consumer's
row first, every change of the log the history row (see
``fanoutsim/designs/leases/leasing.py``). Without those locks the second pull
leases the same events and dies on the lease's primary key, the second
publish takes the same seq, a pull and recovery both expire one lease, and
two registrations both start the consumer.
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from fanoutsim.designs.leases.config import LeaseConfig
from fanoutsim.designs.leases.engine import TRACE, LeaseEngine
from fanoutsim.kernel.metrics import Metrics
from fanoutsim.kernel.timeutil import US
from fanoutsim.kernel.trace import Trace

NOW = 1_700_000_000 * US


class Hold:
    """A fault plan that holds a step inside its transaction at ``point`` (the
    first pass) until :attr:`release` is set."""

    def __init__(self, point: str) -> None:
        self.at = point
        self.reached, self.release = threading.Event(), threading.Event()

    def point(self, name: str, now: int, **where) -> None:
        if name == self.at and not self.reached.is_set():
            self.reached.set()
            self.release.wait(30)


class Run(threading.Thread):
    """``fn()`` on a thread of its own; its result, or the exception it raised."""

    def __init__(self, fn) -> None:
        super().__init__(daemon=True)
        self.fn, self.result, self.error = fn, None, None
        self.start()

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as exc:  # the old code's KeyError: reported by the test, not lost in a thread
            self.error = exc

    def outcome(self):
        self.join(30)
        assert not self.is_alive(), "the step never finished"
        if self.error is not None:
            raise self.error
        return self.result


def _lock_waits(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as con:
        return con.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
        ).fetchone()[0]


def _blocked_or_done(dsn: str, step: Run, waits: int = 1) -> None:
    """Wait until ``step`` finished or ``waits`` backends wait for a lock."""
    deadline = time.monotonic() + 20
    while step.is_alive() and _lock_waits(dsn) < waits:
        assert time.monotonic() < deadline, "the step neither finished nor waited for a lock"
        time.sleep(0.02)


@pytest.fixture
def two(pg_store, pg_dsn):
    """``two(point)``: two engines on one schema; the first holds at ``point``."""

    def make(point: str | None = None):
        a = pg_store()
        b = pg_store(a.schema)
        hold = Hold(point) if point else None
        return (
            LeaseEngine(a, LeaseConfig(), Metrics(), Trace(TRACE), faults=hold),
            LeaseEngine(b, LeaseConfig(), Metrics(), Trace(TRACE)),
            hold,
        )

    return make


def _kinds(*engines, kind: str) -> list:
    return [row for e in engines for row in e.trace.frame().itertuples() if row.kind == kind]


def test_two_pulls_of_one_consumer_lease_each_event_once(two, pg_dsn):
    a, b, hold = two("lease.before_commit")
    a.add_consumer(NOW, "c", batch_limit=2, in_flight_limit=8)
    a.publish(NOW, [("p", "k", {"n": n}) for n in range(4)])
    first = Run(lambda: a.consume(NOW + 1, "c"))
    assert hold.reached.wait(20)  # two leases inserted, not committed
    second = Run(lambda: b.consume(NOW + 2, "c"))
    _blocked_or_done(pg_dsn, second)
    hold.release.set()
    got_a, got_b = first.outcome(), second.outcome()  # no KeyError on the lease's primary key
    leased = [lease.event_id for lease in got_a + got_b]
    assert sorted(leased) == ["1:0", "1:1", "1:2", "1:3"]  # each event leased once, none left out
    assert len(b.store.rows("leases")) == 4
    assert b.store.rows("history")[0]["leases_granted"] == 4  # neither pull's count was overwritten
    assert b.store.rows("lease_consumers")[0]["revision"] == 3  # created, then one per pull


def test_two_publishes_take_their_own_seqs(two, pg_dsn):
    a, b, hold = two("publish.before_commit")
    first = Run(lambda: a.publish(NOW, [("p", "k", None)]))
    assert hold.reached.wait(20)
    second = Run(lambda: b.publish(NOW + 1, [("p", "k", None), ("q", "k", None)]))
    _blocked_or_done(pg_dsn, second)
    hold.release.set()
    assert first.outcome() == ["1:0"] and second.outcome() == ["2:0", "2:1"]
    assert [r["seq"] for r in b.store.rows("events")] == [1, 2, 3]
    h = b.store.rows("history")[0]
    assert (h["last_commit"], h["last_seq"]) == (2, 3)


def test_a_pull_and_recovery_expire_one_lease_once(two, pg_dsn):
    a, b, hold = two("recover.before_commit")
    a.add_consumer(NOW, "c", lease_seconds=5.0)
    a.publish(NOW, [("p", "k", None)])
    assert [lease.attempt for lease in b.consume(NOW, "c")] == [1]
    later = NOW + 6 * US  # the lease has expired
    recovery = Run(lambda: a.recover(later))
    assert hold.reached.wait(20)  # the lease deleted and its retry written, not committed
    pull = Run(lambda: b.consume(later + 1, "c"))
    _blocked_or_done(pg_dsn, pull)
    hold.release.set()
    assert recovery.outcome() == 1
    assert [lease.attempt for lease in pull.outcome()] == [2]  # the retry, leased once
    assert len(_kinds(a, b, kind="expired")) == 1  # one expiry, not one per step that saw the lease
    assert b.store.rows("lease_consumers")[0]["revision"] == 4  # created, leased, expired, leased


def test_two_registrations_of_one_consumer_start_it_once(two, pg_dsn):
    a, b, _ = two()
    a.publish(NOW, [("p", "k", None)])
    with psycopg.connect(
        pg_dsn + ("&" if "?" in pg_dsn else "?") + f"options=-csearch_path%3D{a.store.schema}"
    ) as held:
        # a third connection blocks every insert of a consumer until it lets go
        held.execute("LOCK TABLE lease_consumers IN SHARE ROW EXCLUSIVE MODE")
        first = Run(lambda: a.add_consumer(NOW + 1, "c", start="beginning"))
        _blocked_or_done(pg_dsn, first)
        second = Run(lambda: b.add_consumer(NOW + 2, "c", start="end"))
        _blocked_or_done(pg_dsn, second, waits=2)
        held.rollback()
    rows = [first.outcome(), second.outcome()]
    assert rows[0] == rows[1] and rows[0]["start_seq"] == 0  # one consumer, the first registration's
    assert len(_kinds(a, b, kind="consumer_start")) == 1  # started once: the checker sees one life


def _held_connection(pg_dsn: str, schema: str) -> psycopg.Connection:
    """A third connection on the schema: its statements run in one open transaction."""
    return psycopg.connect(pg_dsn + ("&" if "?" in pg_dsn else "?") + f"options=-csearch_path%3D{schema}")


def test_recovery_that_waited_for_an_extension_does_not_expire_the_extended_lease(two, pg_dsn):
    """Recovery reads the expired leases before it locks their consumers; a
    worker's ``in_progress`` that held the consumer meanwhile ran the lease on.
    Recovery expired it all the same (its token had not changed): a false
    expiry, then a second delivery of an event whose worker was still on it."""
    a, b, _ = two()
    a.add_consumer(NOW, "c", lease_seconds=5.0)
    a.publish(NOW, [("p", "k", None)])
    (lease,) = b.consume(NOW, "c")
    later = NOW + 6 * US  # the lease has expired, as read
    with _held_connection(pg_dsn, a.store.schema) as held:
        # the worker's in_progress, as another node runs it: the consumer locked, the lease run on 60 s
        held.execute("SELECT * FROM lease_consumers WHERE consumer = 'c' FOR UPDATE")
        held.execute("UPDATE leases SET expires_at = expires_at + interval '60 seconds' WHERE consumer = 'c'")
        recovery = Run(lambda: a.recover(later))
        _blocked_or_done(pg_dsn, recovery)
        held.commit()
    assert recovery.outcome() == 0
    assert [r["token"] for r in b.store.rows("leases")] == [lease.token]  # still held, as extended
    assert not b.store.rows("retries") and not _kinds(a, b, kind="expired")


def test_retention_that_forgets_a_consumers_rows_waits_for_its_transition_without_deadlock(pg_store, pg_dsn):
    """Retention by age (``limits``, ``interest``) deletes every consumer's rows
    of the events it prunes. It took the history lock first and then the rows,
    while a pull takes the consumer, its rows, then the history: the two
    deadlocked, and PostgreSQL aborted one (a serving process's loop died)."""
    config = LeaseConfig(retention_policy="limits", retention=60.0)
    a = pg_store()
    b = pg_store(a.schema)
    ea = LeaseEngine(a, config, Metrics(), Trace(TRACE))
    eb = LeaseEngine(b, config, Metrics(), Trace(TRACE))
    ea.add_consumer(NOW, "c", lease_seconds=5.0)
    ea.publish(NOW, [("p", "k", None)])
    (lease,) = eb.consume(NOW, "c")
    eb.nack(NOW + 1, "c", lease.event_id, lease.token, lease.incarnation, delay=30.0)  # a retry, due later
    old = NOW + 61 * US  # the event is past retention
    with _held_connection(pg_dsn, a.schema) as held:
        # a pull of another node: the consumer locked, its due retry taken, then (below) the history
        held.execute("SELECT * FROM lease_consumers WHERE consumer = 'c' FOR UPDATE")
        held.execute("DELETE FROM retries WHERE consumer = 'c'")
        retention = Run(lambda: ea.prune_once(old))
        _blocked_or_done(pg_dsn, retention)
        held.execute("SET lock_timeout = '20s'")
        held.execute("SELECT * FROM history FOR UPDATE")  # DeadlockDetected here or in retention, before
        held.commit()
    assert retention.outcome() == 1  # the event pruned, once the pull committed
    assert not b.rows("events") and not b.rows("retries")
