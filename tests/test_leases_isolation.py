"""Isolation (seed 003): "Consumers in sibling named databases remain
isolated." Two named databases in one store, the same consumer names in both:
each has its own log, checkpoints, leases, retention fence and history
incarnation; nothing one does is seen by the other."""

from __future__ import annotations

import pytest

from fanoutsim.designs.leases import LeaseConfig, LeaseEngine
from fanoutsim.designs.leases.checker import check_leases
from fanoutsim.designs.leases.engine import TRACE as LEASE_TRACE
from fanoutsim.designs.leases.simulation import LeaseSimulation
from fanoutsim.designs.leases.tables import TABLES, database_rows, in_database
from fanoutsim.designs.stores import open_store
from fanoutsim.kernel.metrics import Metrics
from fanoutsim.kernel.trace import Trace

T0 = 1_767_225_600_000_000


def t(seconds: float) -> int:
    return T0 + round(seconds * 1_000_000)


@pytest.fixture(params=["memory", "duckdb"])
def store(request, tmp_path):
    s = open_store("memory" if request.param == "memory" else str(tmp_path / "two.duckdb"))
    yield s
    s.close()


def engines(store):
    return (
        LeaseEngine(store, LeaseConfig(), Metrics(), Trace(LEASE_TRACE), database="orders"),
        LeaseEngine(store, LeaseConfig(), Metrics(), Trace(LEASE_TRACE), database="tickets"),
    )


def test_same_consumer_name_in_two_databases_keeps_two_checkpoints(store):
    orders, tickets = engines(store)
    for e in (orders, tickets):
        e.add_consumer(t(0), "indexer", batch_limit=8, in_flight_limit=8)
    orders.publish(t(0), [("p", "k", i) for i in range(5)])
    tickets.publish(t(0), [("p", "k", 9)])
    got = orders.consume(t(1), "indexer")
    assert [x.event_id for x in got] == [f"1:{i}" for i in range(5)]
    for x in got:
        assert orders.ack(t(2), "indexer", x.event_id, x.token, x.incarnation) == "acked"
    # a shared checkpoint would put tickets' indexer at seq 5, past its one event
    assert orders.status(t(2), "indexer")["checkpoints"] == {"p": 5}
    assert tickets.status(t(2), "indexer")["checkpoints"] == {}
    (only,) = tickets.consume(t(3), "indexer")
    assert (only.event_id, only.payload) == ("1:0", "9")
    # an ack of orders' lease in tickets' database finds no lease there
    assert tickets.ack(t(3), "indexer", "1:1", got[1].token, 1) == "no_lease"
    assert tickets.ack(t(3), "indexer", only.event_id, only.token, only.incarnation) == "acked"
    assert tickets.status(t(3), "indexer")["checkpoints"] == {"p": 1}
    assert orders.status(t(3), "indexer")["checkpoints"] == {"p": 5}


def test_restore_and_retire_in_one_database_leave_the_other_alone(store):
    orders, tickets = engines(store)
    for e in (orders, tickets):
        e.add_consumer(t(0), "indexer")
        e.publish(t(0), [("p", "k", 1)])
    (mine,) = tickets.consume(t(1), "indexer")
    assert orders.restore(t(1)) == 2  # orders' incarnation only
    assert tickets.status(t(1), "indexer")["incarnation"] == 1
    assert tickets.ack(t(2), "indexer", mine.event_id, mine.token, mine.incarnation) == "acked"
    assert orders.retire(t(2), "indexer") == "applied"
    assert orders.status(t(2), "indexer") is None
    assert tickets.status(t(2), "indexer")["checkpoints"] == {"p": 1}


def test_the_default_database_shows_nothing_of_named_ones(store):
    orders, _ = engines(store)
    orders.add_consumer(t(0), "indexer")
    orders.publish(t(0), [("p", "k", 1)])
    assert all(store.rows(tb) == [] for tb in TABLES if tb != "history")
    assert [r["event_id"] for r in database_rows(store, "events", "orders")] == ["1:0"]
    assert database_rows(store, "events", "tickets") == []  # a database used for the first time is empty


