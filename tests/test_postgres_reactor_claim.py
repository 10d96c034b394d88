"""Two executors claiming over one PostgreSQL, interleaved on purpose.

The claim is one ``UPDATE ... WHERE id IN (SELECT ... WHERE status =
'pending' LIMIT n)``. At READ COMMITTED an UPDATE that waited for another
transaction's row lock re-checks its own WHERE on the row as committed, but
not the subquery's: without ``status = 'pending'`` in the outer WHERE, the
second executor claimed the rows the first had just claimed, and each ran
them (roles.py promises that two executors never both claim a row).
"""

from __future__ import annotations

import threading
import uuid

from test_postgres_leases_concurrency import Run, _blocked_or_done

from fanoutsim.kernel.timeutil import US

NOW = 1_700_000_000 * US


def _pending(n: int) -> list[dict]:
    return [
        {
            "id": str(uuid.UUID(int=k + 1)),
            "workflow_name": "wf",
            "tenant_id": "public",
            "context": "{}",
            "status": "pending",
            "dispatched_at": NOW + k,
            "claimed_at": None,
            "finished_at": None,
        }
        for k in range(n)
    ]


def test_two_executors_never_claim_one_execution(pg_store, pg_dsn):
    a = pg_store()
    b = pg_store(a.schema)
    with a.transaction() as tx:
        for row in _pending(4):
            tx.insert_execution(row)
    claimed, release = threading.Event(), threading.Event()

    def first() -> list[str]:
        with a.transaction() as tx:  # claims two, and holds them uncommitted
            rows = [r["id"] for r in tx.claim_executions(NOW + 10, 2)]
            claimed.set()
            release.wait(30)
        return rows

    one = Run(first)
    assert claimed.wait(20)
    two = Run(lambda: [r["id"] for r in _claim(b, 2)])
    _blocked_or_done(pg_dsn, two)  # waits for the first's row locks
    release.set()
    got_a, got_b = one.outcome(), two.outcome()
    assert len(got_a) == 2 and not set(got_a) & set(got_b), (got_a, got_b)
    # what the second did not take is still there for the next claim
    assert sorted(got_a + got_b + [r["id"] for r in _claim(b, 4)]) == [r["id"] for r in _pending(4)]


def _claim(store, limit: int) -> list[dict]:
    with store.transaction() as tx:
        return tx.claim_executions(NOW + 20, limit)


def test_two_processes_starting_together_subscribe_once(pg_url, pg_dsn):
    """Every serving process subscribes its scenario's workflows as it starts.
    Two that start together on a new database both found the subscription
    missing and both inserted it: the second failed on the UNIQUE (reactor,
    workflow, tenant) and did not start."""
    import psycopg

    from fanoutsim.designs.reactor.pgreplicas import CONFIG, REACTOR, WORKFLOW
    from fanoutsim.designs.reactor.realtime import Realtime

    url = pg_url()
    a, b = Realtime(CONFIG, store=url), Realtime(CONFIG, store=url)
    try:
        for rt in (a, b):
            rt.runner.register_workflow(WORKFLOW, duration=0.001)
        with psycopg.connect(url) as held:
            # a third connection holds back every insert of a subscription until it lets go
            held.execute("LOCK TABLE reactor_subscriptions IN SHARE ROW EXCLUSIVE MODE")
            first = Run(lambda: a.runner.subscribe_workflow_to_reactor(REACTOR, WORKFLOW))
            _blocked_or_done(pg_dsn, first)
            second = Run(lambda: b.runner.subscribe_workflow_to_reactor(REACTOR, WORKFLOW))
            _blocked_or_done(pg_dsn, second, waits=2)
            held.rollback()
        ids = [first.outcome(), second.outcome()]  # no KeyError: duplicate key
        assert ids[0] == ids[1]
        assert [s["id"] for s in a.store.rows("reactor_subscriptions")] == ids[:1]
    finally:
        a.close()
        b.close()
