"""A pull that waits for another node's lock acts at the time the lock is
granted (``after_locks``). Over PostgreSQL under load, a pull that found one
expired lease recovered it and pulled again, and that second pull could wait
past another lease's expiry: it found that one expired too, and the client's
loop died of it (``'NoneType' object has no attribute 'result'``), so a
serving process stopped pulling. The lock wait is made here by hand."""

from __future__ import annotations

import pytest

from fanoutsim.designs.leases import LeaseConfig, leasing
from fanoutsim.designs.leases.simulation import LeaseSimulation

S = 1_000_000  # µs


@pytest.mark.parametrize("store", ["memory", "duckdb"])
def test_a_pull_that_waits_past_a_second_expiry_recovers_it_too(store, monkeypatch):
    config = LeaseConfig(recovery_interval=3600.0)  # no background recovery: the pull recovers
    sim = LeaseSimulation(config, seed=0, store=store)
    sim.register_consumer("c", client=False, lease_seconds=5.0, batch_limit=1)
    sim.publish("a")
    sim.publish("b")
    (first,) = sim.consume("c")  # expires at 5 s
    sim.run(until=2.0)
    (second,) = sim.consume("c")  # expires at 7 s
    sim.run(until=6.0)  # the first has expired, the second not yet

    with sim.store.transaction() as tx:
        tx_class = type(tx)
    recovered, waited = [], []

    def recover(*args, **kwargs):  # the pull's recovery of the first, then a pull again
        recovered.append(leasing_recover(*args, **kwargs))
        return recovered[-1]

    def after_locks(self, now: int) -> int:  # that pull waits 2 s for another node's lock
        if recovered and not waited:
            waited.append(now)
            return now + 2 * S
        return now

    leasing_recover = leasing.recover
    monkeypatch.setattr(leasing, "recover", recover)
    monkeypatch.setattr(tx_class, "after_locks", after_locks)
    got = sim.consume("c")
    monkeypatch.undo()

    assert recovered == [1, 1] and len(waited) == 1  # the first expired lease, then the second
    # both are failed attempts: the pull leased one again (batch 1), the other waits as a retry
    (lease,) = got
    assert lease.attempt == 2 and lease.event_id in (first.event_id, second.event_id)
    other = ({first.event_id, second.event_id} - {lease.event_id}).pop()
    assert [(r["event_id"], r["attempts"]) for r in sim.store.rows("retries")] == [(other, 1)]
    assert [r["event_id"] for r in sim.store.rows("leases")] == [lease.event_id]
