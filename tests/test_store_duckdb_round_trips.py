"""The DuckDB store's round trips: a transaction of one update is sent alone
(DuckDB's autocommit, no BEGIN or COMMIT); a claim finds its rows by the ids
of the pending executions the store holds as a hint; a fetch is answered from
the stream's last read, which committed firings join. Each must change what
DuckDB is sent and nothing a caller sees; the contract suite checks them
against the memory store over random sequences, these the mechanisms."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_store_contract import EXECS, FIRING_IDS, FIRINGS, SUBS, add, execution, firing, sub

from fanoutsim.designs.reactor.tables import sql as tables
from fanoutsim.designs.stores import DuckDBStore, MemoryStore
from fanoutsim.faults import Crash
from fanoutsim.kernel.store import duckdb as duckdb_store
from fanoutsim.kernel.store.sql import TS, native_timestamps
from fanoutsim.kernel.timeutil import from_us


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
    assert (
        sent(
            duck,
            lambda tx: (
                tx.update_subscription(s["id"], {"last_seen_fired_at": 6}),
                tx.update_subscription(s["id"], {"updated_at": 7}),
            ),
        )
        == 4
    )
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
    # the first claim reads the pending rows (one SELECT), then sends its update alone
    # (held: the transaction's one write, committed as DuckDB runs it)
    assert sent(duck, lambda tx: first.extend(tx.claim_executions(10, 2))) == 2
    assert first == [{**r, "status": "running", "claimed_at": 10} for r in order[:2]]
    rest = []
    assert sent(duck, lambda tx: rest.extend(tx.claim_executions(11, 5))) == 1
    assert [r["id"] for r in rest] == [r["id"] for r in order[2:]]
    assert sent(duck, lambda tx: tx.claim_executions(12, 5)) == 0  # known to be none
    # rows dispatched later join the hint at their commit, in order
    late = [execution(0), execution(20)]
    add(duck, execs=late)
    got = []
    assert sent(duck, lambda tx: got.extend(tx.claim_executions(13, 5))) == 1
    assert [r["id"] for r in got] == [late[0]["id"], late[1]["id"]]
    assert [(r["status"], r["claimed_at"]) for r in duck.rows(EXECS)] == [
        ("running", 13),
        ("running", 10),
        ("running", 10),
        ("running", 11),
        ("running", 11),
        ("running", 13),
    ]


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
            tx.claim_executions(6, 1)  # held, sent alone at the commit, and checked there
    assert [r["status"] for r in duck.rows(EXECS)] == ["completed", "completed"]  # it found no row to claim
    with duck.transaction() as tx:  # the hint is gone: the next claim reads the table again
        assert tx.claim_executions(7, 1) == []


def test_a_held_claim_is_checked_when_a_later_statement_sends_it(duck):
    es = [execution(1), execution(2)]
    add(duck, execs=es, subs=[sub()])
    with duck.transaction() as tx:
        tx.claim_executions(5, 1)
    duck.con.execute("UPDATE workflow_executions SET status = 'completed'")  # behind the store's back
    with pytest.raises(RuntimeError, match="out of step with the table: claimed 0 of 1"):
        with duck.transaction() as tx:
            tx.claim_executions(6, 1)
            tx.insert_firing(firing(3))  # sends the held claim first: BEGIN, the claim, then this
    assert duck.rows(FIRINGS) == []  # the transaction rolled back


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


# -- inserts held when the store knows their key is new ------------------------------


def insert(kind, row):
    return lambda tx: getattr(tx, f"insert_{kind}")(row)


@pytest.mark.parametrize("kind, make", [("firing", firing), ("execution", execution)])
def test_a_transaction_of_one_new_insert_is_one_statement(duck, kind, make):
    # the first counts and reads the table's keys (two SELECTs), then sends the insert alone
    first, second, third = make(1), make(2), make(3)
    assert sent(duck, insert(kind, first)) == 3
    assert sent(duck, insert(kind, second)) == 1
    # with another write: BEGIN with the first, the second, COMMIT
    assert sent(duck, lambda tx: (insert(kind, third)(tx), tx.log_runner(5, "start"))) == 4
    table = FIRINGS if kind == "firing" else EXECS
    assert [r["id"] for r in duck.rows(table)] == [first["id"], second["id"], third["id"]]


@pytest.mark.parametrize("kind, make", [("firing", firing), ("execution", execution)])
@pytest.mark.parametrize("store", ["memory", "duckdb"])
def test_a_duplicate_key_is_refused_by_the_insert_call_not_the_commit(store, kind, make):
    db = MemoryStore() if store == "memory" else DuckDBStore(":memory:")
    table = FIRINGS if kind == "firing" else EXECS
    row = make(1)
    with pytest.raises(KeyError, match="duplicate"):
        with db.transaction() as tx:
            insert(kind, row)(tx)  # held on DuckDB: nothing is sent yet
            insert(kind, {**row})(tx)  # the same key again, in the same transaction
            pytest.fail("the duplicate was not refused by its insert call")
    assert db.rows(table) == []  # rolled back
    add(db, **{f"{kind}s" if kind == "firing" else "execs": [row]})
    with pytest.raises(KeyError, match="duplicate"):
        with db.transaction() as tx:
            insert(kind, {**row, "tenant_id": "t2"})(tx)  # committed before: refused here
            pytest.fail("the duplicate was not refused by its insert call")
    assert [(r["id"], r["tenant_id"]) for r in db.rows(table)] == [(row["id"], "t1")]


def test_a_pruned_key_may_be_inserted_again(duck):
    old = firing(1)
    add(duck, firings=[old])
    assert sent(duck, insert("firing", firing(50))) == 1
    with duck.transaction() as tx:
        assert tx.prune_firings(10, conservative=False) == [old["id"]]
    assert sent(duck, insert("firing", {**old, "fired_at": 60, "created_at": 60})) == 1  # held: known gone
    assert [r["id"] for r in duck.rows(FIRINGS)][-1] == old["id"]


def test_a_key_in_another_spelling_is_sent_at_once_and_then_checked_by_duckdb(duck):
    add(duck, execs=[execution(0)])  # the keys are known from here on
    row = execution(1)
    upper = {**row, "id": row["id"].upper()}  # the same UUID: DuckDB reads it back in lower case
    assert sent(duck, insert("execution", upper)) == 3  # not held: BEGIN with the insert, COMMIT
    with pytest.raises(KeyError, match="duplicate key"):
        with duck.transaction() as tx:
            tx.insert_execution(row)  # the keys are read again: sent now, refused by DuckDB here
            pytest.fail("the duplicate was not refused by its insert call")
    assert [r["id"] for r in duck.rows(EXECS)][-1] == row["id"]


@pytest.mark.parametrize("error", [ValueError("boom"), Crash("test.point")], ids=["Exception", "Crash"])
def test_a_held_insert_is_never_sent_if_its_transaction_rolls_back(duck, error):
    add(duck, firings=[firing(1)])  # the keys are known from here on
    row = firing(2)
    before = duck.statements
    with pytest.raises(type(error)):
        with duck.transaction() as tx:
            tx.insert_firing(row)
            raise error
    assert duck.statements == before
    assert sent(duck, insert("firing", row)) == 1  # its key is still new
    assert len(duck.rows(FIRINGS)) == 2


def test_a_table_with_more_keys_than_the_hint_keeps_has_its_inserts_sent_at_once(duck, monkeypatch):
    monkeypatch.setattr(duckdb_store, "KEYS_KEPT", 3)
    rows = [execution(t) for t in range(5)]
    assert sent(duck, insert("execution", rows[0])) == 3  # the count, the keys, the insert alone
    assert sent(duck, insert("execution", rows[1])) == 1
    assert sent(duck, insert("execution", rows[2])) == 1  # the hint now holds 3 keys
    assert sent(duck, insert("execution", rows[3])) == 1  # checked against all 3; then no keys are kept
    assert sent(duck, insert("execution", execution(8))) == 3  # BEGIN with the insert, COMMIT
    with pytest.raises(KeyError, match="duplicate key"):
        with duck.transaction() as tx:
            tx.insert_execution(rows[1])
            pytest.fail("the duplicate was not refused by its insert call")
    other = DuckDBStore(":memory:")
    # rows written in a transaction that sends them at once (it began with the
    # subscription): the keys are not read until an insert could be held
    add(other, subs=[sub()], execs=rows[:3])
    assert sent(other, insert("execution", rows[4])) == 4  # the count says too many: BEGIN with it, COMMIT
    assert sent(other, insert("execution", execution(9))) == 3
    other.close()


# -- fetches answered from the stream's last read ------------------------------------


def fetch(db, after, limit, after_id=None):
    with db.transaction() as tx:
        return tx.fetch_firings("r1", "t1", after, limit, after_id=after_id)


def test_firings_committed_after_a_fetch_join_its_read_in_order(duck):
    memory = MemoryStore()
    for db in (memory, duck):
        add(db, firings=[firing(10, fid=FIRING_IDS[0]), firing(20, fid=FIRING_IDS[1])])
    assert sent(duck, lambda tx: tx.fetch_firings("r1", "t1", None, 10)) == 1  # all of them: complete
    # a later firing, and a late one that sorts between the two
    for db in (memory, duck):
        add(db, firings=[firing(30, fid=FIRING_IDS[2]), firing(15, fid=FIRING_IDS[3])])
    for after, limit in ((None, 10), (10, 10), (15, 1), (20, 5), (30, 5)):
        before = duck.statements
        assert fetch(duck, after, limit) == fetch(memory, after, limit)
        assert duck.statements == before  # no statement: the read had every row


def test_a_prefix_read_does_not_answer_past_its_end(duck):
    memory, first, late = MemoryStore(), [firing(t) for t in (10, 20, 30)], firing(25)
    for db in (memory, duck):
        add(db, firings=first)
    fetch(duck, None, 2)  # the first two only: a prefix
    for db in (memory, duck):
        add(db, firings=[late])  # after the prefix: unknown whether 30 lies between
    before = duck.statements
    assert fetch(duck, None, 2) == fetch(memory, None, 2)
    assert duck.statements == before
    assert fetch(duck, 20, 5) == fetch(memory, 20, 5)  # past the prefix: SQL
    assert duck.statements == before + 1


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("fire"), st.integers(0, 12)),
            st.tuples(st.just("fire"), st.integers(0, 12)),
            st.tuples(st.just("fetch"), st.none() | st.integers(0, 12), st.integers(1, 8)),
            st.tuples(st.just("prune"), st.integers(0, 12)),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_reads_that_forget_rows_far_behind_still_answer_as_sql(steps):
    """With the dead-row allowance at 1, reads are trimmed at nearly every
    answer: slower cursors must then read SQL and get the same rows."""
    memory, duck = MemoryStore(), DuckDBStore(":memory:")
    allowance, tables._DEAD_ROWS = tables._DEAD_ROWS, 1
    try:
        for n, (kind, *a) in enumerate(steps):
            if kind == "fire":
                row = firing(a[0], fid=f"00000000-0000-4000-8000-{n:012d}")
                for db in (memory, duck):
                    add(db, firings=[dict(row)])
            elif kind == "fetch":
                assert fetch(duck, *a) == fetch(memory, *a), (kind, a)
            else:
                for db in (memory, duck):
                    with db.transaction() as tx:
                        tx.prune_firings(a[0], False)
    finally:
        tables._DEAD_ROWS = allowance
        duck.close()


def test_a_read_forgets_rows_far_behind_and_a_slower_cursor_reads_sql(duck, monkeypatch):
    monkeypatch.setattr(tables, "_DEAD_ROWS", 1)
    memory, rows = MemoryStore(), [firing(t) for t in (10, 20, 30, 40, 50)]
    for db in (memory, duck):
        add(db, firings=rows)
    fetch(duck, None, 10)  # every row: a complete read
    before = duck.statements
    assert fetch(duck, 40, 10) == fetch(memory, 40, 10)  # answered; the four rows behind are dropped
    assert duck.statements == before
    assert fetch(duck, 45, 10) == fetch(memory, 45, 10)  # still answered, from the read's new cursor
    assert duck.statements == before
    assert fetch(duck, 10, 10) == fetch(memory, 10, 10)  # behind the read now: SQL, a new read
    assert duck.statements == before + 1
    assert fetch(duck, 20, 2) == fetch(memory, 20, 2)
    assert duck.statements == before + 1


@pytest.mark.parametrize(
    "at", [-62_135_596_800_000_001, 0, 253_402_300_800_000_000], ids=["before year 1", "the epoch", "after year 9999"]
)
def test_timestamps_bound_as_datetimes_or_converted_in_sql_read_back_the_same(duck, at):
    """Statements bind their timestamps as datetimes, and fall back to the
    conversion in SQL outside datetime's years 1-9999: both read back as written."""
    memory, s, f, e = MemoryStore(), sub(), firing(at), execution(at)
    for db in (memory, duck):
        add(db, subs=[s], firings=[f], execs=[e])
        with db.transaction() as tx:
            tx.update_subscription(s["id"], {"last_seen_fired_at": at, "updated_at": at})
        with db.transaction() as tx:
            assert [r["claimed_at"] for r in tx.claim_executions(at, 1)] == [at]
        with db.transaction() as tx:
            tx.finish_execution(e["id"], at, "completed")
    for table in (SUBS, EXECS, "reactor_firings"):
        assert duck.rows(table) == memory.rows(table)
    assert duck.rows(EXECS)[0]["finished_at"] == at


