"""One conformance suite for the store interface, run unchanged on every adapter.

Every test talks to the store only through ``store.transaction()``, the ``Tx``
methods and ``store.rows()``, and asserts what a caller can observe: rows,
orderings, counts, errors. The property test at the end applies one random
sequence of operations — rolled-back transactions and failed writes among
them — to the memory adapter and to DuckDB, and to PostgreSQL, side by side
and requires them to agree after every step.
"""

from __future__ import annotations

import random
import threading
import uuid

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fanoutsim.designs.stores import TABLES, DuckDBStore, MemoryStore
from fanoutsim.faults import Crash

FIRINGS, SUBS, EXECS = "reactor_firings", "reactor_subscriptions", "workflow_executions"

# epoch microseconds far from "now": 0001-01-01, 9999-12-31T23:59:59.999999, around the epoch
FAR_PAST = -62_135_596_800_000_000
FAR_FUTURE = 253_402_300_799_999_999
TIMESTAMPS = [FAR_PAST, -1, 0, 1, 1_767_225_600_000_001, FAR_FUTURE]


@pytest.fixture(params=["memory", "duckdb-memory", "duckdb-file", "postgres"])
def db(request, tmp_path):
    if request.param == "memory":
        s = MemoryStore()
    elif request.param == "duckdb-memory":
        s = DuckDBStore(":memory:")
    elif request.param == "duckdb-file":
        s = DuckDBStore(str(tmp_path / "contract.duckdb"))
    else:
        s = request.getfixturevalue("pg_store")()
    yield s
    s.close()


# -- rows -------------------------------------------------------------------------

_ids = random.Random(20260101)


def new_id() -> str:
    """A random-looking UUID string, so ordering ties are broken by real ids."""
    return str(uuid.UUID(int=_ids.getrandbits(128), version=4))


def firing(fired_at, reactor="r1", tenant="t1", payload=b"\x00payload\xff", fid=None, created_at=None) -> dict:
    return {
        "id": fid or new_id(),
        "reactor_name": reactor,
        "tenant_id": tenant,
        "payload": payload,
        "fired_at": fired_at,
        "created_at": fired_at if created_at is None else created_at,
    }


def sub(reactor="r1", workflow="w1", tenant="t1", *, enabled=True, watermark=None, sid=None, **extra) -> dict:
    row = {
        "id": sid or new_id(),
        "reactor_name": reactor,
        "workflow_name": workflow,
        "tenant_id": tenant,
        "enabled": enabled,
        "predicate": None,
        "last_seen_fired_at": watermark,
        "last_seen_firing_id": None,
        "predicate_error_count": 0,
        "predicate_error_firing_id": None,
        "last_predicate_error": None,
        "predicate_degraded": False,
        "created_at": 100,
        "updated_at": 100,
    }
    row.update(extra)
    return row


def execution(dispatched_at, status="pending", eid=None, workflow="w1", tenant="t1") -> dict:
    return {
        "id": eid or new_id(),
        "workflow_name": workflow,
        "tenant_id": tenant,
        "context": '{"reactor_firing_id":"x"}',
        "status": status,
        "dispatched_at": dispatched_at,
        "claimed_at": None,
        "finished_at": None,
    }


def add(db, *, firings=(), subs=(), execs=()) -> None:
    with db.transaction() as tx:
        for r in firings:
            tx.insert_firing(r)
        for r in subs:
            tx.insert_subscription(r)
        for r in execs:
            tx.insert_execution(r)


def snapshot(db) -> dict[str, list[dict]]:
    return {t: db.rows(t) for t in TABLES}


def fetch(db, reactor="r1", tenant="t1", after=None, limit=100, after_id=None, until=None) -> list[dict]:
    with db.transaction() as tx:
        return tx.fetch_firings(reactor, tenant, after, limit, after_id=after_id, until=until)


def fired_ats(rows) -> list[int]:
    return [r["fired_at"] for r in rows]


def ids(rows) -> list[str]:
    return [r["id"] for r in rows]


def prune(db, cutoff, conservative, limit=None) -> int:
    """How many firings one prune deleted (its ids are checked where order matters)."""
    with db.transaction() as tx:
        return len(tx.prune_firings(cutoff, conservative, limit))


# -- reactor_firings: insert, fetch, count ---------------------------------------------


def test_writes_counts_every_committed_write_and_no_rollback(db):
    """``store.writes`` grows with each committed transaction that wrote, so a
    runtime asleep until a row appears can tell that nothing has changed."""
    before = db.writes
    with db.transaction() as tx:
        tx.insert_firing(firing(10))
    assert db.writes == before + 1
    with pytest.raises(Crash):
        with db.transaction() as tx:
            tx.insert_execution(execution(11))
            raise Crash("test.point")
    assert db.writes == before + 1  # rolled back: nothing changed
    with db.transaction() as tx:
        tx.has_pending_executions()
    assert db.writes in (before + 1, before + 2)  # a read may count, never a lost write
    seen = db.writes
    with db.transaction() as tx:
        tx.insert_execution(execution(12))
    assert db.writes == seen + 1


def test_fetch_returns_exactly_the_inserted_row(db):
    row = firing(1_000, payload=b"\x00\x01\x02")
    add(db, firings=[row])
    assert fetch(db) == [row]
    assert db.rows(FIRINGS) == [row]


def test_fetch_is_strictly_after_the_watermark(db):
    rows = [firing(t) for t in (10, 20, 20, 30)]
    add(db, firings=rows)
    assert fired_ats(fetch(db, after=None)) == [10, 20, 20, 30]
    assert fired_ats(fetch(db, after=9)) == [10, 20, 20, 30]
    assert fired_ats(fetch(db, after=10)) == [20, 20, 30]
    assert fired_ats(fetch(db, after=19)) == [20, 20, 30]
    assert fired_ats(fetch(db, after=20)) == [30]  # both ties at 20 are behind a watermark of 20
    assert fetch(db, after=30) == []


def test_fetch_limit(db):
    add(db, firings=[firing(t) for t in range(1, 8)])
    assert fired_ats(fetch(db, limit=3)) == [1, 2, 3]
    assert fired_ats(fetch(db, after=3, limit=3)) == [4, 5, 6]
    assert fired_ats(fetch(db, after=6, limit=3)) == [7]
    assert fetch(db, limit=0) == []
    with pytest.raises(ValueError):
        fetch(db, limit=-1)


def test_fetch_orders_by_fired_at_then_id(db):
    rows = [firing(50) for _ in range(6)] + [firing(40), firing(60)]
    random.Random(1).shuffle(rows)
    add(db, firings=rows)
    want = sorted(rows, key=lambda r: (r["fired_at"], r["id"]))
    assert fetch(db) == want
    # a limit that cuts through the tie takes the smallest ids
    assert ids(fetch(db, limit=3)) == ids(want[:3])
    assert db.rows(FIRINGS) == want


def test_fetch_sees_only_its_stream(db):
    mine = [firing(t, "r1", "t1") for t in (1, 4)]
    others = [firing(2, "r1", "t2"), firing(3, "r2", "t1"), firing(5, "r2", "t2")]
    add(db, firings=mine + others)
    assert fetch(db, "r1", "t1") == mine
    assert ids(fetch(db, "r1", "t2")) == [others[0]["id"]]
    assert ids(fetch(db, "r2", "t1")) == [others[1]["id"]]
    assert fetch(db, "r3", "t1") == []
    assert fetch(db, "r1", "t3") == []


def test_count_firings(db):
    with db.transaction() as tx:
        assert tx.count_firings() == 0
    add(db, firings=[firing(1), firing(2, "r2"), firing(3, "r1", "t2")])
    with db.transaction() as tx:
        assert tx.count_firings() == 3
        tx.insert_firing(firing(4))
        assert tx.count_firings() == 4  # a transaction sees its own writes


def test_duplicate_firing_id_raises(db):
    row = firing(1)
    add(db, firings=[row])
    with pytest.raises(KeyError):
        add(db, firings=[firing(2, fid=row["id"])])
    assert db.rows(FIRINGS) == [row]


# -- reactor_firings: prune ------------------------------------------------------------


def test_prune_ttl_deletes_strictly_older_than_cutoff_whatever_the_watermarks(db):
    rows = [firing(t) for t in (10, 20, 30, 40)]
    add(db, firings=rows, subs=[sub(watermark=None), sub(workflow="w2", watermark=5)])
    assert prune(db, 30, conservative=False) == 2
    assert fired_ats(db.rows(FIRINGS)) == [30, 40]  # fired_at == cutoff is kept
    assert prune(db, 30, conservative=False) == 0