def test_two_simulations_share_one_store_without_cross_talk():
    store = open_store("memory")
    a = LeaseSimulation(seed=1, store=store, database="orders")
    b = LeaseSimulation(seed=1, store=store, database="tickets")
    for sim, n in ((a, 6), (b, 2)):
        sim.register_consumer("indexer")
        for i in range(n):
            sim.publish("p", "k", i)
    a.run(until=3.0)
    b.run(until=3.0)
    assert a.checkpoints()["seq"].tolist() == [6]
    assert b.checkpoints()["seq"].tolist() == [2]
    ra, rb = check_leases(a), check_leases(b)
    assert (ra.total["published"], ra.total["delivered"], ra.total["lost"]) == (6, 6, 0)
    assert (rb.total["published"], rb.total["delivered"], rb.total["lost"]) == (2, 2, 0)


def test_database_names_are_checked_and_a_late_switch_refused():
    store = open_store("memory")
    with pytest.raises(ValueError, match="database must be a name of lowercase letters"):
        LeaseEngine(store, LeaseConfig(), Metrics(), Trace(LEASE_TRACE), database="Orders; DROP")
    with pytest.raises(RuntimeError, match="must come first"):
        with store.transaction() as tx:
            tx.set_history({"incarnation": 1, "last_commit": 0, "last_seq": 0, "leases_granted": 0})
            tx.use_database("orders")
    with in_database(store, "orders") as tx:
        assert tx.get_history()["incarnation"] == 1


def test_a_named_database_survives_reopening_its_duckdb_file(tmp_path):
    path = str(tmp_path / "named.duckdb")
    store = open_store(path)
    e = LeaseEngine(store, LeaseConfig(), Metrics(), Trace(LEASE_TRACE), database="orders")
    e.add_consumer(t(0), "indexer")
    e.publish(t(0), [("p", "k", 1), ("p", "k", 2)])
    (x, y) = e.consume(t(1), "indexer")
    e.ack(t(1), "indexer", x.event_id, x.token, x.incarnation)
    store.close()
    again = open_store(path)
    try:
        assert again.rows("events") == []  # the default database: empty
        assert [r["event_id"] for r in database_rows(again, "events", "orders")] == ["1:0", "1:1"]
        e2 = LeaseEngine(again, LeaseConfig(), Metrics(), Trace(LEASE_TRACE), database="orders")
        st = e2.status(t(2), "indexer")
        assert st["checkpoints"] == {"p": 1} and st["in_flight"] == [y.event_id]
    finally:
        again.close()


@pytest.mark.parametrize("ending", ["exception", "failed write"])
def test_a_cleared_database_comes_back_whole_when_its_transaction_rolls_back(store, ending):
    a, b = engines(store)
    a.publish(t(0), [("p", "k", 1), ("p", "k", 2)])
    b.publish(t(0), [("p", "k", 3)])
    other = database_rows(store, "events", "tickets")[0]
    with pytest.raises(ValueError if ending == "exception" else KeyError):
        with in_database(store, "orders") as tx:
            tx.clear_database()
            assert tx.get_event("1:0") is None  # cleared, inside the transaction
            if ending == "exception":
                raise ValueError("roll back")
            tx.insert_event(dict(other))
            tx.insert_event(dict(other))  # a duplicate: the write fails, and the transaction with it
    with in_database(store, "orders") as tx:
        assert tx.get_event("1:0") is not None and tx.event_bounds() == (1, 2)
    a.publish(t(1), [("p", "k", 4)])  # the next write lands in the tables that came back
    assert [r["seq"] for r in database_rows(store, "events", "orders")] == [1, 2, 3]
    assert [r["seq"] for r in database_rows(store, "events", "tickets")] == [1]
