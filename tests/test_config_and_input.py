"""Bad input gets a clear error naming the field, and writes nothing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import fanoutsim as fs
from fanoutsim.designs.reactor.config import POLICIES


def test_defaults_are_the_real_systems():
    c = fs.SchedulerConfig()
    assert (
        c.reactor_poll_interval,
        c.reactor_poll_batch_limit,
        c.reactor_firings_prune_interval,
        c.reactor_firings_retention,
    ) == (1.0, 100, 3600.0, 604800.0)
    assert (
        c.prune_policy,
        c.predicate_error_policy,
        c.predicate_error_limit,
        c.dispatch_failure_policy,
        c.watermark_commit,
    ) == ("ttl", "skip", 5, "hold", "per_firing")


@pytest.mark.parametrize("field", ["reactor_poll_interval", "reactor_firings_prune_interval", "executor_poll_interval"])
@pytest.mark.parametrize("value", [0, -1.0, float("nan"), float("inf"), "1", True, None])
def test_intervals_must_be_positive(field, value):
    with pytest.raises(ValueError, match=field):
        fs.SchedulerConfig(**{field: value})


@pytest.mark.parametrize("field", ["reactor_poll_batch_limit", "predicate_error_limit", "executor_workers"])
@pytest.mark.parametrize("value", [0, -3, 1.5, "2", True])
def test_counts_must_be_integers_at_least_one(field, value):
    with pytest.raises(ValueError, match=f"{field} must be an integer >= 1"):
        fs.SchedulerConfig(**{field: value})


def test_retention_may_be_zero_but_not_negative():
    fs.SchedulerConfig(reactor_firings_retention=0)
    with pytest.raises(ValueError, match="reactor_firings_retention"):
        fs.SchedulerConfig(reactor_firings_retention=-1)


@pytest.mark.parametrize("field", sorted(POLICIES))
@given(value=st.text(max_size=12))
def test_unknown_policy_names_the_field_and_the_allowed_values(field, value):
    if value in POLICIES[field]:
        return
    with pytest.raises(ValueError) as info:
        fs.SchedulerConfig(**{field: value})
    msg = str(info.value)
    assert field in msg and all(repr(a) in msg for a in POLICIES[field])


def test_from_dict_names_unknown_settings():
    with pytest.raises(ValueError, match="'poll_interval'.*allowed: reactor_poll_interval"):
        fs.SchedulerConfig.from_dict({"poll_interval": 1})


def test_payload_that_cannot_be_json_encoded_names_the_source_and_writes_nothing(store):
    sim = fs.Simulation(store=store)
    graph_calls = []
    sim.runner.register_computation_graph("r", graph_calls.append)
    with pytest.raises(TypeError, match="payload source 'when'"):
        sim.fire("r", {"ok": 1, "when": {1, 2}})
    with pytest.raises(TypeError, match="payload source 'x'"):
        sim.fire("r", {"x": float("nan")})
    with pytest.raises(TypeError, match="mapping"):
        sim.fire("r", [("x", 1)])
    assert sim.firings().empty and graph_calls == []


@pytest.mark.parametrize("reactor, tenant", [("", "public"), ("r", ""), (7, "public"), ("r", None)])
def test_fire_rejects_bad_names(store, reactor, tenant):
    sim = fs.Simulation(store=store)
    with pytest.raises(ValueError, match="name must be a non-empty string"):
        sim.fire(reactor, {"n": 1}, tenant=tenant)
    assert sim.firings().empty


def test_run_until_earlier_than_now_is_refused():
    sim = fs.Simulation()
    sim.run(until=10)
    with pytest.raises(ValueError, match="until=5 is earlier than now=10"):
        sim.run(until=5)
    with pytest.raises(TypeError):
        sim.run(until="20")
    assert sim.now == 10


def test_bad_simulation_arguments():
    with pytest.raises(TypeError, match="seed"):
        fs.Simulation(seed="1")
    with pytest.raises(TypeError, match="SchedulerConfig"):
        fs.Simulation(config={"reactor_poll_interval": 1})
    with pytest.raises(ValueError, match="store 'mysql'"):
        fs.Simulation(store="mysql")
    with pytest.raises(ValueError, match="ISO 8601"):
        fs.Simulation(start="yesterday")


def test_register_workflow_validates():
    r = fs.Simulation().runner
    with pytest.raises(ValueError, match="duration"):
        r.register_workflow("wf", duration=-1)
    with pytest.raises(TypeError, match="callable"):
        r.register_workflow("wf", fn="not callable")
    with pytest.raises(ValueError, match="workflow name"):
        r.register_workflow("")


def test_timestamps_are_utc_microseconds_from_a_configurable_start():
    sim = fs.Simulation(start="2030-06-01T12:00:00Z")
    sim.run(until=1.0000015)
    sim.fire("r", {"n": 1})
    fired = sim.firings().loc[0, "fired_at"]
    assert str(fired.tz) == "UTC"
    assert fired.isoformat() == "2030-06-01T12:00:01.000002+00:00"  # rounded to the microsecond