def test_prune_conservative_null_watermark_holds_its_stream(db):
    held = [firing(t, "r1", "t1") for t in (10, 20)]
    free = [firing(t, "r2", "t1") for t in (10, 20)]
    add(db, firings=held + free, subs=[sub("r1", "w1", "t1", watermark=None), sub("r1", "w2", "t1", watermark=99)])
    assert prune(db, 100, conservative=True) == 2
    assert db.rows(FIRINGS) == sorted(held, key=lambda r: (r["fired_at"], r["id"]))


def test_prune_conservative_disabled_subscription_does_not_hold(db):
    add(db, firings=[firing(10), firing(20)], subs=[sub(enabled=False, watermark=None)])
    assert prune(db, 100, conservative=True) == 2
    assert db.rows(FIRINGS) == []


def test_prune_conservative_other_streams_subscriptions_do_not_matter(db):
    add(
        db,
        firings=[firing(10, "r1", "t1"), firing(20, "r1", "t1")],
        subs=[
            sub("r1", "w1", "t2", watermark=None),
            sub("r2", "w1", "t1", watermark=None),
            sub("r2", "w2", "t2", watermark=0),
        ],
    )
    assert prune(db, 100, conservative=True) == 2


def test_prune_conservative_stops_at_the_slowest_watermark(db):
    rows = [firing(t) for t in (10, 20, 30, 40, 50)]
    add(
        db,
        firings=rows,
        subs=[
            sub(workflow="w1", watermark=30),
            sub(workflow="w2", watermark=20),
            sub(workflow="w3", watermark=None, enabled=False),
        ],
    )
    # a firing at the watermark has been seen; one past it has not
    assert prune(db, 45, conservative=True) == 2
    assert fired_ats(db.rows(FIRINGS)) == [30, 40, 50]
    # the cutoff still bounds it when every watermark is past it
    with db.transaction() as tx:
        for s in tx.list_subscriptions():
            tx.update_subscription(s["id"], {"last_seen_fired_at": 50})
    assert prune(db, 45, conservative=True) == 2
    assert fired_ats(db.rows(FIRINGS)) == [50]


def test_prune_conservative_watermark_inside_a_tie(db):
    tied = [firing(20) for _ in range(4)]
    add(db, firings=[firing(10)] + tied + [firing(30)], subs=[sub(watermark=20)])
    assert prune(db, 100, conservative=True) == 5  # every firing at the watermark goes
    assert fired_ats(db.rows(FIRINGS)) == [30]


@pytest.mark.parametrize("conservative", [False, True])
def test_prune_limit_deletes_oldest_first_across_streams(db, conservative):
    rows = [
        firing(10, "r2", "t1"),
        firing(20, "r1", "t1"),
        firing(30, "r1", "t2"),
        firing(40, "r2", "t1"),
        firing(50, "r1", "t1"),
    ]
    tied = [firing(25, "r1", "t1"), firing(25, "r2", "t1"), firing(25, "r1", "t2")]
    everything = sorted(rows + tied, key=lambda r: (r["fired_at"], r["id"]))
    add(db, firings=rows + tied)
    assert prune(db, 1000, conservative, limit=3) == 3
    assert db.rows(FIRINGS) == everything[3:]
    assert prune(db, 1000, conservative, limit=2) == 2  # cuts through the tie at 25 by id
    assert db.rows(FIRINGS) == everything[5:]
    assert prune(db, 1000, conservative, limit=0) == 0
    assert prune(db, 1000, conservative, limit=None) == 3
    assert db.rows(FIRINGS) == []
    with pytest.raises(ValueError):
        prune(db, 1000, conservative, limit=-1)


def test_prune_returns_the_deleted_ids_and_count_firings_agrees(db):
    fs_ = [firing(t, r, tn) for t in range(1, 6) for r in ("r1", "r2") for tn in ("t1", "t2")]
    add(db, firings=fs_)
    with db.transaction() as tx:
        assert tx.count_firings() == 20
        deleted = tx.prune_firings(4, conservative=False)
        assert deleted == [f["id"] for f in sorted(fs_, key=lambda f: (f["fired_at"], f["id"])) if f["fired_at"] < 4]
        assert tx.count_firings() == 8
    assert len(db.rows(FIRINGS)) == 8


# -- reactor_subscriptions -----------------------------------------------------------


def test_subscription_insert_and_get(db):
    row = sub("r1", "w1", "t1", predicate="payload.x > 1", watermark=123, created_at=5, updated_at=6)
    add(db, subs=[row])
    with db.transaction() as tx:
        assert tx.get_subscription("r1", "w1", "t1") == row
        assert tx.get_subscription("r1", "w1", "t2") is None
        assert tx.get_subscription("r1", "w2", "t1") is None
        assert tx.get_subscription("r2", "w1", "t1") is None


def test_subscription_update(db):
    row = sub()
    add(db, subs=[row])
    firing_id = new_id()
    changes = {
        "enabled": False,
        "predicate": "payload.p > 100",
        "last_seen_fired_at": 77,
        "predicate_error_count": 3,
        "predicate_error_firing_id": firing_id,
        "last_predicate_error": "no such key",
        "predicate_degraded": True,
        "updated_at": 200,
    }
    with db.transaction() as tx:
        tx.update_subscription(row["id"], changes)
        assert tx.get_subscription("r1", "w1", "t1") == {**row, **changes}
    assert db.rows(SUBS) == [{**row, **changes}]
    # back to NULLs
    nulls = {
        "predicate": None,
        "last_seen_fired_at": None,
        "predicate_error_firing_id": None,
        "last_predicate_error": None,
    }
    with db.transaction() as tx:
        tx.update_subscription(row["id"], nulls)
        tx.update_subscription(row["id"], {})  # nothing to change
    assert db.rows(SUBS) == [{**row, **changes, **nulls}]


def test_subscription_update_of_a_missing_id_changes_nothing(db):
    add(db, subs=[sub()])
    before = snapshot(db)
    with db.transaction() as tx:
        tx.update_subscription(new_id(), {"enabled": False})
    assert snapshot(db) == before


def test_subscription_update_refuses_unknown_and_identity_columns(db):
    row = sub()
    add(db, subs=[row])
    with pytest.raises(KeyError):
        with db.transaction() as tx:
            tx.update_subscription(row["id"], {"enabeld": False})
    for col, value in [("tenant_id", "t9"), ("reactor_name", "r9"), ("workflow_name", "w9"), ("id", new_id())]:
        with pytest.raises(ValueError):
            with db.transaction() as tx:
                tx.update_subscription(row["id"], {col: value})
    assert db.rows(SUBS) == [row]
    with db.transaction() as tx:
        assert tx.get_subscription("r1", "w1", "t1") == row


def test_subscription_delete(db):
    a, b = sub(workflow="w1"), sub(workflow="w2")
    add(db, subs=[a, b])
    with db.transaction() as tx:
        assert tx.delete_subscription(a["id"]) is True
        assert tx.delete_subscription(a["id"]) is False
        assert tx.delete_subscription(new_id()) is False
        assert tx.get_subscription("r1", "w1", "t1") is None
    assert db.rows(SUBS) == [b]
    # the triple is free again, even within one transaction
    with db.transaction() as tx:
        assert tx.delete_subscription(b["id"]) is True
        again = sub(workflow="w2")
        tx.insert_subscription(again)
    assert db.rows(SUBS) == [again]


def test_list_subscriptions_order_and_filters(db):
    rows = [
        sub(r, w, t, enabled=(r, w) != ("r1", "w2"))
        for t in ("t2", "t1", "t10")
        for r in ("r2", "r1")
        for w in ("w2", "w1", "W0")
    ]
    random.Random(2).shuffle(rows)
    add(db, subs=rows)
    key = lambda r: (r["tenant_id"], r["reactor_name"], r["workflow_name"])  # noqa: E731
    want = sorted(rows, key=key)
    with db.transaction() as tx:
        assert tx.list_subscriptions() == want
        assert tx.list_subscriptions(tenant="t1") == [r for r in want if r["tenant_id"] == "t1"]
        assert tx.list_subscriptions(enabled_only=True) == [r for r in want if r["enabled"]]
        assert tx.list_subscriptions(tenant="t10", enabled_only=True) == [
            r for r in want if r["tenant_id"] == "t10" and r["enabled"]
        ]
        assert tx.list_subscriptions(tenant="nobody") == []
    assert db.rows(SUBS) == want


def test_list_subscriptions_orders_text_by_code_point(db):
    names = ["b", "B", "a", "é", "z", "Z", "aa", "a b", "日本", "ä"]
    add(db, subs=[sub(tenant=n) for n in names])
    with db.transaction() as tx:
        assert [r["tenant_id"] for r in tx.list_subscriptions()] == sorted(names)


