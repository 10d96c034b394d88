"""The reactor's memory tables keep firings and finished executions as columns
(and their older ids and contexts packed in chunks): they read back as written,
whatever the chunk they are in, a rollback puts back what was, a time that
does not fit an int64 column is kept as it is, and the big indexes are ones
the cyclic collector stops walking."""

from __future__ import annotations

import gc

import pytest
from test_store_contract import EXECS, FIRINGS, add, execution, fetch, firing, ids

from fanoutsim.designs.reactor.tables import memory as reactor_memory
from fanoutsim.designs.stores import MemoryStore


@pytest.fixture
def small_chunks(monkeypatch):
    """A finished row's id and context pack every 3 rows."""
    monkeypatch.setattr(reactor_memory._Finished, "CHUNK", 3)


def finish(db, eid: str, at: int, status: str = "completed") -> None:
    with db.transaction() as tx:
        tx.finish_execution(eid, at, status)


def test_finished_rows_in_packed_chunks_read_back_and_finish_again_with_a_rollback(small_chunks):
    db = MemoryStore()
    rows = [execution(t, "running") for t in range(10)]
    add(db, execs=rows)
    for k, r in enumerate(rows):
        finish(db, r["id"], 100 + k)
    done = db.finished_executions
    assert len(done) == 10 and len(done.chunks) == 3 and len(done.head) == 1 and not db.executions
    expected = [{**r, "status": "completed", "finished_at": 100 + k} for k, r in enumerate(rows)]
    assert db.rows(EXECS) == expected
    before = db.rows(EXECS)
    with pytest.raises(RuntimeError):
        with db.transaction() as tx:
            tx.finish_execution(rows[1]["id"], 200, "failed")  # a row in the oldest chunk
            tx.insert_execution(execution(50, "completed"))
            raise RuntimeError("rolled back")
    assert db.rows(EXECS) == before
    finish(db, rows[1]["id"], 200, "failed")
    assert db.rows(EXECS)[1] == {**expected[1], "status": "failed", "finished_at": 200}
    with pytest.raises(KeyError):
        add(db, execs=[execution(60, eid=rows[4]["id"])])  # a packed id stays taken


class _EveryHash:
    """Sealed ids' hashes that say *maybe* for every id (as a collision would)."""

    def might_hold(self, eid: str) -> bool:
        return True


def test_a_hash_that_says_maybe_is_settled_by_the_sealed_rows(small_chunks):
    db = MemoryStore()
    rows = [execution(t, "completed") for t in range(7)]
    add(db, execs=rows)
    db.finished_executions.sealed_ids = _EveryHash()
    fresh = execution(9, "completed")
    add(db, execs=[fresh])  # not a duplicate: no sealed row has its id
    assert ids(db.rows(EXECS)) == ids(rows + [fresh])
    with pytest.raises(KeyError):
        add(db, execs=[execution(10, eid=rows[2]["id"])])


def test_firings_tied_in_time_read_in_id_order_and_a_prune_rolls_back():
    db = MemoryStore()
    rows = [firing(20) for _ in range(5)] + [firing(10), firing(30)]
    add(db, firings=rows)
    ordered = sorted(rows, key=lambda r: (r["fired_at"], r["id"]))
    assert fetch(db) == ordered
    tied = ordered[1:6]
    assert ids(fetch(db, after=20, after_id=tied[1]["id"])) == ids(ordered[3:])
    before = db.rows(FIRINGS)
    with pytest.raises(RuntimeError):
        with db.transaction() as tx:
            assert tx.prune_firings(25, conservative=False, limit=4) == ids(ordered[:4])
            tx.insert_firing(firing(20))
            raise RuntimeError("rolled back")
    assert db.rows(FIRINGS) == before and fetch(db) == ordered


def test_a_time_that_does_not_fit_an_int64_is_kept_as_written():
    db = MemoryStore()
    small, huge, other = firing(5), firing(2**70, created_at=2**70 + 1), firing(7, reactor="r2")
    add(db, firings=[small, huge, other])
    assert fetch(db) == [small, huge] and fetch(db, after=5) == [huge]
    assert db.rows(FIRINGS) == [small, other, huge]
    with db.transaction() as tx:
        assert tx.prune_firings(2**71, conservative=False) == ids([small, other, huge])
        assert tx.count_firings() == 0


def test_the_big_indexes_are_ones_the_collector_stops_walking(small_chunks):
    """The firing ids' index holds only str (and the streams' key tuples): once
    collected, it is not tracked; the finished ids' primary key is their hashes
    in an array, and keeps no id alive."""
    db = MemoryStore()
    rows = [execution(t, "running") for t in range(50)]
    add(db, firings=[firing(t, tenant=f"t{t % 3}") for t in range(50)], execs=rows)
    for r in rows:
        finish(db, r["id"], 100)
    gc.collect()
    assert len(db.firings) == 50 and not gc.is_tracked(db.firings)
    known = db.finished_executions.sealed_ids
    assert len(known) == 48 and not any(isinstance(x, str) for x in _reachable(known))
    assert all(db.finished_executions.has(r["id"]) for r in rows)


def _reachable(obj: object) -> list[object]:
    """What ``obj`` holds, and what that holds, and so on (types left out)."""
    seen, todo, out = set(), [obj], []
    while todo:
        for ref in gc.get_referents(todo.pop()):
            if not isinstance(ref, type) and id(ref) not in seen:
                seen.add(id(ref))
                out.append(ref)
                todo.append(ref)
    return out
