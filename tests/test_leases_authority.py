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
    "consume": lambda sim, lease, c: sim.consume("a", caller=c),
    "ack": lambda sim, lease, c: sim.ack("a", lease.event_id, lease.token, lease.incarnation, caller=c),
    "nack": lambda sim, lease, c: sim.nack("a", lease.event_id, lease.token, lease.incarnation, delay=1.0, caller=c),
    "status": lambda sim, lease, c: sim.status("a", caller=c),
    "seek": lambda sim, lease, c: sim.seek("a", 0, caller=c),
    "retire": lambda sim, lease, c: sim.retire("a", caller=c),
    "restore": lambda sim, lease, c: sim.restore(caller=c),
    "backup": lambda sim, lease, c: sim.backup(caller=c),
    "restore_backup": lambda sim, lease, c: sim.restore_backup(sim.backups[0], caller=c),
    "administer_seek": lambda sim, lease, c: sim.administer("seek", "a", 0, caller=c),
    "administer_retire": lambda sim, lease, c: sim.administer("retire", "a", caller=c),
}
ALLOWED = {
    "consume": [A],
    "ack": [A],
    "nack": [A],
    "status": [A, ADMIN],
    "seek": [ADMIN],
    "retire": [ADMIN],
    "restore": [ADMIN],
    "backup": [ADMIN],
    "restore_backup": [ADMIN],
    "administer_seek": [ADMIN],
    "administer_retire": [ADMIN],
}
CALLERS = {
    "own": A,
    "other consumer": B,
    "admin": ADMIN,
    "a name, not a credential": "a",
    "a dict": {"consumer_name": "a", "admin": True},
}
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
    done = {
        "consume": ["leased"],
        "ack": ["acked"],
        "nack": ["nacked"],
        "status": [],
        "seek": ["seek", "seek_refused"],
        "retire": ["retired", "retire_refused"],
        "restore": ["restored"],
        "backup": ["backup"],
        "restore_backup": ["backup_restored"],
        "administer_seek": ["seek", "seek_refused"],
        "administer_retire": ["retired", "retire_refused"],
    }[op]
    if op == "consume":
        assert (t["kind"] == "leased").sum() == 2  # the held lease, then one more
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
    assert sim.leases()["event_id"].tolist() == [lease.event_id]  # still leased, not acked


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


def test_a_credential_is_made_from_a_consumer_identity_as_the_calls_take_one():
    from fanoutsim.designs.leases.identity import ConsumerIdentity, module_hash

    ident = ConsumerIdentity(module_hash("v1"), "TicketEvents", "indexer", {"org": "a"})
    assert Credential.consumer(ident) == Credential.consumer(ident.key)
    sim = LeaseSimulation(seed=0)
    sim.register_consumer(ident, client=False)
    sim.publish("p")
    (x,) = sim.consume(ident, caller=Credential.consumer(ident))
    assert sim.ack(ident, x.event_id, x.token, x.incarnation, caller=Credential.consumer(ident)) == "acked"
    assert sim.status(ident, caller=Credential.consumer(ident))["checkpoints"] == {"p": 1}
    with pytest.raises(ValueError, match="a consumer name or a ConsumerIdentity"):
        Credential.consumer(3)


def test_every_call_on_a_consumer_that_is_gone_fails_closed_with_not_found():
    """One style of refusal: each transition's result ``not_found`` (RiffDB's
    ``NotFound``), nothing changed and nothing raised; status is None."""
    sim, lease = _sim()
    assert sim.nack("a", lease.event_id, lease.token, lease.incarnation) == "retry_scheduled"
    assert sim.retire("a") == "applied"
    before = _snapshot(sim)[0]
    mine = Credential.consumer("a")
    pulled = sim.consume("a", caller=mine)
    assert (pulled, pulled.result) == ([], "not_found") and "not_found" in repr(pulled)
    assert sim.ack("a", lease.event_id, lease.token, lease.incarnation, caller=mine) == "not_found"
    assert sim.nack("a", lease.event_id, lease.token, lease.incarnation, caller=mine) == "not_found"
    assert sim.seek("a", 0) == "not_found" and sim.retire("a") == "not_found"
    assert sim.status("a", caller=mine) is None
    assert _snapshot(sim)[0] == before
    t = sim.trace()
    assert t[t["kind"] == "consume_refused"]["detail"].tolist() == ["not_found"]
    pulled = sim.consume("b")  # a pull of a consumer that exists is applied
    assert len(pulled) == 1 and pulled.result == "applied"


def test_a_credential_is_granted_in_one_named_database():
    """RiffDB grants authority per database: a credential of ``orders`` does
    nothing in ``tickets``, though the consumer has the same name there."""
    from fanoutsim.designs.stores import open_store

    store = open_store("memory")
    orders = LeaseSimulation(seed=1, store=store, database="orders")
    tickets = LeaseSimulation(seed=1, store=store, database="tickets")
    for sim in (orders, tickets):
        sim.register_consumer("c", client=False)
        sim.publish("p")
    mine = Credential.consumer("c", database="orders")
    assert mine != Credential.consumer("c", database="tickets")
    assert len(orders.consume("c", caller=mine)) == 1
    with pytest.raises(Unauthorized, match="database 'orders'.*this is database 'tickets'"):
        tickets.consume("c", caller=mine)
    admin_orders = Credential.admin_grant("orders")
    with pytest.raises(Unauthorized, match="database 'orders'.*this is database 'tickets'"):
        tickets.seek("c", 0, caller=admin_orders)
    with pytest.raises(Unauthorized, match="database 'default'.*this is database 'orders'"):
        orders.backup(caller=ADMIN)  # ADMIN: the default database's grant
    assert tickets.leases().empty and tickets.seek("c", "end", caller=Credential.admin_grant("tickets")) == "applied"
    assert len(tickets.consume("c")) == 0  # no caller: the credential the call needs, of this database
    with pytest.raises(ValueError, match="database must be a name"):
        Credential.consumer("c", database="Bad Name")


def test_the_wall_clock_checks_a_status_caller_as_the_virtual_clock_does():
    from fanoutsim.designs.leases.realtime import LeaseRealtime

    rt = LeaseRealtime(store="memory")
    try:
        for name in ("a", "b"):
            rt.register_consumer(name, client=False)
        with pytest.raises(Unauthorized, match="status on consumer 'a' refused"):
            rt.status("a", caller=B)
        assert rt.status("a", caller=ADMIN)["consumer"] == rt.status("a", caller=A)["consumer"] == "a"
    finally:
        rt.close()