def test_subscription_unique_triple(db):
    add(db, subs=[sub("r1", "w1", "t1")])
    with pytest.raises(KeyError):
        add(db, subs=[sub("r1", "w1", "t1")])
    with pytest.raises(KeyError):  # same id, other triple
        add(db, subs=[sub("r1", "w2", "t1", sid=db.rows(SUBS)[0]["id"])])
    add(db, subs=[sub("r1", "w1", "t2"), sub("r1", "w2", "t1"), sub("r2", "w1", "t1")])
    assert len(db.rows(SUBS)) == 4


def test_a_failed_write_fails_the_whole_transaction(db):
    """SQL aborts a transaction on a constraint violation; swallowing the
    KeyError does not bring it back, and nothing in it is committed."""
    dup = sub()
    add(db, subs=[dup])
    before = snapshot(db)
    with pytest.raises(RuntimeError):
        with db.transaction() as tx:
            tx.insert_firing(firing(1))
            try:
                tx.insert_subscription(sub(sid=new_id()))  # the same triple
            except KeyError:
                pass
            with pytest.raises(RuntimeError):
                tx.count_firings()
            with pytest.raises(RuntimeError):
                tx.insert_execution(execution(1))
    assert snapshot(db) == before
    add(db, firings=[firing(2)])  # the store itself is fine
    assert len(db.rows(FIRINGS)) == 1


# -- workflow_executions -------------------------------------------------------------


def claim(db, now, limit) -> list[dict]:
    with db.transaction() as tx:
        return tx.claim_executions(now, limit)


def test_claim_oldest_first_by_dispatched_at_then_id(db):
    rows = [execution(t) for t in (30, 10, 20, 20, 20, 40)]
    add(db, execs=rows)
    order = sorted(rows, key=lambda r: (r["dispatched_at"], r["id"]))
    first = claim(db, 1000, 2)
    assert ids(first) == ids(order[:2])
    assert all(r["status"] == "running" and r["claimed_at"] == 1000 for r in first)
    assert first == [{**r, "status": "running", "claimed_at": 1000} for r in order[:2]]
    second = claim(db, 1001, 3)
    assert ids(second) == ids(order[2:5])
    assert ids(claim(db, 1002, 10)) == ids(order[5:])
    assert claim(db, 1003, 10) == []  # claimed rows are not claimed again
    assert [(r["status"], r["claimed_at"]) for r in db.rows(EXECS)] == [("running", 1000)] * 2 + [
        ("running", 1001)
    ] * 3 + [("running", 1002)]


def test_claim_limit_and_only_pending(db):
    rows = [execution(1, "running"), execution(2, "completed"), execution(3, "failed"), execution(4), execution(5)]
    add(db, execs=rows)
    assert claim(db, 10, 0) == []
    with pytest.raises(ValueError):
        claim(db, 10, -1)
    assert ids(claim(db, 10, 5)) == ids(rows[3:])


def test_finish_execution(db):
    a, b = execution(1), execution(2)
    add(db, execs=[a, b])
    claim(db, 5, 1)
    with db.transaction() as tx:
        tx.finish_execution(a["id"], 9, "completed")
        tx.finish_execution(new_id(), 9, "completed")  # no such row: nothing happens
    assert db.rows(EXECS) == [{**a, "status": "completed", "claimed_at": 5, "finished_at": 9}, {**b}]
    # a row finished while still pending is done: nobody claims it later
    with db.transaction() as tx:
        tx.finish_execution(b["id"], 10, "failed")
    assert claim(db, 11, 10) == []
    assert db.rows(EXECS)[1] == {**b, "status": "failed", "finished_at": 10}


def test_duplicate_execution_id_raises(db):
    row = execution(1)
    add(db, execs=[row])
    with pytest.raises(KeyError):
        add(db, execs=[execution(2, eid=row["id"])])
    assert db.rows(EXECS) == [row]


def test_count_executions(db):
    rows = [execution(1, "running"), execution(2, "completed"), execution(3, "failed"), execution(4)]
    add(db, execs=rows)
    with db.transaction() as tx:
        assert tx.count_executions() == 4
        tx.insert_execution(execution(5))
        tx.finish_execution(rows[3]["id"], 9, "completed")
        assert tx.count_executions() == 5  # a transaction sees its own writes; a finish keeps the row
    claim(db, 10, 10)
    with db.transaction() as tx:
        assert tx.count_executions() == 5


def test_a_finished_execution_finished_again_keeps_its_row_and_a_rollback_its_first_finish(db):
    """A finish of a finished row is an UPDATE like any other: the row's status
    and finished_at change, claimed_at stays, a pending status makes it
    claimable again; its id stays taken; a rollback puts back what was."""
    a, b, c = execution(1), execution(2), execution(3)
    add(db, execs=[a, b, c])
    claim(db, 5, 3)
    for x in (a, b, c):
        with db.transaction() as tx:
            tx.finish_execution(x["id"], 9, "completed")
    before = db.rows(EXECS)
    with pytest.raises(RuntimeError):
        with db.transaction() as tx:
            tx.finish_execution(b["id"], 12, "failed")
            tx.finish_execution(a["id"], 12, "pending")
            raise RuntimeError("rolled back")
    assert db.rows(EXECS) == before and claim(db, 13, 10) == []
    with db.transaction() as tx:
        tx.finish_execution(b["id"], 20, "failed")
    assert db.rows(EXECS)[1] == {**b, "status": "failed", "claimed_at": 5, "finished_at": 20}
    with db.transaction() as tx:
        tx.finish_execution(a["id"], 21, "pending")
    assert ids(claim(db, 22, 10)) == [a["id"]]
    with pytest.raises(KeyError):
        add(db, execs=[execution(4, eid=c["id"])])
    assert [(r["id"], r["status"]) for r in db.rows(EXECS)] == [
        (a["id"], "running"),
        (b["id"], "failed"),
        (c["id"], "completed"),
    ]


# -- rows() ----------------------------------------------------------------------------


def test_rows_of_every_table_in_contract_order(db):
    fs = [firing(t, r, tn) for t in (3, 1, 2, 2) for r, tn in (("r2", "t1"), ("r1", "t2"))]
    ss = [sub(r, w, t) for t in ("t2", "t1") for r in ("r2", "r1") for w in ("w2", "w1")]
    es = [execution(t) for t in (5, 1, 3, 3, 3)]
    for rows in (fs, ss, es):
        random.Random(3).shuffle(rows)
    add(db, firings=fs, subs=ss, execs=es)
    assert db.rows(FIRINGS) == sorted(fs, key=lambda r: (r["fired_at"], r["id"]))
    assert db.rows(SUBS) == sorted(ss, key=lambda r: (r["tenant_id"], r["reactor_name"], r["workflow_name"]))
    assert db.rows(EXECS) == sorted(es, key=lambda r: (r["dispatched_at"], r["id"]))
    for table, cols in TABLES.items():
        assert all(tuple(r) == cols for r in db.rows(table))
    with pytest.raises(KeyError):
        db.rows("no_such_table")


def test_rows_inside_the_open_transaction_raises(db):
    with db.transaction():
        with pytest.raises(RuntimeError):
            db.rows(FIRINGS)
    assert db.rows(FIRINGS) == []


def test_rows_from_another_thread_sees_only_committed_rows(db):
    kept = firing(1)
    add(db, firings=[kept])
    seen: list = []
    reader = threading.Thread(target=lambda: seen.append(db.rows(FIRINGS)), daemon=True)
    with pytest.raises(ValueError):
        with db.transaction() as tx:
            tx.insert_firing(firing(2))
            reader.start()
            reader.join(0.2)  # it waits for the transaction to end
            raise ValueError("roll back")
    reader.join(10)
    assert seen == [[kept]]


# -- exact values ------------------------------------------------------------------------


def test_timestamps_round_trip_exactly(db):
    fs = [firing(t, created_at=t) for t in TIMESTAMPS]
    ss = [sub(workflow=f"w{i}", watermark=t, created_at=t, updated_at=t) for i, t in enumerate(TIMESTAMPS)]
    es = [execution(t) for t in TIMESTAMPS]
    add(db, firings=fs, subs=ss + [sub(workflow="null", watermark=None)], execs=es)
    assert db.rows(FIRINGS) == fs  # ordered too: far past first
    assert fetch(db, after=FAR_PAST) == fs[1:]
    assert fetch(db, after=FAR_FUTURE - 1) == fs[-1:]
    with db.transaction() as tx:
        for s in ss:
            assert tx.get_subscription(s["reactor_name"], s["workflow_name"], s["tenant_id"]) == s
        assert tx.get_subscription("r1", "null", "t1")["last_seen_fired_at"] is None
    assert db.rows(EXECS) == es
    assert all(r["claimed_at"] is None and r["finished_at"] is None for r in db.rows(EXECS))
    claimed = claim(db, FAR_FUTURE, 100)
    assert {r["claimed_at"] for r in claimed} == {FAR_FUTURE}
    with db.transaction() as tx:
        tx.finish_execution(es[0]["id"], FAR_PAST, "completed")
        tx.update_subscription(ss[0]["id"], {"last_seen_fired_at": FAR_FUTURE, "updated_at": FAR_PAST})
    assert db.rows(EXECS)[0]["finished_at"] == FAR_PAST
    assert [r for r in db.rows(SUBS) if r["id"] == ss[0]["id"]][0]["last_seen_fired_at"] == FAR_FUTURE


