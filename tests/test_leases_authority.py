"""Authority (seed 003, least-authority roles): a consumer credential may
lease, ack and nack only its own consumer; seek, retire, restore, backup and
restore from backup need the admin grant; every other call fails closed with a clear error and changes
nothing — no table, no trace row."""
from __future__ import annotations

import pytest

from fanoutsim.designs.leases.authority import ADMIN, RULES, Credential, Unauthorized, authorize
from fanoutsim.designs.leases.simulation import LeaseSimulation
from fanoutsim.designs.leases.tables import TABLES

A, B = Credential.consumer("a"), Credential.consumer("b")


def _sim(store="memory"):
    sim = LeaseSimulation(seed=3, store=store)
    for name in ("a", "b"):
        sim.register_consumer(name, client=False, batch_limit=1, in_flight_limit=2)
    for k in range(3):
        sim.publish("p", "ticket.changed", {"k": k})
    (lease,) = sim.consume("a")
    sim.backups.append(sim.backup())
    return sim, lease


# op -> (a call on the sim, given the held lease and a caller), who may
CALLS = {
    "consume": lambda sim, l, c: sim.consume("a", caller=c),
    "ack": lambda sim, l, c: sim.ack("a", l.event_id, l.token, l.incarnation, caller=c),
    "nack": lambda sim, l, c: sim.nack("a", l.event_id, l.token, l.incarnation, delay=1.0, caller=c),
    "status": lambda sim, l, c: sim.status("a", caller=c),
    "seek": lambda sim, l, c: sim.seek("a", 0, caller=c),
    "retire": lambda sim, l, c: sim.retire("a", caller=c),
    "restore": lambda sim, l, c: sim.restore(caller=c),
    "backup": lambda sim, l, c: sim.backup(caller=c),
    "restore_backup": lambda sim, l, c: sim.restore_backup(sim.backups[0], caller=c),
    "administer_seek": lambda sim, l, c: sim.administer("seek", "a", 0, caller=c),
    "administer_retire": lambda sim, l, c: sim.administer("retire", "a", caller=c),
}
ALLOWED = {"consume": [A], "ack": [A], "nack": [A], "status": [A, ADMIN], "seek": [ADMIN], "retire": [ADMIN],
           "restore": [ADMIN], "backup": [ADMIN], "restore_backup": [ADMIN], "administer_seek": [ADMIN], "administer_retire": [ADMIN]}
CALLERS = {"own": A, "other consumer": B, "admin": ADMIN, "a name, not a credential": "a",
           "a dict": {"consumer_name": "a", "admin": True}}
WRONG = [(op, who) for op in CALLS for who, c in CALLERS.items() if c not in ALLOWED[op]]


def _snapshot(sim):
    return {t: sim.store.rows(t) for t in TABLES}, len(sim.trace())


@pytest.mark.parametrize("op,who", WRONG, ids=[f"{op}-{who}" for op, who in WRONG])
def test_every_wrong_credential_fails_closed_and_changes_nothing(op, who):
    sim, lease = _sim()
    before = _snapshot(sim)
    with pytest.raises(Unauthorized) as err:
        CALLS[op](sim, lease, CALLERS[who])
    msg = str(err.value)
    assert msg.startswith(op.removeprefix("administer_")) and "nothing was changed" in msg
    sim.run(until=5.0)  # an administer process would have run by now: none was started
    assert _snapshot(sim)[0] == before[0]
    assert len(sim.trace()) == before[1]


@pytest.mark.parametrize("op", list(CALLS))
def test_the_right_credential_is_served(op):
    sim, lease = _sim()
    for c in ALLOWED[op]:
        CALLS[op](sim, lease, c)  # no Unauthorized
    sim.run(until=5.0)
    t = sim.trace()
    # served: applied, or refused by the broker itself (a lease is out), never by authority
    done = {"consume": ["leased"], "ack": ["acked"], "nack": ["nacked"], "status": [],
            "seek": ["seek", "seek_refused"], "retire": ["retired", "retire_refused"], "restore": ["restored"], "backup": ["backup"], "restore_backup": ["backup_restored"],
            "administer_seek": ["seek", "seek_refused"], "administer_retire": ["retired", "retire_refused"]}[op]
    if op == "consume":
        assert (t["kind"] == "leased").sum() == 2   # the held lease, then one more
    elif done:
        assert t["kind"].isin(done).any()


def test_default_caller_is_the_credential_the_operation_needs():
    sim, lease = _sim()
    assert sim.ack("a", lease.event_id, lease.token, lease.incarnation) == "acked"
    assert sim.seek("b", 0) == "applied"


def test_a_consumer_credential_cannot_touch_another_consumer_even_with_a_valid_token():
    sim, lease = _sim()
    with pytest.raises(Unauthorized, match="consumer 'a''s own credential, the caller holds consumer 'b'"):
        sim.ack("a", lease.event_id, lease.token, lease.incarnation, caller=B)
    assert sim.leases()["event_id"].tolist() == [lease.event_id]   # still leased, not acked


def test_duckdb_store_refuses_alike():
    sim, lease = _sim("duckdb")
    before = _snapshot(sim)
    with pytest.raises(Unauthorized):
        sim.seek("a", 0, caller=A)
    assert _snapshot(sim) == before


def test_credentials_are_checked():
    with pytest.raises(ValueError, match="either one consumer's"):
        Credential()
    with pytest.raises(ValueError, match="either one consumer's"):
        Credential("a", admin=True)
    with pytest.raises(ValueError, match="consumer_name must be a non-empty string"):
        Credential.consumer("")
    with pytest.raises(ValueError, match="op must be one of"):
        authorize(ADMIN, "drop", "a")
    assert set(RULES) >= {"consume", "ack", "nack", "seek", "retire"}
