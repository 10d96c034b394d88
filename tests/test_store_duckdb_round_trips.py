"""The DuckDB store's round trips: a transaction of one update is sent alone
(DuckDB's autocommit, no BEGIN or COMMIT), and a claim finds its rows by the
ids of the pending executions the store holds as a hint. Both must change
what DuckDB is sent and nothing a caller sees; the contract suite checks the
second against the memory store over random sequences, these the mechanisms."""
from __future__ import annotations

import pytest

from fanoutsim.designs.stores import DuckDBStore, MemoryStore
from fanoutsim.kernel.faults import Crash
from test_store_contract import EXECS, SUBS, add, execution, sub


def sent(store, block) -> int:
    """The statements DuckDB was sent for ``block(tx)``, in one transaction."""
    before = store.statements
    with store.transaction() as tx:
        block(tx)
    return store.statements - before


@pytest.fixture
def duck():
    store = DuckDBStore(":memory:")
    yield store
    store.close()


def test_a_transaction_of_one_update_is_one_statement(duck):
    s = sub()
    add(duck, subs=[s])
    assert sent(duck, lambda tx: tx.update_subscription(s["id"], {"last_seen_fired_at": 5})) == 1
    assert duck.rows(SUBS)[0]["last_seen_fired_at"] == 5
    # two: BEGIN with the first, the second, COMMIT
    assert sent(duck, lambda tx: (tx.update_subscription(s["id"], {"last_seen_fired_at": 6}),
                                  tx.update_subscription(s["id"], {"updated_at": 7}))) == 4
    assert (duck.rows(SUBS)[0]["last_seen_fired_at"], duck.rows(SUBS)[0]["updated_at"]) == (6, 7)


@pytest.mark.parametrize("store", ["memory", "duckdb"])
def test_a_held_update_is_seen_by_the_rest_of_its_transaction(store):
    db = MemoryStore() if store == "memory" else DuckDBStore(":memory:")
    s, e = sub(), execution(1)
    add(db, subs=[s], execs=[e])
    with db.transaction() as tx:
        tx.update_subscription(s["id"], {"enabled": False})
        assert tx.list_subscriptions(enabled_only=True) == []
        tx.finish_execution(e["id"], 2, "completed")  # finished while pending: nobody claims it
        assert not tx.has_pending_executions()
        assert tx.claim_executions(3, 10) == []
    assert db.rows(SUBS)[0]["enabled"] is False
    assert db.rows(EXECS)[0]["status"] == "completed"


@pytest.mark.parametrize("error", [ValueError("boom"), Crash("test.point")], ids=["Exception", "Crash"])
def test_a_held_update_is_never_sent_if_its_transaction_rolls_back(duck, error):
    s = sub(watermark=3)
    add(duck, subs=[s])
    sent(duck, lambda tx: tx.list_subscriptions())  # read once: the subscriptions are now a hint
    before = duck.statements
    with pytest.raises(type(error)):
        with duck.transaction() as tx:
            tx.update_subscription(s["id"], {"last_seen_fired_at": 9})
            raise error
    assert duck.statements == before  # nothing was sent, so nothing to roll back
    assert duck.rows(SUBS)[0]["last_seen_fired_at"] == 3
    assert sent(duck, lambda tx: tx.list_subscriptions()) == 0  # the hint kept the committed row
    with duck.transaction() as tx:
        assert tx.list_subscriptions()[0]["last_seen_fired_at"] == 3


def test_a_claim_sends_one_update_by_id_once_the_pending_rows_are_known(duck):
    es = [execution(t) for t in (3, 1, 2, 1)]
    add(duck, execs=es)
    order = sorted(es, key=lambda r: (r["dispatched_at"], r["id"]))
    first = []
    # the first claim reads the pending rows (one SELECT), then BEGIN with the update, COMMIT
    assert sent(duck, lambda tx: first.extend(tx.claim_executions(10, 2))) == 4
    assert first == [{**r, "status": "running", "claimed_at": 10} for r in order[:2]]
    rest = []
    assert sent(duck, lambda tx: rest.extend(tx.claim_executions(11, 5))) == 3
    assert [r["id"] for r in rest] == [r["id"] for r in order[2:]]
    assert sent(duck, lambda tx: tx.claim_executions(12, 5)) == 0  # known to be none
    # rows dispatched later join the hint at their commit, in order
    late = [execution(0), execution(20)]
    add(duck, execs=late)
    got = []
    assert sent(duck, lambda tx: got.extend(tx.claim_executions(13, 5))) == 3
    assert [r["id"] for r in got] == [late[0]["id"], late[1]["id"]]
    assert [(r["status"], r["claimed_at"]) for r in duck.rows(EXECS)] == \
        [("running", 13), ("running", 10), ("running", 10), ("running", 11), ("running", 11), ("running", 13)]


def test_requeued_rows_are_read_again_and_claimed_in_order(duck):
    es = [execution(t) for t in (1, 2, 3)]
    add(duck, execs=es)
    with duck.transaction() as tx:
        tx.claim_executions(5, 2)
    with duck.transaction() as tx:
        assert tx.requeue_running() == [es[0]["id"], es[1]["id"]]
    with duck.transaction() as tx:
        assert [r["id"] for r in tx.claim_executions(6, 10)] == [r["id"] for r in es]


def test_a_claim_refuses_a_hint_out_of_step_with_the_table(duck):
    es = [execution(1), execution(2)]
    add(duck, execs=es)
    with duck.transaction() as tx:
        tx.claim_executions(5, 1)  # the pending rows are now a hint
    duck.con.execute("UPDATE workflow_executions SET status = 'completed'")  # behind the store's back
    with pytest.raises(RuntimeError, match="out of step with the table: claimed 0 of 1"):
        with duck.transaction() as tx:
            tx.claim_executions(6, 1)
    assert [r["status"] for r in duck.rows(EXECS)] == ["completed", "completed"]  # rolled back


@pytest.mark.parametrize("writes", [1, 2], ids=["held, sent alone", "two, BEGIN ... COMMIT"])
def test_the_hints_change_before_another_transaction_can_begin(duck, writes):
    """A commit's hint updates run under the store's lock: a thread waiting to
    begin never reads the hints of before the commit."""
    s = sub()
    add(duck, subs=[s])
    seen = []
    with duck.transaction() as tx:
        for k in range(writes):
            tx.update_subscription(s["id"], {"updated_at": 200 + k})
        tx._on_commit(lambda: seen.append(duck._lock.locked()))
    assert seen == [True]