def test_timestamps_compare_as_integers_at_microsecond_resolution(db):
    add(db, firings=[firing(t) for t in (5, 6, 7)], subs=[sub(watermark=6)])
    assert fired_ats(fetch(db, after=5)) == [6, 7]
    assert fired_ats(fetch(db, after=6)) == [7]
    assert prune(db, 7, conservative=True) == 2
    assert prune(db, 8, conservative=True) == 0  # 7 is past the watermark


@pytest.mark.parametrize(
    "payload", [b"", b"\x00", b"\x00" * 1000, bytes(range(256)), b"\xff\xfe\x00\x80", "é".encode() + b"\x00\x00"]
)
def test_payload_bytes_round_trip(db, payload):
    row = firing(1, payload=payload)
    add(db, firings=[row])
    (got,) = fetch(db)
    assert type(got["payload"]) is bytes and got["payload"] == payload
    assert db.rows(FIRINGS)[0]["payload"] == payload


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=st.binary(max_size=300))
def test_payload_arbitrary_bytes_round_trip(db, payload):
    row = firing(1, payload=payload)
    add(db, firings=[row])
    try:
        assert fetch(db)[0]["payload"] == payload
    finally:
        with db.transaction() as tx:
            tx.prune_firings(10**18, conservative=False)


# -- transactions --------------------------------------------------------------------------


def _base(db):
    """Committed state every rollback test starts from."""
    s1, s2 = sub(watermark=15), sub(workflow="w2", watermark=None, enabled=False)
    e1, e2 = execution(1), execution(2)
    add(db, firings=[firing(10), firing(20), firing(30, "r2")], subs=[s1, s2], execs=[e1, e2])
    return s1, e1


# each: a write, and a read inside the same transaction showing it took effect
WRITES = {
    "insert_firing": lambda tx, s, e: (tx.insert_firing(firing(40)), tx.count_firings() == 4),
    "insert_subscription": lambda tx, s, e: (
        tx.insert_subscription(sub(workflow="w3")),
        tx.get_subscription("r1", "w3", "t1") is not None,
    ),
    "update_subscription": lambda tx, s, e: (
        tx.update_subscription(s["id"], {"last_seen_fired_at": 99}),
        tx.get_subscription("r1", "w1", "t1")["last_seen_fired_at"] == 99,
    ),
    "delete_subscription": lambda tx, s, e: (None, tx.delete_subscription(s["id"])),
    "prune_firings": lambda tx, s, e: (None, len(tx.prune_firings(100, conservative=False)) == 3),
    "insert_execution": lambda tx, s, e: (
        tx.insert_execution(execution(0)),
        tx.claim_executions(5, 1)[0]["dispatched_at"] == 0,
    ),
    "claim_executions": lambda tx, s, e: (None, len(tx.claim_executions(5, 10)) == 2),
    "finish_execution": lambda tx, s, e: (
        tx.finish_execution(e["id"], 7, "completed"),
        [r["id"] for r in tx.claim_executions(8, 10)] != [e["id"]],
    ),
}


@pytest.mark.parametrize("error", [ValueError("boom"), Crash("test.point")], ids=["Exception", "Crash"])
@pytest.mark.parametrize("write", sorted(WRITES))
def test_rollback_undoes_every_kind_of_write(db, write, error):
    s, e = _base(db)
    before = snapshot(db)
    with pytest.raises(type(error)):
        with db.transaction() as tx:
            _, took_effect = WRITES[write](tx, s, e)
            assert took_effect
            raise error
    assert snapshot(db) == before
    # the store is still usable, and the same write now commits
    with db.transaction() as tx:
        _, took_effect = WRITES[write](tx, s, e)
        assert took_effect
    assert snapshot(db) != before


@pytest.mark.parametrize("error", [ValueError("boom"), Crash("test.point")], ids=["Exception", "Crash"])
def test_rollback_undoes_a_transaction_of_every_write(db, error):
    s, e = _base(db)
    before = snapshot(db)
    with pytest.raises(type(error)):
        with db.transaction() as tx:
            for name in sorted(WRITES):
                if name not in ("delete_subscription", "claim_executions"):  # they'd remove what others use
                    WRITES[name](tx, s, e)
            WRITES["claim_executions"](tx, s, e)
            WRITES["delete_subscription"](tx, s, e)
            raise error
    assert snapshot(db) == before
    with db.transaction() as tx:
        assert tx.count_firings() == 3
        assert [r["id"] for r in tx.claim_executions(9, 10)] == ids(before[EXECS])


def test_nested_transaction_raises(db):
    with db.transaction() as tx:
        tx.insert_firing(firing(1))
        with pytest.raises(RuntimeError):
            with db.transaction():
                pass
        tx.insert_firing(firing(2))
    assert fired_ats(db.rows(FIRINGS)) == [1, 2]
    # and an outer block that lets it escape rolls back
    with pytest.raises(RuntimeError):
        with db.transaction() as tx:
            tx.insert_firing(firing(3))
            with db.transaction():
                pass
    assert fired_ats(db.rows(FIRINGS)) == [1, 2]
    add(db, firings=[firing(4)])
    assert fired_ats(db.rows(FIRINGS)) == [1, 2, 4]


def test_rows_reads_committed_rows_only(db):
    add(db, firings=[firing(1)])
    seen = []
    with db.transaction() as tx:
        tx.insert_firing(firing(2))
        with pytest.raises(RuntimeError, match="outside the open transaction"):
            db.rows(FIRINGS)
        # another thread waits for the commit instead of reading a half-done transaction
        reader = threading.Thread(target=lambda: seen.append(fired_ats(db.rows(FIRINGS))))
        reader.start()
        reader.join(0.2)
        assert reader.is_alive() and not seen
    reader.join(5)
    assert seen == [[1, 2]]


# -- the adapters side by side ---------------------------------------------------------------

_pool = random.Random(7)
FIRING_IDS = [str(uuid.UUID(int=_pool.getrandbits(128), version=4)) for _ in range(10)]
SUB_IDS = [str(uuid.UUID(int=_pool.getrandbits(128), version=4)) for _ in range(6)]
EXEC_IDS = [str(uuid.UUID(int=_pool.getrandbits(128), version=4)) for _ in range(10)]
REACTORS, TENANTS, WORKFLOWS = ("r1", "r2"), ("a", "b"), ("w1", "w2")
times = st.integers(0, 12)  # few values: ties are common
maybe_time = st.none() | times

ops = st.one_of(
    st.tuples(
        st.just("insert_firing"),
        st.sampled_from(FIRING_IDS),
        st.sampled_from(REACTORS),
        st.sampled_from(TENANTS),
        times,
        st.binary(max_size=4),
    ),
    st.tuples(st.just("fetch"), st.sampled_from(REACTORS), st.sampled_from(TENANTS), maybe_time, st.integers(0, 4)),
    st.tuples(st.just("prune"), times, st.booleans(), st.none() | st.integers(0, 4)),
    st.tuples(st.just("count")),
    st.tuples(
        st.just("insert_sub"),
        st.sampled_from(SUB_IDS),
        st.sampled_from(REACTORS),
        st.sampled_from(WORKFLOWS),
        st.sampled_from(TENANTS),
        st.booleans(),
        maybe_time,
    ),
    st.tuples(
        st.just("update_sub"),
        st.sampled_from(SUB_IDS),
        st.fixed_dictionaries(
            {},
            optional={
                "enabled": st.booleans(),
                "last_seen_fired_at": maybe_time,
                "updated_at": times,
                "predicate": st.none() | st.just("payload.x > 1"),
                "predicate_error_count": st.integers(0, 3),
                "predicate_degraded": st.booleans(),
            },
        ),
    ),
    st.tuples(st.just("delete_sub"), st.sampled_from(SUB_IDS)),
    st.tuples(st.just("get_sub"), st.sampled_from(REACTORS), st.sampled_from(WORKFLOWS), st.sampled_from(TENANTS)),
    st.tuples(st.just("list_subs"), st.none() | st.sampled_from(TENANTS), st.booleans()),
    st.tuples(
        st.just("insert_exec"),
        st.sampled_from(EXEC_IDS),
        times,
        st.sampled_from(["pending", "pending", "running", "completed"]),
    ),
    st.tuples(st.just("claim"), times, st.integers(0, 3)),
    st.tuples(st.just("finish"), st.sampled_from(EXEC_IDS), times, st.sampled_from(["completed", "failed", "pending"])),
    st.tuples(st.just("requeue")),
)
# how a step's transaction ends: commit, an exception, a crash, or a swallowed failed write
endings = st.sampled_from(["commit", "commit", "exception", "crash", "swallow"])
steps = st.lists(st.tuples(st.lists(ops, min_size=1, max_size=6), endings), min_size=1, max_size=6)