def test_each_ts_parameter_and_only_it_is_bound_as_a_datetime():
    statement = f"UPDATE t SET a = ?, b = {TS} WHERE c = ? AND d < {TS} AND (CAST(? AS BIGINT) IS NULL)"
    text, params = native_timestamps(statement, ["x", 5, 6, 7, 8])
    assert text == "UPDATE t SET a = ?, b = ? WHERE c = ? AND d < ? AND (CAST(? AS BIGINT) IS NULL)"
    assert params == ["x", from_us(5), 6, from_us(7), 8]
    assert native_timestamps(statement, ["x", None, 6, 7, 8])[1] == ["x", None, 6, from_us(7), 8]
    # as given: out of datetime's range, not an int, not lined up with the ?s, or no TS at all
    for params in (["x", 253_402_300_800_000_000, 6, 7, 8], ["x", 5.0, 6, 7, 8], ["x", True, 6, 7, 8], ["x", 5, 6, 7]):
        assert native_timestamps(statement, params) == (statement, params)
    assert native_timestamps("SELECT ?", [1]) == ("SELECT ?", [1])


class _Interrupting:
    """A connection whose statements meet a Ctrl-C, as DuckDB reports one that
    arrives while it runs a statement: RuntimeError("Query interrupted")."""

    def __init__(self, con) -> None:
        self.con = con

    def execute(self, *args):
        raise RuntimeError("Query interrupted")

    def __getattr__(self, name):
        return getattr(self.con, name)


def test_a_ctrl_c_during_a_statement_is_the_users_interrupt_and_changes_nothing(duck):
    s = sub()
    add(duck, subs=[s])
    con = duck.con
    duck.con = _Interrupting(con)
    try:
        with pytest.raises(KeyboardInterrupt):
            with duck.transaction() as tx:
                tx.update_subscription(s["id"], {"last_seen_fired_at": 5})
    finally:
        duck.con = con
    assert duck.rows(SUBS)[0]["last_seen_fired_at"] is None
    with duck.transaction() as tx:  # the store goes on
        tx.update_subscription(s["id"], {"last_seen_fired_at": 6})
    assert duck.rows(SUBS)[0]["last_seen_fired_at"] == 6
