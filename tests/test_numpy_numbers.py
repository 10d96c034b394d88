"""Numbers are numbers: a NumPy integer or float (``np.int64(3)`` as a rate, a
limit from a DataFrame) is taken wherever a Python one is, and kept as the
Python number it equals, so a config holding one still goes into report.json;
booleans, Python's or NumPy's, are refused as before."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fanoutsim as fs
from fanoutsim.designs.leases import LeaseConfig
from fanoutsim.designs.leases.simulation import LeaseSimulation
from fanoutsim.designs.outbox import OutboxConfig
from fanoutsim.designs.outbox.simulation import OutboxSimulation
from fanoutsim.kernel.validate import (
    Fraction,
    IntAtLeast,
    IntRange,
    Invalid,
    Position,
    Rate,
    Seconds,
    Seed,
    is_number,
    is_real,
    is_whole,
)

INTS = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.uint64)
FLOATS = (np.float16, np.float32, np.float64)


def test_the_number_checks_take_numpy_numbers_and_refuse_booleans():
    for t in INTS + FLOATS:
        assert is_real(t(3)) and is_number(t(3))
    for t in INTS:
        assert is_whole(t(3))
    assert not is_whole(np.float64(3.0)) and not is_number(np.float64("nan"))
    for b in (True, np.bool_(True)):
        assert not is_real(b) and not is_whole(b) and not is_number(b)


@settings(max_examples=200, deadline=None)
@given(t=st.sampled_from(INTS), v=st.integers(0, 100))
def test_validators_keep_a_numpy_integer_as_the_python_int_it_equals(t, v):
    for validator in (IntAtLeast(0), IntRange(0, 100), Seed(), Position()):
        kept = validator.check(t(v))
        assert kept == v and type(kept) is int
    assert type(Seconds().check(t(v))) is float and Seconds().check(t(v)) == v


@settings(max_examples=200, deadline=None)
@given(t=st.sampled_from(FLOATS), v=st.floats(0.01, 1.0))
def test_validators_keep_a_numpy_float_as_a_python_float(t, v):
    x = t(v)
    for validator in (Seconds(), Rate("events"), Fraction()):
        kept = validator.check(x)
        assert type(kept) is float and kept == float(x)


@pytest.mark.parametrize("validator", [Seconds(), Rate("events"), Fraction(), IntAtLeast(0), Seed()])
def test_a_numpy_boolean_is_refused_as_a_python_one(validator):
    with pytest.raises(Invalid):
        validator.check(np.bool_(True))


def test_the_reactor_takes_numpy_numbers():
    cfg = fs.SchedulerConfig(
        reactor_poll_interval=np.int64(1),
        reactor_poll_batch_limit=np.int64(50),
        reactor_firings_retention=np.float32(3600),
    )
    assert type(cfg.reactor_poll_batch_limit) is int and type(cfg.reactor_poll_interval) is int
    json.dumps(dataclasses.asdict(cfg))  # it goes into report.json
    sim = fs.Simulation(cfg, seed=0)
    sim.runner.register_workflow("w", duration=np.float32(0.01))
    sim.runner.subscribe_workflow_to_reactor("r", "w")
    sim.add_workload("r", rate=np.int64(3), start=np.int64(0), stop=np.float32(5))
    sim.run(until=np.int64(10))
    assert len(sim.firings()) > 0


def test_the_outbox_takes_numpy_numbers():
    cfg = OutboxConfig(safety_poll_interval=np.float32(2.0), batch_limit=np.int64(10))
    json.dumps(dataclasses.asdict(cfg))
    sim = OutboxSimulation(cfg, seed=0)
    sim.register_consumer("c", duration=np.float32(0.01), retry_budget=np.int64(3))
    sim.add_workload(np.int64(2))
    sim.run(until=np.int64(10))
    assert sim.cursors()["seq"].max() > 0


def test_leases_take_numpy_numbers():
    cfg = LeaseConfig(retention=np.int64(600), recovery_interval=np.float32(0.5))
    json.dumps(dataclasses.asdict(cfg))
    sim = LeaseSimulation(cfg, seed=0)
    row = sim.register_consumer(
        "c",
        batch_limit=np.int64(2),
        in_flight_limit=np.int32(4),
        lease_seconds=np.int64(30),
        duration=np.float32(0.01),
        fail=np.float64(0.0),
        nack_delay=np.int64(1),
        poll_interval=np.float32(0.5),
    )
    assert type(row["batch_limit"]) is int and type(row["lease_seconds"]) is float
    sim.add_workload(np.int64(3), partitions=np.int64(2), stop=np.float32(5))
    sim.run(until=np.int64(10))
    assert sim.status("c")["checkpoints"]
    with pytest.raises(ValueError, match="rate must be"):
        sim.add_workload(np.bool_(True))
