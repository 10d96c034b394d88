"""The questions a step asks before a statement that may find nothing
(``has_firings_past``, ``has_firings_before``, ``has_pending_executions``),
and the DuckDB adapter's subscription list served from what it last read.

They let the engine skip a fetch, a claim or a prune that would find nothing,
so they must never answer False while the statement would find a row. The
memory adapter answers exactly; the DuckDB adapter answers from hints (bounds
of its committed rows), which may say True when unsure but must survive
rollbacks, crashes, failed writes and prunes. Random sequences of operations
check both: after every step, and inside open transactions after their own
writes.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_store_contract import (
    EXECS,
    FIRING_IDS,
    REACTORS,
    SUBS,
    TENANTS,
    add,
    endings,
    execution,
    firing,
    maybe_time,
    ops,
    run_step,
    sub,
    times,
)

from fanoutsim.designs.leases.tables import in_database
from fanoutsim.designs.reactor.tables import ReactorTx
from fanoutsim.designs.stores import DuckDBStore, MemoryStore
from fanoutsim.faults import Crash

STREAMS = [(r, t) for r in REACTORS for t in TENANTS]
CURSORS = [(None, None)] + [(at, fid) for at in range(-1, 14, 2) for fid in (None, FIRING_IDS[0])]


def truth(tx) -> dict:
    """What the statements themselves find, read in ``tx``."""
    out = {}
    for r, t in STREAMS:
        for after, after_id in CURSORS:
            out[("past", r, t, after, after_id)] = bool(tx.fetch_firings(r, t, after, 1, after_id=after_id))
    oldest = [rows[0]["fired_at"] for rows in (tx.fetch_firings(r, t, None, 1) for r, t in STREAMS) if rows]
    for cutoff in range(-1, 15, 2):
        out[("before", cutoff)] = any(at < cutoff for at in oldest)
    return out


def answers(tx) -> dict:
    out = {}
    for r, t in STREAMS:
        for after, after_id in CURSORS:
            out[("past", r, t, after, after_id)] = tx.has_firings_past(r, t, after, after_id)
    for cutoff in range(-1, 15, 2):
        out[("before", cutoff)] = tx.has_firings_before(cutoff)
    return out


def first_fetching(tx, subs, i: int, compound: bool) -> int:
    """The first index from ``i`` whose fetch (batch limit 1) finds a row."""
    for j in range(i, len(subs)):
        s = subs[j]
        after = s["last_seen_fired_at"]
        after_id = s["last_seen_firing_id"] if compound and after is not None else None
        if tx.fetch_firings(s["reactor_name"], s["tenant_id"], after, 1, after_id=after_id):
            return j
    return len(subs)


def assert_pass_sound(tx, exact: bool) -> None:
    """A poll pass's questions: its list is the enabled subscriptions as
    listed, and ``first_with_firings_past`` skips no subscription whose fetch
    finds a row (an exact adapter skips every other one, as the one-question
    loop of the base class does)."""
    subs = tx.poll_subscriptions()
    assert list(subs) == tx.list_subscriptions(enabled_only=True)
    for compound in (False, True):
        for i in range(len(subs) + 1):
            said, real = tx.first_with_firings_past(subs, i, compound), first_fetching(tx, subs, i, compound)
            assert i <= said <= real  # skipped only subscriptions whose fetch finds nothing
            if exact:
                assert said == real == ReactorTx.first_with_firings_past(tx, subs, i, compound)


def assert_sound(store, exact: bool) -> None:
    """No question answered False where its statement would find a row (and,
    for an exact adapter, none answered True where it would find none)."""
    with store.transaction() as tx:
        said = answers(tx)
        pending = tx.has_pending_executions()
        assert_pass_sound(tx, exact)
    with store.transaction() as tx:
        real = truth(tx)
    real_pending = any(r["status"] == "pending" for r in store.rows(EXECS))
    wrong = [k for k, v in real.items() if v and not said[k]]
    assert not wrong, f"said nothing is there, but there is: {wrong[:5]}"
    assert pending or not real_pending, "said nothing is pending, but a row is"
    if exact:
        assert said == real
        assert pending == real_pending


# in-transaction questions, after the transaction's own writes
questions = st.one_of(
    st.tuples(
        st.just("has_past"),
        st.sampled_from(REACTORS),
        st.sampled_from(TENANTS),
        maybe_time,
        st.none() | st.sampled_from(FIRING_IDS),
    ),
    st.tuples(st.just("has_before"), times),
    st.tuples(st.just("has_pending")),
)


def ask(tx, op):
    """A question and, beside it, whether its answer was sound in this transaction."""
    kind, *a = op
    if kind == "has_past":
        r, t, after, after_id = a
        said = tx.has_firings_past(r, t, after, after_id)
        return said or not tx.fetch_firings(r, t, after, 1, after_id=after_id)
    if kind == "has_before":
        said = tx.has_firings_before(a[0])
        return said or not any(
            rows and rows[0]["fired_at"] < a[0] for rows in (tx.fetch_firings(r, t, None, 1) for r, t in STREAMS)
        )
    said = tx.has_pending_executions()
    if said:
        return True
    taken = tx.claim_executions(0, 1000)  # a claim must then find nothing (this tx may roll back)
    return not taken


mixed = st.lists(st.tuples(st.lists(ops | questions, min_size=1, max_size=8), endings), min_size=1, max_size=8)


def run_mixed(store, step_ops, ending):
    import test_store_contract as contract

    original = contract.apply

    def apply(tx, op):
        if op[0].startswith("has_"):
            assert ask(tx, op), f"unsound answer to {op}"
            return None
        return original(tx, op)

    contract.apply = apply
    try:
        return run_step(store, step_ops, ending)
    finally:
        contract.apply = original


@settings(max_examples=25, deadline=None)
@given(steps=mixed)
def test_skip_questions_are_sound_after_any_sequence(steps):
    memory, duck = MemoryStore(), DuckDBStore(":memory:")
    try:
        for step_ops, ending in steps:
            assert run_mixed(memory, step_ops, ending) == run_mixed(duck, step_ops, ending)
            assert_sound(memory, exact=True)
            assert_sound(duck, exact=False)
    finally:
        duck.close()


def test_duckdb_hints_follow_commits_not_rollbacks(tmp_path):
    duck = DuckDBStore(str(tmp_path / "hints.duckdb"))
    try:
        with duck.transaction() as tx:  # the hints are loaded from the empty tables
            assert not tx.has_firings_past("r1", "t1", None)
            assert not tx.has_firings_before(100)
            assert not tx.has_pending_executions()
        try:
            with duck.transaction() as tx:
                tx.insert_firing(firing(5))
                tx.insert_execution(execution(5))
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        statements = duck.statements
        with duck.transaction() as tx:  # nothing committed: still nothing, and no statement asked
            assert not tx.has_firings_past("r1", "t1", None)
            assert not tx.has_firings_before(100)
            assert not tx.has_pending_executions()
        assert duck.statements == statements
        add(duck, firings=[firing(5)], execs=[execution(5)])
        with duck.transaction() as tx:
            assert tx.has_firings_past("r1", "t1", 4)
            assert not tx.has_firings_past("r1", "t1", 5)  # strictly after: nothing past 5
            assert not tx.has_firings_past("r2", "t1", None)
            assert tx.has_firings_before(6) and not tx.has_firings_before(5)
            assert tx.has_pending_executions()
            assert len(tx.claim_executions(10, 5)) == 1  # fewer than asked: nothing is left pending
        with duck.transaction() as tx:
            assert not tx.has_pending_executions()
        # the subscriptions as last read serve the next list, until a commit changes one
        add(duck, subs=[sub(watermark=1)])
        with duck.transaction() as tx:
            listed = tx.list_subscriptions()
        statements = duck.statements
        with duck.transaction() as tx:
            assert tx.list_subscriptions() == listed
            listed[0]["enabled"] = False  # a caller's copy: changing it changes nothing stored
        assert duck.statements == statements
        try:
            with duck.transaction() as tx:
                tx.update_subscription(listed[0]["id"], {"last_seen_fired_at": 5})
                assert tx.list_subscriptions()[0]["last_seen_fired_at"] == 5  # its own write
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        with duck.transaction() as tx:
            assert tx.list_subscriptions()[0]["last_seen_fired_at"] == 1
            assert tx.list_subscriptions(enabled_only=True)[0]["enabled"] is True
            tx.update_subscription(listed[0]["id"], {"last_seen_fired_at": 7})
        with duck.transaction() as tx:
            assert tx.list_subscriptions()[0]["last_seen_fired_at"] == 7
            assert tx.list_subscriptions(tenant="nobody") == []
    finally:
        duck.close()
    reopened = DuckDBStore(str(tmp_path / "hints.duckdb"))  # a new process: hints from the tables
    try:
        with reopened.transaction() as tx:
            assert tx.has_firings_past("r1", "t1", 4) and not tx.has_firings_past("r1", "t1", 5)
            assert not tx.has_pending_executions()
    finally:
        reopened.close()


# -- the outbox: a read past the log's end (has_outbox_past) ---------------------------------
AFTERS = range(0, 14)
outbox_ops = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 3)),  # reserve and insert seqs at the log's end
    st.tuples(st.just("reserve")),  # a seq reserved, never inserted: a gap
    st.tuples(st.just("insert_at"), st.integers(1, 12)),  # maybe a duplicate: a failed write
    st.tuples(st.just("prune"), st.integers(0, 14), st.none() | st.integers(0, 3)),
    st.tuples(st.just("defer"), st.sampled_from(["c1", "c2"]), st.integers(1, 12)),
    st.tuples(st.just("undefer"), st.sampled_from(["c1", "c2"]), st.integers(1, 12)),
    st.tuples(st.just("has_past"), st.integers(0, 13)),
)


def outbox_row(seq: int) -> dict:
    return {"seq": seq, "ts": seq, "topic": "t", "kind": "k", "ref": None, "due_at": None}


def apply_outbox(tx, op):
    kind, *a = op
    if kind == "append":
        for _ in range(a[0]):
            tx.insert_outbox(outbox_row(tx.reserve_outbox_seq()))
        return None
    if kind == "reserve":
        return tx.reserve_outbox_seq()
    if kind == "insert_at":
        return tx.insert_outbox(outbox_row(a[0]))
    if kind == "prune":
        return tx.prune_outbox(*a)
    if kind == "defer":
        return tx.defer(a[0], a[1], 5)
    if kind == "undefer":
        return tx.delete_deferred(*a)
    # the question in the open transaction, after its own writes: sound, or say so
    said = tx.has_outbox_past(a[0])
    return said or not tx.fetch_outbox(a[0], 1)


def run_outbox_step(store, step_ops, ending) -> list:
    import test_store_contract as contract

    original = contract.apply
    contract.apply = apply_outbox
    try:
        seen = run_step(store, step_ops, ending)
    finally:
        contract.apply = original
    assert ("ok", False) not in [s for s, op in zip(seen, step_ops) if op[0] == "has_past"], (
        "said nothing is past the cursor in a transaction, but a row is"
    )
    return seen


def assert_outbox_sound(store, exact: bool) -> None:
    with store.transaction() as tx:
        said = {after: tx.has_outbox_past(after) for after in AFTERS}
    with store.transaction() as tx:
        real = {after: bool(tx.fetch_outbox(after, 1)) for after in AFTERS}
    wrong = [after for after in AFTERS if real[after] and not said[after]]
    assert not wrong, f"said the log ends before cursors {wrong}, but a row is past them"
    if exact:
        assert said == real


@settings(max_examples=40, deadline=None)
@given(steps=st.lists(st.tuples(st.lists(outbox_ops, min_size=1, max_size=6), endings), min_size=1, max_size=8))
def test_outbox_past_is_sound_after_any_sequence(steps):
    memory, duck = MemoryStore(), DuckDBStore(":memory:")
    try:
        for step_ops, ending in steps:
            assert run_outbox_step(memory, step_ops, ending) == run_outbox_step(duck, step_ops, ending)
            assert_outbox_sound(memory, exact=True)
            assert_outbox_sound(duck, exact=False)
    finally:
        duck.close()


def test_duckdb_outbox_hint_follows_commits_not_rollbacks(tmp_path):
    duck = DuckDBStore(str(tmp_path / "outbox.duckdb"))
    try:
        with duck.transaction() as tx:  # loaded from the empty log
            assert not tx.has_outbox_past(0)
        try:
            with duck.transaction() as tx:
                tx.insert_outbox(outbox_row(tx.reserve_outbox_seq()))
                assert tx.has_outbox_past(0)  # its own row, asked of SQL
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        statements = duck.statements
        with duck.transaction() as tx:  # nothing committed: still nothing, and no statement asked
            assert not tx.has_outbox_past(0)
        assert duck.statements == statements
        with duck.transaction() as tx:
            for _ in range(3):
                tx.insert_outbox(outbox_row(tx.reserve_outbox_seq()))
        with duck.transaction() as tx:
            assert tx.has_outbox_past(2) and not tx.has_outbox_past(3)
            assert tx.fetch_outbox(2, 5)[0]["seq"] == 3
    finally:
        duck.close()
    reopened = DuckDBStore(str(tmp_path / "outbox.duckdb"))  # a new process: the hint from the table
    try:
        with reopened.transaction() as tx:
            assert tx.has_outbox_past(2) and not tx.has_outbox_past(3)
    finally:
        reopened.close()


# -- leases: a recovery pass with no lease due (has_lease_due) --------------------------------
NOWS = range(0, 16)
DATABASES = ["main", "other"]
lease_skip_ops = st.one_of(
    st.tuples(
        st.just("lease"), st.sampled_from(["w", "v"]), st.integers(1, 6), st.integers(0, 14)
    ),  # maybe a duplicate
    st.tuples(st.just("unlease"), st.sampled_from(["w", "v"]), st.integers(1, 6)),
    st.tuples(st.just("expired"), st.integers(0, 14), st.integers(1, 3)),
    st.tuples(st.just("recover"), st.integers(0, 14)),  # recovery: read the expired leases, delete them
    st.tuples(st.just("clear")),
    st.tuples(st.just("has_due"), st.integers(0, 15)),
    st.tuples(st.just("held"), st.sampled_from(["w", "v"])),  # a pull's read of its consumer's leases
)


def lease_row(consumer: str, n: int, expires: int) -> dict:
    return {
        "consumer": consumer,
        "event_id": f"{n}:0",
        "seq": n,
        "partition": "a",
        "token": f"t{n}",
        "incarnation": 1,
        "attempt": 1,
        "leased_at": 0,
        "expires_at": expires,
    }


def apply_lease_skip(tx, op):
    kind, *a = op
    if kind == "lease":
        return tx.insert_lease(lease_row(*a))
    if kind == "unlease":
        return tx.delete_lease(a[0], f"{a[1]}:0")
    if kind == "expired":
        return tx.expired_leases(*a)
    if kind == "recover":
        for lease in tx.expired_leases(a[0], 1000):
            tx.delete_lease(lease["consumer"], lease["event_id"])
        return None
    if kind == "clear":
        return tx.clear_database()
    if kind == "held":
        held = tx.list_leases(a[0])
        assert held == [r for r in tx.list_leases() if r["consumer"] == a[0]]
        return held
    # the question in the open transaction, after its own writes: sound, or say so
    return tx.has_lease_due(a[0]) or not tx.expired_leases(a[0], 1)


def run_lease_step(store, database, step_ops, ending) -> list:
    seen: list = []
    try:
        with in_database(store, database) as tx:
            for op in step_ops:
                try:
                    seen.append(("ok", apply_lease_skip(tx, op)))
                except KeyError as exc:
                    seen.append(("error", type(exc).__name__))
                    if ending != "swallow":
                        raise
                if op[0] == "has_due":
                    assert seen[-1] == ("ok", True), f"said no lease is due in a transaction, but one is: {op}"
            if ending == "exception":
                raise ValueError("roll back")
            if ending == "crash":
                raise Crash("property.step")
    except (Exception, Crash) as exc:
        if isinstance(exc, AssertionError):
            raise
        seen.append(("raised", type(exc).__name__))
    return seen


def assert_lease_sound(store, database, exact: bool) -> None:
    with in_database(store, database) as tx:
        said = {now: tx.has_lease_due(now) for now in NOWS}
    with in_database(store, database) as tx:
        real = {now: bool(tx.expired_leases(now, 1)) for now in NOWS}
    wrong = [now for now in NOWS if real[now] and not said[now]]
    assert not wrong, f"said no lease is due at {wrong} in {database!r}, but one is"
    if exact:
        assert said == real


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(DATABASES), st.lists(lease_skip_ops, min_size=1, max_size=6), endings),
        min_size=1,
        max_size=8,
    )
)
def test_lease_due_is_sound_after_any_sequence(steps):
    memory, duck = MemoryStore(), DuckDBStore(":memory:")
    try:
        for database, step_ops, ending in steps:
            assert run_lease_step(memory, database, step_ops, ending) == run_lease_step(
                duck, database, step_ops, ending
            )
            for db in DATABASES:
                assert_lease_sound(memory, db, exact=True)
                assert_lease_sound(duck, db, exact=False)
    finally:
        duck.close()


def test_duckdb_lease_hint_follows_commits_not_rollbacks():
    duck = DuckDBStore(":memory:")
    try:
        with in_database(duck) as tx:  # loaded from the empty table
            assert not tx.has_lease_due(100)
        try:
            with in_database(duck) as tx:
                tx.insert_lease(lease_row("w", 1, 5))
                assert tx.has_lease_due(5)  # its own row, asked of SQL
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        statements = duck.statements
        with in_database(duck) as tx:  # nothing committed: still nothing due, and no statement asked
            assert not tx.has_lease_due(100)
        assert duck.statements == statements
        with in_database(duck) as tx:
            tx.insert_lease(lease_row("w", 1, 5))
            tx.insert_lease(lease_row("w", 2, 9))
        with in_database(duck) as tx:
            assert not tx.has_lease_due(4) and tx.has_lease_due(5)
            assert [r["seq"] for r in tx.expired_leases(6, 10)] == [1]
            tx.delete_lease("w", "1:0")
        with in_database(duck) as tx:  # read again after recovery: the next expiry is 9
            assert not tx.has_lease_due(8) and tx.has_lease_due(9)
        with in_database(duck, "other") as tx:  # another database: its own hint
            assert not tx.has_lease_due(100)
    finally:
        duck.close()


# -- the DuckDB adapter's stream reads: one read serves the next fetches of a stream ------------
read_ops = st.lists(
    st.one_of(
        st.tuples(st.just("fetch"), st.sampled_from(["r1", "r2"]), st.sampled_from(CURSORS), st.integers(0, 5)),
        st.tuples(st.just("fire"), st.sampled_from(["r1", "r2"]), st.integers(-1, 14)),
        st.tuples(st.just("prune"), st.integers(0, 14)),
        st.tuples(st.just("fire_rolled_back"), st.sampled_from(["r1", "r2"]), st.integers(-1, 14)),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(steps=read_ops)
def test_fetches_served_from_the_last_read_are_what_sql_reads(steps):
    """Every fetch through the hinted adapter equals the memory store's (the
    reference) and a fresh DuckDB transaction's own statement, whatever fired,
    was pruned or rolled back in between."""
    import itertools

    memory, duck = MemoryStore(), DuckDBStore(":memory:")
    ids = (f"00000000-0000-4000-8000-{n:012d}" for n in itertools.count())
    try:
        for op in steps:
            kind = op[0]
            if kind == "fetch":
                _, reactor, (after, after_id), limit = op
                got = []
                for store in (memory, duck):
                    with store.transaction() as tx:
                        got.append(tx.fetch_firings(reactor, "t1", after, limit, after_id=after_id))
                try:
                    with duck.transaction() as tx:  # a write first: this fetch asks SQL itself
                        tx.log_runner(0, "probe")
                        got.append(tx.fetch_firings(reactor, "t1", after, limit, after_id=after_id))
                        raise Crash("test.rollback")
                except Crash:
                    pass
                assert got[0] == got[1] == got[2], op
                if got[1]:  # a caller's copy: changing it changes no later read
                    got[1][0]["payload"] = b"changed"
            elif kind == "prune":
                for store in (memory, duck):
                    with store.transaction() as tx:
                        tx.prune_firings(op[1], False)
            else:
                row = firing(op[2], reactor=op[1], tenant="t1", fid=next(ids))
                for store in (memory, duck):
                    try:
                        with store.transaction() as tx:
                            tx.insert_firing(dict(row))
                            if kind == "fire_rolled_back":
                                raise Crash("test.rollback")
                    except Crash:
                        pass
    finally:
        duck.close()


def test_a_pass_over_one_streams_subscriptions_reads_it_once():
    duck = DuckDBStore(":memory:")
    try:
        add(duck, firings=[firing(at, fid=f"00000000-0000-4000-8000-{at:012d}") for at in range(1, 9)])
        with duck.transaction() as tx:
            first = tx.fetch_firings("r1", "t1", None, 3)
        statements = duck.statements
        with duck.transaction() as tx:  # the next subscriptions of the stream, at or past that cursor
            assert tx.fetch_firings("r1", "t1", None, 3) == first
            assert [r["fired_at"] for r in tx.fetch_firings("r1", "t1", 1, 2)] == [2, 3]
            assert [r["fired_at"] for r in tx.fetch_firings("r1", "t1", 2, 1)] == [3]
        assert duck.statements == statements
        with duck.transaction() as tx:  # more than the read took: SQL again
            assert [r["fired_at"] for r in tx.fetch_firings("r1", "t1", 2, 3)] == [3, 4, 5]
        assert duck.statements == statements + 1
        add(duck, firings=[firing(9, fid="00000000-0000-4000-8000-000000000099")])  # a commit: read anew
        statements = duck.statements
        with duck.transaction() as tx:
            assert [r["fired_at"] for r in tx.fetch_firings("r1", "t1", 7, 5)] == [8, 9]
        assert duck.statements == statements + 1
    finally:
        duck.close()


def test_a_subscription_update_reads_back_as_sql_would():
    """The subscriptions hint takes a committed update as is only when every
    value is what SQL returns for its column; else it is read again."""
    duck, memory = DuckDBStore(":memory:"), MemoryStore()
    try:
        s = sub(watermark=1)
        for store in (duck, memory):
            add(store, subs=[s])
            with store.transaction() as tx:
                tx.list_subscriptions()
        fid = "0000000A-0000-4000-8000-000000000001"  # upper case: SQL returns it lower case
        for changes in (
            {"last_seen_fired_at": 5, "last_seen_firing_id": fid.lower()},
            {"last_seen_firing_id": fid},
            {"enabled": 0},
            {"predicate_error_count": True},
        ):
            with duck.transaction() as tx:
                tx.update_subscription(s["id"], changes)
            with duck.transaction() as tx:
                listed = tx.list_subscriptions()
            assert listed == duck.rows(SUBS), changes
            assert [type(v) for v in listed[0].values()] == [type(v) for v in duck.rows(SUBS)[0].values()]
    finally:
        duck.close()


def test_a_pass_keeps_its_subscription_rows_as_listed():
    """The memory adapter hands a pass the store's own rows: an update after
    the list replaces the row rather than changing the one the pass holds,
    and a rolled-back update leaves the next list as it was."""
    for store in (MemoryStore(), DuckDBStore(":memory:")):
        row = sub("r1", "w1", "t1")
        with store.transaction() as tx:
            tx.insert_subscription(row)
            tx.insert_subscription(sub("r1", "w2", "t1", enabled=False))
        with store.transaction() as tx:
            listed = tx.poll_subscriptions()
        as_listed = [dict(r) for r in listed]
        assert [r["id"] for r in as_listed] == [row["id"]]  # the disabled one is not polled
        with store.transaction() as tx:
            tx.update_subscription(row["id"], {"last_seen_fired_at": 7, "updated_at": 7})
        assert [dict(r) for r in listed] == as_listed
        with store.transaction() as tx:
            assert [r["last_seen_fired_at"] for r in tx.poll_subscriptions()] == [7]
        try:
            with store.transaction() as tx:
                tx.update_subscription(row["id"], {"last_seen_fired_at": 9, "enabled": False})
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        with store.transaction() as tx:
            assert [(r["last_seen_fired_at"], r["enabled"]) for r in tx.poll_subscriptions()] == [(7, True)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from(["list", "watermark", "enable", "disable", "watermark_rollback", "insert"]),
            st.integers(0, 4),
            st.integers(0, 1000),
        ),
        max_size=40,
    )
)
def test_listed_subscriptions_hold_for_their_pass_and_follow_the_commits(ops):
    """Against a model: every poll list is the enabled rows, as committed, in
    poll order; a list a pass was given stays as it was, whatever commits after."""
    store = MemoryStore()
    model: dict[str, dict] = {}

    def add(i: int) -> None:
        row = sub(f"r{i % 2}", f"w{i}", f"t{i % 3}", sid=f"s{i}")
        with store.transaction() as tx:
            tx.insert_subscription(row)
        model[row["id"]] = dict(row)

    for i in range(3):
        add(i)
    held: list[tuple[object, list[dict]]] = []
    for kind, k, v in ops:
        sid = f"s{k}"
        if kind == "insert":
            if sid not in model:
                add(k)
            continue
        if kind == "list":
            with store.transaction() as tx:
                listed = tx.poll_subscriptions()
            want = sorted(
                (r for r in model.values() if r["enabled"]),
                key=lambda r: (r["tenant_id"], r["reactor_name"], r["workflow_name"]),
            )
            assert [dict(r) for r in listed] == want
            held.append((listed, [dict(r) for r in listed]))
        elif sid in model:
            changes = (
                {"last_seen_fired_at": v, "updated_at": v}
                if kind.startswith("watermark")
                else {"enabled": kind == "enable"}
            )
            try:
                with store.transaction() as tx:
                    tx.update_subscription(sid, changes)
                    if kind == "watermark_rollback":
                        raise RuntimeError("roll back")
            except RuntimeError:
                pass
            else:
                model[sid].update(changes)
        for listed, as_given in held:
            assert [dict(r) for r in listed] == as_given  # a pass's list never changes under it