def apply(tx, op):
    kind, *a = op
    if kind == "insert_firing":
        fid, r, t, at, payload = a
        return tx.insert_firing(
            {"id": fid, "reactor_name": r, "tenant_id": t, "payload": payload, "fired_at": at, "created_at": at}
        )
    if kind == "fetch":
        return tx.fetch_firings(*a)
    if kind == "prune":
        return tx.prune_firings(*a)
    if kind == "count":
        return tx.count_firings()
    if kind == "insert_sub":
        sid, r, w, t, enabled, wm = a
        return tx.insert_subscription(sub(r, w, t, enabled=enabled, watermark=wm, sid=sid))
    if kind == "update_sub":
        return tx.update_subscription(*a)
    if kind == "delete_sub":
        return tx.delete_subscription(*a)
    if kind == "get_sub":
        return tx.get_subscription(*a)
    if kind == "list_subs":
        return tx.list_subscriptions(tenant=a[0], enabled_only=a[1])
    if kind == "insert_exec":
        eid, at, status = a
        return tx.insert_execution(execution(at, status, eid=eid))
    if kind == "claim":
        return tx.claim_executions(*a)
    if kind == "finish":
        return tx.finish_execution(*a)
    if kind == "requeue":
        return tx.requeue_running()
    return apply_lease(tx, kind, a)


# the leased-consumer tables: events over two partitions (commit = seq), two consumers
CONSUMERS, PARTS = ["w", "v"], ["a", "b"]
seqs = st.integers(1, 12)
lease_ops = st.one_of(
    st.tuples(st.just("insert_events"), st.lists(st.sampled_from(PARTS), min_size=1, max_size=5)),
    st.tuples(st.just("insert_event"), seqs, st.sampled_from(PARTS)),  # maybe a duplicate
    st.tuples(
        st.just("prune_events"), st.integers(0, 90), st.none() | st.integers(0, 9), st.none() | st.integers(0, 3)
    ),
    st.tuples(
        st.just("event_window"),
        st.sampled_from(CONSUMERS),
        st.integers(0, 8),
        st.integers(0, 4),
        st.none() | st.sampled_from(PARTS),
    ),
    st.tuples(st.just("get_event_at"), seqs),
    st.tuples(st.just("set_checkpoint"), st.sampled_from(CONSUMERS), st.sampled_from(PARTS), seqs),
    st.tuples(st.just("list_checkpoints"), st.sampled_from(CONSUMERS)),
    st.tuples(st.just("clear_checkpoints"), st.sampled_from(CONSUMERS)),
    st.tuples(st.just("insert_resolution"), st.sampled_from(CONSUMERS), seqs, st.sampled_from(PARTS)),
    st.tuples(st.just("list_resolutions"), st.sampled_from(CONSUMERS), st.none() | st.sampled_from(PARTS)),
    st.tuples(st.just("delete_resolution"), st.sampled_from(CONSUMERS), seqs),
    st.tuples(st.just("clear_resolutions"), st.sampled_from(CONSUMERS)),
    st.tuples(st.just("put_consumer"), st.sampled_from(CONSUMERS), st.integers(0, 8)),
    st.tuples(st.just("delete_consumer"), st.sampled_from(CONSUMERS)),
)
# every example fills the log first, then mixes reads among the writes
fill = st.tuples(st.just("insert_events"), st.lists(st.sampled_from(PARTS), min_size=3, max_size=8))
window = st.tuples(
    st.just("event_window"),
    st.sampled_from(CONSUMERS),
    st.integers(0, 4),
    st.integers(0, 3),
    st.none() | st.sampled_from(PARTS),
)
lease_steps = st.tuples(
    fill, st.lists(st.tuples(st.lists(lease_ops | window, min_size=2, max_size=8), endings), min_size=1, max_size=6)
).map(lambda x: [([x[0]], "commit"), *x[1]])


def apply_lease(tx, kind, a):
    if kind == "insert_events":  # past the last retained seq: never a duplicate
        last = tx.event_bounds()[1] or 0
        for i, part in enumerate(a[0]):
            tx.insert_event(lease_event(last + 1 + i, partition=part))
        return None
    if kind == "insert_event":
        seq, part = a
        return tx.insert_event(lease_event(seq, partition=part))
    if kind == "prune_events":
        return tx.prune_events(*a)
    if kind == "set_checkpoint":
        c, part, seq = a
        return tx.set_checkpoint(c, part, seq, seq)
    if kind == "insert_resolution":
        c, seq, part = a
        return tx.insert_resolution(resolution(c, seq, part))
    if kind == "delete_resolution":
        c, seq = a
        return tx.delete_resolution(c, f"{seq}:0")
    if kind == "put_consumer":
        c, start = a
        return tx.put_lease_consumer(
            {
                "consumer": c,
                "start_seq": start,
                "start_commit": start,
                "batch_limit": 4,
                "in_flight_limit": 4,
                "lease_seconds": 60.0,
                "revision": start + 1,
            }
        )
    if kind == "delete_consumer":
        return tx.delete_lease_consumer(*a)
    if kind in (
        "event_window",
        "get_event_at",
        "list_checkpoints",
        "clear_checkpoints",
        "list_resolutions",
        "clear_resolutions",
    ):
        return getattr(tx, kind)(*a)
    raise AssertionError(kind)


def run_step(store, step_ops, ending) -> list:
    """Results and error types, in order: what a caller of this store would see."""
    seen: list = []
    try:
        with store.transaction() as tx:
            for op in step_ops:
                try:
                    seen.append(("ok", apply(tx, op)))
                except KeyError as exc:
                    seen.append(("error", type(exc).__name__))
                    if ending != "swallow":
                        raise
            if ending == "exception":
                raise ValueError("roll back")
            if ending == "crash":
                raise Crash("property.step")
    except (Exception, Crash) as exc:
        seen.append(("raised", type(exc).__name__))
    return seen


@pytest.fixture(params=["duckdb", "postgres"])
def sql_store(request):
    """A fresh SQL store for each hypothesis example: ``sql_store()``."""
    if request.param == "duckdb":
        return lambda: DuckDBStore(":memory:")
    dsn = request.getfixturevalue("pg_dsn")
    from pgfixtures import drop_schema, new_schema

    from fanoutsim.designs.stores import PostgresStore

    schema = new_schema()
    request.addfinalizer(lambda: drop_schema(dsn, schema))

    def make():  # the same schema, emptied: a new one per example is slow
        store = PostgresStore(dsn, schema=schema)
        with store.con.transaction():
            for table in TABLES:
                store.con.execute(f"DELETE FROM {table}")
            store.con.execute("UPDATE outbox_seq SET last = 0")
        store.con.execute("DELETE FROM history")
        store.con.execute("INSERT INTO history VALUES (1, 1, 0, 0, 0)")
        return store

    return make


_HYPOTHESIS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


_FIRING = ("insert_firing", FIRING_IDS[0], REACTORS[0], TENANTS[0], 0, b"")


@settings(max_examples=40, **_HYPOTHESIS)
@given(steps=steps)
# found by this test: an update that sets nothing, after a failed write of its
# transaction, sends no statement, and must still be refused as any use is
@example(steps=[([_FIRING, _FIRING, ("update_sub", SUB_IDS[0], {})], "swallow")])
def test_memory_and_sql_agree_on_any_sequence(sql_store, steps):
    memory, other = MemoryStore(), sql_store()
    try:
        for step_ops, ending in steps:
            assert run_step(memory, step_ops, ending) == run_step(other, step_ops, ending)
            for table in TABLES:
                assert memory.rows(table) == other.rows(table), table
    finally:
        other.close()


@settings(max_examples=60, **_HYPOTHESIS)
@given(steps=lease_steps)
def test_memory_and_sql_agree_on_any_sequence_of_lease_table_steps(sql_store, steps):
    memory, other = MemoryStore(), sql_store()
    try:
        for step_ops, ending in steps:
            assert run_step(memory, step_ops, ending) == run_step(other, step_ops, ending)
            for table in ("events", "lease_consumers", "checkpoints", "resolutions"):
                assert memory.rows(table) == other.rows(table), table
    finally:
        other.close()


# -- the compound cursor and the settle horizon ------------------------------------------


