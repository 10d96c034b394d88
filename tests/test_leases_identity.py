"""Consumer identity (seed 003): "A durable consumer is identified by the
complete tuple of reactive module hash, operation name, canonical typed
parameters, and consumer name. It is therefore not silently rebound when a
module changes." A module change makes a new consumer; the old identity keeps
its checkpoint and retention fence until it is retired."""

from __future__ import annotations

import pytest
from experiments import leases as lx  # notebooks/experiments: the lessons' experiments

from fanoutsim.designs.leases import LeaseConfig
from fanoutsim.designs.leases import analysis as la
from fanoutsim.designs.leases.identity import ConsumerIdentity, module_hash
from fanoutsim.designs.leases.simulation import LeaseSimulation

V1, V2 = module_hash("v1"), module_hash("v2")


def ident(**kw):
    base = dict(module_hash=V1, operation="TicketEvents", name="indexer", parameters={"org": "a", "n": 1})
    return ConsumerIdentity(**{**base, **kw})


@pytest.mark.parametrize(
    "change",
    [
        dict(module_hash=V2),
        dict(operation="TicketWatch"),
        dict(name="mailer"),
        dict(parameters={"org": "b", "n": 1}),
        dict(parameters={"org": "a"}),
    ],
    ids=["module", "operation", "name", "parameter value", "parameter set"],
)
def test_every_part_of_the_tuple_makes_a_different_consumer(change):
    assert ident(**change).key != ident().key


def test_parameter_order_does_not_matter_and_the_key_is_stable():
    a = ident(parameters={"org": "a", "n": 1})
    b = ident(parameters={"n": 1, "org": "a"})
    assert a.key == b.key and a.key.startswith("indexer@TicketEvents:") and len(a.key.split(":")[1]) == 16


def test_identity_input_is_checked():
    with pytest.raises(ValueError, match="module_hash must be 64 lowercase hex digits"):
        ident(module_hash="abc")
    with pytest.raises(ValueError, match="parameters must be JSON values"):
        ident(parameters={"x": object()})
    with pytest.raises(ValueError, match="parameters must be a mapping"):
        ident(parameters=[1, 2])


def test_a_module_change_makes_a_new_consumer_and_the_old_keeps_its_fence():
    sim = LeaseSimulation(LeaseConfig(retention=10.0, retention_interval=5.0), seed=2)
    v1 = ident()
    sim.register_consumer(v1, duration=0.01)
    sim.add_workload(2.0, partitions=2, stop=120.0)
    sim.run(until=30.0)
    cp_old = sim.status(v1.key)["checkpoints"]
    v2 = sim.deploy(v1, V2, start="end")
    assert v2.key != v1.key and v2.module_hash == V2
    st2 = sim.status(v2.key)
    assert st2["checkpoints"] == {} and st2["start_seq"] == sim.history()["last_seq"].iloc[0]
    sim.run(until=120.0)
    # nobody pulls v1 any more, and it was not rebound: its checkpoints stand where they were
    assert sim.status(v1.key)["checkpoints"] == cp_old
    assert sim.status(v2.key)["checkpoints"]  # v2 consumes
    # v1's fence holds every event past its checkpoints, whatever their age
    low = min(cp_old.values())
    assert sim.events()["seq"].min() <= low + 1
    kept = len(sim.events())
    sim.retire(v1.key)
    sim.run(until=130.0)
    assert len(sim.events()) < kept / 4  # retired: retention takes the log back


def test_deploy_refuses_what_is_not_a_module_change():
    sim = LeaseSimulation(seed=0)
    v1 = ident()
    sim.register_consumer(v1, client=False)
    with pytest.raises(ValueError, match="is the module"):
        sim.deploy(v1, V1)
    with pytest.raises(KeyError, match="no consumer"):
        sim.deploy(ident(name="ghost"), V2)


def test_the_log_grows_behind_a_forgotten_identity():
    runs = {m: lx.identity_run(m, seconds=300.0, deploy_at=100.5, retire_at=200.5) for m in lx.IDENTITY_MODES}
    s = lx.identity_summary(runs).set_index(["run", "module"])
    forgotten, retired = lx.IDENTITY_MODES
    assert s.loc[(forgotten, "v1"), "exists"] and not s.loc[(retired, "v1"), "exists"]
    assert s.loc[(forgotten, "v1"), "events_retained"] > 2 * s.loc[(retired, "v1"), "events_retained"]
    sizes = {m: la.events_size(sim) for m, sim in runs.items()}
    grow = sizes[forgotten].set_index("t_s")["rows"]
    assert grow.loc[299.0] > grow.loc[200.0] > grow.loc[100.0]  # it keeps growing after the deploy


@pytest.mark.parametrize("refusal", ["start past the end", "new identity with other limits"])
def test_a_refused_deploy_changes_nothing_and_the_old_consumer_keeps_consuming(refusal):
    sim = LeaseSimulation(seed=0)
    v1 = ident()
    sim.register_consumer(v1, duration=0.01, poll_interval=0.5)
    kw = {}
    if refusal == "start past the end":
        kw["start"] = 10_000
        match = "past the end of the log"
    else:
        sim.register_consumer(ident(module_hash=V2), client=False, batch_limit=1)
        match = "exists with other settings"
    sim.publish("p", "k", 1)
    sim.run(until=2.0)
    before = sim.status(v1.key)
    trace_rows = len(sim.trace())
    with pytest.raises(ValueError, match=match):
        sim.deploy(v1, V2, **kw)
    assert len(sim.trace()) == trace_rows and v1.key in sim.clients
    sim.publish("p", "k", 2)
    sim.run(until=4.0)
    after = sim.status(v1.key)
    assert after["checkpoints"] == {"p": before["checkpoints"]["p"] + 1}  # it still consumes