def test_compound_cursor_resumes_inside_a_tie(db):
    tied = sorted([firing(20), firing(20), firing(20)], key=lambda f: f["id"])
    add(db, firings=[firing(10), *tied, firing(30)])
    assert fired_ats(fetch(db, after=20)) == [30]  # the strict timestamp cursor skips the tie
    rest = fetch(db, after=20, after_id=tied[0]["id"])
    assert [r["id"] for r in rest] == [tied[1]["id"], tied[2]["id"]] + [r["id"] for r in fetch(db, after=20)]
    assert fetch(db, after=20, after_id=tied[2]["id"]) == fetch(db, after=20)
    assert fired_ats(fetch(db, after=20, after_id=tied[0]["id"], limit=1)) == [20]


def test_until_is_an_inclusive_horizon(db):
    add(db, firings=[firing(t) for t in (10, 20, 30, 40)])
    assert fired_ats(fetch(db, until=30)) == [10, 20, 30]
    assert fired_ats(fetch(db, after=10, until=30)) == [20, 30]
    assert fired_ats(fetch(db, after=10, until=30, limit=1)) == [20]
    assert fetch(db, after=30, until=30) == []
    assert fired_ats(fetch(db, after=20, after_id="00000000-0000-0000-0000-000000000000", until=20)) == [20]


# -- requeueing the claims of a dead executor ---------------------------------------------


def test_requeue_running_returns_the_claims_to_pending_oldest_first(db):
    e1, e2, e3 = execution(1), execution(2), execution(3)
    done = execution(0, status="completed")
    add(db, execs=[e1, e2, e3, done])
    with db.transaction() as tx:
        claimed = tx.claim_executions(10, 2)
    assert [r["id"] for r in claimed] == [e1["id"], e2["id"]]
    with pytest.raises(RuntimeError):
        with db.transaction() as tx:
            tx.requeue_running()
            raise RuntimeError("crash")  # rolled back: still running
    assert sorted(r["status"] for r in db.rows("workflow_executions")) == ["completed", "pending", "running", "running"]
    with db.transaction() as tx:
        assert tx.requeue_running() == [e1["id"], e2["id"]]
        assert tx.requeue_running() == []
    rows = {r["id"]: r for r in db.rows("workflow_executions")}
    assert rows[e1["id"]]["status"] == "pending" and rows[e1["id"]]["claimed_at"] is None
    with db.transaction() as tx:  # claimable again, oldest first
        assert [r["id"] for r in tx.claim_executions(20, 3)] == [e1["id"], e2["id"], e3["id"]]


# -- runner_log ---------------------------------------------------------------------------


def test_runner_log_appends_in_order_and_rolls_back(db):
    with db.transaction() as tx:
        assert tx.log_runner(10, "start", "pid 1") == 1
        assert tx.log_runner(20, "stop") == 2
    with pytest.raises(RuntimeError):
        with db.transaction() as tx:
            tx.log_runner(30, "start")
            raise RuntimeError("crash")
    assert db.rows("runner_log") == [
        {"seq": 1, "happened_at": 10, "event": "start", "detail": "pid 1"},
        {"seq": 2, "happened_at": 20, "event": "stop", "detail": None},
    ]
    with db.transaction() as tx:
        assert tx.log_runner(40, "start") == 3


# == the outbox design (seed 002) ===========================================================


def outbox_row(seq, ts, topic="page:p1", kind="page.updated", ref="p1", due_at=None) -> dict:
    return {"seq": seq, "ts": ts, "topic": topic, "kind": kind, "ref": ref, "due_at": due_at}


def append(db, *stamps, due_at=None) -> list[int]:
    """Reserve a seq and insert a row per stamp, one transaction each; the seqs."""
    out = []
    for ts in stamps:
        with db.transaction() as tx:
            seq = tx.reserve_outbox_seq()
            tx.insert_outbox(outbox_row(seq, ts, due_at=due_at))
        out.append(seq)
    return out


def test_outbox_seqs_count_up_and_fetch_is_strictly_after_in_seq_order(db):
    assert append(db, 10, 20, 30, 40) == [1, 2, 3, 4]
    with db.transaction() as tx:
        assert [r["seq"] for r in tx.fetch_outbox(0, 100)] == [1, 2, 3, 4]
        assert [r["seq"] for r in tx.fetch_outbox(2, 100)] == [3, 4]
        assert [r["seq"] for r in tx.fetch_outbox(1, 2)] == [2, 3]
        assert tx.fetch_outbox(4, 100) == []
        assert tx.outbox_bounds() == (1, 4)
        with pytest.raises(ValueError):
            tx.fetch_outbox(0, -1)
    assert db.rows("outbox") == [outbox_row(i + 1, ts) for i, ts in enumerate((10, 20, 30, 40))]


def test_outbox_a_reserved_seq_inserted_late_fills_its_gap(db):
    with db.transaction() as tx:
        late = tx.reserve_outbox_seq()
    append(db, 20)
    with db.transaction() as tx:
        assert [r["seq"] for r in tx.fetch_outbox(0, 10)] == [2]  # the gap at 1
    with db.transaction() as tx:
        tx.insert_outbox(outbox_row(late, 10))
    with db.transaction() as tx:
        assert [r["seq"] for r in tx.fetch_outbox(0, 10)] == [1, 2]


def test_outbox_rollback_returns_the_seq_and_the_row(db):
    append(db, 10)
    with pytest.raises(Crash):
        with db.transaction() as tx:
            seq = tx.reserve_outbox_seq()
            tx.insert_outbox(outbox_row(seq, 20))
            tx.upsert_page({"id": "p1", "body": "x", "updated_at": 20})
            raise Crash("commit.after_change_before_outbox")
    assert [r["seq"] for r in db.rows("outbox")] == [1] and db.rows("pages") == []
    assert append(db, 30) == [2]


def test_outbox_duplicate_seq_raises(db):
    append(db, 10)
    with pytest.raises(KeyError):
        with db.transaction() as tx:
            tx.insert_outbox(outbox_row(1, 99))
    assert db.rows("outbox") == [outbox_row(1, 10)]


def test_outbox_prune_is_by_ts_spares_deferred_rows_and_never_reuses_a_seq(db):
    append(db, 10, 20, 30, 40)
    with db.transaction() as tx:
        tx.defer("mailer", 2, 500)
        assert tx.prune_outbox(35, limit=1) == [1]
        assert tx.prune_outbox(35) == [3]  # 2 is owed to a consumer, 4 is young
        assert tx.outbox_bounds() == (2, 4)
        tx.delete_deferred("mailer", 2)
        assert tx.prune_outbox(100) == [2, 4]
        assert tx.outbox_bounds() == (None, 4)
    assert append(db, 50) == [5]


def test_cursors_upsert_and_list_in_consumer_order(db):
    with db.transaction() as tx:
        assert tx.get_cursor("indexer") is None
        tx.set_cursor("indexer", 3)
        tx.set_cursor("exporter", 0)
        tx.set_cursor("indexer", 7)
        assert tx.get_cursor("indexer") == 7
        assert tx.list_cursors() == [{"consumer": "exporter", "seq": 0}, {"consumer": "indexer", "seq": 7}]
    with pytest.raises(RuntimeError):
        with db.transaction() as tx:
            tx.set_cursor("indexer", 9)
            raise RuntimeError("crash")
    assert db.rows("cursors") == [{"consumer": "exporter", "seq": 0}, {"consumer": "indexer", "seq": 7}]


def test_a_rollback_puts_back_each_entry_written_twice_and_removes_new_ones(db):
    """Upserts over an entry and into a new key, each twice in one
    transaction: a rollback leaves every entry as it was before it (the
    memory store's undo log keeps each overwrite), and the store goes on."""
    with db.transaction() as tx:
        tx.set_cursor("indexer", 3)
        tx.defer("indexer", 5, 100)
    with pytest.raises(Crash):
        with db.transaction() as tx:
            tx.set_cursor("indexer", 8)
            tx.set_cursor("mailer", 1)
            tx.defer("indexer", 5, 200)
            tx.defer("mailer", 6, 300)
            tx.set_cursor("indexer", 9)
            tx.set_cursor("mailer", 2)
            tx.defer("indexer", 5, 400)
            raise Crash("test.point")
    assert db.rows("cursors") == [{"consumer": "indexer", "seq": 3}]
    with db.transaction() as tx:
        assert (tx.next_due("indexer"), tx.next_due("mailer")) == (100, None)
        tx.set_cursor("mailer", 4)
    assert db.rows("cursors") == [{"consumer": "indexer", "seq": 3}, {"consumer": "mailer", "seq": 4}]


def test_past_cursor_is_the_cursor_the_rows_past_it_and_the_next_due_in_one_read(db):
    append(db, 10, 20, 30, 40)
    with db.transaction() as tx:
        assert tx.past_cursor("indexer", 10) == (None, [], None)  # no cursor: nothing read
        tx.set_cursor("indexer", 1)
        tx.set_cursor("mailer", 4)
        cursor, rows, due = tx.past_cursor("indexer", 2)
        assert (cursor, [r["seq"] for r in rows], due) == (1, [2, 3], None)
        assert rows == tx.fetch_outbox(1, 2)
        assert tx.past_cursor("mailer", 10) == (4, [], None)  # at the end of the log
        tx.defer("mailer", 2, 500)
        tx.defer("indexer", 3, 700)
        assert tx.past_cursor("mailer", 10) == (4, [], 500)
        assert tx.past_cursor("indexer", 0) == (1, [], 700)
        with pytest.raises(ValueError):
            tx.past_cursor("indexer", -1)


def test_parked_rows_overwrite_and_list_by_consumer_then_seq(db):
    with db.transaction() as tx:
        tx.park({"consumer": "z", "seq": 1, "error": "e1", "attempts": 1, "parked_at": 5})
        tx.park({"consumer": "a", "seq": 9, "error": "e2", "attempts": 2, "parked_at": 6})
        tx.park({"consumer": "a", "seq": 3, "error": "e3", "attempts": 3, "parked_at": 7})
        tx.park({"consumer": "a", "seq": 3, "error": "e4", "attempts": 5, "parked_at": 8})
        assert [(r["consumer"], r["seq"]) for r in tx.list_parked()] == [("a", 3), ("a", 9), ("z", 1)]
        assert tx.list_parked("a")[0] == {"consumer": "a", "seq": 3, "error": "e4", "attempts": 5, "parked_at": 8}
        assert tx.list_parked("nobody") == []
    assert len(db.rows("parked")) == 3


def test_deferred_work_is_due_by_time_then_seq(db):
    with db.transaction() as tx:
        assert tx.next_due("mailer") is None
        tx.defer("mailer", 5, 300)
        tx.defer("mailer", 4, 300)
        tx.defer("mailer", 9, 100)
        tx.defer("other", 1, 50)
        assert tx.next_due("mailer") == 100
        assert [r["seq"] for r in tx.fetch_due("mailer", 299, 10)] == [9]
        assert [r["seq"] for r in tx.fetch_due("mailer", 300, 10)] == [9, 4, 5]
        assert [r["seq"] for r in tx.fetch_due("mailer", 300, 2)] == [9, 4]
        assert tx.delete_deferred("mailer", 9) and not tx.delete_deferred("mailer", 9)
    with pytest.raises(Crash):
        with db.transaction() as tx:
            tx.delete_deferred("mailer", 4)
            raise Crash("x")
    assert db.rows("deferred") == [
        {"consumer": "mailer", "seq": 4, "due_at": 300},
        {"consumer": "mailer", "seq": 5, "due_at": 300},
        {"consumer": "other", "seq": 1, "due_at": 50},
    ]


def test_pages_upsert_and_get(db):
    with db.transaction() as tx:
        assert tx.get_page("p1") is None
        tx.upsert_page({"id": "p1", "body": "one", "updated_at": 1})
        tx.upsert_page({"id": "p1", "body": "two", "updated_at": 2})
        tx.upsert_page({"id": "p0", "body": None, "updated_at": 3})
        assert tx.get_page("p1") == {"id": "p1", "body": "two", "updated_at": 2}
    assert [r["id"] for r in db.rows("pages")] == ["p0", "p1"]


# == the leased-consumer design (seed 003) ==================================================
# events, lease_consumers, checkpoints, leases, retries, dead_letters and the history row


def lease_event(seq, commit_seq=None, ordinal=0, partition="a", at=None, kind="ticket.changed", payload='{"x":1}'):
    commit_seq = seq if commit_seq is None else commit_seq
    return {
        "seq": seq,
        "event_id": f"{commit_seq}:{ordinal}",
        "commit_seq": commit_seq,
        "ordinal": ordinal,
        "partition": partition,
        "kind": kind,
        "payload": payload,
        "committed_at": seq * 10 if at is None else at,
    }


def add_events(db, *rows) -> None:
    with db.transaction() as tx:
        for r in rows:
            tx.insert_event(r)


def lease_row(consumer, seq, partition="a", token="t" * 64, incarnation=1, attempt=1, leased_at=5, expires_at=65):
    return {
        "consumer": consumer,
        "event_id": f"{seq}:0",
        "seq": seq,
        "partition": partition,
        "token": token,
        "incarnation": incarnation,
        "attempt": attempt,
        "leased_at": leased_at,
        "expires_at": expires_at,
    }


def test_lease_history_is_one_row_that_starts_at_incarnation_1(db):
    first = {"incarnation": 1, "last_commit": 0, "last_seq": 0, "leases_granted": 0}
    with db.transaction() as tx:
        assert tx.get_history() == first
        tx.set_history({"incarnation": 2, "last_commit": 3, "last_seq": 5, "leases_granted": 7})
        assert tx.get_history()["incarnation"] == 2
    with pytest.raises(Crash):
        with db.transaction() as tx:
            tx.set_history({"incarnation": 9, "last_commit": 9, "last_seq": 9, "leases_granted": 9})
            raise Crash("restore.x")
    assert db.rows("history") == [{"incarnation": 2, "last_commit": 3, "last_seq": 5, "leases_granted": 7}]


def test_lease_events_insert_get_bounds_and_duplicates(db):
    rows = [lease_event(1), lease_event(2, 2, 0, "b"), lease_event(3, 2, 1, "a")]
    add_events(db, *rows)
    with db.transaction() as tx:
        assert tx.get_event("2:1") == rows[2]
        assert tx.get_event("9:9") is None
        assert tx.event_bounds() == (1, 3)
    assert db.rows("events") == rows
    for dup in (lease_event(3, 7), {**lease_event(4), "event_id": "1:0"}):  # same seq, same event id
        with pytest.raises(KeyError):
            add_events(db, dup)
    assert db.rows("events") == rows


def test_lease_event_window_is_the_first_events_per_partition_past_start_and_checkpoint(db):
    add_events(
        db, *[lease_event(q, partition=p) for q, p in ((1, "a"), (2, "b"), (3, "a"), (4, "c"), (5, "b"), (6, "a"))]
    )
    with db.transaction() as tx:

        def win(c, after, n, part=None):
            return [(r["partition"], r["seq"]) for r in tx.event_window(c, after, n, part)]

        assert win("x", 0, 1) == [("a", 1), ("b", 2), ("c", 4)]  # the heads
        assert win("x", 3, 1) == [("c", 4), ("b", 5), ("a", 6)]  # the start hides 1..3
        assert win("x", 0, 2) == [("a", 1), ("b", 2), ("a", 3), ("c", 4), ("b", 5)]
        assert win("x", 0, 9) == [("a", 1), ("b", 2), ("a", 3), ("c", 4), ("b", 5), ("a", 6)]
        assert win("x", 0, 2, "a") == [("a", 1), ("a", 3)]
        assert win("x", 0, 0) == [] and win("x", 0, 5, "nowhere") == []
        tx.set_checkpoint("x", "a", 3, 3)
        tx.set_checkpoint("x", "c", 4, 4)
        tx.set_checkpoint("y", "b", 5, 5)  # another consumer's: no effect on x
        assert win("x", 0, 1) == [("b", 2), ("a", 6)]
        assert win("x", 0, 3, "a") == [("a", 6)]
        assert tx.list_checkpoints("x") == [
            {"consumer": "x", "partition": "a", "seq": 3, "commit_seq": 3},
            {"consumer": "x", "partition": "c", "seq": 4, "commit_seq": 4},
        ]
        tx.set_checkpoint("x", "a", 6, 6)  # overwrites
        assert win("x", 0, 1) == [("b", 2)]
        assert tx.get_event_at(4) == lease_event(4, partition="c") and tx.get_event_at(7) is None
        with pytest.raises(ValueError):
            tx.event_window("x", 0, -1)
        assert tx.clear_checkpoints("x") == 2 and tx.list_checkpoints("x") == []
        assert tx.clear_checkpoints("x") == 0
        assert win("x", 0, 1) == [("a", 1), ("b", 2), ("c", 4)]
    with pytest.raises(Crash):
        with db.transaction() as tx:
            tx.set_checkpoint("y", "b", 6, 9)
            tx.set_checkpoint("y", "z", 1, 1)
            assert tx.clear_checkpoints("y") == 2
            raise Crash("ack.before_commit")
    assert db.rows("checkpoints") == [{"consumer": "y", "partition": "b", "seq": 5, "commit_seq": 5}]


def resolution(consumer, seq, partition="a", kind="acknowledged"):
    return {
        "consumer": consumer,
        "event_id": f"{seq}:0",
        "seq": seq,
        "partition": partition,
        "commit_seq": seq,
        "kind": kind,
    }


def test_lease_resolutions_are_held_once_listed_by_seq_and_cleared_per_consumer(db):
    with db.transaction() as tx:
        tx.insert_resolution(resolution("w", 5))
        tx.insert_resolution(resolution("w", 2, "b", "dead_lettered"))
        tx.insert_resolution(resolution("w", 3))
        tx.insert_resolution(resolution("v", 1))
        assert [r["seq"] for r in tx.list_resolutions("w")] == [2, 3, 5]
        assert tx.list_resolutions("w", "a") == [resolution("w", 3), resolution("w", 5)]
        assert tx.list_resolutions("w", "b") == [resolution("w", 2, "b", "dead_lettered")]
        assert tx.list_resolutions("w", "zz") == [] and tx.list_resolutions("nobody") == []
        assert tx.delete_resolution("w", "3:0") and not tx.delete_resolution("w", "3:0")
    with pytest.raises(KeyError):
        with db.transaction() as tx:
            tx.insert_resolution(resolution("w", 5, "b"))  # the same (consumer, event_id)
    with pytest.raises(Crash):
        with db.transaction() as tx:
            assert tx.clear_resolutions("w") == 2
            tx.insert_resolution(resolution("w", 9))
            assert tx.delete_resolution("v", "1:0")
            raise Crash("seek.before_commit")
    assert db.rows("resolutions") == [resolution("v", 1), resolution("w", 2, "b", "dead_lettered"), resolution("w", 5)]
    with db.transaction() as tx:
        assert tx.clear_resolutions("w") == 2 and tx.clear_resolutions("w") == 0
        tx.insert_resolution(resolution("w", 5, "b"))  # held again after the clear
    assert db.rows("resolutions") == [resolution("v", 1), resolution("w", 5, "b")]


def test_lease_prune_is_by_age_and_never_past_the_fence_commit(db):
    add_events(
        db,
        lease_event(1, 1, 0, at=10),
        lease_event(2, 2, 0, at=20),
        lease_event(3, 2, 1, at=20),
        lease_event(4, 3, 0, at=30),
        lease_event(5, 4, 0, at=40),
    )
    with db.transaction() as tx:
        assert tx.prune_events(35, fence=2) == ["1:0"]  # commit 2 still holds a required event
        assert tx.prune_events(35, fence=None, limit=1) == ["2:0"]
        assert tx.prune_events(35, fence=None) == ["2:1", "3:0"]  # 5 is young
        assert tx.event_bounds() == (5, 5)
    with pytest.raises(Crash):
        with db.transaction() as tx:
            assert tx.prune_events(100, fence=None) == ["4:0"]
            raise Crash("events.mid_prune")
    assert [r["seq"] for r in db.rows("events")] == [5]


def test_lease_delete_event_takes_one_event_from_the_middle_and_rolls_back(db):
    add_events(db, lease_event(1), lease_event(2, 2, 0, "b"), lease_event(3, 3, 0, "a"))
    with db.transaction() as tx:
        assert tx.delete_event(2) and not tx.delete_event(2) and not tx.delete_event(9)
        assert tx.get_event("2:0") is None and tx.get_event_at(2) is None
        assert tx.event_bounds() == (1, 3)  # a hole, not a horizon
        assert [r["seq"] for r in tx.event_window("x", 0, 5)] == [1, 3]
    with pytest.raises(Crash):
        with db.transaction() as tx:
            assert tx.delete_event(1)
            raise Crash("ack.before_commit")
    assert [r["seq"] for r in db.rows("events")] == [1, 3]


def test_lease_consumers_upsert_list_by_name_and_delete(db):
    row = {
        "consumer": "indexer",
        "start_seq": 0,
        "start_commit": 0,
        "batch_limit": 4,
        "in_flight_limit": 4,
        "lease_seconds": 60.0,
        "revision": 1,
    }
    with db.transaction() as tx:
        assert tx.get_lease_consumer("indexer") is None
        tx.put_lease_consumer(row)
        tx.put_lease_consumer({**row, "consumer": "audit", "lease_seconds": 5.0})
        tx.put_lease_consumer({**row, "revision": 2, "start_seq": 7, "start_commit": 5})
        assert tx.get_lease_consumer("indexer") == {**row, "revision": 2, "start_seq": 7, "start_commit": 5}
        assert [r["consumer"] for r in tx.list_lease_consumers()] == ["audit", "indexer"]
    assert db.rows("lease_consumers")[0] == {**row, "consumer": "audit", "lease_seconds": 5.0}
    with pytest.raises(Crash):
        with db.transaction() as tx:
            assert tx.delete_lease_consumer("audit") and not tx.delete_lease_consumer("audit")
            raise Crash("retire.before_commit")
    with db.transaction() as tx:
        assert tx.delete_lease_consumer("audit")
        assert not tx.delete_lease_consumer("nobody")
    assert [r["consumer"] for r in db.rows("lease_consumers")] == ["indexer"]


def test_lease_rows_one_per_consumer_and_event_expire_by_time(db):
    with db.transaction() as tx:
        tx.insert_lease(lease_row("w", 3, expires_at=70))
        tx.insert_lease(lease_row("w", 1, "b", expires_at=70))
        tx.insert_lease(lease_row("a", 2, expires_at=60))
        assert tx.get_lease("w", "3:0") == lease_row("w", 3, expires_at=70)
        assert [(r["consumer"], r["seq"]) for r in tx.list_leases()] == [("a", 2), ("w", 1), ("w", 3)]
        assert [r["seq"] for r in tx.list_leases("w")] == [1, 3]
        assert tx.expired_leases(59, 10) == []
        assert [r["seq"] for r in tx.expired_leases(70, 10)] == [2, 1, 3]  # by (expires_at, consumer, seq)
        assert [r["seq"] for r in tx.expired_leases(70, 1)] == [2]
    with pytest.raises(KeyError):
        with db.transaction() as tx:
            tx.insert_lease(lease_row("w", 3, token="u" * 64))
    with pytest.raises(Crash):
        with db.transaction() as tx:
            assert tx.delete_lease("w", "3:0") and not tx.delete_lease("w", "3:0")
            raise Crash("ack.before_commit")
    with db.transaction() as tx:
        assert tx.delete_lease("w", "3:0")
    assert [(r["consumer"], r["seq"]) for r in db.rows("leases")] == [("a", 2), ("w", 1)]


def test_lease_retries_overwrite_and_delete(db):
    def retry(consumer, seq, attempts, not_before=100, error="boom"):
        return {
            "consumer": consumer,
            "event_id": f"{seq}:0",
            "seq": seq,
            "partition": "a",
            "attempts": attempts,
            "not_before": not_before,
            "error": error,
        }

    with db.transaction() as tx:
        assert tx.get_retry("w", "1:0") is None
        tx.put_retry(retry("w", 4, 1))
        tx.put_retry(retry("w", 1, 1))
        tx.put_retry(retry("w", 1, 2, 200, None))
        tx.put_retry(retry("a", 9, 1))
        assert tx.get_retry("w", "1:0") == retry("w", 1, 2, 200, None)
        assert [r["seq"] for r in tx.list_retries("w")] == [1, 4]
        assert tx.delete_retry("w", "4:0") and not tx.delete_retry("w", "4:0")
    assert db.rows("retries") == [retry("a", 9, 1), retry("w", 1, 2, 200, None)]
    with pytest.raises(Crash):
        with db.transaction() as tx:
            assert tx.clear_retries("w") == 1 and tx.list_retries("w") == []
            raise Crash("seek.before_commit")
    with db.transaction() as tx:
        tx.put_retry(retry("w", 6, 1))
        assert tx.clear_retries("w") == 2 and tx.clear_retries("w") == 0
    assert db.rows("retries") == [retry("a", 9, 1)]


def test_lease_dead_letters_are_retained_once(db):
    dead = {
        "consumer": "w",
        "event_id": "7:0",
        "seq": 7,
        "partition": "a",
        "attempts": 10,
        "error": "poison",
        "payload": '{"x":1}',
        "dead_at": 99,
    }
    with db.transaction() as tx:
        tx.insert_dead_letter(dead)
        tx.insert_dead_letter({**dead, "consumer": "a"})
        assert [r["consumer"] for r in tx.list_dead_letters()] == ["a", "w"]
        assert tx.list_dead_letters("w") == [dead]
    with pytest.raises(KeyError):
        with db.transaction() as tx:
            tx.insert_dead_letter(dead)
    assert len(db.rows("dead_letters")) == 2
    with pytest.raises(Crash):
        with db.transaction() as tx:
            assert tx.clear_dead_letters("w") == 1
            raise Crash("retire.before_commit")
    with db.transaction() as tx:
        assert tx.clear_dead_letters("w") == 1 and tx.clear_dead_letters("w") == 0
        tx.insert_dead_letter(dead)  # retained again after the clear
    assert [r["consumer"] for r in db.rows("dead_letters")] == ["a", "w"]
